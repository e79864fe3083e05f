"""Batched greedy decoding of RNN-T and TDT models: frame-looping, label-looping, WIND.

`greedy_decode` checks the inputs and runs one of the loop programs of `programs.py` eagerly or,
on a GPU, through the CUDA-graph drivers of `graphs.py`; the same program code runs either way,
so CPU tests cover the code the GPU modes replay. Imports run greedy -> graphs -> programs.
"""

from __future__ import annotations

import dataclasses

import torch

from ..errors import OptionsError
from ..results import changed
from .inputs import check_inputs, check_joint
from .model import ModelAdapter
from .options import GreedyOptions
from .programs import FrameLooping, LabelLooping, make_program, run_eager

__all__ = ["FrameLooping", "LabelLooping", "greedy_decode", "make_program", "run_eager"]


def greedy_decode(model, enc, enc_lengths, options: GreedyOptions | None = None):
    """Greedy-decode a batch of encoder outputs with an RNN-T or TDT model.

    model:       a `TransducerModel` (see `wfstdecode.transducer.model`).
    enc:         encoder output, float tensor (B, T, D), on the model's device.
    enc_lengths: valid frames per utterance, integer tensor (B,) on enc's device, 0 <= len <= T.
    options:     `GreedyOptions` (algorithm, window, durations, max_symbols_per_frame,
                 cuda_graphs).

    Returns one `Hypothesis` per utterance: tokens, timestamps (frame of each token),
    durations (TDT only), score (sum of the log-probabilities of every greedy choice, blanks
    included; TDT adds the chosen duration's log-probability), and notes naming the algorithm,
    the WIND window used and the CUDA-graph mode.

    Raises `DecodeInputError` for NaN / inf in a valid frame of ``enc`` (padding beyond a
    length may hold anything) and for non-finite logits that the search used.
    """
    from . import graphs  # the GPU drivers; importing them needs no GPU

    if options is None:
        options = GreedyOptions()
    if not isinstance(options, GreedyOptions):
        raise OptionsError(f"options must be GreedyOptions; got {type(options).__name__}")
    enc, lengths = check_inputs(model, enc, enc_lengths)
    adapter = ModelAdapter(model)
    window = options.window_for(enc.shape[1])
    if options.algorithm == "wind" and window != options.effective_window:
        # Cut here, not only in the program: the notes and the graph cache see what runs.
        options = dataclasses.replace(options, window=window)
    mode = graphs.resolve_mode(options.cuda_graphs, enc.device)
    notes = (f"algorithm={options.algorithm}", f"window={options.effective_window}")
    notes += (f"cuda_graphs={mode}" + (" (auto)" if options.cuda_graphs == "auto" else ""),)
    if enc.shape[0] == 0:
        return []
    with torch.inference_mode():
        vocab = check_joint(adapter, enc, options.durations)
        # No frames: nothing to capture (the loop bodies would index a frame of nothing, and
        # the joint's width was not probed), and eagerly nothing runs past init_.
        if mode != "off" and enc.shape[1]:  # (a captured program is shared: read while held)
            with graphs.running(mode, adapter, enc, lengths, options, vocab) as program:
                return own_windows(program.hypotheses(notes), lengths, options)
        program = make_program(adapter, enc, lengths, options, vocab, fixed=False)
        run_eager(program)
        return own_windows(program.hypotheses(notes), lengths, options)


def own_windows(hyps: list, lengths, options: GreedyOptions) -> list:
    """WIND's hypotheses with the window their own utterance's frames cut it to
    (`GreedyOptions.window_for`), not the batch's padded T: a result equals the utterance's
    decoded alone, whatever else shares the batch, notes included (frames past an utterance's
    end score nothing of it)."""
    if options.algorithm != "wind":
        return hyps
    batch_note = f"window={options.effective_window}"
    return [h if (note := f"window={options.window_for(n)}") == batch_note else
            changed(h, notes=tuple(note if x == batch_note else x for x in h.notes))
            for h, n in zip(hyps, lengths.tolist(), strict=True)]  # fmt: skip

"""Batched transducer beam searches: `beam_decode` with `BeamOptions`.

Two families (see `BeamOptions`): frame-synchronous searches whose scores sum over
alignments ("standard", "tokenwise", "maes"; `segment.py`) and searches whose scores are one
alignment's ("alsd": `alignment.py`, "wind": `window.py`). `reference.py` is the per-utterance
specification both are tested against. They are written in tensor operations that never wait on
the device; on CPU tensors each runs its bookkeeping compiled instead (`alignment_cpu.py` /
`alsd_step.py`, `segment_cpu.py` / `segment_step.py`, `wind_cpu.py` / `wind_step.py`), since
there each tensor operation's fixed cost is most of a step. Imports run beam -> segment /
window -> alignment -> rows, and beam -> alignment_cpu / segment_cpu / wind_cpu -> *_step /
predictor_slots -> rows (wind_cpu also reads alignment_cpu's rows and window's layout).
"""

from __future__ import annotations

import torch

from ...errors import OptionsError
from ..inputs import check_inputs, check_joint
from ..model import ModelAdapter
from .alignment import alignment_search
from .alignment_cpu import alsd_search_cpu
from .options import BEAM_ALGORITHMS, BeamOptions
from .reference import beam_reference
from .segment import segment_search
from .segment_cpu import segment_search_cpu
from .wind_cpu import wind_search_cpu
from .window import window_search

__all__ = ["BEAM_ALGORITHMS", "BeamOptions", "beam_decode", "beam_reference"]

# On CPU tensors every search runs its bookkeeping compiled (`alignment_cpu`, `segment_cpu`,
# `wind_cpu`); False runs the tensor searches there too, as on CUDA (the tests check both).
COMPILED_ON_CPU = True


def beam_decode(model, enc, enc_lengths, options: BeamOptions | None = None):
    """Beam-search a batch of encoder outputs with an RNN-T or TDT model.

    model, enc, enc_lengths: as `greedy_decode` (a `TransducerModel`, (B, T, D), (B,)).
    options: `BeamOptions`.

    Returns, per utterance, up to ``options.nbest`` `Hypothesis` objects, best first, with
    distinct token sequences: tokens, timestamps, durations (TDT), score (log-probability: summed
    over the alignments the search merged for "standard" / "tokenwise" / "maes", one
    alignment's for "alsd" / "wind"; see `BeamOptions`), and notes. Timestamps: the frame of each
    label in the alignment the score belongs to ("alsd", "wind"; for the summing searches the
    best contribution's), for "tokenwise" the frame of the segment where the label's emission
    was most probable.
    """
    if options is None:
        options = BeamOptions()
    if not isinstance(options, BeamOptions):
        raise OptionsError(f"options must be BeamOptions; got {type(options).__name__}")
    enc, lengths = check_inputs(model, enc, enc_lengths)
    if enc.shape[0] == 0:
        return []
    adapter = ModelAdapter(model)
    notes = (f"algorithm={options.algorithm}", f"beam_size={options.beam_size}")
    if options.algorithm == "wind":
        notes += (f"window={min(options.effective_window, max(enc.shape[1], 1))}",)
    if options.algorithm == "tokenwise":
        notes += (f"segment_size={options.effective_segment}",)
    with torch.inference_mode():
        vocab = check_joint(adapter, enc, options.durations)
        search = {"alsd": alignment_search, "wind": window_search}.get(
            options.algorithm, segment_search
        )
        if enc.device.type == "cpu" and COMPILED_ON_CPU:
            if search is alignment_search:
                search = alsd_search_cpu
            elif search is segment_search:
                search = segment_search_cpu
            else:
                search = wind_search_cpu
        return search(adapter, enc, lengths, options, vocab, notes)

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

import contextlib

import torch

from ...errors import OptionsError
from ...interrupts import on_worker
from ...results import changed
from ..inputs import check_inputs, check_joint
from ..model import ModelAdapter
from ..programs import check_memory
from .alignment import alignment_search
from .alignment_cpu import alsd_search_cpu
from .options import BEAM_ALGORITHMS, BeamOptions
from .reference import beam_reference
from .segment import segment_search
from .segment_cpu import segment_search_cpu
from .wind_cpu import wind_search_cpu
from .window import pool_layout, window_search

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
    if options.length_norm:  # the n best are ranked by it, not by the score they show
        notes += ("ranked by score per token (length_norm)",)
    with torch.inference_mode():
        vocab = check_joint(adapter, enc, options.durations)
        _check_beam_memory(enc, options, vocab)
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
            _load_compiled(search, adapter, enc, lengths, options, vocab)
        return own_cuts(search(adapter, enc, lengths, options, vocab, notes), lengths, options)


def own_cuts(hyps: list, lengths, options: BeamOptions) -> list:
    """Each utterance's hypotheses with the note of the window ("wind") or segment
    ("tokenwise") its own frames cut it to, not the batch's padded T: a result equals the
    utterance's decoded alone, whatever else shares the batch, notes included (frames past an
    utterance's end score nothing of it)."""
    if options.algorithm not in ("wind", "tokenwise"):
        return hyps

    def note(n: int) -> str:
        if options.algorithm == "wind":
            return f"window={min(options.effective_window, max(n, 1))}"
        return f"segment_size={options.segment_for(n)}"

    return [[changed(h, notes=(*h.notes, note(n))) for h in utt]
            for utt, n in zip(hyps, lengths.tolist(), strict=True)]  # fmt: skip


_LOADED: set = set()  # (search, dtype, TDT) whose compiled functions this process has loaded


def _load_compiled(search, adapter, enc, lengths, options: BeamOptions, vocab: int) -> None:
    """The first time a compiled search meets a dtype in this process, search the first 2
    frames of the longest utterance on the worker thread that keeps Ctrl-C off compiled code
    (`interrupts.on_worker`): that loads (or compiles) every Numba function the search calls,
    and a Ctrl-C landing in LLVM's loading on the main thread was swallowed by a ctypes callback
    (the call went on, the interrupt was lost). A Ctrl-C meanwhile comes out once the loading
    ends (a second one at once). Best effort: an error there is left to the search itself."""
    key = (search, enc.dtype, options.durations is not None)
    if key in _LOADED:
        return
    b = int(lengths.argmax())
    frames = min(2, int(lengths[b]))
    if frames == 0:
        return  # (nothing to search: nothing is loaded)
    tiny, tiny_lengths = enc[b : b + 1, :frames], torch.tensor([frames], device=enc.device)

    def search_tiny():
        with torch.inference_mode():  # (thread-local: the worker's own)
            search(adapter, tiny, tiny_lengths, options, vocab, ())

    with contextlib.suppress(Exception):  # (the real search raises what is wrong)
        on_worker(search_tiny)
    _LOADED.add(key)


def _check_beam_memory(enc, options: BeamOptions, vocab: int) -> None:
    """`DeviceMemoryError` naming the options before a search allocates more than the machine
    has (a beam of 2**31 rows; a TDT duration past T frames holds T, `landing_width`): a lower
    bound of its largest buffers, 8 bytes a value — per row of the search, the log-probs one
    step reads (a window of frames, a segment) and the mass landing ahead (TDT)."""
    B, T, _ = enc.shape
    K, width = options.beam_size, 0
    if options.algorithm == "wind":
        frames, _, rows = pool_layout(options, T)
    elif options.algorithm == "alsd":
        frames, rows = 1, 2 * K
    else:  # the summing searches hold each row's mass landing ahead: the largest duration, <= T
        frames, rows = options.segment_for(T), K + options.expansions
        width = options.landing_width(T)
    values = B * rows * (frames * vocab + width + frames)
    tunable = {
        "wind": "beam_size or window",
        "maes": "beam_size or expansion_beta",
        "tokenwise": "beam_size or segment_size",
    }.get(options.algorithm, "beam_size")
    check_memory(
        enc.device,
        8 * values,
        f"the {options.algorithm!r} beam search's buffers ({B} utterances x {rows} rows x "
        f"{frames} frames x {vocab} labels"
        + (f", durations up to {width} frames" if width > 1 else "")
        + ")",
        f"lower {tunable}" + (" or the largest duration" if width > 1 else ""),
    )

"""The "alsd" search on the CPU: the model's calls in torch, the search's bookkeeping in one
compiled step per batch (`alsd_step`), labels kept as a traceback instead of copied histories.

`alignment.alignment_search` runs the same search in ~300 tensor operations a step, so that
the loop never waits on the device; on a CPU core each operation costs microseconds and, with
a small model, they are most of the time. Here a step is: the joint on the live beam rows
only, the log-softmax, one compiled call that applies every utterance's moves, and the
predictor on the rows that appended a label. Same hypotheses as `alignment_search` and
`reference._alignment_search` (tests).
"""

from __future__ import annotations

import numpy as np
import torch

from .predictor_slots import PredictorSlots
from .rows import encoder_rows, non_finite_logits, traced_hypotheses

__all__ = ["alsd_search_cpu", "start_rows"]


def start_rows(length, R, final):
    """The host rows of the compiled alignment searches ("alsd", "wind"): utterance b owns
    rows b*R .. b*R+R-1, its final set from row ``final``; ``(score, hash, size, frame,
    count, traceback buffer)`` with the empty hypothesis at frame 0 in row 0, or already final
    where the utterance has no frames."""
    B = length.shape[0]
    score = np.full(B * R, -np.inf)
    score[0::R] = np.where(length > 0, 0.0, -np.inf)
    score[final::R] = np.where(length > 0, -np.inf, 0.0)
    hash_, size, frame, count = (np.zeros(B * R, dtype=np.int64) for _ in range(4))
    return score, hash_, size, frame, count, np.empty((64, 4, B * R), dtype=np.int64)


def alsd_search_cpu(adapter, enc, lengths, options, vocab, notes):
    from .alsd_step import alsd_step, trace_back  # Numba compiles on first use

    B, T, _ = enc.shape
    K = options.beam_size
    R = 2 * K
    tdt = options.durations is not None
    durations = np.asarray(options.durations if tdt else (0,), dtype=np.int64)
    length = lengths.numpy().astype(np.int64)
    score, hash_, size, frame, count, backs = start_rows(length, R, final=K)
    emit_rows, emit_labels, beam_parent = (np.empty(B * K, dtype=np.int64) for _ in range(3))
    no_durations = np.empty((0, 0))
    max_tokens = -1 if options.max_tokens is None else options.max_tokens

    enc_rows = encoder_rows(adapter, enc)
    predictor = PredictorSlots(adapter, B * K)
    steps = 0
    while True:
        live = np.flatnonzero(score.reshape(B, R)[:, :K] > -np.inf)  # beam index b*K + k
        if live.size == 0:
            break
        rows = live // K * R + live % K
        at = torch.from_numpy(live // K * T + frame[rows])
        logits = adapter.joint(enc_rows.index_select(0, at), predictor.output(live))
        logits = logits.double()
        lp = logits[:, :vocab].log_softmax(-1).numpy()
        lpd = logits[:, vocab:].log_softmax(-1).numpy() if tdt else no_durations
        if steps == backs.shape[0]:
            backs = np.concatenate([backs, np.empty_like(backs)])
        n_emit, bad = alsd_step(
            lp, lpd, rows, K, adapter.blank_id, options.max_symbols_per_frame, max_tokens,
            durations, tdt, length, score, hash_, size, frame, count, backs[steps],
            emit_rows, emit_labels, beam_parent,
        )  # fmt: skip
        if bad >= 0:
            raise non_finite_logits(bad)
        steps += 1
        predictor.take(beam_parent)
        predictor.feed(emit_rows[:n_emit], emit_labels[:n_emit])
    finals = np.flatnonzero(score > -np.inf)  # only final rows are left
    traced, offsets = trace_back(backs, steps, finals)
    names = ("labels", "timestamps", "durations") if tdt else ("labels", "timestamps")
    return traced_hypotheses(traced, offsets.tolist(), names, score[finals].tolist(),
                             (finals // R).tolist(), B, options, notes)  # fmt: skip

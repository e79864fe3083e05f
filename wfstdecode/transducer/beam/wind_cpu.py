"""The "wind" search on the CPU: the model's calls in torch, the search's bookkeeping compiled
(`wind_step`), labels kept as a traceback instead of copied histories.

`window.window_search` runs the same search in ~150 tensor operations a step so that the loop
never waits on the device; on a CPU core those are most of its time (2.5 s for the 180 flite
utterances at beam 4, B = 32, of which the model's calls ~0.7 s). Here a step is: the
selection of the pool rows to expand (compiled), the joint on their windows only, the
log-softmax, one compiled call that applies every utterance's moves, and the predictor on the
pool rows that appended a label — when they are expanded (most never are: a step adds up to
K*K of them per utterance and expands K), where the model's state layout lets it run on some
rows (`predictor_slots.PredictorSlots.indirect`).
Same hypotheses as `window_search` and `reference._window_search` (tests).
"""

from __future__ import annotations

import numpy as np
import torch

from .alignment_cpu import start_rows
from .predictor_slots import PredictorSlots
from .rows import encoder_rows, non_finite_logits, traced_hypotheses
from .window import pool_layout

__all__ = ["wind_search_cpu"]


def wind_search_cpu(adapter, enc, lengths, options, vocab, notes):
    from .alsd_step import trace_back  # Numba compiles on first use
    from .wind_step import wind_select, wind_step

    B, T, _ = enc.shape
    K = options.beam_size
    W, P, R = pool_layout(options, T)
    length = lengths.numpy().astype(np.int64)
    score, hash_, size, frame, count, backs = start_rows(length, R, final=P)
    expand = np.empty(B * K, dtype=np.int64)
    pool_parent, emit_rows, emit_labels = (np.empty(B * P, dtype=np.int64) for _ in range(3))
    max_tokens = -1 if options.max_tokens is None else options.max_tokens
    window = np.arange(W)
    predictor = PredictorSlots(adapter, B * P)
    # the label each pool row appended but has not fed to the predictor yet (-1: none), while
    # its slot holds its parent's state (where the predictor can run on some rows only)
    lazy = predictor.indirect
    pending = np.full(B * P, -1, dtype=np.int64)

    enc_rows = encoder_rows(adapter, enc)
    steps = 0
    while True:
        n = wind_select(score, frame, K, P, B, expand)
        if n == 0:  # (it expands something in every utterance whose pool is not empty)
            break
        rows = expand[:n]
        utt = rows // R
        at = utt[:, None] * T + np.minimum(frame[rows][:, None] + window, T - 1)
        pool = utt * P + rows % R
        fed = pool[pending[pool] >= 0]
        predictor.feed(fed, pending[fed])
        pending[fed] = -1
        logits = adapter.joint(
            enc_rows.index_select(0, torch.from_numpy(at.reshape(-1))),
            predictor.output(pool).repeat_interleave(W, 0),
        )
        lp = logits.double()[:, :vocab].log_softmax(-1).numpy().reshape(n, W, vocab)
        if steps == backs.shape[0]:
            backs = np.concatenate([backs, np.empty_like(backs)])
        n_emit, bad = wind_step(
            lp, expand, n, K, P, W, adapter.blank_id, options.max_symbols_per_frame, max_tokens,
            length, score, hash_, size, frame, count, backs[steps], pool_parent, emit_rows,
            emit_labels,
        )  # fmt: skip
        if bad >= 0:
            raise non_finite_logits(bad)
        steps += 1
        predictor.take(pool_parent)
        if lazy:
            pending = pending[pool_parent]
            pending[emit_rows[:n_emit]] = emit_labels[:n_emit]
        else:
            predictor.feed(emit_rows[:n_emit], emit_labels[:n_emit])
    finals = np.flatnonzero(score > -np.inf)  # only final rows are left
    traced, offsets = trace_back(backs, steps, finals)
    return traced_hypotheses(traced[:2], offsets.tolist(), ("labels", "timestamps"),
                             score[finals].tolist(), (finals // R).tolist(), B, options,
                             notes)  # fmt: skip

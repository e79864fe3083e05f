"""The frame-synchronous searches with prefix merging ("standard", "tokenwise", "maes"; RNN-T
and TDT) on the CPU: the model's calls in torch, each round's bookkeeping in one compiled call
per batch (`segment_step`), labels kept as a traceback.

`segment.segment_search` runs the same searches in tensor operations that never wait on the
device; on a CPU core their fixed costs are most of a round. Here a round is: the joint on the
live active hypotheses only (at every frame of the segment), the log-softmax, one compiled call
(blank expansions merged into the done hypotheses, label expansions competing for the active
places), and the predictor on the new active hypotheses. Same hypotheses as `segment_search`
and `reference._segment_search` (tests).
"""

from __future__ import annotations

import numpy as np
import torch

from .predictor_slots import PredictorSlots
from .rows import encoder_rows, non_finite_logits, traced_hypotheses

__all__ = ["segment_search_cpu"]


def segment_search_cpu(adapter, enc, lengths, options, vocab, notes):
    from .segment_step import begin_segment, segment_round, trace_nodes  # compiled on first use

    B, T, _ = enc.shape
    K, E, S = options.beam_size, options.expansions, options.segment_for(T)
    R = K + E
    tdt = options.durations is not None
    durations = np.asarray(options.durations or (), dtype=np.int64)
    width = options.landing_width(T)  # frames ahead a token can land
    length = lengths.numpy().astype(np.int64)
    # the done hypotheses (score, label hash, labels, traceback node, mass landing ahead): the
    # empty one, at frame 0, to start
    done = (
        np.full(B * R, -np.inf),
        *(np.zeros(B * R, dtype=np.int64) for _ in range(3)),
        np.full((B * R, width), -np.inf),
    )
    done[0][::R], done[3][::R], done[4][::R, 0] = 0.0, -1, 0.0
    done_n = np.ones(B, dtype=np.int64)
    active = tuple(np.zeros(B * E, dtype=np.int64) for _ in range(3))
    stay = np.full((B * E, S), -np.inf)
    nodes, n_nodes = np.empty((4, 1024), dtype=np.int64), 0
    source = np.empty(B * R, dtype=np.int64)
    emit_rows, emit_labels = np.empty(B * E, dtype=np.int64), np.empty(B * E, dtype=np.int64)

    enc_rows = encoder_rows(adapter, enc)
    predictor = PredictorSlots(adapter, B * R)
    offsets, own = np.arange(S), np.arange(B * R)
    for start in range(0, T, S):
        begin_segment(start, length, K, E, done_n, done, active, stay, source)
        predictor.take(source)
        frames = np.clip(length - start, 0, S)
        at = np.minimum(start + offsets, T - 1)
        for round_ in range(options.rounds + 1):
            live = np.flatnonzero((stay > -np.inf).any(1))  # active slot b*E + e
            if live.size == 0 and round_ > 0:
                break  # (round 0 runs anyway: TDT's done hypotheses get their new order)
            lp, lpd = _log_probs(adapter, enc_rows, predictor, live, at, T, K, E, vocab, tdt)
            if n_nodes + B * E > nodes.shape[1]:  # a round adds at most E nodes an utterance
                grown = np.empty((4, max(2 * nodes.shape[1], n_nodes + B * E)), dtype=np.int64)
                grown[:, :n_nodes] = nodes[:, :n_nodes]
                nodes = grown
            n_emit, n_nodes, bad = segment_round(
                lp, lpd, live, frames, start, K, E, adapter.blank_id, options.gamma, durations,
                tdt, round_ == options.rounds, done_n, done, active, stay, nodes, n_nodes,
                source, emit_rows, emit_labels,
            )  # fmt: skip
            if bad >= 0:
                raise non_finite_logits(bad)
            after = source < 0  # rows that copy a new row once the predictor has run
            predictor.take(np.where(after, own, source))
            predictor.feed(emit_rows[:n_emit], emit_labels[:n_emit])
            if after.any():
                predictor.take(np.where(after, -1 - source, own))
    slots = np.array([b * R + j for b in range(B) for j in range(done_n[b])], dtype=np.int64)
    traced, offsets = trace_nodes(nodes, done[3][slots])
    names = ("labels", "timestamps", "durations") if tdt else ("labels", "timestamps")
    return traced_hypotheses(traced, offsets.tolist(), names, done[0][slots].tolist(),
                             (slots // R).tolist(), B, options, notes)  # fmt: skip


def _log_probs(adapter, enc_rows, predictor, live, at, T, K, E, vocab, tdt):
    """Token log-probs (n, S, V) of the live active slots at the segment's frames ``at``, and
    TDT's duration log-probs at its one frame (n, D; RNN-T: (n, 0))."""
    n, S = live.size, at.size
    if n == 0:
        return np.empty((0, S, vocab)), np.empty((0, 0))
    R = K + E
    utt = live // E
    enc_at = torch.from_numpy((utt * T)[:, None] + at[None, :]).view(-1)
    pred = predictor.output(utt * R + K + live % E)
    J = pred.shape[1]
    logits = adapter.joint(
        enc_rows.index_select(0, enc_at), pred.unsqueeze(1).expand(n, S, J).reshape(n * S, J)
    )
    logits = logits.view(n, S, -1).double()
    lp = logits[..., :vocab].log_softmax(-1).numpy()
    lpd = logits[:, 0, vocab:].log_softmax(-1).numpy() if tdt else np.empty((n, 0))
    return lp, lpd

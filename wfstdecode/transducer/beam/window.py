"""Batched WIND beam search (the WIND paper's Algorithm 3), RNN-T, B x (P pool + K final)
hypotheses in fixed-shape rows (`BeamRows`), P = K * (W + 1).

Hypotheses wait in a pool, each at the frame it reads next; a step takes, per utterance, the K
best of the earliest frame's hypotheses ("t = min(t2hyps.keys())"), scores their moves in a
window of W frames (`alignment.score_moves`), keeps each one's K best moves (line 13) and its
greedy move (`reference._window_moves` says why), sends the
moves that reach the last frame to the final set (`alignment.merge_final`) and puts the others
back into the pool. A hypothesis at the earliest frame is expanded only while fewer than K
hypotheses at later frames beat it (Graves' rule; the paper's safeguard against staying at one
frame, where labels emitted at t bring hypotheses back). The pool keeps, per frame, the K best
distinct hypotheses that beat the K-th final score (Viterbi recombination by labels, frame and
labels emitted at the frame; keeping the K best per frame as hypotheses arrive selects the same
ones as the paper's pruning when a frame's turn comes). Every pool hypothesis reads a frame in
[t, t + W], so K per frame fit in P rows. `reference._window_search` is the same per utterance.
"""

from __future__ import annotations

import math

import torch

from ..programs import host_flag
from .alignment import (
    Beam,
    Kept,
    apply_step_,
    decode_moves,
    finishes,
    merge_final,
    score_moves,
)
from .rows import BeamRows, recombine

__all__ = ["pool_layout", "window_search"]


def pool_layout(options, T: int) -> tuple[int, int, int]:
    """``(W, P, R)``: the window (at most the frames there are), the pool's rows per utterance
    (K per frame it can hold: W + 1) and all rows per utterance (the pool, then K final)."""
    K = options.beam_size
    W = min(options.effective_window, max(T, 1))
    return W, K * (W + 1), K * (W + 2)


def window_search(adapter, enc, lengths, options, vocab, notes):
    B, T, _ = enc.shape
    K, dev = options.beam_size, enc.device
    W, P, R = pool_layout(options, T)
    rows = BeamRows(adapter, B, R, dev, tdt=False)
    s = Beam.start(rows, lengths, R, final=P)
    first = (torch.arange(B, device=dev) * R).unsqueeze(1)
    pool_rows, final_rows = (
        first + torch.arange(P, device=dev),
        first + P + torch.arange(K, device=dev),
    )
    enc_p = adapter.encoder(enc)
    while host_flag((rows.scores[pool_rows] > -math.inf).any()):
        score, frame = rows.scores[pool_rows], s.frame[pool_rows]  # (B, P)
        live = score > -math.inf
        earliest = torch.where(live, frame, torch.iinfo(frame.dtype).max).amin(1, keepdim=True)
        # Graves' rule: a hypothesis at the earliest frame goes on only while fewer than K
        # waiting at later frames beat it (labels emitted at t bring hypotheses back to t).
        later = torch.where(live & (frame > earliest), score, -math.inf)
        kth_later = later.topk(K, dim=1).values[:, -1:]
        current = live & (frame == earliest) & (score > kth_later)
        cur_score, cur_pick = torch.where(current, score, -math.inf).topk(K, dim=1)
        expand = pool_rows.gather(1, cur_pick)
        rows.feed_pending_(expand.view(-1))
        moves, greedy = score_moves(
            adapter, rows, s, expand, cur_score.view(-1), enc_p, options, vocab, W, None, True
        )
        moves = _k_best_and_greedy(moves.view(B * K, -1), K, greedy).view(B, -1)
        # (the finishing moves are taken out of ``moves``)
        f_values, f_move = finishes(rows, s, expand, moves.view(B * K, W, vocab), vocab, W, None)
        final_best, final_pick = merge_final(rows, final_rows, f_values, f_move)
        threshold = final_best[:, -1:]
        g_values, g_move = decode_moves(rows, s, expand, moves, None, K * (K + 1), vocab, W, None)
        # Candidates for the pool: the hypotheses waiting at later frames, and the new moves.
        waiting = later  # those at the earliest frame were expanded, or are dropped
        cand = {
            "parent": torch.cat([pool_rows, g_move["parent"]], 1),
            "label": torch.cat([torch.zeros_like(pool_rows), g_move["label"]], 1),
            "is_label": torch.cat([torch.zeros_like(current), g_move["is_label"]], 1),
            "emit_frame": torch.cat([torch.zeros_like(pool_rows), g_move["emit_frame"]], 1),
            "frame": torch.cat([frame, g_move["frame"]], 1),
            "count": torch.cat([s.count[pool_rows], g_move["count"]], 1),
            "hash": torch.cat([rows.hash[pool_rows], g_move["hash"]], 1),
            "length": torch.cat([rows.lengths[pool_rows], g_move["length"]], 1),
        }
        values = torch.cat([waiting, g_values], 1)
        values = torch.where(values > threshold, values, -math.inf)
        keys = (cand["hash"], cand["length"], cand["frame"], cand["count"])
        values = _k_best_per_frame(recombine(values, keys, merge="max"), cand["frame"], K)
        pool_best, pool_pick = values.topk(P, dim=1)
        kept = Kept(cand, pool_pick, pool_best)
        apply_step_(rows, s, kept, f_move, final_pick, final_best, final_rows, tdt=False, lazy=True)
    return rows.results(options, notes, first=P, count=K)


def _k_best_and_greedy(moves, k, greedy):
    """Keep each row's ``k`` best moves (Algorithm 3, line 13) and its greedy move (index
    ``greedy``; `reference._window_moves` says why); the rest -inf."""
    best, index = moves.topk(min(k, moves.shape[1]), dim=1)
    kept = torch.full_like(moves, -math.inf).scatter(1, index, best)
    at = greedy.unsqueeze(1)
    return kept.scatter(1, at, moves.gather(1, at))


def _k_best_per_frame(values, frame, k):
    """Keep, per utterance and frame, the ``k`` best of ``values`` (B, M); the rest -inf."""
    M = values.shape[1]
    mine, other = values.unsqueeze(2), values.unsqueeze(1)
    earlier = torch.ones(M, M, dtype=torch.bool, device=values.device).tril(-1)
    above = (other > mine) | ((other == mine) & earlier)
    same_frame = frame.unsqueeze(2) == frame.unsqueeze(1)
    rank = (above & same_frame & (other > -math.inf)).sum(2)
    return torch.where(rank < k, values, -math.inf)

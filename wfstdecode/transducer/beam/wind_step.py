"""One step of the WIND beam search ("wind", RNN-T) for a whole batch, compiled (Numba): what
`window.window_search` does with ~150 tensor operations a step, on the host, for the CPU.

The rows of a batch: utterance b owns rows b*R .. b*R+R-1, R = P + K, P = K * (W + 1): the
first P its pool (hypotheses waiting, each at the frame it reads next), the other K its final
set; per row the arrays ``score``, ``hash`` (of the labels, as `rows.HASH_BASE`), ``size``
(labels), ``frame`` and ``count`` (labels emitted at that frame). As `reference._window_search`,
per utterance:
  * `wind_select`: the K best pool hypotheses at the earliest frame that beat the K-th best
    waiting at a later frame (Graves' rule) are expanded (the model scores their windows); an
    earliest frame with none such is dropped and the next one taken;
  * `wind_step`: each expanded hypothesis offers its K best window moves (a label at frame
    t+j after blanks at t..t+j-1, or blanks over the whole window) and its greedy move
    (`reference._window_moves`); the all-blank moves that
    reach the last frame merge into the final set (by labels: the better alignment), which
    keeps its K best; the pool becomes the hypotheses waiting at later frames and the other
    moves that beat the K-th final score, recombined by (labels, frame, count) and at most K
    per frame (so that at most P remain: every one reads a frame in [t, t + W]).
It writes the rows in place, a traceback row per row (parent row, label or -1, its frame, 0)
read by `alsd_step.trace_back`, and the pool rows that appended a label (the predictor runs
on them).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .alsd_step import (
    FRAME,
    NONE,
    append_candidate,
    clear_row,
    distinct_best,
    live_span,
    note_parent,
    write_row,
)

__all__ = ["wind_select", "wind_step"]


@njit(nogil=True, cache=True)
def wind_select(score, frame, K, P, B, expand):
    """The pool rows each utterance expands this step, best first (ties: the lower row), into
    ``expand``; returns how many in all. An earliest frame none of whose hypotheses may be
    expanded is dropped here, and the next one looked at (a step would only drop it)."""
    R = P + K
    n = 0
    for b in range(B):
        base = b * R
        while True:
            earliest = -1
            for r in range(base, base + P):
                if score[r] > -np.inf and (earliest < 0 or frame[r] < earliest):
                    earliest = frame[r]
            if earliest < 0:
                break
            later = np.full(K, -np.inf)  # the K best waiting at later frames, descending
            for r in range(base, base + P):
                if score[r] > later[K - 1] and frame[r] > earliest:
                    _insert(later, score[r])
            first = n
            for _ in range(K):
                best, pick = later[K - 1], -1
                for r in range(base, base + P):
                    if frame[r] == earliest and score[r] > best:
                        taken = False
                        for q in range(first, n):
                            taken = taken or expand[q] == r
                        if not taken:
                            best, pick = score[r], r
                if pick < 0:
                    break
                expand[n] = pick
                n += 1
            if n > first:
                break
            for r in range(base, base + P):
                if frame[r] == earliest:
                    score[r] = -np.inf
    return n


@njit(inline="always", nogil=True, cache=True)
def _insert(top, s):
    """Put ``s`` into the descending ``top`` in place of its last (it beats the last)."""
    i = top.shape[0] - 1
    while i > 0 and top[i - 1] < s:
        top[i] = top[i - 1]
        i -= 1
    top[i] = s


@njit(nogil=True, cache=True)
def _best_moves(lp_h, n, t, c, score, may_label, first_may_label, blank, K, best, moves):
    """The ``K`` best moves of a hypothesis at frame ``t`` (``c`` labels emitted there) whose
    window of ``n`` frames has log-probs ``lp_h`` (W, V), in `reference._moves`' order, ties:
    the earlier, then its greedy move when not among them (`reference._window_moves`): written
    to ``best`` (scores) and ``moves`` (label, its frame, frame after, count after; room for
    K + 1), best first; returns how many."""
    V = lp_h.shape[1]
    m = 0
    blanks = 0.0
    for j in range(n + 1):
        for k in range(V if j < n else 1):
            if j == n:  # blanks over the whole window
                s, label, to, c_to = score + blanks, NONE, t + n, 0
            else:
                if k == blank or not may_label or (j == 0 and not first_may_label):
                    continue
                s, label, to, c_to = score + blanks + lp_h[j, k], k, t + j, c + 1 if j == 0 else 1
            if m == K and not s > best[K - 1]:
                continue
            i = m if m < K else K - 1
            while i > 0 and best[i - 1] < s:
                best[i] = best[i - 1]
                moves[i] = moves[i - 1]
                i -= 1
            best[i] = s
            moves[i, 0], moves[i, 1], moves[i, 2], moves[i, 3] = label, t + j, to, c_to
            m = min(m + 1, K)
        if j < n:
            blanks += lp_h[j, blank]
    # the greedy move (`reference._greedy_move`), scored as above
    blanks = 0.0
    s, label, at, to, c_to = 0.0, NONE, t + n, t + n, 0
    for j in range(n):
        top = 0
        for k in range(1, V):
            if lp_h[j, k] > lp_h[j, top]:
                top = k
        if top != blank and may_label and (j > 0 or first_may_label):
            s, label, at, to, c_to = (
                score + blanks + lp_h[j, top],
                top,
                t + j,
                t + j,
                c + 1 if j == 0 else 1,
            )
            break
        blanks += lp_h[j, blank]
    if label == NONE:
        s = score + blanks
    for q in range(m):
        if moves[q, 0] == label and moves[q, 1] == at:
            return m
    best[m] = s
    moves[m, 0], moves[m, 1], moves[m, 2], moves[m, 3] = label, at, to, c_to
    return m + 1


@njit(nogil=True, cache=True)
def wind_step(
    lp, expand, n_expand, K, P, W, blank, max_symbols, max_tokens, length,
    score, hash_, size, frame, count, back, pool_parent, emit_rows, emit_labels,
):  # fmt: skip
    """One step (module docstring). ``lp`` (n_expand, W, V): the log-probs of each expanded
    row ``expand[i]`` at frames t .. t+W-1 of its window (those past the utterance unread).
    ``back`` (4, B*R) receives the traceback rows; ``pool_parent`` (B*P) each new pool row's
    parent as a pool index (b*P + p; its own for an empty row), for the predictor. Returns (labels
    appended, the first utterance whose log-probs hold a NaN, or -1)."""
    R = P + K
    B = length.shape[0]
    V = lp.shape[2]
    cap = P + K * (K + 1) + K  # the pool, K + 1 moves of each expanded row, the final set
    cands = (np.empty(cap), np.empty((cap, 6), np.int64))
    final = (np.empty(cap), np.empty((cap, 6), np.int64))
    out = (np.empty(R), np.empty((R, 6), np.int64), np.empty(R, np.int64), np.empty(R, np.int64))
    kept_score, kept_move = out[0], out[1]
    best, moves = np.empty(K + 1), np.empty((K + 1, 4), np.int64)
    n_emit = 0
    start = 0
    for b in range(B):
        base = b * R
        stop = live_span(expand[:n_expand], start, R, b)
        for i in range(start, stop):
            for j in range(min(W, length[b] - frame[expand[i]])):
                for v in range(V):
                    if np.isnan(lp[i, j, v]):
                        return n_emit, b
        earliest = -1
        for r in range(base, base + P):
            if score[r] > -np.inf and (earliest < 0 or frame[r] < earliest):
                earliest = frame[r]
        n_final, n_cand = 0, 0
        for q in range(base + P, base + R):
            if score[q] > -np.inf:
                n_final = append_candidate(final, n_final, score[q], q, NONE, 0, 0, 0, 0)
        for r in range(base, base + P):  # waiting at later frames
            if score[r] > -np.inf and frame[r] > earliest:
                n_cand = append_candidate(
                    cands, n_cand, score[r], r, NONE, 0, 0, frame[r], count[r]
                )
        for i in range(start, stop):
            row = expand[i]
            t, c = frame[row], count[row]
            n = min(W, length[b] - t)
            may_label = max_tokens < 0 or size[row] < max_tokens
            m = _best_moves(lp[i], n, t, c, score[row], may_label, c < max_symbols, blank, K,
                            best, moves)  # fmt: skip
            for q in range(m):
                label, at, to, c_to = moves[q, 0], moves[q, 1], moves[q, 2], moves[q, 3]
                if to >= length[b]:
                    n_final = append_candidate(final, n_final, best[q], row, label, at, 0, 0, 0)
                else:
                    n_cand = append_candidate(cands, n_cand, best[q], row, label, at, 0, to, c_to)
        kept_final = distinct_best(final, n_final, K, -np.inf, False, hash_, size, out, P, K)
        threshold = kept_score[R - 1] if kept_final == K else -np.inf
        # the pool: one per (labels, frame, count), at most K per frame (so all fit in P rows)
        kept_pool = distinct_best(cands, n_cand, P, threshold, True, hash_, size, out, 0, K)
        for r in range(kept_pool, P):  # the pool's empty places
            clear_row(base + r, score, back)
            pool_parent[b * P + r] = b * P + r
        for r in range(P + kept_final, R):  # the final set's
            clear_row(base + r, score, back)
        for m in range(P, P + kept_final):
            write_row(m, base + m, out, length[b], score, hash_, size, frame, count, back)
        for m in range(kept_pool):  # the pool, best first
            write_row(m, base + m, out, kept_move[m, FRAME], score, hash_, size, frame, count,
                      back)  # fmt: skip
            n_emit = note_parent(
                kept_move[m], b * P, m, base, pool_parent, emit_rows, emit_labels, n_emit
            )
        start = stop
    return n_emit, -1

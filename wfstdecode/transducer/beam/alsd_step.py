"""One step of the alignment-length synchronous search ("alsd") for a whole batch, compiled
(Numba): what `alignment._step_` does with ~200 tensor operations, on the host, for the CPU.

The rows of a batch: utterance b owns rows b*R .. b*R+R-1, R = 2K, the first K its beam, the
other K its final set; per row the arrays ``score``, ``hash`` (of the labels, as
`rows.HASH_BASE`), ``size`` (labels), ``frame`` (the next frame to read) and ``count`` (labels
emitted at that frame). A step reads the token log-probabilities of the live beam rows and, per
utterance, exactly as `reference._alignment_search`:
  1. offers every finishing move (one that reaches the utterance's last frame) to the final
     set, which merges by labels (Viterbi: the better alignment) and keeps its K best;
  2. keeps the K best distinct (labels, frame, count) among the other moves that beat the K-th
     final score (-inf while fewer than K are final): the new beam.
Only a few candidates of each kind are kept as the moves are scored (`_offer`): first the 2K
best; if that may have dropped one of the K best distinct keys (fewer than K distinct among
them), the step looks again among the K*K*D best (plus the K old final rows), which hold them
all: a key comes from at most D moves (durations; 1 for RNN-T) of each of the K parents.
It writes the rows in place and, per row, one row of the traceback (parent row, label or -1,
its frame, its duration), and lists the new beam rows that appended a label (the predictor
runs on them).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .rows import HASH_BASE

__all__ = [
    "alsd_step",
    "append_candidate",
    "clear_row",
    "distinct_best",
    "live_span",
    "note_parent",
    "trace_back",
    "write_row",
]

NONE = -1


# A candidate's move, as the columns of the (cap, 6) buffers: the row it extends (its parent),
# the label it appends (NONE: a blank), the frame of that label, its duration (TDT), and the
# frame and count after it.
PARENT, LABEL, AT, DURATION, FRAME, COUNT = range(6)


@njit(inline="always", nogil=True, cache=True)
def append_candidate(top, n, score, parent, label, at, duration, frame, count):
    top_score, top_move = top
    top_score[n] = score
    top_move[n, PARENT] = parent
    top_move[n, LABEL] = label
    top_move[n, AT] = at
    top_move[n, DURATION] = duration
    top_move[n, FRAME] = frame
    top_move[n, COUNT] = count
    return n + 1


@njit(nogil=True, cache=True)
def _offer(top, n, limit, floor, score, parent, label, at, duration, frame, count):
    """Offer a candidate that beats ``floor`` to ``top`` (scores, moves), which holds, in the
    order offered, a superset of the ``limit / 2`` best so far: at ``limit`` entries it keeps
    those (ties: the earlier) and ``floor`` becomes the worst of them — a later offer must beat
    it. Returns the new size and floor."""
    top_score, top_move = top
    if n == limit:
        keep = n // 2
        floor = np.sort(top_score[:n])[n - keep]
        room = keep - np.sum(top_score[:n] > floor)  # places for scores equal to the floor
        m = 0
        for i in range(n):
            if top_score[i] > floor or (top_score[i] == floor and room > 0):
                room -= top_score[i] == floor
                top_score[m] = top_score[i]
                top_move[m] = top_move[i]
                m += 1
        n = m
        if not score > floor:
            return n, floor
    return append_candidate(top, n, score, parent, label, at, duration, frame, count), floor


# Up to this many comparisons (k picks x n candidates), `distinct_best` picks by repeated scans
# (the usual beams: WIND's pool at beam 16, window 8, is 144 picks of ~400); beyond, in the
# order of one sort (WIND's pool at beam 200 took ~1,800 x 40,000 comparisons a step: 10 s for
# two utterances of 20 frames; 1 s now).
SCAN_LIMIT = 1 << 16


@njit(nogil=True, cache=True)
def distinct_best(top, n, k, threshold, by_frame, hash_, size, out, at, per_frame):
    """Keep the ``k`` best candidates of ``top``'s ``n`` (ties: the earlier offered) that beat
    ``threshold`` and whose key differs from those kept before: the labels (hash and size)
    and, ``by_frame``, the frame and count — then at most ``per_frame`` of each frame. ``out``
    = (scores, moves, hashes, sizes), written from row ``at``; the candidates' scores may be
    used up. Returns how many were kept."""
    top_score = top[0]
    m = 0
    if k * n <= SCAN_LIMIT:
        while m < k:
            j = -1
            best = threshold
            for i in range(n):
                if top_score[i] > best:
                    j, best = i, top_score[i]
            if j < 0:
                break
            top_score[j] = -np.inf
            m = _keep_distinct(top, j, best, m, by_frame, hash_, size, out, at, per_frame)
    else:
        for j in np.argsort(-top_score[:n], kind="mergesort"):  # stable: ties the earlier
            if m == k or not top_score[j] > threshold:
                break
            m = _keep_distinct(top, j, top_score[j], m, by_frame, hash_, size, out, at,
                               per_frame)  # fmt: skip
    return m


@njit(inline="always", nogil=True, cache=True)
def _keep_distinct(top, j, score, m, by_frame, hash_, size, out, at, per_frame):
    """`distinct_best`'s candidate ``j`` (of ``score``) kept as the ``m``-th unless its key was
    kept before (or its frame is full); returns how many are kept then."""
    top_move = top[1]
    out_score, out_move, out_hash, out_size = out
    parent, label = top_move[j, PARENT], top_move[j, LABEL]
    h, z = hash_[parent], size[parent]
    if label != NONE:
        h, z = h * HASH_BASE + label + 1, z + 1
    seen, at_frame = False, 0
    for q in range(at, at + m):
        same_frame = out_move[q, FRAME] == top_move[j, FRAME]
        at_frame += same_frame
        same_place = same_frame and out_move[q, COUNT] == top_move[j, COUNT]
        seen = seen or (out_hash[q] == h and out_size[q] == z and (same_place or not by_frame))
    if seen or (by_frame and at_frame >= per_frame):
        return m
    out_score[at + m] = score
    out_move[at + m] = top_move[j]
    out_hash[at + m] = h
    out_size[at + m] = z
    return m + 1


@njit(inline="always", nogil=True, cache=True)
def live_span(live, start, width, b):
    """The end of utterance b's entries in ``live`` (ascending row ids, ``width`` rows per
    utterance), which begin at ``start``."""
    stop = start
    while stop < live.shape[0] and live[stop] // width == b:
        stop += 1
    return stop


@njit(inline="always", nogil=True, cache=True)
def _move(tdt, blank, k, d, lp_k, lpd_d, score, t, c):
    """Label ``k`` (or the blank) with duration ``d`` (TDT; RNN-T: 0) from a hypothesis
    with ``score`` at frame ``t``, ``c`` labels emitted there: (score, frame, count) after it,
    the log-probs added in `reference._moves`' order. RNN-T: a blank moves one frame on."""
    if tdt:
        after = score + lp_k + lpd_d
        if k == blank:
            return after, t + max(d, 1), 0
        return after, t + d, c + 1 if d == 0 else 0
    if k == blank:
        return score + lp_k, t + 1, 0
    return score + lp_k, t, c + 1


@njit(nogil=True, cache=True)
def _collect(
    lp, lpd, start, stop, live, K, blank, max_symbols, max_tokens, durations, tdt, length,
    score, size, frame, count, final, going, limit,
):  # fmt: skip
    """One utterance's candidates: its old final rows and the moves that reach its last
    frame (``length``) in ``final``, the other moves in ``going`` (`_offer`, ``limit``), in
    `reference._moves`' order. Returns each one's size and floor."""
    R = 2 * K
    V = lp.shape[1]
    D = durations.shape[0] if tdt else 1
    n_final, n_going = 0, 0
    final_floor, going_floor = -np.inf, -np.inf
    base = live[start] // R * R
    for q in range(base + K, base + R):
        if score[q] > -np.inf:
            n_final = append_candidate(final, n_final, score[q], q, NONE, 0, 0, 0, 0)
    for i in range(start, stop):
        row = live[i]
        t, c = frame[row], count[row]
        may_label = (max_tokens < 0 or size[row] < max_tokens) and c < max_symbols
        for k in range(V):
            if k != blank and not may_label:
                continue
            label = NONE if k == blank else k
            for di in range(D):
                d = durations[di] if tdt else 0
                lpd_d = lpd[i, di] if tdt else 0.0
                s, to, c_to = _move(tdt, blank, k, d, lp[i, k], lpd_d, score[row], t, c)
                if to >= length:
                    if s > final_floor:
                        n_final, final_floor = _offer(
                            final, n_final, limit + K, final_floor, s, row, label, t, d, 0, 0
                        )
                elif s > going_floor:
                    n_going, going_floor = _offer(
                        going, n_going, limit, going_floor, s, row, label, t, d, to, c_to
                    )
    return n_final, final_floor, n_going, going_floor


@njit(nogil=True, cache=True)
def alsd_step(
    lp, lpd, live, K, blank, max_symbols, max_tokens, durations, tdt, length,
    score, hash_, size, frame, count, back, emit_rows, emit_labels, beam_parent,
):  # fmt: skip
    """One step (module docstring). ``lp`` (n, V) and ``lpd`` (n, D; TDT) are the log-probs of
    the live beam rows ``live`` (row ids, ascending); ``length`` (B,) the utterances' frames.
    ``back`` (4, B*R) receives the traceback row (parent row, label, its frame, duration);
    ``beam_parent`` (B*K) each new beam row's parent as a beam index (b*K + k; 0 for an empty
    row). Returns (labels appended, the first utterance whose log-probs hold a NaN, or -1)."""
    R = 2 * K
    B = length.shape[0]
    V = lp.shape[1]
    D = durations.shape[0] if tdt else 1
    cap = K * K * D + K
    final = (np.empty(2 * cap + K), np.empty((2 * cap + K, 6), np.int64))
    going = (np.empty(2 * cap), np.empty((2 * cap, 6), np.int64))
    # the kept candidates: the new beam at 0..K-1, the final set at K..R-1
    out = (
        np.empty(R, np.float64),
        np.empty((R, 6), np.int64),
        np.empty(R, np.int64),
        np.empty(R, np.int64),
    )
    kept_score, kept_move = out[0], out[1]
    n_emit = 0
    start = 0
    for b in range(B):
        stop = live_span(live, start, R, b)
        base = b * R
        if stop == start:  # nothing to expand: the rows stay as they are
            for r in range(R):
                back[0, base + r] = base + r if r >= K and score[base + r] > -np.inf else NONE
                back[1, base + r] = NONE
            for r in range(K):
                beam_parent[b * K + r] = 0
            continue
        for i in range(start, stop):
            for v in range(V):
                if np.isnan(lp[i, v]):
                    return n_emit, b
            if tdt:
                for d in range(D):
                    if np.isnan(lpd[i, d]):
                        return n_emit, b
        # A few candidates of each kind first; if dropping the others may have changed the
        # choice, all that the bound (module docstring) needs.
        for cap in (2 * K, K * K * D + K):
            n_final, final_floor, n_going, going_floor = _collect(
                lp, lpd, start, stop, live, K, blank, max_symbols, max_tokens, durations, tdt,
                length[b], score, size, frame, count, final, going, 2 * cap,
            )  # fmt: skip
            kept_final = distinct_best(final, n_final, K, -np.inf, False, hash_, size, out, K, K)
            threshold = kept_score[R - 1] if kept_final == K else -np.inf
            kept_beam = distinct_best(going, n_going, K, threshold, True, hash_, size, out, 0, K)
            if (kept_final == K or final_floor == -np.inf) and (
                kept_beam == K or going_floor <= threshold
            ):
                break
        # write the rows (every parent was read above)
        for r in range(R):
            q = base + r
            if (r < K and r >= kept_beam) or (r >= K and r - K >= kept_final):
                clear_row(q, score, back)
                if r < K:
                    beam_parent[b * K + r] = 0
                continue
            to = kept_move[r, FRAME] if r < K else length[b]
            write_row(r, q, out, to, score, hash_, size, frame, count, back)
            if r < K:
                n_emit = note_parent(
                    kept_move[r], b * K, r, base, beam_parent, emit_rows, emit_labels, n_emit
                )
        start = stop
    return n_emit, -1


@njit(inline="always", nogil=True, cache=True)
def write_row(m, q, out, to, score, hash_, size, frame, count, back):
    """Row ``q`` takes kept candidate ``m`` of ``out`` (`distinct_best`'s), reading frame
    ``to`` next, and its traceback row."""
    kept_score, kept_move, kept_hash, kept_size = out
    score[q] = kept_score[m]
    hash_[q] = kept_hash[m]
    size[q] = kept_size[m]
    frame[q] = to
    count[q] = kept_move[m, COUNT]
    for f in range(4):  # parent, label, its frame, duration
        back[f, q] = kept_move[m, f]


@njit(inline="always", nogil=True, cache=True)
def clear_row(q, score, back):
    """Row ``q`` holds no hypothesis (and has no traceback row)."""
    score[q] = -np.inf
    back[0, q] = NONE
    back[1, q] = NONE


@njit(inline="always", nogil=True, cache=True)
def note_parent(move, first, slot, base, parent_of, emit_rows, emit_labels, n_emit):
    """For the predictor: slot ``first + slot`` (of the rows that hold predictor state, the
    utterance's from ``first``; its search rows from ``base``) takes the state of its
    candidate ``move``'s parent, and is listed with its label if it appended one. Returns the
    number listed."""
    parent_of[first + slot] = first + move[PARENT] - base
    if move[LABEL] != NONE:
        emit_rows[n_emit] = first + slot
        emit_labels[n_emit] = move[LABEL]
        n_emit += 1
    return n_emit


@njit(nogil=True, cache=True)
def trace_back(backs, n_steps, rows):
    """The labels, frames and durations of ``rows`` after ``n_steps`` steps of traceback rows
    ``backs`` (steps, 4, N): flat arrays and each row's offset into them (len(rows) + 1)."""
    lengths = np.zeros(rows.shape[0], np.int64)
    for i in range(rows.shape[0]):
        r = rows[i]
        for s in range(n_steps - 1, -1, -1):
            if r == NONE:
                break
            if backs[s, 1, r] != NONE:
                lengths[i] += 1
            r = backs[s, 0, r]
    offsets = np.zeros(rows.shape[0] + 1, np.int64)
    offsets[1:] = np.cumsum(lengths)
    out = np.empty((3, offsets[-1]), np.int64)
    for i in range(rows.shape[0]):
        r = rows[i]
        at = offsets[i + 1]
        for s in range(n_steps - 1, -1, -1):
            if r == NONE:
                break
            if backs[s, 1, r] != NONE:
                at -= 1
                out[0, at] = backs[s, 1, r]
                out[1, at] = backs[s, 2, r]
                out[2, at] = backs[s, 3, r]
            r = backs[s, 0, r]
    return out, offsets

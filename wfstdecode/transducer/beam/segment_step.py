"""One round of the frame-synchronous searches with prefix merging ("standard", "tokenwise",
"maes"; RNN-T) for a whole batch, compiled (Numba): what `segment.py` does with tensor
operations, on the host, for the CPU — exactly `reference._segment_search`'s arithmetic.

Per utterance b: up to K "done" hypotheses (finished the segment with a blank; merged by
labels, log-sum-exp) in slots b*(K+E) .. b*(K+E)+K-1 of the done arrays (E more slots of room
while a round merges), and up to E "active" ones in b*E .. b*E+E-1, each with ``stay``, the
log-probability that its last label was emitted at each frame of the segment. Hypotheses'
labels live in a traceback of nodes (parent node, label, frame; -1: the empty hypothesis).

The predictor's output and state are kept per slot in a table of B*(K+E) rows — done slot j
of b at b*(K+E)+j, active slot e at b*(K+E)+K+e — and ``source`` says, after each call, which
row of the old table each row of the new one copies (the caller gathers them).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .rows import HASH_BASE

__all__ = ["begin_segment", "segment_round", "trace_nodes"]

NONE = -1


@njit(nogil=True, cache=True)
def begin_segment(start, length, K, E, done_n, done, active, stay, source):
    """Utterances with frames from ``start`` on: their done hypotheses become the active ones,
    all mass on the segment's first frame, and nothing is done. ``done`` = (score, hash, size,
    node) arrays (B*(K+E)), ``active`` = (hash, size, node) arrays (B*E), ``stay`` (B*E, S)."""
    done_score, done_hash, done_size, done_node = done
    act_hash, act_size, act_node = active
    R = K + E
    for i in range(source.shape[0]):
        source[i] = i
    for b in range(length.shape[0]):
        stay[b * E : b * E + E] = -np.inf
        if start >= length[b]:
            continue
        for e in range(done_n[b]):
            d, a = b * R + e, b * E + e
            stay[a, 0] = done_score[d]
            act_hash[a], act_size[a], act_node[a] = done_hash[d], done_size[d], done_node[d]
            source[b * R + K + e] = d
        done_n[b] = 0


@njit(nogil=True, cache=True)
def segment_round(
    lp, live, frames, start, K, E, blank, gamma, last_round, done_n, done, active, stay,
    nodes, n_nodes, source, emit_rows, emit_labels,
):  # fmt: skip
    """One round for every utterance: merge each live active hypothesis' blank expansion into
    the done ones (the K best stay), then — unless ``last_round`` — its label expansions (MAES:
    those within ``gamma`` of its best expansion) compete for E places, each beating the K-th
    done score. ``lp`` (n, S, V): token log-probs of the live active slots ``live`` (ascending);
    ``frames`` (B,): the segment's frames in each utterance. ``nodes`` (3, capacity): the
    traceback, ``n_nodes`` used. Fills ``source``, and ``emit_rows`` / ``emit_labels`` with the
    new active rows (of the predictor table) and their labels. Returns (new active hypotheses,
    nodes used, the first utterance whose log-probs hold a NaN at its frames or -1)."""
    done_score, done_hash, done_size, done_node = done
    act_hash, act_size, act_node = active
    S, V = lp.shape[1], lp.shape[2]
    R = K + E
    B = frames.shape[0]
    done_src = np.empty(R, np.int64)  # per done entry: the old predictor row it copies
    reach = np.empty((live.shape[0], S))
    label_score = np.empty(V)
    top_score = np.empty(E)
    top_pick = np.empty((E, 2), np.int64)  # (live index, label)
    new_hash, new_size, new_node = (
        np.empty(E, np.int64),
        np.empty(E, np.int64),
        np.empty(E, np.int64),
    )
    new_stay = np.empty((E, S))
    new_src = np.empty(E, np.int64)
    for i in range(source.shape[0]):
        source[i] = i
    n_emit = 0
    first = 0
    for b in range(B):
        last = first
        while last < live.shape[0] and live[last] // E == b:
            last += 1
        if first == last:
            continue
        base, n = b * R, frames[b]
        for i in range(first, last):
            for t in range(n):
                for v in range(V):
                    if np.isnan(lp[i, t, v]):
                        return n_emit, n_nodes, b
        for j in range(done_n[b]):
            done_src[j] = base + j
        n_top = 0
        for i in range(first, last):
            a = live[i]
            # Eq. 3-5: reach[t], the hypothesis with blanks from its last label up to t
            cum, acc = 0.0, -np.inf
            for t in range(n):
                acc = np.logaddexp(acc, stay[a, t] - cum)
                reach[i, t] = acc + cum
                cum = cum + lp[i, t, blank]
            blank_score = reach[i, n - 1] + lp[i, n - 1, blank]  # Eq. 7
            # merge the blank expansion into the done ones (labels: hash and size)
            j = 0
            while j < done_n[b] and not (
                done_hash[base + j] == act_hash[a] and done_size[base + j] == act_size[a]
            ):
                j += 1
            d = base + j
            if j == done_n[b]:
                done_score[d], done_hash[d], done_size[d] = blank_score, act_hash[a], act_size[a]
                done_node[d], done_src[j] = act_node[a], base + K + a - b * E
                done_n[b] += 1
            else:
                if blank_score > done_score[d]:  # the better contribution represents
                    done_node[d], done_src[j] = act_node[a], base + K + a - b * E
                done_score[d] = np.logaddexp(done_score[d], blank_score)
            if last_round:
                continue
            # Eq. 4-6: label expansions, summed over the frame of emission
            best = blank_score
            for k in range(V):
                label_score[k] = _label_score(reach, lp, i, k, n) if k != blank else -np.inf
                best = max(best, label_score[k])
            for k in range(V):
                score = label_score[k]
                if k == blank or not score >= best - gamma:
                    continue
                if n_top == E and not score > top_score[E - 1]:
                    continue
                q = min(n_top, E - 1)  # insert, after equal scores
                while q > 0 and score > top_score[q - 1]:
                    top_score[q] = top_score[q - 1]
                    top_pick[q] = top_pick[q - 1]
                    q -= 1
                top_score[q], top_pick[q, 0], top_pick[q, 1] = score, i, k
                n_top = min(n_top + 1, E)
        # the K best done hypotheses stay (ties: the earlier)
        kept = _keep_best(done_score, done_hash, done_size, done_node, done_src, base,
                          done_n[b], K)  # fmt: skip
        done_n[b] = kept
        for j in range(kept):
            source[base + j] = done_src[j]
        threshold = done_score[base + K - 1] if kept == K else -np.inf
        # the new active hypotheses
        m = 0
        for q in range(n_top):
            if not top_score[q] > threshold:
                continue
            i, k = top_pick[q, 0], top_pick[q, 1]
            a = live[i]
            frame, peak = 0, -np.inf
            for t in range(S):
                e = reach[i, t] + lp[i, t, k] if t < n else -np.inf
                new_stay[m, t] = e
                if e > peak:
                    frame, peak = t, e
            node = n_nodes
            nodes[0, node], nodes[1, node], nodes[2, node] = act_node[a], k, start + frame
            n_nodes += 1
            new_hash[m] = act_hash[a] * HASH_BASE + k + 1
            new_size[m], new_node[m], new_src[m] = act_size[a] + 1, node, base + K + a - b * E
            m += 1
        for e in range(E):
            a = b * E + e
            if e < m:
                stay[a] = new_stay[e]
                act_hash[a], act_size[a], act_node[a] = new_hash[e], new_size[e], new_node[e]
                source[base + K + e] = new_src[e]
                emit_rows[n_emit], emit_labels[n_emit] = base + K + e, nodes[1, new_node[e]]
                n_emit += 1
            else:
                stay[a] = -np.inf
        first = last
    return n_emit, n_nodes, -1


@njit(inline="always", nogil=True, cache=True)
def _label_score(reach, lp, i, k, n):
    """Eq. 6: log sum over t of reach[t] * P(k at t), summed as `reference._logsumexp` does."""
    score = -np.inf
    for t in range(n):
        score = np.logaddexp(score, reach[i, t] + lp[i, t, k])
    return score


@njit(nogil=True, cache=True)
def _keep_best(score, hash_, size, node, src, base, n, K):
    """Sort the done entries base .. base+n-1 (and their ``src``) by score, best first, stably
    (insertion sort: n <= K + E); returns how many stay (at most K)."""
    for j in range(1, n):
        q = j
        while q > 0 and score[base + q] > score[base + q - 1]:
            x, y = base + q, base + q - 1
            score[x], score[y] = score[y], score[x]
            hash_[x], hash_[y] = hash_[y], hash_[x]
            size[x], size[y] = size[y], size[x]
            node[x], node[y] = node[y], node[x]
            src[q], src[q - 1] = src[q - 1], src[q]
            q -= 1
    return min(n, K)


@njit(nogil=True, cache=True)
def trace_nodes(nodes, ends):
    """Labels and frames of the hypotheses ending at ``ends`` (node ids, -1: empty): flat
    (2, total) arrays and each one's offset (len(ends) + 1)."""
    lengths = np.zeros(ends.shape[0], np.int64)
    for i in range(ends.shape[0]):
        x = ends[i]
        while x != NONE:
            lengths[i] += 1
            x = nodes[0, x]
    offsets = np.zeros(ends.shape[0] + 1, np.int64)
    offsets[1:] = np.cumsum(lengths)
    out = np.empty((2, offsets[-1]), np.int64)
    for i in range(ends.shape[0]):
        x, at = ends[i], offsets[i + 1]
        while x != NONE:
            at -= 1
            out[0, at], out[1, at] = nodes[1, x], nodes[2, x]
            x = nodes[0, x]
    return out, offsets

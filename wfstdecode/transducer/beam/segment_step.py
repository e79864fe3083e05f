"""One round of the frame-synchronous searches with prefix merging ("standard", "tokenwise",
"maes"; RNN-T and TDT) for a whole batch, compiled (Numba): what `segment.py` does with tensor
operations, on the host, for the CPU — `reference._segment_search`'s arithmetic, in its order.

Per utterance b: up to K "done" hypotheses (merged by labels, log-sum-exp) in slots
b*(K+E) .. b*(K+E)+K-1 of the done arrays (E more slots of room while a round merges), each
with ``ahead``, its log mass landing on each of the next W frames (RNN-T: W = 1, the next; TDT:
the longest duration, at most T: `BeamOptions.landing_width`); and up to E "active" ones in
b*E .. b*E+E-1, each with ``stay``, the log-probability that its last label was emitted at each
frame of the segment. Hypotheses' labels live in a traceback of nodes (parent node, label,
frame, TDT duration; -1: the empty hypothesis).

The predictor's output and state are kept per slot in a table of B*(K+E) rows — done slot j
of b at b*(K+E)+j, active slot e at b*(K+E)+K+e. After each call ``source`` says what each row
of the new table copies: row ``source[i]`` of the old table (i >= 0), or, -1 - r, row r of the
new table once the new active rows have run the predictor (a TDT label expansion that lands on
a later frame joins the done ones with the state after its label).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .alsd_step import live_span
from .rows import HASH_BASE

__all__ = ["begin_segment", "segment_round", "trace_nodes"]

NONE = -1


@njit(nogil=True, cache=True)
def _logsumexp(values):
    """As `reference._logsumexp`: log-add-exp from -inf, in order."""
    out = -np.inf
    for v in values:
        out = np.logaddexp(out, v)
    return out


@njit(nogil=True, cache=True)
def begin_segment(start, length, K, E, done_n, done, active, stay, source):
    """Utterances with frames from ``start`` on: each done hypothesis' mass landing on the
    segment's first frame becomes an active one; the rest of its mass moves a frame closer
    (the done ones with none left go). ``done`` = (score, hash, size, node, ahead) arrays,
    ``active`` = (hash, size, node) arrays, ``stay`` (B*E, S)."""
    done_score, done_hash, done_size, done_node, ahead = done
    act_hash, act_size, act_node = active
    R, W = K + E, ahead.shape[1]
    for i in range(source.shape[0]):
        source[i] = i
    for b in range(length.shape[0]):
        stay[b * E : b * E + E] = -np.inf
        if start >= length[b]:
            continue
        base, kept = b * R, 0
        for e in range(done_n[b]):
            d, a = base + e, b * E + e
            stay[a, 0] = ahead[d, 0]
            act_hash[a], act_size[a], act_node[a] = done_hash[d], done_size[d], done_node[d]
            source[base + K + e] = d
            for w in range(W - 1):
                ahead[d, w] = ahead[d, w + 1]
            ahead[d, W - 1] = -np.inf
            score = _logsumexp(ahead[d])
            if score > -np.inf:  # keep it, in order
                q = base + kept
                done_score[q], done_hash[q], done_size[q] = score, done_hash[d], done_size[d]
                done_node[q], ahead[q] = done_node[d], ahead[d]
                source[q] = d
                kept += 1
        done_n[b] = kept


@njit(nogil=True, cache=True)
def _merge(done, done_src, base, n, h, z, score, node, src, contrib):
    """`reference._merge`: add a contribution (labels hash ``h`` and size ``z``, ``score``,
    traceback ``node``, predictor ``src``, landing mass ``contrib``) to the done entries
    base .. base+n-1: equal labels sum (log-add-exp), the better contribution represents.
    Returns the new count."""
    done_score, done_hash, done_size, done_node, ahead = done
    j = 0
    while j < n and not (done_hash[base + j] == h and done_size[base + j] == z):
        j += 1
    d = base + j
    if j == n:
        done_score[d], done_hash[d], done_size[d], done_node[d] = score, h, z, node
        ahead[d] = contrib
        done_src[j] = src
        return n + 1
    if score > done_score[d]:
        done_node[d], done_src[j] = node, src
    for w in range(ahead.shape[1]):
        ahead[d, w] = np.logaddexp(ahead[d, w], contrib[w])
    done_score[d] = np.logaddexp(done_score[d], score)
    return n


@njit(nogil=True, cache=True)
def _landing(lpd, i, durations, tdt, label_land, blank_land):
    """`reference._landing`: where a label and a blank land, as log-probs over the frames
    0 .. W ahead (TDT: from the duration log-probs of live row i)."""
    label_land[:] = -np.inf
    blank_land[:] = -np.inf
    if not tdt:
        label_land[0], blank_land[1] = 0.0, 0.0
        return
    W = label_land.shape[0] - 1  # (a longer duration lands past the end as W does)
    for di in range(durations.shape[0]):
        d = min(durations[di], W)
        label_land[d] = np.logaddexp(label_land[d], lpd[i, di])
        blank_land[max(d, 1)] = np.logaddexp(blank_land[max(d, 1)], lpd[i, di])


@njit(nogil=True, cache=True)
def segment_round(
    lp, lpd, live, frames, start, K, E, blank, gamma, durations, tdt, last_round, done_n, done,
    active, stay, nodes, n_nodes, source, emit_rows, emit_labels,
):  # fmt: skip
    """One round for every utterance with frames in the segment: merge each live active
    hypothesis' blank expansion into the done ones (the K best stay), then — unless
    ``last_round`` — its label expansions (MAES: those within ``gamma`` of its best expansion)
    compete for E places, each beating the K-th done score; TDT: an expansion's mass landing
    later joins the done ones, what duration 0 keeps stays active while it alone beats that
    score. ``lp`` (n, S, V) / ``lpd`` (n, D): token / duration log-probs of the live active
    slots ``live`` (ascending); ``frames`` (B,): the segment's frames in each utterance.
    ``nodes`` (4, capacity): the traceback, ``n_nodes`` used. Fills ``source``, and
    ``emit_rows`` / ``emit_labels`` with the rows (of the predictor table) that appended a
    label. Returns (rows that appended a label, nodes used, the first utterance whose log-probs
    hold a NaN at its frames, or -1)."""
    done_score, ahead = done[0], done[4]
    act_hash, act_size, act_node = active
    S, V = lp.shape[1], lp.shape[2]
    R, W = K + E, ahead.shape[1]
    B = frames.shape[0]
    done_src = np.empty(R, np.int64)  # per done entry: what its predictor row copies
    reach = np.empty((live.shape[0], S))
    label_lands = np.empty((live.shape[0], W + 1))
    blank_land = np.empty(W + 1)
    label_score = np.empty(V)
    contrib = np.empty(W)
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
        last = live_span(live, first, E, b)
        base, n = b * R, frames[b]
        if n == 0:  # the utterance has ended
            continue
        for i in range(first, last):
            for t in range(n):
                for v in range(V):
                    if np.isnan(lp[i, t, v]):
                        return n_emit, n_nodes, b
            for di in range(lpd.shape[1]):
                if np.isnan(lpd[i, di]):
                    return n_emit, n_nodes, b
        for j in range(done_n[b]):
            done_src[j] = base + j
        n_top = 0
        for i in range(first, last):
            a = live[i]
            _landing(lpd, i, durations, tdt, label_lands[i], blank_land)
            # Eq. 3-5: reach[t], the hypothesis with blanks from its last label up to t, by
            # the recursion reach[t] = reach[t-1] + blank[t-1] (+) stay[t]: no difference of
            # log-probs (a -inf blank made the paper's reach[t] - cum[t] NaN)
            acc = -np.inf
            for t in range(n):
                if t:
                    acc = acc + lp[i, t - 1, blank]
                acc = np.logaddexp(acc, stay[a, t])
                reach[i, t] = acc
            blank_score = reach[i, n - 1] + lp[i, n - 1, blank]  # Eq. 7
            for w in range(W):
                contrib[w] = blank_score + blank_land[w + 1]
            done_n[b] = _merge(done, done_src, base, done_n[b], act_hash[a], act_size[a],
                               blank_score, act_node[a], base + K + a - b * E, contrib)  # fmt: skip
            if last_round:
                continue
            # Eq. 4-6: label expansions, summed over the frame of emission
            best = blank_score
            for k in range(V):
                label_score[k] = -np.inf
                if k != blank:
                    for t in range(n):
                        label_score[k] = np.logaddexp(label_score[k], reach[i, t] + lp[i, t, k])
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
        done_n[b] = _keep_best(done, done_src, base, done_n[b], K)
        if last_round:
            for j in range(done_n[b]):
                source[base + j] = done_src[j]
            first = last
            continue
        threshold = done_score[base + K - 1] if done_n[b] == K else -np.inf
        # the expansions that beat the K-th done score run the predictor
        m = 0
        for q in range(n_top):
            if not top_score[q] > threshold:
                continue
            i, k = top_pick[q, 0], top_pick[q, 1]
            a = live[i]
            frame, peak = 0, -np.inf
            for t in range(S):
                e = reach[i, t] + lp[i, t, k] if t < n else -np.inf
                new_stay[m, t] = e + label_lands[i, 0]
                if e > peak:
                    frame, peak = t, e
            duration = 0
            if tdt:  # the label's most probable duration
                best_d = 0
                for di in range(1, durations.shape[0]):
                    if lpd[i, di] > lpd[i, best_d]:
                        best_d = di
                duration = durations[best_d]
            node = n_nodes
            nodes[0, node], nodes[1, node], nodes[2, node] = act_node[a], k, start + frame
            nodes[3, node] = duration
            n_nodes += 1
            new_hash[m] = act_hash[a] * HASH_BASE + k + 1
            new_size[m], new_node[m], new_src[m] = act_size[a] + 1, node, base + K + a - b * E
            if tdt:  # the mass landing on a later frame joins the done ones
                for w in range(W):
                    contrib[w] = top_score[q] + label_lands[i, w + 1]
                landed = _logsumexp(contrib)
                done_n[b] = _merge(done, done_src, base, done_n[b], new_hash[m], new_size[m],
                                   landed, node, -1 - (base + K + m), contrib)  # fmt: skip
                if not new_stay[m, 0] > threshold:  # duration 0 keeps too little: not active
                    new_stay[m] = -np.inf
            m += 1
        done_n[b] = _keep_best(done, done_src, base, done_n[b], K)
        for j in range(done_n[b]):
            source[base + j] = done_src[j]
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


@njit(nogil=True, cache=True)
def _keep_best(done, src, base, n, K):
    """Sort the done entries base .. base+n-1 (and their ``src``) by score, best first, stably
    (insertion sort: n <= K + E); returns how many stay (at most K)."""
    score, hash_, size, node, ahead = done
    for j in range(1, n):
        q = j
        while q > 0 and score[base + q] > score[base + q - 1]:
            x, y = base + q, base + q - 1
            score[x], score[y] = score[y], score[x]
            hash_[x], hash_[y] = hash_[y], hash_[x]
            size[x], size[y] = size[y], size[x]
            node[x], node[y] = node[y], node[x]
            for w in range(ahead.shape[1]):
                ahead[x, w], ahead[y, w] = ahead[y, w], ahead[x, w]
            src[q], src[q - 1] = src[q - 1], src[q]
            q -= 1
    return min(n, K)


@njit(nogil=True, cache=True)
def trace_nodes(nodes, ends):
    """Labels, frames and durations of the hypotheses ending at ``ends`` (node ids, -1:
    empty): flat (3, total) arrays and each one's offset (len(ends) + 1)."""
    lengths = np.zeros(ends.shape[0], np.int64)
    for i in range(ends.shape[0]):
        x = ends[i]
        while x != NONE:
            lengths[i] += 1
            x = nodes[0, x]
    offsets = np.zeros(ends.shape[0] + 1, np.int64)
    offsets[1:] = np.cumsum(lengths)
    out = np.empty((3, offsets[-1]), np.int64)
    for i in range(ends.shape[0]):
        x, at = ends[i], offsets[i + 1]
        while x != NONE:
            at -= 1
            out[0, at], out[1, at], out[2, at] = nodes[1, x], nodes[2, x], nodes[3, x]
            x = nodes[0, x]
    return out, offsets

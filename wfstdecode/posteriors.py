"""Posteriors on an acyclic word graph (a `lattice.Lattice`, a `compact_lattice.CompactLattice`):
forward-backward in the log semiring, by arc, by word position, of one word sequence.

The graphs are given as arrays: nodes numbered in topological order (``src[i] < dst[i]``), node
0 the start, arcs sorted by ``src`` (the public functions sort them if not), float64 costs
(``-log`` probabilities) of the arcs and of ending at each node (inf: not final), word labels
(0: none).

By word position, a forward pass runs over cells (node, words so far). A node's reachable word
counts span a band that grows with the lattice's length (paths that split or merge words), so
a table of whole bands is quadratic in a long lattice: 92 million cells (0.7 GB) for a
14,720-frame OCR lattice. Each node keeps a row of the cells that matter instead, in one arena
in topological order: when every arc into a node has been added, its row is narrowed to the
cells whose paths carry more than e^-46 (1e-20) of the total (`position_posteriors`; none
reported is affected: the smallest reported is 1e-12) or that any path reaches at all
(`sequence_posterior`: exact), and only those are carried over its arcs.
"""

from __future__ import annotations

import operator

import numpy as np
from numba import njit

from .errors import OptionsError

_INF = np.inf
NEGLIGIBLE_COST = 46.0  # cells whose paths' share of the total is below e^-46 are dropped
_SMALLEST_REPORTED = 1e-12  # a word posterior at or below this is left out


def position_posteriors(src, dst, olabel, w, final) -> list[dict[int, float]]:
    """`Lattice.word_posteriors` of an acyclic word graph (the module docstring): per word
    position ``k``, ``{word: posterior}``. No complete path: no positions (every arc's posterior
    is then 0)."""
    n_nodes = len(final)
    if not n_nodes:
        return []
    src, dst, olabel, w = _by_source(src, dst, olabel, w)
    pos, label, post = _position_posteriors(n_nodes, src, dst, olabel, w, final)
    out: list[dict[int, float]] = [{} for _ in range(int(pos.max(initial=-1)) + 1)]
    for k, word, x in zip(pos.tolist(), label.tolist(), post.tolist(), strict=True):
        out[k][word] = x
    return out


def sequence_posterior(src, dst, olabel, w, final, words) -> float:
    """`Lattice.path_posterior` of an acyclic word graph: the share of the total probability of
    the paths that write exactly ``words`` (word ids)."""
    return float(np.exp(sequence_log_posterior(src, dst, olabel, w, final, words)))


def sequence_log_posterior(src, dst, olabel, w, final, words) -> float:
    """The natural log of `sequence_posterior` (-inf: no such path), which does not underflow:
    a long lattice's sequences can each hold less than e^-745 of the total (the smallest
    float64), where `sequence_posterior` is 0 for every one of them."""
    if not len(final):
        return -_INF
    src, dst, olabel, w = _by_source(src, dst, olabel, w)
    total = log_backward(final, src, dst, w)
    if not total[0] < _INF:
        return -_INF
    try:
        if isinstance(words, (str, bytes)):
            raise TypeError  # (read character by character: "12" as words 1, 2)
        words = np.asarray([operator.index(x) for x in words], np.int64)  # (int(1.9) is 1)
    except (TypeError, ValueError, OverflowError):
        raise OptionsError(f"path_posterior takes word ids (ints); got {words!r:.80}") from None
    return float(total[0] - _word_constrained_cost(src, dst, olabel, w, final, words))


def _by_source(src, dst, olabel, w) -> tuple:
    """The arcs sorted by source (stable), as the passes read them; as given when they are."""
    src = np.asarray(src)
    if len(src) < 2 or np.all(src[1:] >= src[:-1]):
        return src, dst, olabel, w
    order = np.argsort(src, kind="stable")
    return src[order], np.asarray(dst)[order], np.asarray(olabel)[order], np.asarray(w)[order]


@njit(nogil=True, cache=True)
def neg_logaddexp(a, b):
    """-log(exp(-a) + exp(-b)) for costs a, b (inf: zero probability)."""
    if a == np.inf:
        return b
    if b == np.inf:
        return a
    lo, hi = min(a, b), max(a, b)
    return lo - np.log1p(np.exp(lo - hi))


@njit(nogil=True, cache=True)
def log_forward(n_nodes, src, dst, w):
    """Each node's cost of all the paths from the start to it (log semiring)."""
    alpha = np.full(n_nodes, np.inf)
    if n_nodes:
        alpha[0] = 0.0
    for i in range(src.shape[0]):
        alpha[dst[i]] = neg_logaddexp(alpha[dst[i]], alpha[src[i]] + w[i])
    return alpha


@njit(nogil=True, cache=True)
def log_backward(final, src, dst, w):
    """Each node's cost of all the paths from it to an end (log semiring)."""
    beta = final.copy()
    for i in range(src.shape[0] - 1, -1, -1):
        beta[src[i]] = neg_logaddexp(beta[src[i]], w[i] + beta[dst[i]])
    return beta


# ---- rows of cells (node, words so far) -------------------------------------------------------
# Node v's cells for word counts lo[v] .. hi[v] are cells[row_at[v] + k - lo[v]] (no row while
# hi[v] < lo[v]). A row that must cover more moves to the arena's end; the arena doubles.


@njit(nogil=True, cache=True)
def _empty_rows(n_nodes):
    lo, hi = np.zeros(n_nodes, np.int64), np.full(n_nodes, -1, np.int64)
    row_at = np.zeros(n_nodes, np.int64)
    cells = np.full(max(64, 2 * n_nodes), np.inf)
    hi[0] = 0  # the start: no word yet, at cost 0
    cells[0] = 0.0
    return lo, hi, row_at, cells, 1


@njit(nogil=True, cache=True)
def _covering(cells, used, row_at, lo, hi, d, k0, k1):
    """Node ``d``'s row made to cover word counts ``k0 .. k1``: ``(cells, used)``. A row that
    grows gets as many spare cells again on the side it grows (inf, dropped when the node's row
    is narrowed): a node entered by many arcs, each reaching one word count more, moves its row
    a logarithmic number of times, not once per arc (quadratic)."""
    has_row = hi[d] >= lo[d]
    if has_row and lo[d] <= k0 and k1 <= hi[d]:
        return cells, used
    if has_row:
        spare = hi[d] - lo[d] + 1
        new_lo = max(0, k0 - spare) if k0 < lo[d] else lo[d]
        new_hi = k1 + spare if k1 > hi[d] else hi[d]
    else:
        new_lo, new_hi = k0, k1
    end = used + new_hi - new_lo + 1
    if end > cells.shape[0]:
        grown = np.empty(max(end, 2 * cells.shape[0]))
        grown[:used] = cells[:used]
        cells = grown
    cells[used:end] = np.inf
    if has_row:
        width = hi[d] - lo[d] + 1
        at = used + lo[d] - new_lo
        cells[at : at + width] = cells[row_at[d] : row_at[d] + width]
    row_at[d], lo[d], hi[d] = used, new_lo, new_hi
    return cells, end


@njit(nogil=True, cache=True)
def _narrow(cells, row_at, lo, hi, v, limit):
    """Node ``v``'s row narrowed to its cells of cost below ``limit``; False if none is."""
    first, last = hi[v] + 1, lo[v] - 1
    for k in range(lo[v], hi[v] + 1):
        if cells[row_at[v] + k - lo[v]] < limit:
            first, last = min(first, k), k
    if first > last:
        return False
    row_at[v] += first - lo[v]
    lo[v], hi[v] = first, last
    return True


@njit(nogil=True, cache=True)
def _position_posteriors(n_nodes, src, dst, olabel, w, final):
    """``(position, word, posterior)`` of each word at each number of words before it: the
    sum over its arcs, added in arc order."""
    n_arcs = src.shape[0]
    beta = log_backward(final, src, dst, w)
    total = beta[0]
    lo, hi, row_at, cells, used = _empty_rows(n_nodes)
    pos, label, post = [], [], []
    i = 0
    for v in range(n_nodes):  # its row is whole: every arc into it is from an earlier node
        first_arc = i
        while i < n_arcs and src[i] == v:
            i += 1
        if hi[v] < lo[v] or not _narrow(cells, row_at, lo, hi, v,
                                        total + NEGLIGIBLE_COST - beta[v]):  # fmt: skip
            continue
        for a in range(first_arc, i):
            d = dst[a]
            step = 1 if olabel[a] != 0 else 0
            cells, used = _covering(cells, used, row_at, lo, hi, d, lo[v] + step, hi[v] + step)
            for k in range(lo[v], hi[v] + 1):
                x = cells[row_at[v] + k - lo[v]] + w[a]
                if not x < np.inf:
                    continue
                j = row_at[d] + k + step - lo[d]
                cells[j] = neg_logaddexp(cells[j], x)
                if step:
                    p = np.exp(total - (x + beta[d]))
                    if p > _SMALLEST_REPORTED:
                        pos.append(k)
                        label.append(olabel[a])
                        post.append(p)
    keys = np.array(pos, np.int64) << 32 | np.array(label, np.int64)
    order = np.argsort(keys, kind="mergesort")  # stable: each sum in arc order
    n = 0
    out_key, out_post = np.empty(len(order), np.int64), np.empty(len(order), np.float64)
    for j in order:
        if n == 0 or keys[j] != out_key[n - 1]:
            out_key[n], out_post[n] = keys[j], 0.0
            n += 1
        out_post[n - 1] += post[j]
    return out_key[:n] >> 32, out_key[:n] & 0xFFFFFFFF, out_post[:n]


@njit(nogil=True, cache=True)
def _word_constrained_cost(src, dst, olabel, w, final, words):
    """-log of the summed probability of the paths that write exactly ``words``: a forward
    pass over (node, words matched so far), each row narrowed to the cells some path reaches."""
    n_nodes, n_words, n_arcs = final.shape[0], words.shape[0], src.shape[0]
    if not n_nodes:
        return np.inf
    lo, hi, row_at, cells, used = _empty_rows(n_nodes)
    total = np.inf
    i = 0
    for v in range(n_nodes):
        first_arc = i
        while i < n_arcs and src[i] == v:
            i += 1
        if hi[v] < lo[v] or not _narrow(cells, row_at, lo, hi, v, np.inf):
            continue
        if lo[v] <= n_words <= hi[v]:
            total = neg_logaddexp(total, cells[row_at[v] + n_words - lo[v]] + final[v])
        for a in range(first_arc, i):
            d, word = dst[a], olabel[a]
            k0 = lo[v] if word == 0 else lo[v] + 1
            k1 = hi[v] if word == 0 else min(hi[v], n_words - 1) + 1
            if k0 > k1:  # (every row's cell matched all the words already)
                continue
            cells, used = _covering(cells, used, row_at, lo, hi, d, k0, k1)
            step = 1 if word != 0 else 0
            for k in range(lo[v], hi[v] + 1):
                x = cells[row_at[v] + k - lo[v]] + w[a]
                if not x < np.inf or (step and (k == n_words or word != words[k])):
                    continue
                j = row_at[d] + k + step - lo[d]
                cells[j] = neg_logaddexp(cells[j], x)
    return total

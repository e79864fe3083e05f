"""The compiled passes over a `wfstdecode.lattice.Lattice`'s arc costs: Viterbi forward and
backward costs, the lattice beam's selection, and the frame-relative costs posteriors use.

An arc's cost is either read from ``w`` (float64, one per arc) or, where ``w`` is empty, summed
as the pass reads it from the arc's float32 parts, ``graph + scale * acoustic`` — the same sum
as `Lattice.arc_cost` makes, so the same float64 values. A lattice fresh from a long search
is pruned that way (`Lattice.pruned`): its float64 costs would be 8 bytes more per arc (GBs at
a wide beam) and summing them beforehand took half of the pruning's time.

The passes that may run for seconds check a cancel flag (``cancel[0]`` set: a Ctrl-C came,
`wfstdecode.interrupts`) every `CHECK_EVERY` arcs and stop; what they return is then partial,
for a caller that drops it.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

CHECK_EVERY = 1 << 16  # arcs (well under a millisecond of any pass)
NEVER = np.zeros(1, np.int32)  # a cancel flag nothing sets
SUMMED = np.zeros(0)  # as ``w``: each arc's cost summed from its parts
NO_PARTS = (np.zeros(0, np.float32), np.zeros(0, np.float32), 0.0)  # with a ``w`` of every arc


@njit(inline="always", nogil=True, cache=True)
def _cost(w, graph_cost, acoustic_cost, scale, i):
    if w.shape[0]:
        return w[i]
    return np.float64(graph_cost[i]) + scale * np.float64(acoustic_cost[i])


@njit(inline="always", nogil=True, cache=True)
def _cancelled(cancel, i):
    return (i & (CHECK_EVERY - 1)) == 0 and cancel[0] != 0


@njit(nogil=True, cache=True)
def viterbi_forward(n_nodes, src, dst, w, graph_cost, acoustic_cost, scale, cancel):
    """float64 [N]: the best cost from the start to each node (inf: none)."""
    alpha = np.full(n_nodes, np.inf)
    if n_nodes:
        alpha[0] = 0.0
    for i in range(src.shape[0]):  # arcs by source, sources in topological order
        if _cancelled(cancel, i):
            break
        c = alpha[src[i]] + _cost(w, graph_cost, acoustic_cost, scale, i)
        if c < alpha[dst[i]]:
            alpha[dst[i]] = c
    return alpha


@njit(nogil=True, cache=True)
def viterbi_backward(final, src, dst, w, graph_cost, acoustic_cost, scale, cancel):
    """float64 [N]: the best cost from each node to the end, its final cost included."""
    beta = final.copy()
    for i in range(src.shape[0] - 1, -1, -1):
        if _cancelled(cancel, i):
            break
        c = _cost(w, graph_cost, acoustic_cost, scale, i) + beta[dst[i]]
        if c < beta[src[i]]:
            beta[src[i]] = c
    return beta


@njit(nogil=True, cache=True)
def arcs_within(alpha, beta, src, dst, limit, w, graph_cost, acoustic_cost, scale, cancel):
    """`Lattice.pruned`'s selection: ``(arcs, nodes, their src, their dst, their costs)``, the
    indices of the arcs whose best complete path costs at most ``limit`` and of their ends and
    the start, those arcs' ends numbered among the nodes kept, and their float64 costs."""
    n_nodes, n_arcs = alpha.shape[0], src.shape[0]
    arc_kept = np.zeros(n_arcs, np.bool_)
    node_id = np.full(n_nodes, -1, np.int64)
    if n_nodes:
        node_id[0] = 0
    n = 0
    for i in range(n_arcs):
        if _cancelled(cancel, i):
            break
        through = alpha[src[i]] + _cost(w, graph_cost, acoustic_cost, scale, i) + beta[dst[i]]
        if through < np.inf and through <= limit:  # an infinite beam drops dead ends too
            arc_kept[i] = True
            n += 1
            node_id[src[i]] = 0
            node_id[dst[i]] = 0
    nodes = np.flatnonzero(node_id == 0)
    node_id[nodes] = np.arange(nodes.shape[0])
    arcs = np.empty(n, np.int64)
    new_src, new_dst = np.empty(n, np.int32), np.empty(n, np.int32)
    costs = np.empty(n)
    k = 0
    for i in range(n_arcs):
        if arc_kept[i]:
            arcs[k], new_src[k], new_dst[k] = i, node_id[src[i]], node_id[dst[i]]
            costs[k] = _cost(w, graph_cost, acoustic_cost, scale, i)
            k += 1
    return arcs, nodes, new_src, new_dst, costs


@njit(nogil=True, cache=True)
def acoustic_shift(num_frames, final, node_frame, ilabel, frame, acoustic_cost):
    """`Lattice._acoustic_shift` compiled (np.minimum.at and its checks took most of the
    posteriors' time): ``(whether it applies, the shift)``."""
    shift = np.zeros(ilabel.shape[0])
    for v in range(final.shape[0]):
        if math.isfinite(final[v]) and node_frame[v] != num_frames:
            return False, shift
    best = np.full(num_frames, np.inf)
    emitting = False
    for i in range(ilabel.shape[0]):
        c = np.float64(acoustic_cost[i])
        if ilabel[i] != 0:
            if not 0 <= frame[i] < num_frames:  # (no bounds checks here: a hand-made lattice)
                raise IndexError("an emitting arc's frame is outside the lattice's frames")
            emitting = True
            if c < best[frame[i]] or c != c:  # (NaN kept, as np.minimum keeps it)
                best[frame[i]] = c
    for i in range(ilabel.shape[0]):
        if ilabel[i] != 0 and math.isfinite(best[frame[i]]):
            shift[i] = best[frame[i]]
    return emitting, shift


@njit(nogil=True, cache=True)
def shifted_cost(graph_cost, acoustic_cost, shift, scale):
    """float64 ``graph + scale * (acoustic - shift)`` per arc (`Lattice._posterior_cost`)."""
    w = np.empty(graph_cost.shape[0])
    for i in range(w.shape[0]):
        w[i] = np.float64(graph_cost[i]) + scale * (np.float64(acoustic_cost[i]) - shift[i])
    return w

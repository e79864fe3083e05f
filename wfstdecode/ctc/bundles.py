"""The search's inputs as argument bundles: named tuples of arrays and scalars that the Numba CPU
functions and the Numba-CUDA kernels take whole, in place of long positional lists (Kaldi's
cudadecoder passes two parameter structs the same way). Numba types a named tuple field by
field, so a bundle costs nothing inside compiled code; the scalars' dtypes are the caller's (the
CPU backend passes int64, the kernels int32).

`arc_cost` and `improves` are the two scalar rules every backend applies per arc: leaf ``@njit``
functions (they call nothing compiled), so that the kernels can compile the same source as device
functions (``cuda.jit(device=True)(arc_cost.py_func)``), which also runs under the simulator.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .boost import EMPTY, HASH_MULT


class SearchGraph(NamedTuple):
    """The decoding graph as the search reads it (see `decoding_graph.py` for the layout)."""

    start: int
    final_cost: np.ndarray  # float32 [S]
    e_offsets: np.ndarray  # int64 [S + 1]: emitting arcs of state s
    ne_offsets: np.ndarray  # int64 [S + 1]: epsilon-input arcs of state s
    next_state: np.ndarray  # int32 [A]
    ilabel: np.ndarray  # int32 [A]
    olabel: np.ndarray  # int32 [A]
    arc_cost: np.ndarray  # float32 [A]: `SearchProblem.arc_cost` (penalties included)
    arc_source: np.ndarray  # int32 [A]: each arc's source state
    num_emitting: int  # arcs below this index are emitting


class LaneBoosts(NamedTuple):
    """The per-utterance boost tables (`boost.BoostTables`), one row per lane of this call."""

    keys: np.ndarray  # int32 [total]: word id, or EMPTY
    values: np.ndarray  # float32 [total]: bonus
    offset: np.ndarray  # int64 [lanes]: where a lane's table starts
    mask: np.ndarray  # int64 [lanes]: its capacity - 1, or -1 for no table


class Limits(NamedTuple):
    """`CtcBeamOptions` fields the search loops read."""

    beam: np.float32
    max_active: int
    min_active: int
    nbest: int


def search_graph(problem, put=np.asarray, index=np.int64) -> SearchGraph:
    """``problem``'s graph as a bundle; ``put`` places each array (e.g. on the GPU), ``index``
    types the scalars."""
    g = problem.graph
    return SearchGraph(
        index(g.start), put(g.final_cost), put(g.e_offsets), put(g.ne_offsets),
        put(g.next_state), put(g.ilabel), put(g.olabel), put(problem.arc_cost),
        put(g.arc_source), index(g.num_emitting_arcs),
    )  # fmt: skip


def lane_boosts(problem, lanes=None, put=np.asarray) -> LaneBoosts:
    """The boost tables of the utterances ``lanes`` (default: all), lane ``i`` = ``lanes[i]``."""
    bt = problem.boosts
    offset, mask = (bt.offset, bt.mask) if lanes is None else (bt.offset[lanes], bt.mask[lanes])
    return LaneBoosts(put(bt.keys), put(bt.values), put(offset), put(mask))


def limits(problem, index=np.int64) -> Limits:
    o = problem.options
    return Limits(problem.beam, index(o.max_active), index(o.min_active), index(o.nbest))


@njit(inline="always", nogil=True, cache=True)
def arc_cost(graph, boosts, lane, a):
    """Arc ``a``'s cost for ``lane``: its static cost less the lane's bonus for its output word
    (reference.py step 2, ``arc_cost'``). The bonus is found in the lane's open-addressing table
    (`boost.py`); a word without a bonus costs the static cost exactly."""
    c = graph.arc_cost[a]
    word = graph.olabel[a]
    mask = boosts.mask[lane]
    if word == 0 or mask < 0:
        return c
    base = boosts.offset[lane]
    h = ((np.int64(word) * np.int64(HASH_MULT)) & np.int64(0xFFFFFFFF)) & mask
    while True:
        k = boosts.keys[base + h]
        if k == word:
            return c - boosts.values[base + h]
        if k == EMPTY:
            return c
        h = (h + 1) & mask


@njit(inline="always", nogil=True, cache=True)
def improves(cost, arc, old_cost, old_arc):
    """The recombination rule (reference.py step 2): the smaller ``(cost, arc)`` key wins."""
    return cost < old_cost or (cost == old_cost and arc < old_arc)

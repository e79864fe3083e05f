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

from .phrases import EMPTY, HASH_MULT, NODE_MULT

_INF = np.float32(np.inf)


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
    slot_label: int  # output labels from here up are the oov slot's (`phrases.NO_SLOT`: none)


class LaneBoosts(NamedTuple):
    """The per-utterance phrase automata (`boost.BoostTables`), one row per lane of this call."""

    key: np.ndarray  # int64 [total]: a goto entry's (node << 32) | word, or EMPTY
    gain: np.ndarray  # float32 [total]: the bonus of taking it from the root
    enter: np.ndarray  # int32 [total]: the context state it leads to
    offset: np.ndarray  # int64 [lanes]: where a lane's table starts
    mask: np.ndarray  # int64 [lanes]: its capacity - 1, or -1 for no table
    fail: np.ndarray  # int32 [nodes]: failure links
    phi: np.ndarray  # float32 [nodes]: what a token in that state gives back
    node_offset: np.ndarray  # int64 [lanes]: where a lane's nodes start
    contexts: np.ndarray  # int64 [lanes]: context states a lane's tokens can be in
    worst: np.ndarray  # float32 [lanes]: the most a lane's phrases add to an arc's cost (>= 0)
    bits: np.ndarray  # int64 [total]: each lane's phrase words as a bitset
    bits_offset: np.ndarray  # int64 [lanes]: where a lane's bitset starts
    bits_len: np.ndarray  # int64 [lanes]: its entries (words from 64 * bits_len up: in none)


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
        put(g.arc_source), index(g.num_emitting_arcs), index(problem.slot_label),
    )  # fmt: skip


def lane_boosts(problem, lanes=None, put=np.asarray) -> LaneBoosts:
    """The boost tables of the utterances ``lanes`` (default: all), lane ``i`` = ``lanes[i]``."""
    bt = problem.boosts
    per_lane = (bt.offset, bt.mask, bt.node_offset, bt.contexts, bt.worst, bt.bits_offset,
                bt.bits_len)  # fmt: skip
    if lanes is not None:
        per_lane = tuple(x[lanes] for x in per_lane)
    offset, mask, node_offset, contexts, worst, bits_offset, bits_len = per_lane
    return LaneBoosts(
        put(bt.key), put(bt.gain), put(bt.enter), put(offset), put(mask),
        put(bt.fail), put(bt.phi), put(node_offset), put(contexts), put(worst),
        put(bt.bits), put(bits_offset), put(bits_len),
    )  # fmt: skip


def limits(problem, index=np.int64) -> Limits:
    o = problem.options
    return Limits(problem.beam, index(o.max_active), index(o.min_active), index(o.nbest))


@njit(inline="always", nogil=True, cache=True)
def arc_cost(graph, boosts, lane, a, x):
    """Arc ``a`` taken by a token of ``lane`` in context state ``x``: ``(cost, next context
    state)`` (reference.py step 2, ``arc_cost'``). An arc with no output word keeps ``x`` at the
    static cost; one with word ``w`` walks the lane's phrase automaton (`boost.py`,
    `phrases.py`): the goto entry of ``(node, w)`` for ``node`` = ``x``, then its failure links,
    earns ``gain - phi[x]`` (``gain`` from the root) and moves to the entry's state; no entry
    down to the root gives ``phi[x]`` back and moves to the root — unless the word is an oov
    slot label, which is then forbidden (infinite cost; without a table the slot is closed).
    Without a table, or for words without a bonus from the root, the cost is the static cost
    exactly."""
    c = graph.arc_cost[a]
    word = graph.olabel[a]
    if word == 0:
        return c, x
    mask = boosts.mask[lane]
    if mask < 0:
        if word >= graph.slot_label:
            return _INF, x
        return c, x
    nodes = boosts.node_offset[lane]
    if word < graph.slot_label:  # a word of no phrase: every probe would miss down to the root
        i = np.int64(word) >> np.int64(6)
        if i >= boosts.bits_len[lane] or not (
            (boosts.bits[boosts.bits_offset[lane] + i] >> (np.int64(word) & np.int64(63)))
            & np.int64(1)
        ):
            return (c, 0) if x == 0 else (c + boosts.phi[nodes + x], 0)
    base = boosts.offset[lane]
    node = x
    while True:  # the goto entry of (node, word), else node's failure link, down to the root
        h = ((np.int64(word) * np.int64(HASH_MULT) + np.int64(node) * np.int64(NODE_MULT))
             & np.int64(0xFFFFFFFF)) & mask  # fmt: skip
        want = (np.int64(node) << np.int64(32)) | np.int64(word)
        while True:
            k = boosts.key[base + h]
            if k == want:
                gain = boosts.gain[base + h]
                if x != 0:
                    gain = gain - boosts.phi[nodes + x]
                return c - gain, boosts.enter[base + h]
            if k == EMPTY:
                break
            h = (h + 1) & mask
        if node == 0:
            if word >= graph.slot_label:
                return _INF, 0
            if x == 0:
                return c, 0  # a word without a bonus: nothing to earn, nothing to give back
            return c + boosts.phi[nodes + x], 0
        node = boosts.fail[nodes + node]


@njit(inline="always", nogil=True, cache=True)
def improves(cost, arc, x, old_cost, old_arc, old_x):
    """The recombination rule (reference.py step 2): the smaller ``(cost, arc, source context
    state)`` key wins."""
    if cost != old_cost:
        return cost < old_cost
    return arc < old_arc or (arc == old_arc and x < old_x)

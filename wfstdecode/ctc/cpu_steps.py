"""The steps of one frame of the CPU backend's search, one Numba function each, in
`reference.py`'s order: `start` (step 1), `expand` (2), `closure_cutoff` (3), `epsilon_closure`
(4), `prune_cutoff` (5), then `keep_ancestors` and `compact_records` (the backpointer store the
reference does not need), and `collect_records`, which keeps that store as small as the active
tokens. `cpu.py` runs them frame by frame; the cuda backend's `cuda/steps.py` has the same
steps under the same names (the table in `cuda/kernels.py` maps them).

Data layout, chosen so the CUDA backend can mirror it:

* per utterance (lane) the tokens of the frame being built are structure-of-arrays candidates
  (`Candidates`): a token's ``prev`` is a record index for tokens reached by an emitting arc (or
  -1 for the start), a candidate index for tokens reached by an epsilon arc inside the frame;
* ``state_map[S]`` maps a state to its first candidate (-1: none), and each candidate links to
  the state's next one in another context state (``chain``; one per state without boosted
  phrases) — the recombination slot of a (state, context state) pair (a hash table keyed by
  state on the GPU); recombination keeps the smallest ``(cost, arc, source context state)``;
* after pruning, survivors and their in-frame epsilon ancestors are appended to the backpointer
  records (`Records`; per frame, as the GPU copies each frame's records to the host); the
  survivors (`Survivors`) are the next frame's tokens and, after the last frame, what
  `_traceback.finish_paths` ranks and traces back;
* max-active / min-active use an exact k-th smallest cost (a quickselect here; a radix select
  over order-preserving cost bits — a cost histogram per digit — on the GPU).

The steps a frame runs are inlined into the frame loop (`cpu._frames`, ``inline="always"``),
which is compiled without Numba's runtime (``_nrt=False``): with it, Numba updates the
reference count of every array of every tuple the steps receive, atomically, several times a
frame, even where the loop never rebinds them (the 60 OCR lines at beam 4: 15 % of perf's
samples in those updates, 8.3 -> 7.0 ms a search without them). Without it nothing in the loop
may allocate. So no step grows a buffer: each says how much room it needs (`expand_room`;
`epsilon_closure` stops and returns `NEEDS_ROOM`, to go on once `cpu._drive` has grown the
candidates) and writes into buffers that have it (`compact_records`; the k-th smallest cost
works in ``Candidates.scratch``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .bundles import arc_cost, improves
from .status import OVERFLOW

CONVERGED, CYCLING, NEEDS_ROOM = 0, 1, 2  # how `epsilon_closure` returns

_INF = np.float32(np.inf)
_NO_ARC = np.int32(np.iinfo(np.int32).max)  # a new candidate's arc: any real arc improves it
CTX, SRC, CHAIN = 0, 1, 2  # the rows of Candidates.context


class Candidates(NamedTuple):
    """The tokens of the frame being built; candidate ``j`` is row ``j`` of every array."""

    state: np.ndarray  # int32
    cost: np.ndarray  # float32
    arc: np.ndarray  # int32: the arc that reached it (-1: the start)
    prev: np.ndarray  # int32: a record (emitting arc, start) or a candidate (epsilon arc)
    # int32 [3, cap]: row CTX its context state (the phrase automaton's), row SRC the context
    # state it came from (the recombination tie-break), row CHAIN the same state's next
    # candidate (in another context state) or -1. One array, not three, to keep the tuple
    # short: each of its arrays costs reference-count updates on every call that passes it.
    context: np.ndarray
    queued: np.ndarray  # bool: in the epsilon closure's next round
    kept: np.ndarray  # bool: a survivor or an in-frame ancestor of one
    record: np.ndarray  # int32: its record index once kept
    # int32 [2, cap]: the epsilon closure's queues, this round's and the next (rows alternate)
    queue: np.ndarray
    scratch: np.ndarray  # float32: a copy of the costs for the k-th smallest


@njit(nogil=True, cache=True)
def candidates(cap):
    return Candidates(
        np.empty(cap, np.int32), np.empty(cap, np.float32), np.empty(cap, np.int32),
        np.empty(cap, np.int32), np.empty((3, cap), np.int32), np.zeros(cap, np.bool_),
        np.zeros(cap, np.bool_), np.empty(cap, np.int32), np.empty((2, cap), np.int32),
        np.empty(cap, np.float32),
    )  # fmt: skip


@njit(nogil=True, cache=True)
def doubled(cands, n):
    """``cands`` with twice the room, its first ``n`` candidates and its queues copied (a frame
    can be stopped for room in its closure and go on)."""
    cap = cands.state.shape[0]
    bigger = candidates(2 * cap)
    bigger.state[:n] = cands.state[:n]
    bigger.cost[:n] = cands.cost[:n]
    bigger.arc[:n] = cands.arc[:n]
    bigger.prev[:n] = cands.prev[:n]
    for row in range(3):  # a loop, not a 2-D slice copy: seconds less to compile
        for j in range(n):
            bigger.context[row, j] = cands.context[row, j]
    for row in range(2):
        for j in range(cap):
            bigger.queue[row, j] = cands.queue[row, j]
    bigger.queued[:n] = cands.queued[:n]  # kept and record are per frame: nothing to copy
    return bigger


@njit(inline="always", nogil=True, cache=True)
def _slot_of(cands, state_map, d, x, phrases):
    """The candidate of state ``d`` in context state ``x``, or -1. Without ``phrases`` (one
    context state) the state's first candidate is the one: the chain is not read."""
    j = state_map[d]
    if phrases:
        while j >= 0 and cands.context[CTX, j] != x:
            j = cands.context[CHAIN, j]
    return j


@njit(inline="always", nogil=True, cache=True)
def _beats(costs, arcs, context, j, c, a, x):
    """`improves` against candidate ``j``: its arc and source context state are read only when
    the costs tie (rare), not for every arc."""
    old = costs[j]
    if c != old:
        return c < old
    return improves(c, a, x, old, arcs[j], context[SRC, j])


@njit(inline="always", nogil=True, cache=True)
def _new_slot(cands, j, state_map, d, x):
    """Make candidate ``j`` the one of state ``d`` in context state ``x``, at ``(+inf,
    _NO_ARC)`` so that any arc improves it.

    ``cands`` has room: it grows outside the frame loop (`cpu._drive`), never inside."""
    cands.context[CHAIN, j] = state_map[d]
    state_map[d] = j
    cands.state[j] = d
    cands.context[CTX, j] = x
    cands.cost[j] = _INF
    cands.arc[j] = _NO_ARC
    cands.queued[j] = False


@njit(nogil=True, cache=True)
def _kth_smallest(costs, n, k, tmp):
    """The ``k``-th smallest (1-based) of ``costs[:n]``: quickselect on a copy in ``tmp`` (Hoare
    partitions around a median of three). ``np.partition`` gives the same value, but replacing
    it cut the backend's first-call compilation from 26 to 21 seconds."""
    for j in range(n):
        tmp[j] = costs[j]
    target = k - 1
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi) // 2
        a, b, c = tmp[lo], tmp[mid], tmp[hi]
        pivot = max(min(a, b), min(max(a, b), c))  # the median of the three
        i, j = lo, hi
        while i <= j:
            while tmp[i] < pivot:
                i += 1
            while tmp[j] > pivot:
                j -= 1
            if i <= j:
                tmp[i], tmp[j] = tmp[j], tmp[i]
                i += 1
                j -= 1
        # now tmp[lo..j] <= pivot <= tmp[i..hi], and any slot between holds the pivot
        if target <= j:
            hi = j
        elif target >= i:
            lo = i
        else:
            return tmp[target]
    return tmp[target]


@njit(inline="always", nogil=True, cache=True)
def smallest(costs, n):
    best = costs[0]
    for j in range(1, n):
        if costs[j] < best:
            best = costs[j]
    return best


@njit(inline="always", nogil=True, cache=True)
def count_within(costs, n, limit):
    """How many of ``costs[:n]`` are at most ``limit``."""
    count = 0
    for j in range(n):
        if costs[j] <= limit:
            count += 1
    return count


@njit(inline="always", nogil=True, cache=True)
def clear_state_map(cands, n, state_map):
    """Set the state map's entries of the ``n`` candidates back to -1 (none)."""
    for j in range(n):
        state_map[cands.state[j]] = -1


# ---- the steps of one frame, in reference.py's order ------------------------------------------


@njit(nogil=True, cache=True)
def start(cands, state_map, graph):
    """Step 1: token frame 0 holds the start state at cost 0 (no arc)."""
    cands.state[0] = graph.start
    cands.cost[0] = np.float32(0.0)
    cands.arc[0] = -1
    cands.prev[0] = -1
    cands.context[CTX, 0] = 0
    cands.context[SRC, 0] = 0
    cands.context[CHAIN, 0] = -1
    cands.queued[0] = False
    state_map[graph.start] = 0
    return 1


@njit(inline="always", nogil=True, cache=True)
def expand_room(alive, n_alive, graph, state_map, boosts, lane):
    """The candidates `expand` can create at most from the ``n_alive`` survivors."""
    most = 0
    for i in range(n_alive):
        s = alive.state[i]
        most += graph.e_offsets[s + 1] - graph.e_offsets[s]
    return min(most, state_map.shape[0] * boosts.contexts[lane])  # one per (state, context)


@njit(inline="always", nogil=True, cache=True)
def expand(ac_t, alive, n_alive, cands, state_map, graph, boosts, lane, beam, early):
    """Step 2: the ``n_alive`` survivors' emitting arcs into the candidates (room for
    `expand_room` of them), recombined per (state, context state); returns their number. With
    ``early`` no candidate beyond the frame's ``best + beam`` is created: no cutoff of this
    frame can keep it while ``min_active`` candidates are within it (`cpu._frames` expands again
    without ``early`` when fewer are: results do not change)."""
    n = 0
    running = _INF
    worst = boosts.worst[lane]
    if early and n_alive > 8 and worst < _INF:
        # a pre-pass for the best emitting cost, so that the bound is tight from the start:
        # exact without boosts; with them an upper bound (each arc at its static cost plus the
        # most a phrase can add, no table probes), which still keeps every candidate needed
        # (none when a spelling through the oov slot may forbid an arc: worst is inf)
        for i in range(n_alive):
            s = alive.state[i]
            for a in range(graph.e_offsets[s], graph.e_offsets[s + 1]):
                c = alive.cost[i] + (ac_t[graph.ilabel[a] - 1] + (graph.arc_cost[a] + worst))
                if c < running:
                    running = c
    i_best = 0
    for i in range(1, n_alive):
        if alive.cost[i] < alive.cost[i_best]:
            i_best = i
    phrases = boosts.contexts[lane] > 1
    for ii in range(n_alive):
        # the best token first: its arcs give a tight early bound (results do not change)
        i = i_best if ii == 0 else (ii - 1 if ii <= i_best else ii)
        s = alive.state[i]
        cost = alive.cost[i]  # read once: the stores below may alias as far as LLVM knows
        record = alive.record[i]
        x = alive.ctx[i]
        for a in range(graph.e_offsets[s], graph.e_offsets[s + 1]):
            arc_c, nx = arc_cost(graph, boosts, lane, a, x)
            c = cost + (ac_t[graph.ilabel[a] - 1] + arc_c)
            if not c < _INF or (early and c > running + beam):
                continue
            if c < running:
                running = c
            d = graph.next_state[a]
            j = _slot_of(cands, state_map, d, nx, phrases)
            if j < 0:  # the pair's first candidate this frame
                j = n
                n += 1
                _new_slot(cands, j, state_map, d, nx)
            if _beats(cands.cost, cands.arc, cands.context, j, c, a, x):
                cands.cost[j] = c
                cands.arc[j] = a
                cands.context[SRC, j] = x
                cands.prev[j] = record
    return n


@njit(inline="always", nogil=True, cache=True)
def closure_cutoff(costs, n, best_emit, lim, scratch):
    """Step 3: ``C``: best emitting cost + beam, lowered to the max_active-th smallest cost when
    there are at least max_active candidates, raised to the min_active-th smallest."""
    limit = best_emit + lim.beam
    if n >= lim.max_active:  # ">=": C must not depend on the candidates dropped beyond the beam
        kth = _kth_smallest(costs, n, lim.max_active, scratch)
        if kth < limit:
            limit = kth
    if lim.min_active > 1:
        kth = _kth_smallest(costs, n, min(lim.min_active, n), scratch)
        if kth > limit:
            limit = kth
    return limit


@njit(inline="always", nogil=True, cache=True)
def closure_queue(cands, n, limit):
    """Step 4's first queue (row 0): the candidates within ``limit``; returns its length."""
    q_n = np.int64(0)  # not the literal 0: one compiled epsilon_closure
    for j in range(n):
        if cands.cost[j] <= limit:
            cands.queue[0, q_n] = j
            q_n += 1
            cands.queued[j] = True
    return q_n


@njit(inline="always", nogil=True, cache=True)
def epsilon_closure(cands, n, q_n, rounds, limit, state_map, graph, boosts, lane):
    """Step 4: tokens within ``limit`` relax their epsilon arcs, in rounds over a queue of the
    candidates that improved (round ``r`` reads ``cands.queue[r % 2]``), until none does.
    Returns ``(n, q_n, rounds, status, room)``: status `CONVERGED`; `CYCLING` after more rounds
    than candidates (+2: a negative-cost cycle); or `NEEDS_ROOM` when the next round could
    create more candidates than ``cands`` holds (``room``: how many), to be called again with
    the same values once it has grown."""
    ne_offsets = graph.ne_offsets
    while q_n > 0:
        if rounds + 1 > n + 2:
            return n, q_n, rounds, CYCLING, 0
        cur = rounds % 2
        most = n  # candidates after this round, at most
        for q in range(q_n):
            s = cands.state[cands.queue[cur, q]]
            most += ne_offsets[s + 1] - ne_offsets[s]
        most = min(most, state_map.shape[0] * boosts.contexts[lane])
        if cands.state.shape[0] < most:
            return n, q_n, rounds, NEEDS_ROOM, most
        n, q_n = _closure_round(cands, n, cur, q_n, limit, state_map, graph, boosts, lane)
        rounds += 1
    return n, q_n, rounds, CONVERGED, 0


@njit(nogil=True, cache=True)
def _closure_round(cands, n, cur, q_n, limit, state_map, graph, boosts, lane):
    """One round of step 4 over the ``q_n`` candidates queued in row ``cur``; ``cands`` has
    room for every candidate the round can create. Returns ``(n, length of the next queue)``,
    the next queue in the other row."""
    ne_offsets, next_state = graph.ne_offsets, graph.next_state
    c_state, c_cost, c_arc = cands.state, cands.cost, cands.arc
    c_prev, c_queued, c_context, queue = cands.prev, cands.queued, cands.context, cands.queue
    phrases = boosts.contexts[lane] > 1
    nxt = 1 - cur
    nx_n = 0
    for q in range(q_n):
        j = queue[cur, q]
        c_queued[j] = False
        s = c_state[j]
        x = c_context[CTX, j]
        for a in range(ne_offsets[s], ne_offsets[s + 1]):
            arc_c, nx = arc_cost(graph, boosts, lane, a, x)
            c = c_cost[j] + arc_c
            if not (c <= limit and c < _INF):
                continue
            d = next_state[a]
            k = _slot_of(cands, state_map, d, nx, phrases)
            if k < 0:
                k = n
                n += 1
                _new_slot(cands, k, state_map, d, nx)
            if not _beats(c_cost, c_arc, c_context, k, c, a, x):
                continue
            c_cost[k] = c
            c_arc[k] = a
            c_context[SRC, k] = x
            c_prev[k] = j
            if not c_queued[k]:
                c_queued[k] = True
                queue[nxt, nx_n] = k
                nx_n += 1
    return n, nx_n


@njit(inline="always", nogil=True, cache=True)
def prune_cutoff(costs, n, lim, scratch):
    """Step 5: ``(best, cutoff)``: best + beam, lowered to the max_active-th best cost when more
    tokens are within it, raised to the min_active-th best (or the worst) when fewer."""
    best = smallest(costs, n)
    cutoff = best + lim.beam
    n_in = count_within(costs, n, cutoff)
    if n_in > lim.max_active:
        cutoff = _kth_smallest(costs, n, lim.max_active, scratch)
    elif n_in < lim.min_active:
        cutoff = _kth_smallest(costs, n, min(lim.min_active, n), scratch)
    return best, cutoff


@njit(inline="always", nogil=True, cache=True)
def keep_ancestors(cands, n, cutoff, num_emitting):
    """Mark the survivors and the in-frame epsilon ancestors they trace back through; returns
    the number of survivors."""
    n_alive = 0
    for j in range(n):
        cands.kept[j] = cands.cost[j] <= cutoff
        n_alive += cands.kept[j]
    for j in range(n):
        if cands.cost[j] <= cutoff:
            k = j
            while cands.arc[k] >= num_emitting:
                k = cands.prev[k]
                if cands.kept[k]:
                    break
                cands.kept[k] = True
    return n_alive


@njit(inline="always", nogil=True, cache=True)
def compact_records(cands, n, cutoff, best, alive, records, n_rec, num_emitting):
    """Append the kept candidates to the records (in candidate order; an epsilon arc's ``prev``
    becomes its ancestor's record) and write the survivors into ``alive``, their costs relative
    to the frame's best (reference.py step 5); both have room for ``n`` more. Returns the
    records' new count."""
    m = 0
    for j in range(n):
        if cands.kept[j]:
            cands.record[j] = n_rec + m
            m += 1
    i = 0
    for j in range(n):
        if cands.kept[j]:
            k = cands.record[j]
            records.arc[k] = cands.arc[j]
            emitting = cands.arc[j] < num_emitting
            records.prev[k] = cands.prev[j] if emitting else cands.record[cands.prev[j]]
            if cands.cost[j] <= cutoff:
                alive.state[i] = cands.state[j]
                alive.ctx[i] = cands.context[CTX, j]
                alive.cost[i] = cands.cost[j] - best
                alive.record[i] = k
                i += 1
    return n_rec + m


# ---- bounded memory: records no survivor needs are dropped as the search goes ----------------


class SharedPrefix(NamedTuple):
    """The path every surviving token shares, moved out of the records: arcs and their frames
    (`finish_paths`' convention); the root record (arc -1) stands for its end."""

    arc: np.ndarray
    frame: np.ndarray


@njit(nogil=True, cache=True)
def _appended(prefix, n, arc, frame):
    if n == prefix.arc.shape[0]:
        grown = SharedPrefix(np.empty(2 * n + 64, np.int32), np.empty(2 * n + 64, np.int32))
        grown.arc[:n] = prefix.arc[:n]
        grown.frame[:n] = prefix.frame[:n]
        prefix = grown
    prefix.arc[n] = arc
    prefix.frame[n] = frame
    return prefix


@njit(nogil=True, cache=True)
def collect_records(alive, records, n_rec, root, prefix, n_prefix, prefix_frames, num_emitting):
    """Keep the records the survivors trace back through, renumbered in order, and move the
    chain from the root that every one of them shares into ``prefix`` (Kaldi's token pruning
    and partial traceback). Results do not change: tracebacks see the same arcs, the prefix's
    then the store's. ``root`` is the record every path starts from (the start, or the end of
    the prefix moved out before; an ancestor in the same frame can have a larger index than its
    descendant, so it is tracked, not assumed first). Returns ``(n_rec, root, prefix, n_prefix,
    prefix_frames)``; ``prefix_frames`` counts the emitting arcs in the prefix."""
    used = np.zeros(n_rec, np.bool_)
    children = np.zeros(n_rec, np.int32)
    child = np.empty(n_rec, np.int32)
    ends = np.zeros(n_rec, np.bool_)  # a survivor's own record: a path ends there
    for i in range(alive.state.shape[0]):
        k = alive.record[i]
        ends[k] = True
        while k >= 0 and not used[k]:
            used[k] = True
            parent = records.prev[k]
            if parent >= 0:
                children[parent] += 1
                child[parent] = k
            k = parent
    while children[root] == 1 and not ends[root]:
        used[root] = False
        root = child[root]
        a = records.arc[root]
        if a < num_emitting:
            prefix_frames += 1
        prefix = _appended(prefix, n_prefix, a, prefix_frames - 1)
        n_prefix += 1
    records.arc[root] = -1
    records.prev[root] = -1
    new_index = np.empty(n_rec, np.int32)
    m = 0
    for k in range(n_rec):
        if used[k]:
            new_index[k] = m
            m += 1
    for k in range(n_rec):  # new_index[k] <= k: moving down never overwrites an unread record
        if used[k]:
            parent = records.prev[k]
            records.prev[new_index[k]] = -1 if parent < 0 else new_index[parent]
            records.arc[new_index[k]] = records.arc[k]
    for i in range(alive.state.shape[0]):
        alive.record[i] = new_index[alive.record[i]]
    return m, new_index[root], prefix, n_prefix, prefix_frames


@njit(nogil=True, cache=True)
def prepend_prefix(prefix, n_prefix, n_paths, out):
    """Put the shared prefix before each of the ``n_paths`` paths `finish_paths` wrote; returns
    the OVERFLOW bit when a whole path no longer fits its row."""
    arcs, frames, lens, _costs = out
    for p in range(n_paths):
        length = lens[p]
        if n_prefix + length > arcs.shape[1]:
            return OVERFLOW
        tail_arcs = arcs[p, :length].copy()
        tail_frames = frames[p, :length].copy()
        arcs[p, n_prefix : n_prefix + length] = tail_arcs
        frames[p, n_prefix : n_prefix + length] = tail_frames
        arcs[p, :n_prefix] = prefix.arc[:n_prefix]
        frames[p, :n_prefix] = prefix.frame[:n_prefix]
        lens[p] = n_prefix + length
    return 0

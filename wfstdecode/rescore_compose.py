"""The composition loop of `rescore.rescore`, compiled: the lattice's nodes split by the two
LMs' states, in topological order, with the LM steps supplied by the caller.

An LM step is ``(state, word) -> (cost change, next state)`` on Python objects (`NgramLm.step`
on tuples of words), which compiled code cannot call. So `compose` numbers the states and keeps
their steps in arrays indexed by a hash of ``state << 32 | word`` (a `StepTable`, which
`rescore.LmRescoring` keeps from one lattice to the next); the compiled loop (`_run`)
goes node after node and, where a node needs steps it lacks, returns those as misses: `compose`
computes them in Python, adds them, and calls it again from that node. A node is processed whole
or not at all, so the result is the plain loop's (`compose_reference`, which
`tests/test_rescore.py` compares with this arc for arc).

With a ``limit`` (the pruned composition), a split node is followed only while its cost so far
plus the first pass's best cost from its lattice node stays within it, or when it lies on the
first pass's best path: the split of node 0, and a split reached from one on the path along the
path's next arc (``on_best``) — the ``(node, LM state)`` pairs that walking the path gives, which
is how `compose_reference` finds them.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from .errors import OptionsError

_DONE, _NEEDS_STEPS, _FULL, _TOO_MANY = 0, 1, 2, 3
_MISSES = 4096  # misses returned by one call at most


@nb.njit(cache=True, inline="always")
def _slot(table, key):
    """The slot of ``key`` in the open-addressing table ``table[0]`` (keys, -1: empty), or the
    empty slot where it would go; the table is kept at most half full."""
    keys = table[0]
    mask = keys.shape[0] - 1
    h = key * np.int64(-7046029254386353131)  # multiplicative hashing (wraps)
    i = (h ^ (h >> 29)) & mask
    while keys[i] != -1 and keys[i] != key:
        i = (i + 1) & mask
    return i


@nb.njit(cache=True)
def _add(table, keys, lo, hi):
    """Enters ``keys[lo:hi]`` into ``table`` (rows: keys, positions) at their positions."""
    for j in range(lo, hi):
        i = _slot(table, keys[j])
        table[0, i] = keys[j]
        table[1, i] = j


def _index(keys: np.ndarray, n: int, capacity: int) -> np.ndarray:
    """A table of ``keys[:n]`` -> position with ``capacity`` (a power of 2) slots."""
    table = np.full((2, capacity), -1, np.int64)
    _add(table, keys, 0, n)
    return table


@nb.njit(cache=True, nogil=True)
def _run(u, first, dst, olabel, w_arc, beta, limit, on_best, steps, step_cost, step_after,
         splits, split_node, split_state, alpha, on_path, head, tail, next_split, arcs, extra,
         counts, misses, max_nodes):  # fmt: skip
    """Composes nodes ``u, u + 1, ...`` until done or stuck: ``(status, node)``.
    ``counts``: split nodes, arcs, and the misses written (``_NEEDS_STEPS``) or the room node
    ``u`` needs (``_FULL``); ``arcs``: rows source split, target split, lattice arc;
    ``splits`` / ``steps``: hash tables of ``node << 32 | state`` / ``state << 32 | word``;
    ``on_path``: per split, whether it lies on the first pass's best path (never pruned)."""
    n = first.shape[0] - 1
    cap_nodes, cap_arcs = split_node.shape[0], arcs.shape[1]
    half = splits.shape[1] // 2
    while u < n:
        lo, hi = first[u], first[u + 1]
        # 1. the steps every followed split of u needs, present?
        counts[2] = 0
        k = 0
        q = head[u]
        while q != -1:
            if alpha[q] + beta[u] <= limit or on_path[q]:
                k += 1
                for i in range(lo, hi):
                    w = olabel[i]
                    if w:
                        key = (split_state[q] << 32) | w
                        if steps[0, _slot(steps, key)] == -1 and counts[2] < misses.shape[0]:
                            misses[counts[2]] = key
                            counts[2] += 1
            q = next_split[q]
        if counts[2]:
            return _NEEDS_STEPS, u
        # 2. room for what u can add
        need = k * (hi - lo)
        if counts[0] + need > cap_nodes or counts[1] + need > cap_arcs or counts[0] + need > half:
            counts[2] = need
            return _FULL, u
        # 3. every followed split of u along every arc of u
        q = head[u]
        while q != -1:
            state = split_state[q]
            if alpha[q] + beta[u] > limit and not on_path[q]:
                q = next_split[q]
                continue
            a_q = alpha[q]
            for i in range(lo, hi):
                w = olabel[i]
                cost, after = 0.0, state
                if w:
                    j = steps[1, _slot(steps, (state << 32) | w)]
                    cost, after = step_cost[j], step_after[j]
                v = dst[i]
                key = (np.int64(v) << 32) | after
                s = _slot(splits, key)
                c = a_q + w_arc[i] + cost
                if splits[0, s] == -1:
                    r = counts[0]
                    if r == max_nodes:
                        return _TOO_MANY, u
                    counts[0] += 1
                    splits[0, s], splits[1, s] = key, r
                    split_node[r], split_state[r], alpha[r] = v, after, c
                    on_path[r] = on_path[q] and on_best[i]
                    next_split[r] = -1
                    if head[v] == -1:
                        head[v] = r
                    else:
                        next_split[tail[v]] = r
                    tail[v] = r
                else:
                    r = splits[1, s]
                    if c < alpha[r]:
                        alpha[r] = c
                    if on_path[q] and on_best[i]:
                        on_path[r] = True
                a = counts[1]
                arcs[0, a], arcs[1, a], arcs[2, a] = q, r, i
                extra[a] = cost
                counts[1] += 1
            q = next_split[q]
        u += 1
    return _DONE, u


class StepTable:
    """The LM steps the compiled loop looks up: rows ``keys`` (``state << 32 | word``),
    ``cost``, ``after`` (a state id) of the first ``n`` slots, found through the hash table
    ``index``; the states themselves (Python objects) numbered in ``states``, ``start`` first.
    ``step(state, word id)`` gives ``(cost change, next state)``. One table may serve every
    lattice of a rescoring with the same word table (`rescore.LmRescoring` keeps it): a lattice
    then finds most steps there, where each step missing costs a return to Python."""

    def __init__(self, start, step):
        self.step = step
        self.states, self._ids = [start], {start: 0}
        self.keys = np.empty(256, np.int64)
        self.cost, self.after = np.empty(256, np.float64), np.empty(256, np.int64)
        self.index = _index(self.keys, 0, 1024)
        self.n = 0

    def add(self, missing) -> None:
        """Computes the steps of the keys ``missing`` (none already in) and enters them."""
        new = list(dict.fromkeys(missing))
        n = self.n
        if n + len(new) > len(self.keys):
            self.keys, self.cost, self.after = (
                _grown(x, n, n + len(new)) for x in (self.keys, self.cost, self.after)
            )
        for j, key in enumerate(new, n):
            cost, after = self.step(self.states[key >> 32], key & 0xFFFFFFFF)
            self.keys[j], self.cost[j], self.after[j] = key, cost, self._intern(after)
        self.n = n + len(new)
        if 2 * self.n > self.index.shape[1]:
            self.index = _index(self.keys, self.n, _pow2(4 * self.n))
        else:
            _add(self.index, self.keys, n, self.n)

    def _intern(self, state) -> int:
        sid = self._ids.get(state)
        if sid is None:
            sid = self._ids[state] = len(self.states)
            self.states.append(state)
        return sid


def compose(first, dst, olabel, w_arc, beta, limit, best_arcs, start, step, max_nodes,
            table: StepTable | None = None):  # fmt: skip
    """The split lattice: ``(node_of, state_of, states, src, dst, arc_of, extra)`` — each split
    node's lattice node and LM state (an index into ``states``, Python objects; ``start`` at
    node 0), and each arc's split source and target, lattice arc and LM cost change.
    ``step(state, word id)`` gives ``(cost change, next state)``; ``beta``/``limit``/
    ``best_arcs`` (the first pass's best path, arc after arc) prune as `rescore` describes
    (``limit`` inf: exact). ``table``: steps kept from earlier lattices (its ``start`` and
    ``step`` then stand for these), else a new one."""
    n = len(first) - 1
    if table is None:
        table = StepTable(start, step)
    elif table.states[0] != start:
        raise ValueError("the step table starts from another LM state")
    on_best = np.zeros(len(dst), np.bool_)
    on_best[np.asarray(best_arcs, np.int64)] = True
    size = _first_room(n)
    split_node = np.zeros(size, np.int64)  # node 0's one split: the start state (id 0)
    split_state = np.zeros(size, np.int64)
    alpha = np.zeros(size, np.float64)
    on_path = np.zeros(size, np.bool_)
    on_path[0] = True  # the start split
    next_split = np.full(size, -1, np.int64)
    head, tail = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    arcs, extra = np.empty((3, 2 * size), np.int64), np.empty(2 * size, np.float64)
    splits = _index(split_node, 1 if n else 0, _pow2(4 * size))
    counts, misses = np.zeros(3, np.int64), np.empty(_MISSES, np.int64)
    if n:
        head[0] = tail[0] = 0
        counts[0] = 1
    u = 0
    while True:
        status, u = _run(
            u, first, dst, olabel, w_arc, beta, limit, on_best, table.index, table.cost,
            table.after, splits, split_node, split_state, alpha, on_path, head, tail, next_split,
            arcs, extra, counts, misses, max_nodes,
        )  # fmt: skip
        if status == _DONE:
            break
        if status == _TOO_MANY:
            raise OptionsError(
                f"rescoring would split the lattice into more than {max_nodes} nodes (max_nodes)"
            )
        if status == _NEEDS_STEPS:
            table.add(misses[: counts[2]].tolist())
            continue
        # _FULL: room for the ``counts[2]`` more split nodes and arcs that node u may add
        k, a, need = int(counts[0]), int(counts[1]), int(counts[2])
        if k + need > len(split_node):
            split_node, split_state, alpha, on_path, next_split = (
                _grown(x, k, k + need)
                for x in (split_node, split_state, alpha, on_path, next_split)
            )
        if a + need > len(extra):
            extra = _grown(extra, a, a + need)
            arcs = np.stack([_grown(row, a, len(extra)) for row in arcs])
        if 2 * (k + need) > splits.shape[1]:
            splits = _index((split_node << 32) | split_state, k, _pow2(4 * (k + need)))
    k, a = int(counts[0]), int(counts[1])
    return (split_node[:k], split_state[:k], table.states, arcs[0, :a], arcs[1, :a],
            arcs[2, :a], extra[:a])  # fmt: skip


def compose_reference(first, dst, olabel, w_arc, beta, limit, best_arcs, start, step,
                      max_nodes):  # fmt: skip
    """`compose` in plain Python, the loop it compiles (tests compare the two), but with each
    split node's LM state itself in place of an index; the split nodes on the best path are the
    ``(node, state)`` pairs found by walking it."""
    n = len(first) - 1
    first, dst, olabel, w_arc = first.tolist(), dst.tolist(), olabel.tolist(), w_arc.tolist()
    state, kept_pairs = start, {(0, start)}
    for i in np.asarray(best_arcs).tolist():
        if olabel[i]:
            state = step(state, olabel[i])[1]
        kept_pairs.add((dst[i], state))
    split: list[dict] = [{} for _ in range(n)]  # node -> {state: split node}
    node_of, state_of, alpha = ([0], [start], [0.0]) if n else ([], [], [])
    if n:
        split[0][start] = 0
    src, dst_new, arc_of, extra = [], [], [], []
    steps: dict = {}
    for u in range(n):
        for state, p in split[u].items():
            a_p = alpha[p]
            if a_p + beta[u] > limit and (u, state) not in kept_pairs:
                continue
            for i in range(first[u], first[u + 1]):
                cost, after = 0.0, state
                if olabel[i]:
                    hit = steps.get((state, olabel[i]))
                    if hit is None:
                        hit = steps[(state, olabel[i])] = step(state, olabel[i])
                    cost, after = hit
                targets = split[dst[i]]
                q = targets.get(after)
                if q is None:
                    if len(node_of) == max_nodes:
                        raise OptionsError(f"rescoring would split the lattice into more than "
                                           f"{max_nodes} nodes (max_nodes)")  # fmt: skip
                    q = targets[after] = len(node_of)
                    node_of.append(dst[i])
                    state_of.append(after)
                    alpha.append(a_p + w_arc[i] + cost)
                elif a_p + w_arc[i] + cost < alpha[q]:
                    alpha[q] = a_p + w_arc[i] + cost
                src.append(p)
                dst_new.append(q)
                arc_of.append(i)
                extra.append(cost)
    arrays = (np.array(x, np.int64) for x in (node_of, src, dst_new, arc_of))
    node_of, src, dst_new, arc_of = arrays
    return node_of, state_of, src, dst_new, arc_of, np.array(extra, np.float64)


def _first_room(n: int) -> int:
    """Split nodes the first buffers hold (grown as needed)."""
    return max(64, 2 * n)


def _grown(x: np.ndarray, used: int, needed: int) -> np.ndarray:
    """``x`` with its first ``used`` entries, in at least ``needed`` (twice as many) slots."""
    out = np.empty(max(needed, 2 * len(x)), x.dtype)
    out[:used] = x[:used]
    return out


def _pow2(n: int, least: int = 10) -> int:
    return 1 << max(least, math.ceil(math.log2(max(n, 1))))

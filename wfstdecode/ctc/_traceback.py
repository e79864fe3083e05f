"""End of a search, shared by the CPU and CUDA backends: rank the surviving tokens, trace their
paths back through a backpointer store, drop duplicate word sequences (see `reference.py`, step 6).

The store (`Records`) is two int32 arrays indexed alike: ``arc[k]`` the arc that made record
``k`` (-1 for the start), ``prev[k]`` the record it came from; surviving token ``i`` of
`Survivors` traces back from record ``record[i]``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ._problem import PathBatch, RawResult
from .status import (
    CYCLE,
    MORE_PATHS,
    NEG_CYCLE,
    NO_FINAL,
    OVERFLOW,
    RESULT_BITS,
    raise_graph_errors,
)

_INF = np.float32(np.inf)


class Survivors(NamedTuple):
    """The surviving tokens of a token frame: state, context state (the phrase automaton's), cost
    relative to that frame's best, and the record it traces back from."""

    state: np.ndarray
    ctx: np.ndarray
    cost: np.ndarray
    record: np.ndarray


class Records(NamedTuple):
    """The backpointer store: record ``k`` was made by ``arc[k]`` (-1: the start, or the end of
    a prefix moved out) from record ``prev[k]``."""

    prev: np.ndarray
    arc: np.ndarray


class PathRows:
    """Host buffers `finish_paths` writes into, for ``lanes`` utterances: ``rows`` paths of up to
    ``cap`` arcs each. Both fast backends' hosts use them the same way: allocate, let the search
    (cpu) or the host trace (cuda) fill them, turn lanes into a `PathBatch` with `results` (one
    into a `RawResult` with `result`), and retry the lanes whose status has a RETRY bit with
    `grown` buffers."""

    def __init__(self, lanes: int, rows: int, cap: int):
        self.rows, self.cap = rows, cap
        self.arcs = np.zeros((lanes, rows, cap), np.int32)
        self.frames = np.zeros((lanes, rows, cap), np.int32)
        self.lens = np.zeros((lanes, rows), np.int64)
        self.costs = np.zeros((lanes, rows), np.float32)

    @classmethod
    def first(cls, lanes: int, nbest: int, max_frames: int) -> PathRows:
        """The first try: rows for any usual ``nbest``, paths of twice the frames and some."""
        return cls(lanes, min(nbest, 16), 2 * max_frames + 16)

    def grown(self, lanes: int, status: int, nbest: int) -> PathRows:
        """Buffers for a retry after OVERFLOW (longer paths) and/or MORE_PATHS (more rows)."""
        cap = 4 * self.cap if status & OVERFLOW else self.cap
        rows = min(nbest, 4 * self.rows) if status & MORE_PATHS else self.rows
        return PathRows(lanes, rows, cap)

    def lane(self, i: int) -> tuple:
        """Lane ``i``'s ``(arcs, frames, lens, costs)``: `finish_paths`' last four arguments."""
        return self.arcs[i], self.frames[i], self.lens[i], self.costs[i]

    def result(self, i, n_paths, status, utterance, died=-1, notes=()) -> RawResult:
        """Lane ``i``'s first ``n_paths`` rows as a `RawResult` (copies), once its status has no
        RETRY bit; the status bits that mean a broken graph raise `GraphError`."""
        return self.results([i], [n_paths], [status], [utterance], [died], notes)[0]

    def results(self, lanes, n_paths, status, utterances, died, notes=()) -> PathBatch:
        """`result` for each of ``lanes`` (the other arguments per lane; ``utterances`` names
        them in errors), as one `PathBatch` whose utterance ``k`` is lane ``lanes[k]``: the
        paths' arcs and frames copied out of the rows in one gather."""
        status = np.asarray(status, np.int64)
        for k in np.flatnonzero(status & (NEG_CYCLE | CYCLE)):
            raise_graph_errors(int(status[k]), int(utterances[k]), int(died[k]))
        lanes = np.asarray(lanes, np.int64)
        n_paths = np.asarray(n_paths, np.int64)
        lane, row = np.nonzero(np.arange(self.rows) < n_paths[:, None])  # each path's row
        lane_ids = lanes[lane]
        lens = self.lens[lane_ids, row]
        taken = np.arange(self.cap) < lens[:, None]  # the paths' arcs, path by path
        return PathBatch(
            self.arcs[lane_ids, row][taken],
            self.frames[lane_ids, row][taken],
            np.concatenate(([0], np.cumsum(lens))),
            lane,
            self.costs[lane_ids, row],
            status & RESULT_BITS,
            np.asarray(died, np.int64),
            (tuple(notes),) * len(lanes),
        )  # fmt: skip


@njit(nogil=True, cache=True)
def finish_paths(alive, records, n_rec, T, final_cost, give_back, olabel, num_emitting, nbest,
                 out):  # fmt: skip
    """Write up to ``nbest`` paths of the survivors ``alive`` (`Survivors`), traced back through
    the first ``n_rec`` of ``records``, into ``out`` (`PathRows.lane`: arcs and frames of path
    ``p`` in ``arcs[p, :lens[p]]``); returns ``(number of paths, status bits)``. A survivor
    ranks by ``cost + (final_cost[state] + give_back[context state])`` (`reference.py`, step 6),
    ties by state, then context state.

    The buffers may have fewer rows than ``nbest`` (a huge ``nbest`` must not allocate for
    paths that do not exist): when they run out while paths remain, MORE_PATHS says so."""
    a_state, a_ctx, a_cost, a_store = alive
    st_prev, st_arc = records
    out_arcs, out_frames, out_len, out_cost = out
    a_n, n_st, n_emit = a_state.shape[0], n_rec, num_emitting
    status = 0
    total = np.empty(a_n, np.float32)
    any_final = False
    for i in range(a_n):
        total[i] = a_cost[i] + (final_cost[a_state[i]] + give_back[a_ctx[i]])
        if total[i] < _INF:
            any_final = True
    if not any_final:
        status |= NO_FINAL
        for i in range(a_n):
            total[i] = a_cost[i] + give_back[a_ctx[i]]
    used = np.zeros(a_n, np.bool_)
    n_paths = 0
    cap_out = out_arcs.shape[1]
    while n_paths < nbest:
        bi = -1
        for i in range(a_n):
            if used[i] or not total[i] < _INF:
                continue
            if (
                bi < 0
                or total[i] < total[bi]
                or (total[i] == total[bi] and a_state[i] < a_state[bi])
                or (total[i] == total[bi] and a_state[i] == a_state[bi] and a_ctx[i] < a_ctx[bi])
            ):
                bi = i
        if bi < 0:
            break
        if n_paths == out_arcs.shape[0]:
            return n_paths, status | MORE_PATHS
        used[bi] = True
        # length of the path
        k = a_store[bi]
        length = 0
        while st_arc[k] != -1:
            length += 1
            if length > n_st:
                return n_paths, status | CYCLE
            k = st_prev[k]
        if length > cap_out:
            return n_paths, status | OVERFLOW
        k = a_store[bi]
        fr = T
        pos = length
        while st_arc[k] != -1:
            pos -= 1
            a = st_arc[k]
            out_arcs[n_paths, pos] = a
            out_frames[n_paths, pos] = fr - 1
            if a < n_emit:
                fr -= 1
            k = st_prev[k]
        # duplicate word sequence?
        dup = False
        for p in range(n_paths):
            x = 0
            y = 0
            same = True
            while True:
                while x < out_len[p] and olabel[out_arcs[p, x]] == 0:
                    x += 1
                while y < length and olabel[out_arcs[n_paths, y]] == 0:
                    y += 1
                if x == out_len[p] or y == length:
                    same = x == out_len[p] and y == length
                    break
                if olabel[out_arcs[p, x]] != olabel[out_arcs[n_paths, y]]:
                    same = False
                    break
                x += 1
                y += 1
            if same:
                dup = True
                break
        if dup:
            continue
        out_len[n_paths] = length
        out_cost[n_paths] = total[bi]
        n_paths += 1
    return n_paths, status

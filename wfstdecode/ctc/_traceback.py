"""End of a search, shared by the CPU and CUDA backends: rank the surviving tokens, trace their
paths back through a backpointer store, drop duplicate word sequences (see `reference.py`, step 6).

The store is two int32 arrays indexed alike: ``st_arc[k]`` the arc that made record ``k`` (-1 for
the start), ``st_prev[k]`` the record it came from. ``a_store[i]`` is surviving token ``i``'s
record.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .status import CYCLE, MORE_PATHS, NO_FINAL, OVERFLOW

_INF = np.float32(np.inf)


def first_rows(nbest: int) -> int:
    """Output rows per utterance to try first: enough for any usual ``nbest``."""
    return min(nbest, 16)


def sliced_paths(n_paths, arcs, frames, lens, costs) -> list:
    """The first ``n_paths`` rows of `finish_paths` output as ``(arcs, frames, cost)`` copies."""
    return [
        (arcs[p, : lens[p]].copy(), frames[p, : lens[p]].copy(), float(costs[p]))
        for p in range(n_paths)
    ]


def grown(cap: int, rows: int, status: int, nbest: int) -> tuple[int, int]:
    """Path length and rows for a retry after OVERFLOW and/or MORE_PATHS."""
    return (4 * cap if status & OVERFLOW else cap), (
        min(nbest, 4 * rows) if status & MORE_PATHS else rows
    )


@njit(nogil=True, cache=True)
def finish_paths(
    a_state, a_cost, a_store, a_n, st_prev, st_arc, n_st, T, final_cost, olabel, n_emit, nbest,
    out_arcs, out_frames, out_len, out_cost,
):  # fmt: skip
    """Write up to ``nbest`` paths of the ``a_n`` survivors into ``out_*`` (arcs and frames of
    path ``p`` in ``out_arcs[p, :out_len[p]]``); returns ``(number of paths, status bits)``.

    The buffers may have fewer rows than ``nbest`` (a huge ``nbest`` must not allocate for
    paths that do not exist): when they run out while paths remain, MORE_PATHS says so."""
    status = 0
    total = np.empty(a_n, np.float32)
    any_final = False
    for i in range(a_n):
        total[i] = a_cost[i] + final_cost[a_state[i]]
        if total[i] < _INF:
            any_final = True
    if not any_final:
        status |= NO_FINAL
        for i in range(a_n):
            total[i] = a_cost[i]
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

"""The CPU backend: the reference semantics (see `reference.py`) in Numba, batch-parallel over
utterances (``prange``), with the GIL released.

Data layout, chosen so the CUDA backend can mirror it:

* per utterance (lane) the tokens of the frame being built are structure-of-arrays candidates
  ``c_state, c_cost (float32), c_arc, c_prev``; ``c_prev`` is a backpointer-store index for tokens
  reached by an emitting arc (or -1 for the start), a candidate index for tokens reached by an
  epsilon arc inside the frame;
* ``state_map[S]`` maps a state to its candidate (-1: none) — the per-state recombination slot
  (a hash table keyed by state on the GPU); recombination keeps the smallest ``(cost, arc)``;
* after pruning, survivors and their in-frame epsilon ancestors are appended to the backpointer
  store ``st_prev, st_arc`` (per frame, as the GPU copies each frame's backpointers to the host);
  traceback walks it at the end;
* max-active / min-active use an exact k-th smallest cost (``np.partition`` here; a radix select
  over order-preserving cost bits — a cost histogram per digit — on the GPU).
"""

from __future__ import annotations

import os
import threading
from concurrent import futures

import numba
import numpy as np
from numba import njit, prange

from ._traceback import finish_paths, first_rows, grown, sliced_paths
from .boost import boost_lookup
from .status import CANCELLED, DIED, NEG_CYCLE, RESULT_BITS, RETRY_BITS, raise_graph_errors
from .tuning import CpuTuning

_INF = np.float32(np.inf)


@njit(nogil=True, cache=True)
def _grow_i32(arr, needed):
    new = np.empty(max(2 * arr.shape[0], needed), np.int32)
    new[: arr.shape[0]] = arr
    return new


@njit(nogil=True, cache=True)
def _grow_f32(arr, needed):
    new = np.empty(max(2 * arr.shape[0], needed), np.float32)
    new[: arr.shape[0]] = arr
    return new


@njit(nogil=True, cache=True)
def _kth_smallest(costs, n, k):
    tmp = costs[:n].copy()
    return np.partition(tmp, k - 1)[k - 1]


@njit(nogil=True, cache=True)
def _decode_utt(
    ac, T, start, final_cost, e_off, ne_off, next_state, ilabel, olabel, arc_cost, n_emit,
    bkeys, bvals, boff, bmask, beam, max_active, min_active, nbest, state_map,
    out_arcs, out_frames, out_len, out_cost, cancel,
):  # fmt: skip
    """Decode one utterance; returns ``(number of paths, status bits, died frame)``. Checks
    ``cancel[0]`` once per frame and stops (CANCELLED) when another thread has set it."""
    cap = 256
    c_state = np.empty(cap, np.int32)
    c_cost = np.empty(cap, np.float32)
    c_arc = np.empty(cap, np.int32)
    c_prev = np.empty(cap, np.int32)
    st_cap = 1024
    st_prev = np.empty(st_cap, np.int32)
    st_arc = np.empty(st_cap, np.int32)
    n_st = 0
    a_state = np.empty(64, np.int32)
    a_cost = np.empty(64, np.float32)
    a_store = np.empty(64, np.int32)
    a_n = 0
    queue = np.empty(256, np.int32)
    nxt = np.empty(256, np.int32)
    queued = np.zeros(256, np.bool_)
    keep = np.zeros(256, np.bool_)
    new_idx = np.empty(256, np.int32)
    early = min_active <= 1
    status = 0

    # token frame 0: the start state
    n = 1
    c_state[0] = start
    c_cost[0] = np.float32(0.0)
    c_arc[0] = -1
    c_prev[0] = -1
    state_map[start] = 0
    best_emit = np.float32(0.0)

    for f in range(T + 1):
        if cancel[0] != 0:
            for j in range(n):
                state_map[c_state[j]] = -1
            return 0, status | CANCELLED, f
        if f > 0:
            # ---- emitting arcs of log-prob frame t = f - 1
            t = f - 1
            n = 0
            running = _INF
            i_best = 0
            for i in range(1, a_n):
                if a_cost[i] < a_cost[i_best]:
                    i_best = i
            if early and a_n > 8:
                # pre-pass: the exact best emitting cost, so that no candidate beyond
                # best + beam is ever created (results do not change; see reference.py)
                for i in range(a_n):
                    s = a_state[i]
                    cu = a_cost[i]
                    for a in range(e_off[s], e_off[s + 1]):
                        ca = arc_cost[a]
                        if olabel[a] != 0:
                            ca = ca - boost_lookup(bkeys, bvals, boff, bmask, olabel[a])
                        c = cu + (ac[t, ilabel[a] - 1] + ca)
                        if c < running:
                            running = c
            for ii in range(a_n):
                # the best token first: its arcs give a tight early cutoff (results do not change)
                i = i_best if ii == 0 else (ii - 1 if ii <= i_best else ii)
                s = a_state[i]
                cu = a_cost[i]
                si = a_store[i]
                for a in range(e_off[s], e_off[s + 1]):
                    ca = arc_cost[a]
                    if olabel[a] != 0:
                        ca = ca - boost_lookup(bkeys, bvals, boff, bmask, olabel[a])
                    c = cu + (ac[t, ilabel[a] - 1] + ca)
                    if not c < _INF:
                        continue
                    if early and c > running + beam:
                        continue  # beyond any cutoff this frame can have
                    if c < running:
                        running = c
                    d = next_state[a]
                    j = state_map[d]
                    if j < 0:
                        if n == cap:
                            cap = 2 * cap
                            c_state = _grow_i32(c_state, cap)
                            c_cost = _grow_f32(c_cost, cap)
                            c_arc = _grow_i32(c_arc, cap)
                            c_prev = _grow_i32(c_prev, cap)
                        j = n
                        n += 1
                        state_map[d] = j
                        c_state[j] = d
                    elif not (c < c_cost[j] or (c == c_cost[j] and a < c_arc[j])):
                        continue
                    c_cost[j] = c
                    c_arc[j] = a
                    c_prev[j] = si
            if n == 0:
                return 0, status | DIED, t
            best_emit = c_cost[0]
            for j in range(1, n):
                if c_cost[j] < best_emit:
                    best_emit = c_cost[j]

        # ---- epsilon closure below the closure cutoff
        limit = best_emit + beam
        if n >= max_active:  # ">=": C must not depend on the candidates dropped beyond the beam
            kth = _kth_smallest(c_cost, n, max_active)
            if kth < limit:
                limit = kth
        if min_active > 1:
            kth = _kth_smallest(c_cost, n, min(min_active, n))
            if kth > limit:
                limit = kth
        if queue.shape[0] < n:
            queue = np.empty(max(n, 2 * queue.shape[0]), np.int32)
        q_n = 0
        for j in range(n):
            if c_cost[j] <= limit:
                queue[q_n] = j
                q_n += 1
        if ne_off[-1] > ne_off[0] and q_n > 0:
            if queued.shape[0] < cap:
                queued = np.zeros(cap, np.bool_)
            for q in range(q_n):
                queued[queue[q]] = True
            rounds = 0
            while q_n > 0:
                rounds += 1
                if rounds > n + 2:
                    return 0, status | NEG_CYCLE, f
                nx_n = 0
                for q in range(q_n):
                    j = queue[q]
                    queued[j] = False
                    s = c_state[j]
                    for a in range(ne_off[s], ne_off[s + 1]):
                        ca = arc_cost[a]
                        if olabel[a] != 0:
                            ca = ca - boost_lookup(bkeys, bvals, boff, bmask, olabel[a])
                        c = c_cost[j] + ca
                        if not (c <= limit and c < _INF):
                            continue
                        d = next_state[a]
                        k = state_map[d]
                        if k < 0:
                            if n == cap:
                                cap = 2 * cap
                                c_state = _grow_i32(c_state, cap)
                                c_cost = _grow_f32(c_cost, cap)
                                c_arc = _grow_i32(c_arc, cap)
                                c_prev = _grow_i32(c_prev, cap)
                                if queued.shape[0] < cap:
                                    old_q = queued
                                    queued = np.zeros(cap, np.bool_)
                                    queued[: old_q.shape[0]] = old_q
                            k = n
                            n += 1
                            state_map[d] = k
                            c_state[k] = d
                        elif not (c < c_cost[k] or (c == c_cost[k] and a < c_arc[k])):
                            continue
                        c_cost[k] = c
                        c_arc[k] = a
                        c_prev[k] = j
                        if not queued[k]:
                            queued[k] = True
                            if nx_n == nxt.shape[0]:
                                nxt = _grow_i32(nxt, nx_n + 1)
                            nxt[nx_n] = k
                            nx_n += 1
                queue, nxt = nxt, queue
                q_n = nx_n

        # ---- pruning
        best = c_cost[0]
        for j in range(1, n):
            if c_cost[j] < best:
                best = c_cost[j]
        cutoff = best + beam
        n_in = 0
        for j in range(n):
            if c_cost[j] <= cutoff:
                n_in += 1
        if n_in > max_active:
            cutoff = _kth_smallest(c_cost, n, max_active)
        elif n_in < min_active:
            cutoff = _kth_smallest(c_cost, n, min(min_active, n))

        # ---- keep survivors and their in-frame epsilon ancestors; store backpointers
        if keep.shape[0] < n:
            keep = np.zeros(max(n, 2 * keep.shape[0]), np.bool_)
            new_idx = np.empty(keep.shape[0], np.int32)
        keep[:n] = False
        a_n = 0
        for j in range(n):
            if c_cost[j] <= cutoff:
                keep[j] = True
                a_n += 1
        for j in range(n):
            if c_cost[j] <= cutoff:
                k = j
                while c_arc[k] >= n_emit:
                    k = c_prev[k]
                    if keep[k]:
                        break
                    keep[k] = True
        m = 0
        for j in range(n):
            if keep[j]:
                new_idx[j] = n_st + m
                m += 1
        if n_st + m > st_cap:
            st_cap = max(2 * st_cap, n_st + m)
            st_prev = _grow_i32(st_prev, st_cap)
            st_arc = _grow_i32(st_arc, st_cap)
        if a_state.shape[0] < a_n:  # the previous frame's tokens are no longer needed
            a_cap = max(a_n, 2 * a_state.shape[0])
            a_state = np.empty(a_cap, np.int32)
            a_cost = np.empty(a_cap, np.float32)
            a_store = np.empty(a_cap, np.int32)
        i = 0
        for j in range(n):
            if keep[j]:
                idx = new_idx[j]
                st_arc[idx] = c_arc[j]
                st_prev[idx] = c_prev[j] if c_arc[j] < n_emit else new_idx[c_prev[j]]
                if c_cost[j] <= cutoff:
                    a_state[i] = c_state[j]
                    a_cost[i] = c_cost[j] - best  # relative to the frame's best (reference.py)
                    a_store[i] = idx
                    i += 1
        n_st += m
        for j in range(n):
            state_map[c_state[j]] = -1

    # ---- end: rank, trace back, drop duplicate word sequences
    n_paths, end_status = finish_paths(
        a_state, a_cost, a_store, a_n, st_prev, st_arc, n_st, T, final_cost, olabel, n_emit,
        nbest, out_arcs, out_frames, out_len, out_cost,
    )  # fmt: skip
    return n_paths, status | end_status, -1


@njit(nogil=True, cache=True)
def _decode_into(
    b, ac, lengths, start, final_cost, e_off, ne_off, next_state, ilabel, olabel, arc_cost, n_emit,
    bkeys, bvals, boff, bmask, beam, max_active, min_active, nbest, state_map,
    out_arcs, out_frames, out_len, out_cost, out_n, out_status, out_died, cancel,
):  # fmt: skip
    n, st, died = _decode_utt(
        ac[b], lengths[b], start, final_cost, e_off, ne_off, next_state, ilabel, olabel,
        arc_cost, n_emit, bkeys, bvals, boff[b], bmask[b], beam, max_active, min_active,
        nbest, state_map, out_arcs[b], out_frames[b], out_len[b], out_cost[b], cancel,
    )  # fmt: skip
    out_n[b] = n
    out_status[b] = st
    out_died[b] = died


@njit(parallel=True, nogil=True, cache=True)
def _decode_batch(
    ac, lengths, start, final_cost, e_off, ne_off, next_state, ilabel, olabel, arc_cost, n_emit,
    bkeys, bvals, boff, bmask, beam, max_active, min_active, nbest,
    out_arcs, out_frames, out_len, out_cost, out_n, out_status, out_died, n_chunks, cancel,
):  # fmt: skip
    num_states = final_cost.shape[0]
    B = lengths.shape[0]
    # one state map per chunk of utterances (each decode leaves it all -1 again); utterances are
    # dealt to chunks round-robin
    for c in prange(n_chunks):
        state_map = np.full(num_states, -1, np.int32)
        for b in range(c, B, n_chunks):
            _decode_into(
                b, ac, lengths, start, final_cost, e_off, ne_off, next_state, ilabel, olabel,
                arc_cost, n_emit, bkeys, bvals, boff, bmask, beam, max_active, min_active, nbest,
                state_map, out_arcs, out_frames, out_len, out_cost, out_n, out_status, out_died,
                cancel,
            )  # fmt: skip


def decode_cpu(problem, tuning: CpuTuning | None = None):
    """Run the batch; returns ``RawResult`` per utterance. Utterances whose paths did not fit
    the output buffers (too long, or more than its rows) run again with larger ones."""
    from ._problem import RawResult

    num_threads = (tuning or CpuTuning()).num_threads
    B = problem.batch_size
    nbest = problem.options.nbest
    results: list = [None] * B
    todo = np.arange(B)
    cap, rows = 2 * int(problem.lengths.max(initial=0)) + 16, first_rows(nbest)
    while len(todo):
        out = _run_interruptibly(problem, todo, cap, rows, num_threads)
        retry, again = [], 0
        for row, b in enumerate(todo):
            n, st, died = (int(x[row]) for x in (out["n"], out["status"], out["died"]))
            if st & RETRY_BITS:
                retry.append(b)
                again |= st
                continue
            raise_graph_errors(st, b, died)
            paths = sliced_paths(n, *(out[k][row] for k in ("arcs", "frames", "len", "cost")))
            results[b] = RawResult(paths, st & RESULT_BITS, died)
        todo = np.array(retry, dtype=np.int64)
        cap, rows = grown(cap, rows, again, nbest)
    return results


def _run_interruptibly(problem, rows_todo, cap, rows, num_threads):
    """`_run` on the worker thread while the main thread waits in short slices, so that Ctrl-C
    is seen within a fraction of a second (a Numba call cannot be interrupted): the search is
    told to stop at its next frame, waited for, and the KeyboardInterrupt goes on. Outside the
    main thread, which never receives KeyboardInterrupt, `_run` runs directly."""
    cancel = np.zeros(1, np.int32)
    if threading.current_thread() is not threading.main_thread():
        return _run(problem, rows_todo, cap, rows, num_threads, cancel)
    job = _worker().submit(_run, problem, rows_todo, cap, rows, num_threads, cancel)
    try:
        while True:
            try:
                return job.result(timeout=0.1)
            except futures.TimeoutError:
                continue
    except KeyboardInterrupt:
        cancel[0] = 1
        while not job.done():  # within a frame; a second Ctrl-C leaves it to finish alone
            futures.wait([job], timeout=0.1)
        raise


_WORKER: tuple[int, futures.ThreadPoolExecutor] | None = None


def _worker() -> futures.ThreadPoolExecutor:
    """The one long-lived thread that runs the main thread's searches. Not a new thread per
    call: Numba's OpenMP layer would build a new thread team for each (measured: 3.4 ms instead
    of 0.8 ms per small call at 2 threads). A forked child makes its own."""
    global _WORKER
    if _WORKER is None or _WORKER[0] != os.getpid():
        _WORKER = (os.getpid(), futures.ThreadPoolExecutor(1, "wfstdecode-ctc-cpu"))
    return _WORKER[1]


def _run(problem, rows_todo, cap, rows, num_threads, cancel):
    g = problem.graph
    bt = problem.boosts
    R = len(rows_todo)
    out = {
        "arcs": np.zeros((R, rows, cap), np.int32),
        "frames": np.zeros((R, rows, cap), np.int32),
        "len": np.zeros((R, rows), np.int64),
        "cost": np.zeros((R, rows), np.float32),
        "n": np.zeros(R, np.int64),
        "status": np.zeros(R, np.int64),
        "died": np.zeros(R, np.int64),
    }
    ac = problem.ac if problem.batch_size == R else problem.ac[rows_todo]
    old = numba.get_num_threads()
    if num_threads is not None:
        numba.set_num_threads(int(min(num_threads, numba.config.NUMBA_NUM_THREADS)))
    try:
        _decode_batch(
            ac, problem.lengths[rows_todo], np.int64(g.start), g.final_cost, g.e_offsets,
            g.ne_offsets, g.next_state, g.ilabel, g.olabel, problem.arc_cost,
            np.int64(g.num_emitting_arcs), bt.keys, bt.values, bt.offset[rows_todo],
            bt.mask[rows_todo], problem.beam, np.int64(problem.options.max_active),
            np.int64(problem.options.min_active), np.int64(problem.options.nbest), out["arcs"],
            out["frames"], out["len"], out["cost"], out["n"], out["status"], out["died"],
            np.int64(min(R, 4 * numba.get_num_threads())), cancel,
        )  # fmt: skip
    finally:
        if num_threads is not None:
            numba.set_num_threads(old)
    return out

"""The CPU backend: the reference semantics (`reference.py`) in Numba, batch-parallel over
utterances (``prange``), with the GIL released.

An utterance's search is `begin` (token frame 0), `advance` (any number of frames, as often as
needed: a stream's chunks) and `end` (step 6), over a `SearchState` that holds everything between
frames; `_decode_batch` runs each whole utterance as `search_from_start` (the first two in one
pass) and `end`. Each frame runs the steps of `cpu_steps.py` in `reference.py`'s order. Memory
follows the active tokens, not the length: the records are collected
(`cpu_steps.collect_records`) whenever they reach `CpuTuning.collect_records_at`.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange

from ..interrupts import on_worker, signals_deferred
from ._problem import FrameSurvivors, PathBatch
from ._traceback import PathRows, Records, Survivors, finish_paths
from .bundles import lane_boosts, limits, search_graph
from .cpu_steps import (
    CYCLING,
    NEEDS_ROOM,
    SharedPrefix,
    candidates,
    clear_state_map,
    closure_cutoff,
    closure_queue,
    collect_records,
    compact_records,
    count_within,
    doubled,
    epsilon_closure,
    expand,
    expand_room,
    keep_ancestors,
    prepend_prefix,
    prune_cutoff,
    smallest,
    start,
)
from .scratch import state_maps, take_next
from .status import CANCELLED, DIED, NEG_CYCLE, OVERFLOW, RETRY_BITS, STOPPED_BITS
from .tuning import CpuTuning, claim_parallel, numba_threads, parallel_region

# SearchState.counts: log-prob frames consumed, records used, the root record, prefix arcs and
# the frames they consume, the record count that triggers the next collection, status bits, and
# the frame the search stopped at (-1: it did not)
FRAMES, N_REC, ROOT, N_PREFIX, PREFIX_FRAMES, COLLECT_AT, STATUS, STOPPED = range(8)


class SearchState(NamedTuple):
    """One utterance between frames (a stream between chunks)."""

    alive: Survivors  # the last token frame's survivors
    records: Records
    prefix: SharedPrefix
    counts: np.ndarray  # int64 [8], indexed by FRAMES, N_REC, ...


class Outcome(NamedTuple):
    """Per lane of one `_run`: paths written, status bits, frame of death (or -1)."""

    n: np.ndarray
    status: np.ndarray
    died: np.ndarray


@njit(nogil=True, cache=True)
def _nothing_kept():
    return FrameSurvivors(np.empty(0, np.int32), np.empty(0, np.int32), np.empty(0, np.int64))


# why `_frames` returned: the frames are done, the search stopped, the buffers need room (before
# a frame, or within one: its closure goes on once they have it), the records are to collect,
# or the kept survivors need room for the frame just done
_DONE, _STOPPED, _ROOM, _ROOM_WITHIN, _COLLECT, _KEEP_ROOM = range(6)


@njit(nogil=True, cache=True, _nrt=False)
def _frames(ac, n_frames, t, alive, n_alive, cands, records, counts, graph, boosts, lane, lim,
            state_map, cancel, within, n, q_n, rounds, limit, building, kept, n_kept):  # fmt: skip
    """Token frames, one per row of ``ac`` from row ``t`` on, steps 2-5 each, until
    ``n_frames`` rows are done or something needs what only `_drive` does (growing a buffer,
    collecting the records). ``within``: first finish token frame ``building`` whose closure
    stopped for room (``n``, ``q_n``, ``rounds``, ``limit``: where it was). Compiled without
    Numba's runtime: no reference counts (`cpu_steps`' docstring says why), no allocation; the
    buffers grow in `_drive`. With ``kept`` (`FrameSurvivors` with room for ``n_frames`` ends)
    each frame's survivors are appended to it.
    Returns ``(why, t, n_alive, n, q_n, rounds, limit, room, building, n_kept)``."""
    keep = kept.ends.shape[0] > 0
    has_epsilon = graph.ne_offsets[-1] > graph.ne_offsets[0]
    cap = cands.state.shape[0]
    wide = False  # the last frame had fewer than min_active candidates within its beam
    while within or t < n_frames:
        if not within:
            building = counts[FRAMES] + 1
            if cancel[0] != 0:
                counts[STATUS] |= CANCELLED
                counts[STOPPED] = counts[FRAMES]
                return _STOPPED, t, n_alive, n, q_n, rounds, limit, 0, building, n_kept
            room = expand_room(alive, n_alive, graph, state_map, boosts, lane)
            if room > cap or records.prev.shape[0] - counts[N_REC] < cap:
                return _ROOM, t, n_alive, n, q_n, rounds, limit, room, building, n_kept
            bounded = not wide
            n = expand(ac[t], alive, n_alive, cands, state_map, graph, boosts, lane, lim.beam,
                       bounded)  # fmt: skip
            if n == 0:
                counts[STATUS] |= DIED
                counts[STOPPED] = counts[FRAMES]
                return _STOPPED, t, n_alive, n, q_n, rounds, limit, 0, building, n_kept
            best = smallest(cands.cost, n)
            if lim.min_active > 1:
                # fewer than min_active within the beam: the cutoffs reach past it, to the
                # candidates a bounded `expand` leaves out (with more, nothing beyond it can
                # survive or matter); the next frame expands unbounded at once, as such frames
                # come in runs (a second expansion per frame cost more than it saved)
                wide = count_within(cands.cost, n, best + lim.beam) < lim.min_active
                if wide and bounded:
                    clear_state_map(cands, n, state_map)
                    n = expand(ac[t], alive, n_alive, cands, state_map, graph, boosts, lane,
                               lim.beam, False)  # fmt: skip
            limit = closure_cutoff(cands.cost, n, best, lim, cands.scratch)
            q_n = closure_queue(cands, n, limit) if has_epsilon else np.int64(0)
            rounds = np.int64(0)
        within = False
        if q_n > 0:
            n, q_n, rounds, closed, room = epsilon_closure(
                cands, n, q_n, rounds, limit, state_map, graph, boosts, lane
            )
            if closed == NEEDS_ROOM:
                return _ROOM_WITHIN, t, n_alive, n, q_n, rounds, limit, room, building, n_kept
            if closed == CYCLING:
                clear_state_map(cands, n, state_map)
                counts[STATUS] |= NEG_CYCLE
                counts[STOPPED] = building
                return _STOPPED, t, n_alive, n, q_n, rounds, limit, 0, building, n_kept
        best, cutoff = prune_cutoff(cands.cost, n, lim, cands.scratch)
        n_alive = keep_ancestors(cands, n, cutoff, graph.num_emitting)
        counts[N_REC] = compact_records(cands, n, cutoff, best, alive, records, counts[N_REC],
                                        graph.num_emitting)  # fmt: skip
        clear_state_map(cands, n, state_map)
        counts[FRAMES] = building
        if building > 0:  # token frame 0 (`begin`) reads no log-probs
            t += 1
            if keep:
                if n_kept + n_alive > kept.state.shape[0]:
                    return _KEEP_ROOM, t, n_alive, n, q_n, rounds, limit, 0, building, n_kept
                n_kept = _keep(kept, n_kept, alive, n_alive, t)
        if counts[N_REC] >= counts[COLLECT_AT]:
            return _COLLECT, t, n_alive, n, q_n, rounds, limit, 0, building, n_kept
    return _DONE, t, n_alive, n, q_n, rounds, limit, 0, building, n_kept


@njit(nogil=True, cache=True)
def _drive(state, ac, n_frames, alive, n_alive, cands, graph, boosts, lane, lim, state_map,
           cancel, within, n, q_n, rounds, limit, building, kept):  # fmt: skip
    """`_frames` until done, growing the buffers and collecting the records between its calls
    (the only place they are rebound); ``alive``: the survivors in buffers with room. Returns
    ``(the new SearchState, kept, survivors kept, frames done)``."""
    counts = state.counts
    records, prefix = state.records, state.prefix
    t, n_kept = 0, 0
    while True:
        why, t, n_alive, n, q_n, rounds, limit, room, building, n_kept = _frames(
            ac, n_frames, t, alive, n_alive, cands, records, counts, graph, boosts, lane, lim,
            state_map, cancel, within, n, q_n, rounds, limit, building, kept, n_kept,
        )  # fmt: skip
        within = why == _ROOM_WITHIN
        if why == _ROOM or within:
            while cands.state.shape[0] < room:
                cands = doubled(cands, n if within else 0)
            cap = cands.state.shape[0]
            if alive.state.shape[0] < cap:
                alive = _with_room(alive, n_alive, cap)
            if records.prev.shape[0] - counts[N_REC] < cap:
                records = _records_with_room(records, counts[N_REC], counts[N_REC] + cap)
        elif why in (_COLLECT, _KEEP_ROOM):
            if why == _KEEP_ROOM:  # the frame is done: its survivors go in once there is room
                kept = _kept_with_room(kept, n_kept, n_kept + n_alive)
                n_kept = _keep(kept, n_kept, alive, n_alive, t)
            if counts[N_REC] >= counts[COLLECT_AT]:
                prefix = _collect(_first(alive, n_alive), records, prefix, counts, graph)
                if 2 * counts[N_REC] > counts[COLLECT_AT]:
                    counts[COLLECT_AT] *= 2
        else:
            return SearchState(_first(alive, n_alive), records, prefix, counts), kept, n_kept, t


@njit(inline="always", nogil=True, cache=True)
def _keep(kept, n_kept, alive, n_alive, t):
    """Append the ``n_alive`` survivors of log-prob frame ``t - 1`` to ``kept`` (it has room);
    returns the new count."""
    for i in range(n_alive):
        kept.state[n_kept + i] = alive.state[i]
        kept.ctx[n_kept + i] = alive.ctx[i]
    kept.ends[t - 1] = n_kept + n_alive
    return n_kept + n_alive


@njit(nogil=True, cache=True)
def _kept_with_room(kept, n_kept, need):
    size = max(2 * kept.state.shape[0], need)
    grown = FrameSurvivors(np.empty(size, np.int32), np.empty(size, np.int32), kept.ends)
    grown.state[:n_kept] = kept.state[:n_kept]
    grown.ctx[:n_kept] = kept.ctx[:n_kept]
    return grown


@njit(nogil=True, cache=True)
def _first(alive, n):
    """The first ``n`` survivors of ``alive`` (views)."""
    return Survivors(alive.state[:n], alive.ctx[:n], alive.cost[:n], alive.record[:n])


@njit(nogil=True, cache=True)
def _with_room(alive, n, cap):
    """``alive``'s first ``n`` survivors in buffers of ``cap``."""
    out = Survivors(np.empty(cap, np.int32), np.empty(cap, np.int32), np.empty(cap, np.float32),
                    np.empty(cap, np.int32))  # fmt: skip
    out.state[:n] = alive.state[:n]
    out.ctx[:n] = alive.ctx[:n]
    out.cost[:n] = alive.cost[:n]
    out.record[:n] = alive.record[:n]
    return out


@njit(nogil=True, cache=True)
def _records_with_room(records, n_rec, need):
    cap = max(2 * records.prev.shape[0], need)
    grown = Records(np.empty(cap, np.int32), np.empty(cap, np.int32))
    grown.prev[:n_rec] = records.prev[:n_rec]
    grown.arc[:n_rec] = records.arc[:n_rec]
    return grown


@njit(nogil=True, cache=True)
def _collect(alive, records, prefix, counts, graph):
    n_rec, root, prefix, n_prefix, prefix_frames = collect_records(
        alive, records, counts[N_REC], counts[ROOT], prefix, counts[N_PREFIX],
        counts[PREFIX_FRAMES], graph.num_emitting,
    )  # fmt: skip
    counts[N_REC], counts[ROOT] = n_rec, root
    counts[N_PREFIX], counts[PREFIX_FRAMES] = n_prefix, prefix_frames
    return prefix


@njit(nogil=True, cache=True)
def begin(graph, boosts, lane, lim, state_map, collect_at, room):
    """Token frame 0 of one utterance (lane): the start state, closed and pruned; the candidate
    buffers start with ``room`` (`CpuTuning.first_room`)."""
    no_frames = np.empty((0, 1), np.float32)
    return search_from_start(graph, boosts, lane, lim, state_map, collect_at, room, no_frames,
                             np.int64(0), np.zeros(1, np.int32))  # fmt: skip


@njit(nogil=True, cache=True)
def search_from_start(graph, boosts, lane, lim, state_map, collect_at, room, ac, n_frames,
                      cancel):  # fmt: skip
    """`begin` then `advance` over ``ac[:n_frames]``, in the same buffers: ~2 us less an
    utterance than the two apart (buffers made, and every tuple's arrays' counts updated, once)."""
    cands = candidates(room)
    n = np.int64(start(cands, state_map, graph))
    counts = np.zeros(8, np.int64)
    counts[COLLECT_AT] = collect_at
    counts[STOPPED] = -1
    empty = np.empty(0, np.int32)
    state = SearchState(
        Survivors(empty, empty, np.empty(0, np.float32), empty),
        Records(np.empty(1024, np.int32), np.empty(1024, np.int32)),
        SharedPrefix(empty, empty), counts,
    )  # fmt: skip
    limit = closure_cutoff(cands.cost, n, np.float32(0.0), lim, cands.scratch)
    q_n = np.int64(0)
    if graph.ne_offsets[-1] > graph.ne_offsets[0]:
        q_n = closure_queue(cands, n, limit)
    return _drive(state, ac, n_frames, _with_room(state.alive, 0, room), np.int64(0), cands,
                  graph, boosts, lane, lim, state_map, cancel, True, n, q_n, np.int64(0), limit,
                  np.int64(0), _nothing_kept())[0]  # fmt: skip


@njit(nogil=True, cache=True)
def advance(state, ac, n_frames, graph, boosts, lane, lim, state_map, cancel, room):
    """The next ``n_frames`` frames (search costs ``ac[:n_frames]``). Checks ``cancel[0]`` once
    per frame and stops (CANCELLED) when another thread has set it; a search that stopped
    (died, negative cycle, cancelled) stays stopped. The candidate buffers start with ``room``
    or twice the survivors, the more."""
    if state.counts[STATUS] & STOPPED_BITS or n_frames == 0:
        return state
    return _advance(state, ac, n_frames, graph, boosts, lane, lim, state_map, cancel, room,
                    _nothing_kept())[0]  # fmt: skip


@njit(nogil=True, cache=True)
def _advance(state, ac, n_frames, graph, boosts, lane, lim, state_map, cancel, room, kept):
    n_alive = state.alive.state.shape[0]
    cap = max(room, 2 * n_alive)
    return _drive(state, ac, n_frames, _with_room(state.alive, n_alive, cap), np.int64(n_alive),
                  candidates(cap), graph, boosts, lane, lim, state_map, cancel, False,
                  np.int64(0), np.int64(0), np.int64(0), np.float32(0.0), np.int64(0),
                  kept)  # fmt: skip


@njit(nogil=True, cache=True)
def advance_keeping(state, ac, n_frames, graph, boosts, lane, lim, state_map, cancel, room):
    """`advance`, keeping each token frame's survivors (for lattices): returns the state and
    the `FrameSurvivors`. Fewer frames are kept when the search stops."""
    if state.counts[STATUS] & STOPPED_BITS or n_frames == 0:
        return state, _nothing_kept()
    kept = FrameSurvivors(np.empty(1024, np.int32), np.empty(1024, np.int32),
                          np.empty(n_frames, np.int64))  # fmt: skip
    state, kept, n_kept, t = _advance(state, ac, n_frames, graph, boosts, lane, lim, state_map,
                                      cancel, room, kept)  # fmt: skip
    return state, FrameSurvivors(kept.state[:n_kept], kept.ctx[:n_kept], kept.ends[:t])


@njit(nogil=True, cache=True)
def search_keeping(b, row, ac, n_frames, graph, boosts, lim, rows, outcome, state_map, cancel,
                   collect_at, room):  # fmt: skip
    """Utterance (lane) ``b``'s whole search for its lattice into row ``row`` of ``rows`` and
    ``outcome`` (`_decode_lane`'s), keeping every token frame's survivors: what `begin`,
    `advance_keeping` and `end` do apart, in one call (each call's boxing of the search state
    and Python around it cost ~0.1 ms an utterance). Returns token frame 0's survivors (graph
    states, context states), whether the search stopped there, and the later frames'
    (`FrameSurvivors`)."""
    state = search_from_start(graph, boosts, b, lim, state_map, collect_at, room, ac,
                              np.int64(0), cancel)  # fmt: skip
    first_state, first_ctx = state.alive.state.copy(), state.alive.ctx.copy()
    stopped_at_start = (state.counts[STATUS] & STOPPED_BITS) != 0
    state, kept = advance_keeping(state, ac, n_frames, graph, boosts, b, lim, state_map, cancel,
                                  room)  # fmt: skip
    out = (rows[0][row], rows[1][row], rows[2][row], rows[3][row])
    n, status, died = end(state, graph, boosts, b, graph.final_cost, lim.nbest, out)
    outcome.n[row], outcome.status[row], outcome.died[row] = n, status, died
    return first_state, first_ctx, stopped_at_start, kept


@njit(nogil=True, cache=True)
def end(state, graph, boosts, lane, final_cost, nbest, out):
    """Step 6 into ``out`` (`PathRows.lane`): ``(number of paths, status bits, stopped frame)``.
    ``final_cost`` is the graph's, or zeros for a partial result (ranked on cost alone)."""
    counts = state.counts
    if counts[STATUS] & STOPPED_BITS:
        return 0, counts[STATUS], counts[STOPPED]
    alive, records = state.alive, state.records
    give_back = boosts.phi[boosts.node_offset[lane] :]
    n_paths, status = finish_paths(alive, records, counts[N_REC], counts[FRAMES], final_cost,
                                   give_back, graph.olabel, graph.num_emitting, nbest,
                                   out)  # fmt: skip
    if counts[N_PREFIX] > 0 and not status & OVERFLOW:
        status |= prepend_prefix(state.prefix, counts[N_PREFIX], n_paths, out)
    return n_paths, status, -1


@njit(nogil=True, cache=True)
def settled_prefix(state, graph):
    """Collect the records now (results do not change), so that the prefix every survivor
    shares — what no later frame can change — is in ``state.prefix``; returns the state."""
    prefix = _collect(state.alive, state.records, state.prefix, state.counts, graph)
    return SearchState(state.alive, state.records, prefix, state.counts)


@njit(parallel=True, nogil=True, cache=True)
def _decode_batch(ac, lengths, graph, boosts, lim, rows, outcome, n_workers, cancel, collect_at,
                  room, maps):  # fmt: skip
    """Every lane of the call; ``rows`` are `PathRows`' arrays, ``outcome`` an `Outcome`,
    ``maps`` (`scratch.state_maps`) a state map per thread."""
    B = lengths.shape[0]
    # unpacked outside the prange: writes through a named tuple's field inside a prange body are
    # lost (Numba issues #7135, #10338; still so in 0.68)
    out_n, out_status, out_died = outcome
    # each worker takes the next utterance, longest first, until none is left: a static split
    # leaves one thread idle while the other still has a few hard lines. A worker's searches
    # use its thread's state map (each decode leaves it all -1 again), or a map of its own
    # should the threading layer number its threads beyond the maps given
    order = np.argsort(-lengths, kind="mergesort")
    taken = np.zeros(1, np.int64)
    for _ in prange(n_workers):
        thread = numba.get_thread_id()
        own = thread >= maps.shape[0]
        state_map = np.full(maps.shape[1], -1, np.int32) if own else maps[thread]
        i = take_next(taken)
        while i < B:
            _decode_lane(order[i], ac, lengths, graph, boosts, lim, rows, out_n, out_status,
                         out_died, state_map, cancel, collect_at, room)  # fmt: skip
            i = take_next(taken)


@njit(nogil=True, cache=True)
def _decode_in_turn(ac, lengths, graph, boosts, lim, rows, outcome, cancel, collect_at, room,
                    maps):  # fmt: skip
    """`_decode_batch` on the calling thread alone: one thread needs no team, and a process
    forked from one that ran parallel regions may not start one (`tuning.claim_parallel`)."""
    out_n, out_status, out_died = outcome
    state_map = maps[0] if maps.shape[0] else np.full(maps.shape[1], -1, np.int32)
    for b in np.argsort(-lengths, kind="mergesort"):
        _decode_lane(b, ac, lengths, graph, boosts, lim, rows, out_n, out_status, out_died,
                     state_map, cancel, collect_at, room)  # fmt: skip


@njit(nogil=True, cache=True)
def _decode_lane(b, ac, lengths, graph, boosts, lim, rows, out_n, out_status, out_died,
                 state_map, cancel, collect_at, room):  # fmt: skip
    """Lane ``b``'s whole search into its rows and outcome."""
    out = (rows[0][b], rows[1][b], rows[2][b], rows[3][b])
    state = search_from_start(graph, boosts, b, lim, state_map, collect_at, room, ac[b],
                              lengths[b], cancel)  # fmt: skip
    n, status, died = end(state, graph, boosts, b, graph.final_cost, lim.nbest, out)
    out_n[b] = n
    out_status[b] = status
    out_died[b] = died


def decode_cpu(problem, tuning: CpuTuning | None = None) -> PathBatch:
    """Run the batch; returns every utterance's paths (`PathBatch`). Utterances whose paths
    did not fit the output buffers (too long, or more than its rows) run again with larger
    ones."""
    tuning = tuning or CpuTuning()
    return with_retries(problem, lambda lanes, rows: _run_interruptibly(problem, lanes, rows,
                                                                        tuning))  # fmt: skip


def with_retries(problem, run) -> PathBatch:
    """Every utterance's paths (`PathBatch`) from ``run(lanes, rows)``, which searches the
    utterances ``lanes`` into `PathRows` ``rows`` (lane ``i`` = utterance ``lanes[i]``) and
    returns their `Outcome`; utterances whose paths did not fit run again with larger rows."""
    nbest = problem.options.nbest
    made = []  # (utterances, their PathBatch) of each run
    lanes = np.arange(problem.batch_size)
    rows = PathRows.first(len(lanes), nbest, int(problem.lengths.max(initial=0)))
    while len(lanes):
        outcome = run(lanes, rows)
        retry = (outcome.status & RETRY_BITS) != 0
        done = np.flatnonzero(~retry)
        made.append((lanes[done], rows.results(done, outcome.n[done], outcome.status[done],
                                               lanes[done], outcome.died[done])))  # fmt: skip
        again = int(np.bitwise_or.reduce(outcome.status[retry], initial=0))
        lanes = lanes[retry]
        rows = rows.grown(len(lanes), again, nbest)
    return PathBatch.merged(made, problem.batch_size)


# a search of at most this many frames in all runs on the calling thread: a Ctrl-C during it is
# seen when it returns (milliseconds at usual settings), and handing it to the worker and back
# (~0.05-0.1 ms) would be a large part of a short call (one utterance at a time)
DIRECT_FRAMES = 256


def _run_interruptibly(problem, lanes, rows, tuning):
    """`_run` where a Ctrl-C cannot harm it (`interrupts`): a search of more than
    `DIRECT_FRAMES` frames on the worker thread while the main thread waits, so that Ctrl-C is
    seen within a fraction of a second (a Numba call cannot be interrupted): the search is told
    to stop at its next frame, waited for, and the KeyboardInterrupt goes on. A shorter one
    where it is called, signals deferred till it returns."""
    cancel = np.zeros(1, np.int32)
    if int(problem.lengths[lanes].sum()) > DIRECT_FRAMES:
        return on_worker(_run, problem, lanes, rows, callers_threads(tuning), cancel,
                         cancel=cancel)  # fmt: skip
    return signals_deferred(_run, problem, lanes, rows, tuning, cancel)


def callers_threads(tuning: CpuTuning) -> CpuTuning:
    """``tuning`` for a search the worker thread runs for the caller: Numba's thread count is
    per thread, so the caller's is written in (asked only where this process may start the
    threading layer: asking starts it)."""
    if tuning.num_threads is None and claim_parallel():
        return replace(tuning, num_threads=numba.get_num_threads())
    return tuning


def _run(problem, lanes, rows: PathRows, tuning: CpuTuning, cancel) -> Outcome:
    """Search the utterances ``lanes`` (lane ``i`` = utterance ``lanes[i]``) into ``rows``."""
    R = len(lanes)
    outcome = Outcome(np.zeros(R, np.int64), np.zeros(R, np.int64), np.zeros(R, np.int64))
    ac = problem.ac if problem.batch_size == R else problem.ac[lanes]
    with numba_threads(tuning.num_threads) as threads, state_maps(problem.graph, threads) as maps:
        paths = (rows.arcs, rows.frames, rows.lens, rows.costs)
        args = (ac, problem.lengths[lanes], search_graph(problem), lane_boosts(problem, lanes),
                limits(problem), paths, outcome)  # fmt: skip
        scratch = (np.int64(tuning.collect_records_at), np.int64(tuning.first_room), maps)
        with parallel_region() if min(R, threads) > 1 else nullcontext(False) as parallel:
            if parallel:
                _decode_batch(*args, np.int64(min(R, threads)), cancel, *scratch)
            else:
                _decode_in_turn(*args, cancel, *scratch)
    return outcome

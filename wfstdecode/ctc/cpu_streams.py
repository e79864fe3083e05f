"""The CPU backend's streaming interface (`stream.py`, `lattice.py`): `cpu.begin`, `cpu.advance`
and `cpu.end` per stream, a group of streams on a pool of threads, and the lattice search's
utterances (`CpuStreams.search_keeping`) each in one compiled call.
"""

from __future__ import annotations

import threading
import weakref
from concurrent import futures

import numba
import numpy as np

from ..interrupts import on_worker, signals_deferred
from ._problem import PathBatch
from ._traceback import PathRows
from .bundles import lane_boosts, limits, search_graph
from .cpu import (
    DIRECT_FRAMES,
    FRAMES,
    N_PREFIX,
    STATUS,
    Outcome,
    SearchState,
    advance,
    advance_keeping,
    begin,
    callers_threads,
    end,
    search_keeping,
    settled_prefix,
    with_retries,
)
from .cpu_steps import SharedPrefix
from .scratch import state_maps
from .status import RETRY_BITS, STOPPED_BITS
from .tuning import CpuTuning, claim_parallel

# calling thread -> {thread count: pool} of the objects made for one call (`run_interruptibly`):
# a pool of their own, new threads every call, made new state maps every call too (`scratch`:
# 33 MB and 1.2 ms a thread on an 8.2M-state graph). Per calling thread, so that calls made at
# once keep their own threads; a pool goes (its threads end) with the thread that used it.
_ONE_CALL_POOLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_ONE_CALL_POOLS_MADE = threading.Lock()


def _one_call_pool(threads: int) -> futures.ThreadPoolExecutor:
    with _ONE_CALL_POOLS_MADE:
        mine = _ONE_CALL_POOLS.setdefault(threading.current_thread(), {})
        pool = mine.get(threads)
        if pool is None:
            pool = mine[threads] = futures.ThreadPoolExecutor(threads, "wfstdecode-ctc-lattices")
        return pool


class CpuStreams:
    """The streaming interface (`stream.py`) over `begin`, `advance` and `end`: each stream is
    one lane with its own boost table; a group of streams advances on a pool of threads (the
    Numba functions release the GIL)."""

    def __init__(self, tuning: CpuTuning | None = None):
        self.tuning = tuning or CpuTuning()
        self._pool: futures.ThreadPoolExecutor | None = None
        self._pool_made = threading.Lock()
        # chunks are short: nothing to interrupt (but `run_interruptibly`'s whole utterances)
        self._cancel = np.zeros(1, np.int32)
        self._made: dict[int, tuple] = {}  # id(problem) -> its bundles, while it lives
        self._one_call = False  # made for one call: its pool is a shared one

    def _bundles(self, p) -> tuple:
        """``p``'s search graph, boosts and limits, made once per problem: a stream keeps its
        problem for life, and making them (~4 us) is a fifth of a short chunk's search."""
        made = self._made.get(id(p))
        if made is None:
            made = self._made[id(p)] = (search_graph(p), lane_boosts(p), limits(p))
            weakref.finalize(p, self._made.pop, id(p), None)
        return made

    def _no_final_costs(self, graph) -> np.ndarray:
        """Zero final costs for ``graph`` (partial results rank on cost alone), made once: a
        new array per call cost more than the decoding itself on a 934k-state graph."""
        cached = getattr(self, "_zeros", None)
        if cached is None or cached[0] is not graph:
            cached = self._zeros = (graph, np.zeros_like(graph.final_cost))
        return cached[1]

    def begin_all(self, problems) -> list[SearchState]:
        return [self.begin(p) for p in problems]

    def run_interruptibly(self, fn, frames: int):
        """``fn(cancel)`` where a Ctrl-C stops it soon, as `decode_cpu`'s searches: more than
        `DIRECT_FRAMES` frames in all run on the worker thread, and a Ctrl-C sets ``cancel[0]``,
        this object's flag, which stops its searches at their next frame (``fn`` may check it
        between its own calls). Only for an object made for the one call (`lattice_search`):
        a stream group's streams must stay whole."""
        self._one_call = True
        if frames <= DIRECT_FRAMES:
            return fn(self._cancel)
        self.tuning = callers_threads(self.tuning)
        return on_worker(fn, self._cancel, cancel=self._cancel)

    # Each call that returns a search state runs with signals deferred (`interrupts`: a Ctrl-C
    # inside Numba's boxing of the state crashed the process); one stream or utterance at a
    # time, so that a Ctrl-C during a long batch (a lattice decode) comes out after the
    # current one.
    def begin(self, p) -> SearchState:
        return signals_deferred(self._begin, p)

    def _begin(self, p) -> SearchState:
        graph, boosts, lim = self._bundles(p)
        with state_maps(p.graph) as maps:
            return begin(graph, boosts, 0, lim, maps[0], np.int64(self.tuning.collect_records_at),
                         np.int64(self.tuning.first_room))  # fmt: skip

    def _advance_one(self, job) -> SearchState:
        p, state, ac = job
        graph, boosts, lim = self._bundles(p)
        with state_maps(p.graph) as maps:
            return advance(state, ac, len(ac), graph, boosts, 0, lim, maps[0], self._cancel,
                           np.int64(self.tuning.first_room))  # fmt: skip

    def advance(self, jobs) -> list[SearchState]:
        return self.map(self._advance_one, jobs)

    def map(self, fn, jobs) -> list:
        """``[fn(job) for job in jobs]`` on this backend's threads (for functions that spend
        their time in Numba code that releases the GIL)."""
        # (asking for the count starts the threading layer.) In a forked child, in turn, as
        # `CpuTuning.num_threads` says: a pool the parent made has no threads here
        parallel = claim_parallel()
        threads = self.tuning.num_threads or numba.get_num_threads()
        if threads == 1 or len(jobs) == 1 or not parallel:
            return [signals_deferred(fn, job) for job in jobs]
        with self._pool_made:  # (threads calling at once make one pool)
            if self._pool is None and self._one_call:
                self._pool = _one_call_pool(threads)
            elif self._pool is None:
                self._pool = futures.ThreadPoolExecutor(threads, "wfstdecode-ctc-streams")
        # the submits and waits too: a handler raising inside the executor's Python-level locks
        # (a new thread's start, a Future's Condition.wait) can break them for good
        done = signals_deferred(lambda: [self._pool.submit(fn, job) for job in jobs])
        try:
            return [signals_deferred(job.result) for job in done]
        except BaseException:  # (a Ctrl-C, or a job's error): the jobs not started never run
            for job in done:
                job.cancel()
            raise

    def advance_keeping(self, jobs) -> list[tuple]:
        """`advance` each job, keeping every token frame's survivors: ``(state,
        FrameSurvivors)``, fewer frames when the search stopped."""
        return self.map(self._advance_keeping_one, jobs)

    def _advance_keeping_one(self, job):
        p, state, ac = job
        graph, boosts, lim = self._bundles(p)
        with state_maps(p.graph) as maps:
            return advance_keeping(state, ac, len(ac), graph, boosts, 0, lim, maps[0],
                                   self._cancel, np.int64(self.tuning.first_room))  # fmt: skip

    def search_keeping(self, problem) -> tuple[PathBatch, list, list]:
        """Every utterance of ``problem`` searched whole, keeping each token frame's survivors
        for its lattice, on this object's threads: per utterance what `begin`, `survivors`,
        `advance_keeping` and `end` give (`lattice._search_keeping` composes those for other
        backends), each utterance in one compiled call (`cpu.search_keeping`). Returns the
        paths (`PathBatch`), token frame 0's survivors (None where the search stopped there)
        and the later frames' `FrameSurvivors`, per utterance. Utterances whose paths did not
        fit run again with larger buffers, as in `decode_cpu`."""
        graph, boosts, lim = self._bundles(problem)
        scratch = (self._cancel, np.int64(self.tuning.collect_records_at),
                   np.int64(self.tuning.first_room))  # fmt: skip
        firsts, kept = [None] * problem.batch_size, [None] * problem.batch_size

        def run(lanes, rows):
            outcome = Outcome(*(np.zeros(len(lanes), np.int64) for _ in range(3)))
            paths = (rows.arcs, rows.frames, rows.lens, rows.costs)

            def search(row):
                b = int(lanes[row])
                with state_maps(problem.graph) as maps:
                    first_state, first_ctx, stopped, kept[b] = search_keeping(
                        np.int64(b), np.int64(row), problem.ac[b], problem.lengths[b], graph,
                        boosts, lim, paths, outcome, maps[0], *scratch,
                    )  # fmt: skip
                firsts[b] = None if stopped else (first_state, first_ctx)

            self.map(search, range(len(lanes)))
            return outcome

        return with_retries(problem, run), firsts, kept

    def end(self, p, state, utterance: int = 0):
        """Step 6 for one stream, with the same output retry as `decode_cpu` (``utterance``:
        its index in the errors it raises)."""
        g, nbest = p.graph, p.options.nbest
        graph, boosts, _ = self._bundles(p)
        rows = PathRows.first(1, nbest, int(state.counts[FRAMES]))
        while True:
            n, status, died = end(state, graph, boosts, 0, g.final_cost, np.int64(nbest),
                                  rows.lane(0))  # fmt: skip
            if not status & RETRY_BITS:
                return rows.result(0, n, status, utterance, died)
            rows = rows.grown(1, status, nbest)

    def survivors(self, state):
        """The last token frame's surviving tokens as ``(graph states, context states)``, or
        None once the search stopped."""
        if state.counts[STATUS] & STOPPED_BITS:
            return None
        return state.alive.state.copy(), state.alive.ctx.copy()

    def partial(self, p, state, since: int = 0):
        """The best path on cost alone, ``(state, arcs, frames, stable arcs)``: the records are
        collected first (hence a new state to keep), so the stable arcs are the prefix every
        survivor shares. Arcs and frames start at arc ``since``, a number of stable arcs an
        earlier call returned (the caller has those: an endpoint check then costs the arcs
        since, not the whole path). Arcs, frames and stable arcs are None when the search
        stopped."""
        if state.counts[STATUS] & STOPPED_BITS:
            return state, None, None, None
        graph, boosts, _ = self._bundles(p)
        state = signals_deferred(settled_prefix, state, graph)
        no_final = self._no_final_costs(p.graph)
        counts = state.counts
        if since > counts[N_PREFIX]:  # (the prefix only grows: an earlier call's is no longer)
            raise ValueError(f"partial: since={since} is beyond the {counts[N_PREFIX]} stable arcs")
        if since:  # the prefix from arc ``since`` on, and the frames after its arc ``since``
            counts = counts.copy()
            counts[N_PREFIX] -= since
            shown = SharedPrefix(state.prefix.arc[since:], state.prefix.frame[since:])
            shown_state = SearchState(state.alive, state.records, shown, counts)
        else:
            shown_state = state
        shown_frames = int(counts[FRAMES]) - (int(state.prefix.frame[since - 1]) if since else 0)
        rows = PathRows.first(1, 1, shown_frames)
        while True:
            _, status, _ = end(shown_state, graph, boosts, 0, no_final, np.int64(1), rows.lane(0))
            if not status & RETRY_BITS:
                break
            rows = rows.grown(1, status, 1)
        length = int(rows.lens[0, 0])
        arcs, frames = rows.arcs[0, 0, :length].copy(), rows.frames[0, 0, :length].copy()
        return state, arcs, frames, int(state.counts[N_PREFIX])

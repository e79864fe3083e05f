"""Streaming on the cuda backend (`stream.py`'s ``begin`` / ``advance`` / ``partial`` / ``end``):
the streams of one `advance` group are the lanes of one batched search on the GPU (Kaldi's
cudadecoder loads channels into lanes the same way), each lane going on from its stream's last
survivors; between calls a stream lives on the host, as the cpu backend keeps it.

One call (`CudaStreams.advance`):

1. the group's chunks (search costs, padded to the longest) and boost tables make one
   `SearchProblem`; `driver.run_search` allocates the lanes, and `_put_back` writes each stream's
   survivors, beam and overflow counts into its lane (`kernels.restore_survivors_kernel`) with
   ``lanes.resumed`` set: the lane's frame 0 puts the survivors into its table
   (`steps.restore`) instead of starting, so frame 1 is the stream's next frame, computed as
   the whole-utterance search computes it. Their records are passed as ``-2 - r`` (``r``: the
   record in the stream's store), which the kernels and `records.JoinedRecords` carry along.
2. after the last frame, each lane's survivors are gathered (`finish.lane_ends`), and
   `_append_reachable` moves the records they trace back through — only those: the rest of the
   call's records are dropped at once — into the stream's store, decoding ``-2 - r``.
3. the stream's state is a cpu `SearchState` (survivors, records, shared prefix, counts), with
   the lane's beam and overflow counts beside it, so `partial` and `end` are the cpu backend's
   host traceback (`cpu_streams.CpuStreams`), and memory follows the active tokens as there (the
   records are collected whenever they double).

``begin`` runs frame 0 (the start state, closed and pruned) as a call with no frames. A stream's
final result equals `decode_ctc` on its whole input, bit for bit, including a beam tightened
on a crowded token table (carried from chunk to chunk), with two exceptions the notes report in
both: a table that was full (which candidates it drops depends on the order the GPU threads run
in, in any search), and a crowded table in a group whose phrase automata make the tables
larger or smaller than the whole-utterance batch's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np
from numba import njit

from .. import bundles
from .._problem import FrameSurvivors
from .._traceback import Records, Survivors
from ..boost import join_lanes
from ..cpu import (
    COLLECT_AT,
    FRAMES,
    N_REC,
    ROOT,
    STATUS,
    STOPPED,
    SearchState,
    _collect,
)
from ..cpu_steps import SharedPrefix
from ..cpu_streams import CpuStreams
from ..status import STOPPED_BITS
from ..tuning import CpuTuning, CudaTuning
from .driver import run_search
from .finish import input_token_frame, lane_ends, overflow_notes
from .layout import grid_rows


class CudaStreamState(NamedTuple):
    """A stream between chunks: its search as the cpu backend keeps one, and its lane's beam
    (the one in force, the lowest it went) and overflow counts (frames, first frame or -1)."""

    search: SearchState
    beam: np.ndarray  # float32 [2]
    overflow: np.ndarray  # int64 [2]


class CudaStreams:
    """The streaming interface of `stream.py` on the GPU (see the module docstring)."""

    def __init__(self, tuning: CudaTuning | None = None):
        self.tuning = tuning or CudaTuning()
        self._host = CpuStreams(CpuTuning(num_threads=1))  # host traceback only

    def begin(self, p) -> CudaStreamState:
        return self.begin_all([p])[0]

    def begin_all(self, problems) -> list[CudaStreamState]:
        """Frame 0 of each stream (one utterance's problem each), in one call."""
        no_frames = np.zeros((0, problems[0].ac.shape[2]), np.float32)
        return [state for state, _ in self._run([(p, None, no_frames) for p in problems])]

    def advance(self, jobs) -> list[CudaStreamState]:
        """``jobs``: ``(problem, state, search costs of the chunk)``; empty chunks and stopped
        searches keep their state."""
        return [state for state, _ in self._advance(jobs, keep=False)]

    def advance_keeping(self, jobs) -> list[tuple]:
        """`advance`, keeping every token frame's survivors (for lattices): ``(state,
        FrameSurvivors)``, fewer frames when the search stopped. The survivors
        reach the host with the records (`buffers.Records`), in the same call."""
        return self._advance(jobs, keep=True)

    def survivors(self, state):
        """The last token frame's survivors, or None once the search stopped."""
        return self._host.survivors(state.search)

    def map(self, fn, jobs) -> list:
        """``[fn(job) for job in jobs]`` (host work: the lanes ran on the GPU)."""
        return [fn(job) for job in jobs]

    def _advance(self, jobs, keep: bool) -> list[tuple]:
        out = [(state, FrameSurvivors.of_frames([])) for _, state, _ in jobs]
        moving = [i for i, (_, state, ac) in enumerate(jobs)
                  if len(ac) and not state.search.counts[STATUS] & STOPPED_BITS]  # fmt: skip
        if moving:
            ran = self._run([jobs[i] for i in moving], keep)
            for i, (state, kept) in zip(moving, ran, strict=True):
                out[i] = (state, kept)
        return out

    def partial(self, p, state, since: int = 0):
        search, arcs, frames, stable = self._host.partial(p, state.search, since)
        return state._replace(search=search), arcs, frames, stable

    def end(self, p, state, utterance: int = 0):
        raw = self._host.end(p, state.search, utterance)
        notes = overflow_notes(int(state.overflow[0]),
                               input_token_frame(p, 0, int(state.overflow[1])),
                               float(state.beam[1]))  # fmt: skip
        return replace(raw, notes=raw.notes + notes)

    # ----- one batched call -------------------------------------------------------------------
    def _run(self, jobs, keep: bool = False) -> list[tuple]:
        """One call over the jobs' lanes: ``(state, kept survivors per frame)`` per job (the
        list is empty unless ``keep``)."""
        first = jobs[0][0]
        lengths = np.array([len(ac) for _, _, ac in jobs], np.int64)
        ac = np.zeros((len(jobs), int(lengths.max()), jobs[0][2].shape[1]), np.float32)
        for b, (_, _, chunk) in enumerate(jobs):
            ac[b, : len(chunk)] = chunk
        problem = replace(
            first, ac=ac, lengths=lengths, log_probs=None, device_lp=None, device_frame_max=None,
            boosts=join_lanes([p.boosts for p, _, _ in jobs]),
        )  # fmt: skip
        saved = [state for _, state, _ in jobs]

        def put_back(d, stream):
            _put_back(d, saved, problem.graph.e_offsets, problem.beam, stream)

        d, copier, _ = run_search(problem, self.tuning, put_back, keep_survivors=keep)
        states = self._take_out(problem, d, copier.joined, saved)  # copies what it needs
        copier.joined.give_back()
        if not keep:
            return [(state, []) for state in states]
        kept = copier.kept.frames  # token frames 1.. of each lane; none past a stop
        return [(state, FrameSurvivors.of_frames([kept[b][f]
                                                  for f in range(1, int(problem.lengths[b]) + 1)
                                                  if f in kept[b]]))
                for b, state in enumerate(states)]  # fmt: skip

    def _take_out(self, problem, d, joined, saved) -> list[CudaStreamState]:
        """Each lane's survivors and the records they trace back through, into its stream."""
        e = lane_ends(d)
        new_index = np.full(max(joined.n, 1), -1, np.int64)  # shared: each record is one lane's
        graph = bundles.search_graph(problem)
        out = []
        for b, old in enumerate(saved):
            search = _fresh_search(self.tuning.collect_records_at) if old is None else old.search
            counts = search.counts.copy()
            done, length = int(counts[FRAMES]), int(problem.lengths[b])
            if e.status[b] & STOPPED_BITS:
                counts[STATUS] |= int(e.status[b]) & STOPPED_BITS
                counts[STOPPED] = done + int(e.died[b])
                search = search._replace(counts=counts)
            else:
                alive = e.survivors(b)
                ends = alive.record.astype(np.int64) + joined.frame_base[length]
                records, n_rec, root, alive_records = _append_reachable(
                    joined.prev, joined.arc, ends, search.records, counts[N_REC], new_index
                )
                counts[N_REC], counts[FRAMES] = n_rec, done + length
                if root >= 0:  # frame 0's start record
                    counts[ROOT] = root
                alive = alive._replace(record=alive_records)
                prefix = search.prefix
                if n_rec >= counts[COLLECT_AT]:  # as the cpu backend's `_drive`
                    prefix = _collect(alive, records, prefix, counts, graph)
                    if 2 * counts[N_REC] > counts[COLLECT_AT]:
                        counts[COLLECT_AT] *= 2
                search = SearchState(alive, records, prefix, counts)
            # first_overflow: the kernels write the lane's frame when its count was 0
            first = int(e.first_overflow[b])
            if old is not None and old.overflow[0]:
                first = int(old.overflow[1])
            elif e.overflow_frames[b]:
                first += done
            out.append(CudaStreamState(
                search, np.array([e.beam[b], e.min_beam[b]], np.float32),
                np.array([e.overflow_frames[b], first], np.int64),
            ))  # fmt: skip
        return out


def _fresh_search(collect_at: int) -> SearchState:
    """A stream before frame 0: no survivors, no records."""
    counts = np.zeros(8, np.int64)
    counts[COLLECT_AT], counts[STOPPED] = collect_at, -1
    empty = np.empty(0, np.int32)
    return SearchState(
        Survivors(empty, empty, np.empty(0, np.float32), empty),
        Records(np.empty(1024, np.int32), np.empty(1024, np.int32)),
        SharedPrefix(empty, empty), counts,
    )  # fmt: skip


def _put_back(d, saved, e_offsets, beam, stream) -> None:
    """Each resumed stream's survivors (records encoded ``-2 - r``), the prefix sum of their
    emitting out-degrees, its beam and overflow counts into its lane, ``lanes.resumed`` set;
    lanes of new streams start at frame 0 as a whole-utterance search does."""
    from numba import cuda

    from . import kernels as K
    from .target import SIM

    if all(s is None for s in saved):
        return
    B, H = len(saved), int(d.tables.size)
    empty = Survivors(*(np.empty(0, dt) for dt in (np.int32, np.int32, np.float32, np.int32)))
    alive = [empty if s is None else s.search.alive for s in saved]
    counts = np.array([len(a.state) for a in alive], np.int64)
    if counts.max() > H:  # survivors fit the table they were pruned in, of the same size
        raise AssertionError(f"{int(counts.max())} survivors for a table of {H} slots")
    offsets = np.concatenate(([0], np.cumsum(counts)))
    scan = np.concatenate([np.concatenate(([0], np.cumsum(e_offsets[a.state + 1]
                                                          - e_offsets[a.state])))
                           for a in alive])  # fmt: skip
    packed = (
        np.concatenate([a.state for a in alive]), np.concatenate([a.ctx for a in alive]),
        np.concatenate([a.cost for a in alive]),
        (-2 - np.concatenate([a.record for a in alive]).astype(np.int64)).astype(np.int32),
    )  # fmt: skip

    def put(x):
        return cuda.to_device(np.ascontiguousarray(x), stream=stream)

    threads = 8 if SIM else 256
    blocks = 1 if SIM else max(1, min(64, int(counts.max()) // threads + 1))
    K.restore_survivors_kernel[(blocks, grid_rows(B)), threads, stream](
        d.survivors, put(counts.astype(np.int32)), put(offsets), tuple(put(x) for x in packed),
        put(scan.astype(np.int32)), np.int32(H),
    )  # fmt: skip
    lanes = d.lanes

    def per_lane(saved_value, fresh, dtype):
        return np.array([fresh if s is None else saved_value(s) for s in saved], dtype)

    for device, values in (
        (lanes.resumed, np.array([s is not None for s in saved], np.int32)),
        (lanes.beam, per_lane(lambda s: s.beam[0], beam, np.float32)),
        (lanes.min_beam, per_lane(lambda s: s.beam[1], beam, np.float32)),
        (lanes.overflow_frames, per_lane(lambda s: s.overflow[0], 0, np.int32)),
        (lanes.first_overflow, per_lane(lambda s: s.overflow[1], -1, np.int32)),
    ):
        device.copy_to_device(values, stream=stream)


@njit(nogil=True, cache=True)
def _append_reachable(call_prev, call_arc, ends, records, n_rec, new_index):
    """The call's records that lane's survivors (records ``ends``) trace back through, appended
    to the stream's store ``records`` (``n_rec`` used; grown by doubling): ``prev`` made the
    store's (``-2 - r`` is the store's record ``r``, -1 the start). ``new_index`` (-1 where not
    yet placed) maps the call's records to the store's. Returns ``(records, n_rec, the start
    record's new index or -1, the survivors' records)``."""
    order = np.empty(16, np.int64)
    m = 0
    for i in range(ends.shape[0]):
        k = ends[i]
        while k >= 0 and new_index[k] == -1:
            new_index[k] = n_rec + m
            if m == order.shape[0]:
                bigger = np.empty(2 * m, np.int64)
                bigger[:m] = order
                order = bigger
            order[m] = k
            m += 1
            k = call_prev[k]
    prev, arc = records.prev, records.arc
    if n_rec + m > prev.shape[0]:
        size = max(2 * prev.shape[0], n_rec + m)
        grown_prev, grown_arc = np.empty(size, np.int32), np.empty(size, np.int32)
        grown_prev[:n_rec], grown_arc[:n_rec] = prev[:n_rec], arc[:n_rec]
        prev, arc = grown_prev, grown_arc
    root = -1
    for j in range(m):
        k = order[j]
        parent = call_prev[k]
        if parent >= 0:
            prev[n_rec + j] = new_index[parent]
        elif parent == -1:
            prev[n_rec + j] = -1
            root = n_rec + j
        else:
            prev[n_rec + j] = -2 - parent
        arc[n_rec + j] = call_arc[k]
    alive_records = np.empty(ends.shape[0], np.int32)
    for i in range(ends.shape[0]):
        alive_records[i] = new_index[ends[i]]
    return Records(prev, arc), n_rec + m, root, alive_records

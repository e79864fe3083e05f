"""The backpointer records' way to the host: `PinnedDoubleBuffer`, what a batched search wrote on
the device copied to pinned host memory on a copy stream, alternating between two slots so that
the copy of step *n* overlaps the compute of step *n + 1*; `RecordCopier`, the cuda search's use
of it (one chunk of frames per step), which joins each chunk's records into global backpointers
(`JoinedRecords`) as it arrives; and the pinned buffers kept between calls. It works on
Numba device arrays and streams, so it runs under Numba's CUDA simulator too; torch / CuPy memory
is reached through ``numba.cuda.as_cuda_array`` and ``numba.cuda.external_stream``.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import njit

from ...buffers import grown
from .layout import INFO_FIRST, INFO_FRAMES, INFO_STARTS

_KEPT: list = []  # (CUDA context, PinnedDoubleBuffer) not in use, for the next call
_KEPT_LOCK = threading.Lock()
# (arc, prev) host arrays of a finished search's `JoinedRecords`, for the next search: fresh
# memory of that size costs a page fault per 4 KB on first write (on the 2-core dev machine, 16
# M records joined in 101-114 ms into new arrays, 36-44 ms into used ones)
_JOINED_KEPT: list = []


class PinnedDoubleBuffer:
    """Device → host copies through two alternating slots of pinned host memory.

    The protocol of one step ``n`` in slot ``n % 2`` (compute on ``stream``, copies on this
    object's own copy stream):

    1. ``stream_wait_copied(slot, stream)`` before the kernels that overwrite the device arrays
       copied out of ``slot`` two steps ago: the stream waits for that copy, the host does not.
    2. ``record_produced(slot, stream)`` after the kernels that wrote this step's arrays.
    3. ``host_wait_produced(slot)`` when the host must read something the step wrote to mapped
       memory (its sizes), then ``put(slot, arrays)`` enqueues the copies of the device arrays
       (views) behind the compute. The host must have taken the slot's previous contents
       (`take`).
    4. ``take(slot)``: waits for that slot's copies only and returns host copies of them.

    The pinned buffers of each field grow by doubling and are reused across steps, and across
    searches after `reset` (pinned allocations are slow: milliseconds per hundred MB). ``timed``
    records CUDA events around each copy; `copy_ms` sums them.
    """

    def __init__(self, dtypes, timed: bool = False):
        from numba import cuda

        self.dtypes = [np.dtype(dt) for dt in dtypes]
        self.stream = cuda.stream()
        self.computed = [cuda.event(), cuda.event()]
        self.copied = [cuda.event(), cuda.event()]
        self._pinned: list[list] = [[None] * len(self.dtypes) for _ in range(2)]
        self._sizes: list[list[int] | None] = [None, None]  # what each slot holds, until taken
        self._timed = timed
        self._copy_events: list = []
        self._event = cuda.event

    def reset(self, timed: bool = False) -> None:
        """Start over, keeping the pinned memory, the stream and the events: copies in flight
        finish, contents not taken are dropped, copy timings are cleared."""
        self.stream.synchronize()
        self._sizes = [None, None]
        self._timed = timed
        self._copy_events = []

    def stream_wait_copied(self, slot: int, stream) -> None:
        self.copied[slot].wait(stream)

    def record_produced(self, slot: int, stream) -> None:
        self.computed[slot].record(stream)

    def host_wait_produced(self, slot: int) -> None:
        self.computed[slot].synchronize()

    def put(self, slot: int, arrays) -> None:
        from numba import cuda

        if self._sizes[slot] is not None:
            raise RuntimeError(f"PinnedDoubleBuffer slot {slot} was put twice without a take")
        if len(arrays) != len(self.dtypes):
            raise ValueError(
                f"PinnedDoubleBuffer copies {len(self.dtypes)} arrays; got {len(arrays)}"
            )
        for k, (src, dtype) in enumerate(zip(arrays, self.dtypes, strict=True)):
            if src.dtype != dtype or src.ndim != 1:
                raise ValueError(
                    f"PinnedDoubleBuffer field {k} holds 1-d {dtype}; got {src.ndim}-d {src.dtype}"
                )
        self.computed[slot].wait(self.stream)
        before = self._mark()
        sizes = []
        for k, src in enumerate(arrays):
            n = src.shape[0]
            host = self._pinned[slot][k]
            if host is None or host.shape[0] < n:
                size = grown(1024 if host is None else host.shape[0], n)
                host = self._pinned[slot][k] = cuda.pinned_array(size, self.dtypes[k])
            if n:
                src.copy_to_host(host[:n], self.stream)
            sizes.append(n)
        if before is not None:
            self._copy_events.append((before, self._mark()))
        self.copied[slot].record(self.stream)
        self._sizes[slot] = sizes

    def take(self, slot: int, copy: bool = True) -> list[np.ndarray]:
        """The slot's arrays, once copied; ``copy=False`` returns views of the pinned memory,
        to be read before the slot is `put` again."""
        sizes = self._sizes[slot]
        if sizes is None:
            raise RuntimeError(f"PinnedDoubleBuffer slot {slot} holds nothing to take")
        self.copied[slot].synchronize()
        self._sizes[slot] = None
        return [
            np.empty(0, dt) if host is None else host[:n].copy() if copy else host[:n]
            for host, n, dt in zip(self._pinned[slot], sizes, self.dtypes, strict=True)
        ]

    def holds(self, slot: int) -> bool:
        """Whether ``slot`` has copies not yet taken."""
        return self._sizes[slot] is not None

    def copy_ms(self) -> float:
        return sum(a.elapsed_time(b) for a, b in self._copy_events)

    def _mark(self):
        if not self._timed:
            return None
        event = self._event()
        event.record(self.stream)
        return event


class RecordCopier:
    """Chunk ``c``'s records go to slot ``c % 2`` of a `PinnedDoubleBuffer` once its kernels are
    done; the host moves them out of the slot into `JoinedRecords` (global backpointers) before
    that slot takes chunk ``c + 2``, so the joining overlaps the device's next chunk. ``d`` is
    the search's `buffers.SearchBuffers`, ``n_emit`` the graph's emitting arcs, ``T`` the
    longest utterance's frames."""

    def __init__(self, d, pinned: PinnedDoubleBuffer, n_emit: int, T: int):
        from .target import SIM

        self.records, self.info, self.sim, self.pinned = d.records, d.control.info, SIM, pinned
        self.pending: list = [None, None]  # (chunk, first frame, frame starts) in each slot
        self.joined = JoinedRecords(n_emit, T)
        # lattices: each frame's survivors, which the records then carry (`buffers.Records`)
        self.kept = KeptSurvivors(len(d.lanes.length)) if int(d.records.keep) else None
        self.collected = 0
        self.moved = 0  # chunks joined
        self.ran = 0  # chunks that ran at least one frame step

    def collect(self, c: int) -> int:
        """Start copying chunk ``c``'s records (chunks in order); the frames it ran."""
        i = c % 2
        self.pinned.host_wait_produced(i)
        info = self.info.copy_to_host()[i] if self.sim else np.array(self.info)[i]
        n, first, used = int(info[INFO_FRAMES]), int(info[INFO_FIRST]), int(info[-1])
        starts = info[INFO_STARTS : INFO_STARTS + n].astype(np.int64)
        self._move_out(i)
        lo = i * int(self.records.capacity)
        r = self.records
        fields = (r.arc, r.prev) if self.kept is None else (r.arc, r.prev, r.lane, r.state, r.ctx)
        self.pinned.put(i, tuple(x[lo : lo + used] for x in fields))
        self.pending[i] = (c, first, starts)
        self.collected += 1
        self.ran += n > 0
        return n

    def _move_out(self, i: int) -> None:
        if self.pending[i] is None:
            return
        c, first, starts = self.pending[i]
        assert c == self.moved, "chunks arrive in order"
        arcs, prevs, *kept = self.pinned.take(i, copy=False)  # read before the slot is put again
        self.joined.add(first, starts, arcs, prevs)
        if self.kept is not None:
            self.kept.add(first, starts, *kept)
        self.moved += 1
        self.pending[i] = None

    def drain(self) -> None:
        for _, i in sorted((p[0], i) for i, p in enumerate(self.pending) if p is not None):
            self._move_out(i)


class JoinedRecords:
    """The chunks' records as one backpointer store: ``arc[k]``, and ``prev[k]`` made global
    (record indices of a chunk are local to it; an emitting arc's ``prev`` points into the
    previous frame's chunk, an epsilon arc's into its own frame's); ``frame_base[t]``: global
    index of record 0 of frame ``t``'s chunk. A negative ``prev`` stays as it is: -1 for the
    start, ``-2 - r`` for record ``r`` of a stream's earlier chunks (`streams.py`)."""

    def __init__(self, n_emit: int, T: int):
        self.n_emit = n_emit
        self.frame_base = np.zeros(T + 1, np.int64)
        with _KEPT_LOCK:
            kept = _JOINED_KEPT.pop() if _JOINED_KEPT else None
        self.arc, self.prev = kept or (np.zeros(0, np.int64), np.zeros(0, np.int64))
        self.n = 0

    def give_back(self) -> None:
        """Hand the arrays to the next search (their contents are dead once the caller has
        traced back or copied what it needs); this object is empty afterwards."""
        if len(self.arc):
            with _KEPT_LOCK:
                _JOINED_KEPT.append((self.arc, self.prev))
                del _JOINED_KEPT[:-2]  # two searches' worth at most
        self.arc = self.prev = np.zeros(0, np.int64)
        self.n = 0

    def add(self, first: int, starts: np.ndarray, arcs: np.ndarray, prevs: np.ndarray) -> None:
        used = len(arcs)
        if self.n + used > len(self.arc):
            # Records per frame vary little: extrapolate to the last frame, grow rarely.
            frames = max(first + len(starts), 1)
            guess = (self.n + used) * len(self.frame_base) // frames + 1024
            size = max(grown(max(len(self.arc), 1024), self.n + used), guess)
            self.arc = np.concatenate((self.arc[: self.n], np.empty(size - self.n, np.int64)))
            self.prev = np.concatenate((self.prev[: self.n], np.empty(size - self.n, np.int64)))
        self.frame_base[first : first + len(starts)] = self.n
        _join_chunk(first, starts, arcs, prevs, self.n_emit, self.frame_base, self.n,
                    self.arc, self.prev)  # fmt: skip
        self.n += used


class KeptSurvivors:
    """Every token frame's survivors per lane, from the records that carry them (lattices):
    ``frames[lane][f] = (states, context states)``."""

    def __init__(self, lanes: int):
        self.frames: list[dict] = [{} for _ in range(lanes)]

    def add(self, first, starts, lanes, states, ctxs) -> None:
        ends = np.append(starts[1:], len(states))
        for j, (lo, hi) in enumerate(zip(starts, ends, strict=True)):
            keep = states[lo:hi] >= 0
            lane = lanes[lo:hi][keep]
            order = np.argsort(lane, kind="stable")
            lane, state, ctx = lane[order], states[lo:hi][keep][order], ctxs[lo:hi][keep][order]
            cuts = np.flatnonzero(np.diff(lane)) + 1
            for lo_k, hi_k in zip(np.r_[0, cuts], np.r_[cuts, len(lane)], strict=True):
                if hi_k > lo_k:
                    self.frames[int(lane[lo_k])][first + j] = (state[lo_k:hi_k].copy(),
                                                               ctx[lo_k:hi_k].copy())  # fmt: skip


@njit(nogil=True, cache=True)
def _join_chunk(first, starts, arcs, prevs, n_emit, frame_base, base, out_arc, out_prev):
    """One pass over a chunk's records: ``out[base + k]`` gets record ``k`` with its ``prev``
    made global. Written without branches on the record (selects, which LLVM turns into
    conditional moves): emitting and epsilon records interleave unpredictably, and the
    branchy form took 3.3x as long (7.3 against 2.2 ns per record, random arcs)."""
    n_frames = len(starts)
    for j in range(n_frames):
        frame = first + j
        end = starts[j + 1] if j + 1 < n_frames else len(arcs)
        own = frame_base[frame]
        before = frame_base[max(frame - 1, 0)]
        for k in range(starts[j], end):
            arc = arcs[k]
            out_arc[base + k] = arc
            prev = np.int64(prevs[k])
            emitting = np.uint32(arc) < np.uint32(n_emit)  # 0 <= arc < n_emit
            shift = before if emitting else own
            # a negative prev stays: the start (-1), or a record of a stream's earlier chunks
            out_prev[base + k] = prev if prev < 0 else prev + shift


def take_record_buffer(timed: bool, fields: int = 2) -> PinnedDoubleBuffer:
    """A pinned record buffer of the current CUDA context for ``fields`` int32 arrays (2: arc
    and prev; 5: with the kept survivors), kept from an earlier call when one is free (its
    pinned memory, once grown to a batch's largest chunk, is not allocated again), else a new
    one. `keep_record_buffer` gives it back."""
    context = _current_context()
    with _KEPT_LOCK:
        i = next((i for i, (c, b) in enumerate(_KEPT)
                  if c is context and len(b.dtypes) == fields), None)  # fmt: skip
        buffer = _KEPT.pop(i)[1] if i is not None else None
    if buffer is None:
        buffer = PinnedDoubleBuffer((np.int32,) * fields)
    buffer.reset(timed)
    return buffer


def keep_record_buffer(buffer: PinnedDoubleBuffer) -> None:
    with _KEPT_LOCK:
        _KEPT.append((_current_context(), buffer))


def release_kept_buffers() -> None:
    """Drop the kept pinned record buffers and joined-record arrays (those not in use); their
    memory is freed."""
    with _KEPT_LOCK:
        _KEPT.clear()
        _JOINED_KEPT.clear()


def _current_context():
    # Numba hands out one object per primary context (a new one after cuda.close()); the
    # simulator makes a new one per call, for its one device.
    from numba import cuda

    from .target import SIM

    return None if SIM else cuda.current_context()

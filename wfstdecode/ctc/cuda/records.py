"""The backpointer records' way to the host: `PinnedDoubleBuffer`, what a batched search wrote on
the device copied to pinned host memory on a copy stream, alternating between two slots so that
the copy of step *n* overlaps the compute of step *n + 1*; `RecordCopier`, the cuda search's use
of it (one chunk of frames per step); and the pinned buffers kept between calls. It works on
Numba device arrays and streams, so it runs under Numba's CUDA simulator too; torch / CuPy memory
is reached through ``numba.cuda.as_cuda_array`` and ``numba.cuda.external_stream``.
"""

from __future__ import annotations

import threading

import numpy as np

from ...buffers import grown
from .layout import INFO_FIRST, INFO_FRAMES, INFO_STARTS

_KEPT: list = []  # (CUDA context, PinnedDoubleBuffer) not in use, for the next call
_KEPT_LOCK = threading.Lock()


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

    def take(self, slot: int) -> list[np.ndarray]:
        sizes = self._sizes[slot]
        if sizes is None:
            raise RuntimeError(f"PinnedDoubleBuffer slot {slot} holds nothing to take")
        self.copied[slot].synchronize()
        self._sizes[slot] = None
        return [
            np.empty(0, dt) if host is None else host[:n].copy()
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
    done; the host moves them out before that slot takes chunk ``c + 2``. ``d`` is the search's
    `buffers.SearchBuffers`."""

    def __init__(self, d, pinned: PinnedDoubleBuffer):
        from .target import SIM

        self.records, self.info, self.sim, self.pinned = d.records, d.control.info, SIM, pinned
        self.pending: list = [None, None]  # (chunk, first frame, frame starts) in each slot
        self.chunks: list = []  # per chunk: (first frame, frame starts, arcs, prevs)
        self.collected = 0

    def collect(self, c: int) -> int:
        """Start copying chunk ``c``'s records (chunks in order); the frames it ran."""
        i = c % 2
        self.pinned.host_wait_produced(i)
        info = self.info.copy_to_host()[i] if self.sim else np.array(self.info)[i]
        n, first, used = int(info[INFO_FRAMES]), int(info[INFO_FIRST]), int(info[-1])
        starts = info[INFO_STARTS : INFO_STARTS + n].astype(np.int64)
        self._move_out(i)
        lo = i * int(self.records.capacity)
        self.pinned.put(i, (self.records.arc[lo : lo + used], self.records.prev[lo : lo + used]))
        self.pending[i] = (c, first, starts)
        self.collected += 1
        return n

    def _move_out(self, i: int) -> None:
        if self.pending[i] is None:
            return
        c, first, starts = self.pending[i]
        assert c == len(self.chunks), "chunks arrive in order"
        arcs, prevs = self.pinned.take(i)
        self.chunks.append((first, starts, arcs, prevs))
        self.pending[i] = None

    def drain(self) -> None:
        for _, i in sorted((p[0], i) for i, p in enumerate(self.pending) if p is not None):
            self._move_out(i)


def take_record_buffer(timed: bool) -> PinnedDoubleBuffer:
    """A pinned record buffer of the current CUDA context, kept from an earlier call when one
    is free (its pinned memory, once grown to a batch's largest chunk, is not allocated
    again), else a new one. `keep_record_buffer` gives it back."""
    context = _current_context()
    with _KEPT_LOCK:
        i = next((i for i, (c, _) in enumerate(_KEPT) if c is context), None)
        buffer = _KEPT.pop(i)[1] if i is not None else None
    if buffer is None:
        buffer = PinnedDoubleBuffer((np.int32, np.int32))
    buffer.reset(timed)
    return buffer


def keep_record_buffer(buffer: PinnedDoubleBuffer) -> None:
    with _KEPT_LOCK:
        _KEPT.append((_current_context(), buffer))


def release_kept_buffers() -> None:
    """Drop the kept pinned record buffers (those not in use); their memory is freed."""
    with _KEPT_LOCK:
        _KEPT.clear()


def _current_context():
    # Numba hands out one object per primary context (a new one after cuda.close()); the
    # simulator makes a new one per call, for its one device.
    from numba import cuda

    from .target import SIM

    return None if SIM else cuda.current_context()

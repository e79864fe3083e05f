"""`PinnedDoubleBuffer`: what a batched search wrote on the device, copied to pinned host memory
on a copy stream, alternating between two slots so that the copy of step *n* overlaps the compute
of step *n + 1* (the cuda backend's backpointer records, one chunk of frames per step). It works on
Numba device arrays and streams, so it runs under Numba's CUDA simulator too; torch / CuPy memory
is reached through ``numba.cuda.as_cuda_array`` and ``numba.cuda.external_stream``.
"""

from __future__ import annotations

import numpy as np

from ...buffers import grown


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

"""Batched sequence buffers: the shared primitive of the batched decoders.

`BatchedSequences` holds, for B sequences at once, preallocated ``(B, L)`` tensors of named
per-item fields (a transducer's labels / timestamps / durations, a CTC decoder's tokens), one
``lengths`` vector and one ``scores`` vector. Appending is masked and never reads a device value
on the host: the host counts the appends it has issued, and since every append adds at most one
item per row, that count bounds ``lengths.max()``; the buffers double before the bound could
exceed the capacity. CUDA-graph callers allocate the proven upper bound up front and pass
``growable=False``, because a captured graph must keep its tensors' addresses.

`PinnedDoubleBuffer` copies what a batched search wrote on the device to pinned host memory on a
copy stream, alternating between two slots so the copy of step *n* overlaps the compute of step
*n + 1* (the CTC cuda backend's backpointer records). It works on Numba device arrays and streams,
so it runs under Numba's CUDA simulator too; torch / CuPy memory is reached through
``numba.cuda.as_cuda_array`` and ``numba.cuda.external_stream``.

Both grow their storage by doubling (`grown`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # imported where used: the CTC cuda backend needs no torch
    import torch

__all__ = ["BatchedSequences", "PinnedDoubleBuffer"]


def grown(capacity: int, needed: int) -> int:
    """``capacity`` doubled until it holds ``needed`` (unchanged when it already does)."""
    capacity = max(capacity, 1)
    while capacity < needed:
        capacity *= 2
    return capacity


class BatchedSequences:
    """B variable-length sequences of named fields, stored as ``(B, capacity)`` tensors.

    fields:   name -> dtype of each per-item field, e.g. ``{"labels": torch.long}``.
    capacity: initial number of items per row (at least 1).
    growable: if False, the caller guarantees that no row outgrows ``capacity`` (CUDA graphs
              replay appends the host cannot count); the storage then never moves.
    """

    def __init__(
        self,
        batch_size: int,
        capacity: int,
        fields: Mapping[str, torch.dtype],
        device: torch.device | str = "cpu",
        score_dtype: torch.dtype | None = None,  # None: float32
        growable: bool = True,
    ):
        if batch_size < 0 or capacity < 1:
            raise ValueError(
                f"batch_size must be >= 0 and capacity >= 1; got {batch_size}, {capacity}"
            )
        self.batch_size = batch_size
        import torch

        self.device = torch.device(device)
        self.growable = growable
        # A fixed buffer keeps one scratch column: full rows outside the mask write there.
        columns = capacity if growable else capacity + 1
        self.data = {
            name: torch.zeros((batch_size, columns), dtype=dt, device=self.device)
            for name, dt in fields.items()
        }
        self.lengths = torch.zeros(batch_size, dtype=torch.long, device=self.device)
        score_dtype = torch.float32 if score_dtype is None else score_dtype
        self.scores = torch.zeros(batch_size, dtype=score_dtype, device=self.device)
        # Host-side upper bound of lengths.max(): the number of appends issued since the reset.
        self._bound = 0

    @property
    def capacity(self) -> int:
        columns = next(iter(self.data.values())).shape[1]
        return columns if self.growable else columns - 1

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.data[name]

    def reset_(self) -> None:
        """Empty every row, keeping the storage (and its addresses, for CUDA graphs)."""
        self.lengths.zero_()
        self.scores.zero_()
        self._bound = 0

    def reserve_(self, capacity: int) -> None:
        """Make room for ``capacity`` items per row (doubling), keeping the contents."""
        import torch

        new = grown(self.capacity, capacity)
        if new == self.capacity:
            return
        for name, old in self.data.items():
            larger = torch.zeros((self.batch_size, new), dtype=old.dtype, device=self.device)
            larger[:, : old.shape[1]].copy_(old)
            self.data[name] = larger

    def append_(self, mask: torch.Tensor, **values: torch.Tensor | int) -> None:
        """Append ``values[name][b]`` to row b where ``mask[b]``; no host synchronisation.

        Every row writes at its own ``lengths[b]`` (a scatter, not a boolean gather, which would
        need the mask's count on the host); rows outside the mask write past their length, where
        the next append overwrites, and do not advance. Every field must be given.
        """
        import torch

        if values.keys() != self.data.keys():
            raise KeyError(f"append_ needs fields {sorted(self.data)}; got {sorted(values)}")
        if self.growable and self._bound >= self.capacity:
            self.reserve_(self.capacity * 2)
        self._bound += 1
        index = self.lengths.unsqueeze(1)
        if not self.growable:
            index = index.clamp(max=self.capacity)  # the scratch column
        for name, buf in self.data.items():
            src = torch.as_tensor(values[name], device=self.device)
            if src.dim() == 0:
                src = src.expand(self.batch_size)
            buf.scatter_(1, index, src.to(buf.dtype).unsqueeze(1))
        self.lengths += mask

    def add_scores_(self, mask: torch.Tensor, delta: torch.Tensor) -> None:
        """``scores[b] += delta[b]`` where ``mask[b]``, without a host synchronisation."""
        import torch

        self.scores += torch.where(mask, delta.to(self.scores.dtype), 0.0)

    def to_lists(self) -> tuple[list[int], list[float], dict[str, list[list]]]:
        """Copy everything to the host in one go: (lengths, scores, {field: rows cut to length})."""
        lengths = self.lengths.tolist()
        scores = self.scores.tolist()
        width = max(lengths, default=0)
        out = {}
        for name, buf in self.data.items():
            rows = buf[:, :width].tolist()
            out[name] = [row[:n] for row, n in zip(rows, lengths, strict=True)]
        return lengths, scores, out


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

"""Batched sequence buffers: the shared primitive of the batched decoders.

`BatchedSequences` holds, for B sequences at once, preallocated ``(B, L)`` tensors of named
per-item fields (a transducer's labels / timestamps / durations, a CTC decoder's tokens), one
``lengths`` vector and one ``scores`` vector. Appending is masked and never reads a device value
on the host: the host counts the appends it has issued, and since every append adds at most one
item per row, that count bounds ``lengths.max()``; the buffers double before the bound could
exceed the capacity. CUDA-graph callers allocate the proven upper bound up front and pass
``growable=False``, because a captured graph must keep its tensors' addresses.

Storage grows by doubling (`grown`), as the CTC cuda backend's pinned record copies
(`wfstdecode.ctc.cuda.records`) do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: importing this module needs no torch
    import torch

__all__ = ["BatchedSequences", "grown"]


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

    def reorder_(self, rows: torch.Tensor) -> None:
        """Row b becomes what row ``rows[b]`` was (a beam search's survivors taking their
        parents' histories); no host synchronisation."""
        for name, buf in self.data.items():
            self.data[name] = buf.index_select(0, rows)
        self.lengths = self.lengths.index_select(0, rows)
        self.scores = self.scores.index_select(0, rows)

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

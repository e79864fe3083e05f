"""`NoHostSync`: a dispatch mode that raises on the operators that read a tensor on the host.

On a GPU, ``torch.cuda.set_sync_debug_mode(2)`` catches syncs. On CPU there is no device to wait
for, so this mode raises on the operators that would sync there: ``.item()`` / ``bool()``
(``_local_scalar_dense``), ``nonzero``, ``masked_select``, unique, and boolean-mask indexing.
Tests run loop bodies under it to prove they never wait for the device.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["NoHostSync"]

aten = torch.ops.aten
SYNCING = {
    aten._local_scalar_dense.default,
    aten.nonzero.default,
    aten.masked_select.default,
    aten.unique_consecutive.default,
    aten._unique2.default,
}


class NoHostSync(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        boolean_index = func in (aten.index.Tensor, aten.index_put_.default) and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in args[1]
        )
        if func in SYNCING or boolean_index:
            raise AssertionError(f"host sync inside a loop body: {func}")
        return func(*args, **(kwargs or {}))

"""The cuda backend of the CTC search: everything that is specific to it lives here.

- `kernels`: the Numba-CUDA kernels, one per step of `reference.py` (expand, closure + prune).
- `driver`: `decode_cuda` — device buffers, the frame loop in chunks (CUDA graphs), the
  double-buffered record copies.
- `records`: `PinnedDoubleBuffer`, the device-to-pinned-host copies of each chunk's records.
- `finish`: survivors gathered on the device, backpointers joined, traceback on the host.
- `inputs`: log-probs already on the GPU (torch, CuPy, Numba), read in place and checked there.
- `memory`: what a batch needs, sized from the options alone (no GPU needed).

Importing this package imports no GPU module; `driver`, `kernels`, `finish`, `inputs` and `records`
import Numba's CUDA support and are imported only when the cuda backend runs.
"""

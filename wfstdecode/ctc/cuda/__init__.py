"""The cuda backend of the CTC search: everything that is specific to it lives here.

- `kernels`: the Numba-CUDA kernels of a frame step (expand, closure + prune) and of the chunk
  control; its docstring maps each step of `reference.py` to the function that runs it.
- `steps`: those steps as device functions, named as in `reference.py` and `cpu_steps.py`.
- `primitives`: what the steps are built from: cost keys, hash tables, block-wide scan / min /
  count / radix select.
- `target`: what differs under Numba's CUDA simulator (the ``cuda`` device code sees, bit casts).
- `buffers`: the kernels' argument bundles (named tuples of device arrays), their allocation,
  and each graph's device copy (cached per graph and arc-cost options).
- `decode`: `decode_cuda`, the backend's entry: one call, or long utterances in calls.
- `driver`: `run_search` — the frame loop in chunks (CUDA graphs), launch
  configuration.
- `records`: the backpointer records' way to the host: `PinnedDoubleBuffer` (double-buffered
  device-to-pinned-host copies), `RecordCopier`, the pinned buffers kept between calls.
- `finish`: survivors gathered on the device, backpointers joined, traceback on the host.
- `streams`: `CudaStreams`, streaming (`CtcStreamDecoder(backend="cuda")`): an `advance`
  group's streams as the lanes of one search, each going on from its last survivors.
- `inputs`: log-probs already on the GPU (torch, CuPy, Numba), read in place and checked there.
- `memory`: what a batch needs, sized from the options alone (no GPU needed).

Importing this package imports no GPU module; `memory` and `buffers` need none either, and the
others import Numba's CUDA support and are imported only when the cuda backend runs.
"""

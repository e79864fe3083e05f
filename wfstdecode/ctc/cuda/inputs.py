"""Log-probs that already live on the GPU (torch CUDA tensors, CuPy arrays, Numba device arrays):
a zero-copy Numba view for the cuda backend, the same checks as the host path done by a kernel,
and the log-probs of the final paths gathered on the device. Imported only when such an
input reaches ``backend="cuda"``.
"""

from __future__ import annotations

import numpy as np
from numba import config, cuda, float32

from ...backends import is_numba_device_array
from ...errors import DecodeInputError
from .layout import grid_rows

_SIM = bool(config.ENABLE_CUDASIM)


def device_log_probs(x):
    """A Numba device view of ``x`` (no copy), after the producer's stream has finished it."""
    module = type(x).__module__
    if module.startswith("torch"):
        import torch

        if not x.is_floating_point():
            raise DecodeInputError(
                f"log_probs must be floating point; got dtype {x.dtype} (shape {tuple(x.shape)})"
            )
        if x.dtype == torch.bfloat16:  # no CUDA array interface for bfloat16: one device copy
            x = x.float()
        _same_device(x.device.index, f"torch tensor on {x.device}")
        torch.cuda.current_stream(x.device).synchronize()
        view = cuda.as_cuda_array(x.detach(), sync=False)
    elif is_numba_device_array(x):
        view = x
    else:
        if not hasattr(x, "__cuda_array_interface__"):  # DLPack only (JAX, ...): CuPy wraps it
            x = _from_dlpack(x)
        if type(x).__module__.startswith("cupy"):
            _same_device(x.device.id, f"CuPy array on device {x.device.id}")
        view = cuda.as_cuda_array(x)  # syncs the stream the array names, if any
    if np.dtype(view.dtype).kind != "f":
        raise DecodeInputError(
            f"log_probs must be floating point (float16/32/64); got dtype {view.dtype} "
            f"(shape {tuple(view.shape)})"
        )
    return view


def _from_dlpack(x):
    try:
        import cupy
    except ImportError as exc:
        raise DecodeInputError(
            f"log_probs is a {type(x).__name__} on the GPU with only a DLPack interface; "
            "reading it in place needs CuPy (pip install 'wfstdecode[cuda]'), or pass a "
            "torch/CuPy array"
        ) from exc
    return cupy.from_dlpack(x)


def _same_device(index, what: str) -> None:
    if _SIM or index is None:
        return
    current = cuda.get_current_device().id
    if index != current:
        raise DecodeInputError(
            f"log_probs is a {what} but the cuda backend runs on device {current}; "
            f"move it there or select that device with numba.cuda.select_device({index})"
        )


def check_device_log_probs(lp, lengths: np.ndarray):
    """The host path's value checks (`_problem.costs_and_first_bad`), on the device: no NaN or
    +inf and not every column -inf, in frames within the lengths. Raises naming the first bad
    frame. Returns the (B, T) float32 maximum of each frame within the lengths, on the device,
    for the search's per-frame relative costs (`steps.acoustic_cost`)."""
    B, T = lp.shape[0], lp.shape[1]
    frame_max = cuda.device_array((B, T), np.float32)
    if B == 0 or T == 0:
        return frame_max
    none = np.iinfo(np.int64).max
    bad = cuda.to_device(np.array([none, none], np.int64))
    threads = 8 if _SIM else 128
    blocks = 1 if _SIM else min(1024, (T + threads - 1) // threads)
    _check_kernel[(blocks, grid_rows(B)), threads](
        lp, cuda.to_device(lengths.astype(np.int32)), bad, frame_max
    )
    first_bad, first_dead = (int(v) for v in bad.copy_to_host())
    if first_bad != none:
        b, t = divmod(first_bad // 2, T)
        what = "NaN" if first_bad % 2 == 0 else "+inf"
        raise DecodeInputError(
            f"log_probs[{b}, {t}] contains {what} (frame within lengths[{b}])", b
        )
    if first_dead != none:
        b, t = divmod(first_dead, T)
        raise DecodeInputError(f"log_probs[{b}, {t}] is -inf in every column", b)
    return frame_max


@cuda.jit
def _check_kernel(lp, lengths, bad, frame_max):
    """bad[0] = min over rows with a NaN or +inf of ``2 * (b * T + t) + (0 if NaN else 1)``;
    bad[1] = min over rows that are -inf everywhere of ``b * T + t`` (values as float32);
    frame_max[b, t] = the row's largest value. Grid row ``y`` takes utterances ``y``,
    ``y + gridDim.y``, ... (`layout.grid_rows`)."""
    T = lp.shape[1]
    V = lp.shape[2]
    for b in range(cuda.blockIdx.y, lp.shape[0], cuda.gridDim.y):
        for t in range(cuda.grid(1), lengths[b], cuda.gridDim.x * cuda.blockDim.x):
            nan = False
            pos_inf = False
            dead = True
            best = float32(-np.inf)
            for k in range(V):
                x = float32(lp[b, t, k])
                if x != x:
                    nan = True
                elif x == float32(np.inf):
                    pos_inf = True
                if x != float32(-np.inf):
                    dead = False
                if x > best:
                    best = x
            frame_max[b, t] = best
            row = np.int64(b) * T + t
            if nan or pos_inf:
                cuda.atomic.min(bad, 0, 2 * row + (0 if nan else 1))
            elif dead:
                cuda.atomic.min(bad, 1, row)


def gather_log_probs(lp, b, t, k) -> np.ndarray:
    """float32 ``lp[b[i], t[i], k[i]]`` for every ``i``, on the host."""
    n = len(b)
    if n == 0:
        return np.zeros(0, np.float32)
    out = cuda.device_array(n, np.float32)
    threads = 8 if _SIM else 256
    idx = [cuda.to_device(np.ascontiguousarray(v, np.int64)) for v in (b, t, k)]
    _gather_kernel[(n + threads - 1) // threads, threads](lp, *idx, out)
    return out.copy_to_host()


@cuda.jit
def _gather_kernel(lp, b, t, k, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = float32(lp[b[i], t[i], k[i]])

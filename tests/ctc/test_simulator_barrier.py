"""The test session's CUDA simulator barrier (tests/conftest.py): every cuda test without a GPU
runs through it, so it must keep the simulator's semantics — a block's threads meet at each
syncthreads, threads that returned no longer count, an error in one thread stops the block and
names the thread."""

import os

import numpy as np
import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
    pytest.skip("tests the CUDA simulator's patched barrier (no simulator here)",
                allow_module_level=True)  # fmt: skip

from numba import cuda


@cuda.jit
def _tree_sum(values, out, stop_at):
    """Block-wide sum in shared memory, log2(n) barrier rounds; threads >= ``stop_at`` return
    after the first round (they hold no partial sum needed later)."""
    shared = cuda.shared.array(16, np.int64)
    i = cuda.threadIdx.x
    shared[i] = values[cuda.blockIdx.x * 16 + i]
    cuda.syncthreads()
    if i >= stop_at:
        return
    width = 8
    while width >= 1:
        if i < width:
            shared[i] += shared[i + width]
        cuda.syncthreads()
        width //= 2
    if i == 0:
        out[cuda.blockIdx.x] = shared[0]


@cuda.jit
def _count_odd(values, out):
    n = cuda.syncthreads_count(values[cuda.threadIdx.x] % 2)
    if cuda.threadIdx.x == 0:
        out[0] = n


@cuda.jit
def _fails_in_one_thread(out):
    cuda.syncthreads()
    if cuda.threadIdx.x == 5:
        out[100] = 1  # out of bounds
    cuda.syncthreads()
    out[cuda.threadIdx.x] = 1


def test_barrier_rounds_with_threads_that_returned():
    values = np.arange(48, dtype=np.int64)
    out = np.zeros(3, np.int64)
    _tree_sum[3, 16](values, out, 8)  # threads 8..15 return after the first barrier
    assert out.tolist() == [values[b * 16 : (b + 1) * 16].sum() for b in range(3)]


def test_syncthreads_count():
    values = np.arange(16, dtype=np.int64)
    out = np.zeros(1, np.int64)
    _count_odd[1, 16](values, out)
    assert out[0] == 8


def test_an_error_in_one_thread_stops_the_block_and_names_the_thread():
    with pytest.raises(IndexError, match=r"tid=\[5, 0, 0\] ctaid=\[0, 0, 0\]"):
        _fails_in_one_thread[1, 8](np.zeros(8, np.int64))

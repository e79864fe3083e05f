"""The cuda backend's pinned double buffer (`wfstdecode.ctc.cuda.records`), on a GPU or under
Numba's CUDA simulator."""

import numpy as np
import pytest

from wfstdecode.backends import available_ctc_backends

needs_cuda = pytest.mark.skipif(
    "cuda" not in available_ctc_backends(), reason="no CUDA GPU and NUMBA_ENABLE_CUDASIM is off"
)


@needs_cuda
def test_pinned_double_buffer_alternates_slots_and_grows():
    from numba import cuda

    from wfstdecode.ctc.cuda.records import PinnedDoubleBuffer

    copier = PinnedDoubleBuffer((np.int32, np.float32))
    stream = cuda.stream()
    big = np.arange(3000, dtype=np.int32)
    sources = [
        (cuda.to_device(np.arange(5, dtype=np.int32)), cuda.to_device(np.ones(5, np.float32))),
        (cuda.to_device(big), cuda.to_device(big.astype(np.float32) / 2)),  # beyond 1024: grows
        (cuda.to_device(np.zeros(0, np.int32)), cuda.to_device(np.zeros(0, np.float32))),
    ]
    expected = [[a.copy_to_host(), b.copy_to_host()] for a, b in sources]
    taken = []
    for step, arrays in enumerate(sources):
        slot = step % 2
        if step >= 2:
            taken.append(copier.take(slot))  # the host empties the slot before reusing it
            copier.stream_wait_copied(slot, stream)
        copier.record_produced(slot, stream)
        copier.host_wait_produced(slot)
        copier.put(slot, arrays)
        assert copier.holds(slot)
    taken += [copier.take(1), copier.take(0)]
    for got, want in zip(taken, expected, strict=True):
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and np.array_equal(g, w)
    assert not copier.holds(0) and not copier.holds(1)


@needs_cuda
def test_pinned_double_buffer_refuses_misuse():
    from numba import cuda

    from wfstdecode.ctc.cuda.records import PinnedDoubleBuffer

    copier = PinnedDoubleBuffer((np.int32,))
    ints = cuda.to_device(np.arange(4, dtype=np.int32))
    with pytest.raises(RuntimeError, match="slot 0 holds nothing"):
        copier.take(0)
    with pytest.raises(ValueError, match="1-d int32; got 1-d float32"):
        copier.put(0, (cuda.to_device(np.zeros(3, np.float32)),))
    with pytest.raises(ValueError, match="copies 1 arrays; got 2"):
        copier.put(0, (ints, ints))
    copier.put(0, (ints,))
    with pytest.raises(RuntimeError, match="slot 0 was put twice"):
        copier.put(0, (ints,))

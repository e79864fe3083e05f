import numpy as np
import pytest
import torch

from wfstdecode.backends import available_ctc_backends
from wfstdecode.buffers import BatchedSequences, PinnedDoubleBuffer, grown

needs_cuda = pytest.mark.skipif(
    "cuda" not in available_ctc_backends(), reason="no CUDA GPU and NUMBA_ENABLE_CUDASIM is off"
)
FIELDS = {"labels": torch.long, "timestamps": torch.long}


def test_masked_append_and_lists():
    buf = BatchedSequences(3, 2, FIELDS)
    buf.append_(torch.tensor([True, False, True]), labels=torch.tensor([1, 2, 3]), timestamps=0)
    buf.append_(torch.tensor([False, True, True]), labels=torch.tensor([4, 5, 6]), timestamps=1)
    buf.add_scores_(torch.tensor([True, False, True]), torch.tensor([0.5, 9.0, -1.0]))
    lengths, scores, data = buf.to_lists()
    assert lengths == [1, 1, 2]
    assert scores == [0.5, 0.0, -1.0]
    assert data["labels"] == [[1], [5], [3, 6]]
    assert data["timestamps"] == [[0], [1], [0, 1]]


def test_growth_by_doubling_keeps_contents():
    buf = BatchedSequences(2, 1, FIELDS)
    for i in range(9):
        buf.append_(
            torch.tensor([True, i % 2 == 0]), labels=torch.tensor([i, 10 + i]), timestamps=i
        )
    assert buf.capacity == 16
    _, _, data = buf.to_lists()
    assert data["labels"] == [list(range(9)), [10, 12, 14, 16, 18]]


def test_fixed_capacity_never_moves_and_full_rows_stay_put():
    buf = BatchedSequences(2, 2, FIELDS, growable=False)
    storage = buf["labels"].data_ptr()
    for i in range(5):  # row 0 fills up; row 1 never appends: its writes land past its length
        mask = torch.tensor([i < 2, False])
        buf.append_(mask, labels=torch.tensor([i, i]), timestamps=i)
    assert buf["labels"].data_ptr() == storage
    assert buf.to_lists()[2]["labels"] == [[0, 1], []]


def test_reset_keeps_storage():
    buf = BatchedSequences(1, 4, FIELDS)
    buf.append_(torch.tensor([True]), labels=torch.tensor([7]), timestamps=0)
    ptr = buf["labels"].data_ptr()
    buf.reset_()
    assert buf.to_lists()[0] == [0] and buf["labels"].data_ptr() == ptr


def test_append_needs_every_field():
    buf = BatchedSequences(1, 4, FIELDS)
    with pytest.raises(KeyError, match="timestamps"):
        buf.append_(torch.tensor([True]), labels=torch.tensor([1]))


def test_grown_doubles_until_it_holds():
    assert grown(4, 4) == 4 and grown(4, 5) == 8 and grown(4, 33) == 64 and grown(0, 3) == 4


@needs_cuda
def test_pinned_double_buffer_alternates_slots_and_grows():
    from numba import cuda

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

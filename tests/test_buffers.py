import pytest
import torch

from wfstdecode.buffers import BatchedSequences, grown

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


def test_reorder_copies_whole_rows_and_appends_continue():
    seqs = BatchedSequences(3, 2, FIELDS)
    for step, mask in enumerate([[True, True, False], [True, False, False]]):
        seqs.append_(
            torch.tensor(mask), labels=torch.tensor([1, 2, 3]) + 10 * step, timestamps=step
        )
    seqs.add_scores_(torch.tensor([True, True, True]), torch.tensor([-1.0, -2.0, -3.0]))
    seqs.reorder_(torch.tensor([1, 0, 0]))  # row 0 <- old row 1; rows 1 and 2 <- old row 0
    seqs.append_(torch.tensor([True, False, True]), labels=7, timestamps=5)  # grows the storage
    lengths, scores, fields = seqs.to_lists()
    assert lengths == [2, 2, 3] and scores == [-2.0, -1.0, -1.0]
    assert fields["labels"] == [[2, 7], [1, 11], [1, 11, 7]]
    assert fields["timestamps"] == [[0, 5], [0, 1], [0, 1, 5]]


def test_reset_buffer_does_not_grow_again():
    """buffers.py:85 reset_ without `_bound = 0`: a reset buffer reused for as many appends as
    before must not grow (else reuse across batches grows the storage without bound)."""
    buf = BatchedSequences(2, 4, {"labels": torch.long})
    for _ in range(4):
        buf.append_(torch.tensor([True, False]), labels=1)
    assert buf.capacity == 4
    for _ in range(3):
        buf.reset_()
        for _ in range(4):
            buf.append_(torch.tensor([True, True]), labels=2)
        assert buf.capacity == 4
        assert buf.to_lists()[2]["labels"] == [[2] * 4, [2] * 4]

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


def _join_by_definition(chunks, n_emit, T):
    """The global backpointers of `JoinedRecords`, record by record in Python."""
    frame_base = [0] * (T + 1)
    arc, prev = [], []
    for first, starts, arcs, prevs in chunks:
        base = len(arc)
        for j in range(len(starts)):  # a record's prev counts from its chunk's first record
            frame_base[first + j] = base
        for j in range(len(starts)):
            frame = first + j
            end = starts[j + 1] if j + 1 < len(starts) else len(arcs)
            for k in range(starts[j], end):
                a, p = int(arcs[k]), int(prevs[k])
                arc.append(a)
                if p < 0:
                    prev.append(p)
                elif 0 <= a < n_emit:
                    prev.append(p + frame_base[max(frame - 1, 0)])
                else:
                    prev.append(p + frame_base[frame])
    return arc, prev


def test_joined_records_equal_the_definition_and_reuse_their_arrays():
    """Chunks of records (emitting and epsilon arcs, negative prevs) joined into global
    backpointers equal the record-by-record definition, in fresh arrays and in the arrays a
    finished join gave back; `release_cuda_buffers` drops those."""
    from wfstdecode.ctc.cuda import records
    from wfstdecode.ctc.cuda.memory import release_cuda_buffers

    rng = np.random.default_rng(0)
    n_emit, T = 50, 40

    def chunks():
        out, first = [], 0
        while first < T:
            frames = int(min(rng.integers(1, 6), T - first))
            sizes = rng.integers(0, 30, frames)
            starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
            used = int(sizes.sum())
            arcs = rng.integers(-1, 2 * n_emit, used).astype(np.int32)
            prevs = rng.integers(-5, 25, used).astype(np.int32)
            out.append((first, starts, arcs, prevs))
            first += frames
        return out

    release_cuda_buffers()
    given = None
    for _ in range(3):
        case = chunks()
        joined = records.JoinedRecords(n_emit, T)
        if given is not None:
            assert joined.arc is given  # the arrays the last join gave back
        for chunk in case:
            joined.add(*chunk)
        arc, prev = _join_by_definition(case, n_emit, T)
        assert joined.arc[: joined.n].tolist() == arc
        assert joined.prev[: joined.n].tolist() == prev
        given = joined.arc
        joined.give_back()
        assert joined.n == 0 and len(joined.arc) == 0
    release_cuda_buffers()
    assert records.JoinedRecords(n_emit, T).arc is not given

"""The cuda backend's token tables and limits: what a crowded table does and says, what never
crowds one, the epsilon closure's records, occupancy and memory sizing, inputs refused on the
device. Runs on a GPU or under Numba's CUDA simulator, as test_cuda_backend.py; the oracles are
the reference and cpu backends."""

import re

import numpy as np
import pytest

from wfstdecode.backends import available_ctc_backends
from wfstdecode.ctc import CtcBeamOptions, CudaTuning, decode_ctc
from wfstdecode.ctc.cuda.target import SIM
from wfstdecode.errors import DeviceMemoryError
from wfstdecode.testing import lexicon_graph, random_graph, random_log_probs, simulate_ctc

needs_cuda = pytest.mark.skipif(
    "cuda" not in available_ctc_backends(), reason="no CUDA GPU and NUMBA_ENABLE_CUDASIM is off"
)


def _raw(lp, lengths, g, opts, **run):
    """The cuda backend's RawResults with run settings (as in test_cuda_backend.py)."""
    from wfstdecode.ctc.cuda.decode import decode_cuda
    from wfstdecode.ctc.search import prepare_problem

    return decode_cuda(prepare_problem(lp, lengths, g, opts, None), CudaTuning(**run))


def test_resident_block_size_counts_the_1kb_cuda_reserves_per_block():
    """116,000 bytes of shared memory per block: two blocks would fit an H100 SM's 233,472
    bytes but for the 1 KB CUDA reserves per block, so 264 utterances (2 per SM) cannot all be
    resident with 1024 threads, nor with 512: 256."""
    from wfstdecode.ctc.cuda.driver import SmLimits, resident_block_size

    h100 = SmLimits(count=132, registers=65536, threads=2048, shared=233472)
    assert resident_block_size(132, 32, 116_000, h100) == 1024  # one block per SM
    assert resident_block_size(264, 32, 116_000, h100) == 256
    assert resident_block_size(264, 32, 115_000, h100) == 1024  # 2 x 116,024 bytes fit


@needs_cuda
def test_int32_record_limit_error_names_the_record_slots_needed(monkeypatch):
    """A batch beyond int32 record indices is refused, naming the slots its two record buffers
    need (2 x `record_capacity`); checked with the limit stood in (a real one needs 2^29 slots)."""
    from wfstdecode.ctc.cuda import driver
    from wfstdecode.ctc.cuda.memory import record_capacity, table_size

    g = random_graph(1, num_states=20, num_tokens=5, arcs_per_state=3)
    lp = random_log_probs(1, 3, 4, g.num_tokens)
    opts = CtcBeamOptions(beam=6.0, max_active=10)
    H = table_size(g.num_states, opts)
    monkeypatch.setattr(driver, "int32_records_fit", lambda B, H: False)
    want = f"3 utterances with token tables of {H} slots needs {2 * record_capacity(3, H)} record"
    with pytest.raises(DeviceMemoryError, match=want):
        _raw(lp, None, g, opts)


_NOTE = re.compile(
    r"token table full on (\d+) frame\(s\), first at frame (\d+): beam tightened "
    r"to as low as (\S+) \("
)


@needs_cuda
def test_overflow_note_names_the_first_crowded_frame_and_the_lowest_beam():
    """The note of a crowded token table (more than half full: the beam halves) names the first
    token frame that was crowded — the shortest prefix of the utterance whose search is crowded
    ends there — and the lowest beam, below the option's and a halving of it."""
    words = ["cat", "cap", "act", "tact", "pat", "apt", "tapa", "tap", "pact"]
    g = lexicon_graph(words)
    seqs = [[g.tokens.id(c) for c in "catpact"]]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=1, confusion_prob=0.3, noise=2.0)
    opts = CtcBeamOptions(beam=30.0, max_active=1000, max_candidates=12)  # crowded, never full
    (whole,) = _raw(lp, lengths, g, opts)
    m = _NOTE.match(whole.notes[0])
    assert m, whole.notes
    frames, first, low = int(m[1]), int(m[2]), float(m[3])
    assert 1 <= frames <= int(lengths[0]) + 1 and 1 <= first <= int(lengths[0])
    assert low < opts.beam and np.log2(opts.beam / low) == round(np.log2(opts.beam / low))
    # token frame f reads log-prob frame f - 1: a prefix of `first` frames is crowded at its end
    (upto,) = _raw(lp[:, :first], None, g, opts)
    assert _NOTE.match(upto.notes[0])[2] == str(first), upto.notes
    (before,) = _raw(lp[:, : first - 1], None, g, opts)
    assert not before.notes, before.notes
    # searched in calls (`CudaTuning.max_frames_per_call`), the note is the same: the first
    # crowded frame counted from the utterance's start, the lowest beam over every call
    for per_call in (1, first - 1):
        (calls,) = _raw(lp, lengths, g, opts, max_frames_per_call=per_call)
        assert calls.notes == whole.notes, (per_call, calls.notes, whole.notes)


@needs_cuda
def test_candidates_beyond_best_plus_beam_never_crowd_the_token_table():
    """With ``min_active <= 1`` expand phase 0 finds the frame's best emitting cost first, so no
    candidate beyond ``best + beam`` enters the table: a narrow beam over a graph of many arcs
    per state never crowds a 16-slot table (no note), and equals the cpu backend."""
    g = random_graph(1, num_states=40, num_tokens=6, arcs_per_state=12, eps_arcs_per_state=0.0)
    lp = random_log_probs(1, 1, 4, g.num_tokens, peaky=3.0)
    opts = CtcBeamOptions(beam=1.0, max_candidates=8)
    got = decode_ctc(lp, None, g, opts, backend="cuda")
    assert not any("token table" in n for h in got for n in h[0].notes), got[0][0].notes
    assert got == decode_ctc(lp, None, g, opts, backend="cpu")


def _hand_graph(src, dst, ilabel, olabel, weight, final):
    from wfstdecode.decoding_graph import DecodingGraph
    from wfstdecode.fstio import FstArrays

    fst = FstArrays(0, np.array(final, np.float32), np.array(src), np.array(dst),
                    np.array(ilabel), np.array(olabel), np.array(weight, np.float64))  # fmt: skip
    return DecodingGraph.from_arrays(fst, None, None, {})


@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=needs_cuda)])
def test_a_survivor_keeps_the_pruned_source_of_the_first_epsilon_arc(backend):
    """The only epsilon arc (arc index ``num_emitting``, the first epsilon arc) costs -5: its
    source (cost 3) is pruned once the closure lowers the best to -2, its target survives, and
    the record of the pruned source must still be kept for the traceback."""
    # 0 -t1-> 1 (0), 0 -t1-> 2 (3), 2 -eps:w1-> 3 (-5); only 3 is final
    g = _hand_graph([0, 0, 2], [1, 2, 3], [1, 1, 0], [0, 0, 1], [0.0, 3.0, -5.0],
                    [np.inf, np.inf, np.inf, 0.0])  # fmt: skip
    assert g.num_emitting_arcs == 2
    lp = np.zeros((1, 1, 1), np.float32)
    opts = CtcBeamOptions(beam=4.0)
    want = decode_ctc(lp, None, g, opts, backend="reference")
    got = decode_ctc(lp, None, g, opts, backend=backend)
    assert got == want
    assert got[0][0].word_ids == (1,) and got[0][0].score == 2.0


@needs_cuda
def test_a_table_exactly_half_full_is_not_crowded():
    """The beam halves only when a token table is *more* than half full: 8 candidates in a
    16-slot table (max_candidates=8) leave the beam and the result alone (no note)."""
    n = 8  # 0 -t1:wk-> k for k = 1..8, all final
    g = _hand_graph([0] * n, list(range(1, n + 1)), [1] * n, list(range(1, n + 1)),
                    [0.5] * n, [np.inf] + [0.0] * n)  # fmt: skip
    from wfstdecode.ctc.cuda.memory import table_size

    opts = CtcBeamOptions(beam=10.0, max_candidates=8)
    assert table_size(g.num_states, opts) == 2 * n
    lp = np.zeros((1, 1, 1), np.float32)
    got = decode_ctc(lp, None, g, opts, backend="cuda")
    assert got == decode_ctc(lp, None, g, opts, backend="reference")
    assert got[0][0].notes == ()


def test_cuda_memory_bytes_refuses_negative_frames():
    from wfstdecode.ctc import cuda_memory_bytes, max_cuda_batch_size

    g = random_graph(1, num_states=30, num_tokens=5)
    with pytest.raises(ValueError, match="frames must be >= 0; got -1"):
        cuda_memory_bytes(g, None, 1, frames=-1)
    with pytest.raises(ValueError, match="frames must be >= 0; got -1"):
        max_cuda_batch_size(g, None, memory_bytes=2**30, frames=-1)


def test_cuda_memory_sizes_take_whole_numbers_only():
    """A float batch size gave a float "largest batch" (247769.0), a string a bare TypeError:
    counts are integers (NumPy's too), named when not; a budget may be 80e9 bytes."""
    from wfstdecode.ctc import cuda_memory_bytes, max_cuda_batch_size
    from wfstdecode.errors import OptionsError

    g = random_graph(1, num_states=30, num_tokens=5)
    assert cuda_memory_bytes(g, None, np.int64(3)) == cuda_memory_bytes(g, None, 3)
    for bad in (2.5, "3", True):
        with pytest.raises(OptionsError, match=f"batch_size must be an integer >= 0; got {bad!r}"):
            cuda_memory_bytes(g, None, bad)
    largest = max_cuda_batch_size(g, None, memory_bytes=1e9)
    assert type(largest) is int and largest == max_cuda_batch_size(g, None, memory_bytes=10**9)
    for bad in (float("nan"), -1, "1e9"):
        with pytest.raises(OptionsError, match="memory_bytes must be a number of bytes >= 0"):
            max_cuda_batch_size(g, None, memory_bytes=bad)


@needs_cuda
def test_integer_device_log_probs_are_refused():
    """A Numba device array of integers is not log-probs: DecodeInputError, as on the host."""
    from numba import cuda

    from wfstdecode.errors import DecodeInputError

    g = random_graph(1, num_states=10, num_tokens=5)
    ints = cuda.to_device(np.zeros((1, 3, g.num_tokens), np.int32))
    with pytest.raises(DecodeInputError, match="floating point"):
        decode_ctc(ints, None, g, CtcBeamOptions(beam=4.0), backend="cuda")


def test_grid_rows_stay_within_cudas_limit():
    """CUDA launches at most 65535 blocks along a grid's y axis: the kernels with a grid row
    per lane take that many rows for a larger batch (and loop over the lanes)."""
    from wfstdecode.ctc.cuda.layout import MAX_GRID_ROWS, grid_rows

    assert MAX_GRID_ROWS == 65535
    assert [grid_rows(b) for b in (0, 1, 3, 65535, 65536, 10**6)] == [1, 1, 3] + [65535] * 3


@needs_cuda
@pytest.mark.skipif(not SIM, reason="checks launches under the simulator, which has no limit")
def test_batches_with_more_lanes_than_grid_rows(monkeypatch):
    """A batch with more lanes than a grid may have rows along y (65535 on a GPU; 2 here,
    enforced on every simulated launch) is searched as one with rows to spare: host log-probs,
    log-probs on the device (their checks), and calls of a few frames (a stream's survivors put
    back) all give the reference's paths. The simulator enforces no grid limit of its own, so
    without this a batch of 65536 utterances passed the tests and failed to launch on a GPU."""
    from numba import cuda
    from numba.cuda.simulator import kernel as sim_kernel

    from wfstdecode.ctc.cuda import layout

    rows = 2
    normalize = sim_kernel.normalize_kernel_dimensions

    def limited(griddim, blockdim):
        grid, block = normalize(griddim, blockdim)
        if max(grid[1:]) > rows:
            raise ValueError(f"grid {grid} has more than {rows} blocks along y or z")
        return grid, block

    monkeypatch.setattr(sim_kernel, "normalize_kernel_dimensions", limited)
    monkeypatch.setattr(layout, "MAX_GRID_ROWS", rows, raising=False)
    g = random_graph(2, num_states=10, num_tokens=4, arcs_per_state=2, eps_arcs_per_state=0.5)
    lp = random_log_probs(2, 5, 4, g.num_tokens, peaky=1.0)
    lengths = np.array([4, 2, 0, 3, 4])
    opts = CtcBeamOptions(beam=6.0, max_active=6, nbest=2)
    want = decode_ctc(lp, lengths, g, opts, backend="reference")
    assert decode_ctc(lp, lengths, g, opts, backend="cuda") == want
    assert decode_ctc(cuda.to_device(lp), lengths, g, opts, backend="cuda") == want
    assert decode_ctc(lp, lengths, g, opts, backend="cuda",
                      tuning=CudaTuning(max_frames_per_call=2)) == want  # fmt: skip

"""The cuda backend beyond reference equality (that is in test_search_equivalence.py): its
building blocks, token-table overflow, and what happens without a GPU. Runs on a GPU or under
Numba's CUDA simulator (tests/conftest.py turns it on when there is no GPU)."""

import os
import subprocess
import sys

import numpy as np
import pytest
from numba import cuda

from wfstdecode import OptionsError
from wfstdecode.backends import available_ctc_backends
from wfstdecode.ctc import CtcBeamOptions, CudaTuning, decode_ctc
from wfstdecode.ctc.cuda import primitives as P
from wfstdecode.ctc.cuda.target import SIM
from wfstdecode.testing import assert_hypotheses_equal, lexicon_graph, random_graph, simulate_ctc

needs_cuda = pytest.mark.skipif(
    "cuda" not in available_ctc_backends(), reason="no CUDA GPU and NUMBA_ENABLE_CUDASIM is off"
)


@cuda.jit
def _encode(costs, arcs, bits, back, keys, arcs_back):
    i = cuda.grid(1)
    if i < costs.shape[0]:
        bits[i] = P.ordered_bits(costs[i])
        back[i] = P.ordered_cost(bits[i])
        keys[i] = P.pack(costs[i], arcs[i])
        arcs_back[i] = P.key_arc(keys[i])


@needs_cuda
def test_order_preserving_cost_bits_and_keys():
    from wfstdecode.ctc.bundles import improves

    rng = np.random.default_rng(0)
    costs = np.concatenate((
        rng.normal(0, 50, 40), [0.0, -0.0, 1e-30, -1e-30, 3.4e38, -3.4e38, np.inf, 7.5, 7.5],
    )).astype(np.float32)  # fmt: skip
    arcs = rng.integers(-1, 1000, len(costs)).astype(np.int32)
    arcs[-2:] = [5, 3]  # equal costs: the smaller arc gives the smaller key
    n = len(costs)
    out = [np.zeros(n, dt) for dt in (np.uint32, np.float32, np.uint64, np.int32)]
    dev = [cuda.to_device(x) for x in out]
    _encode[1, 64](cuda.to_device(costs), cuda.to_device(arcs), *dev)
    bits, back, keys, arcs_back = (d.copy_to_host() for d in dev)
    assert np.array_equal(back, costs)  # -0.0 == 0.0 too
    assert np.array_equal(arcs_back, arcs)
    order = np.lexsort((arcs, costs))
    assert np.all(np.diff(keys[order].astype(object)) > 0)  # keys sort as (cost, arc)
    for i in range(n):  # the integer order of keys is the backends' recombination rule
        for j in range(n):
            assert (keys[i] < keys[j]) == improves(costs[i], arcs[i], 0, costs[j], arcs[j], 0), (
                i,
                j,
            )
    finite = np.isfinite(costs) & (costs != 0)
    assert np.array_equal(np.argsort(bits[finite], kind="stable"),
                          np.argsort(costs[finite], kind="stable"))  # fmt: skip


@needs_cuda
def test_token_table_overflow_tightens_the_beam_and_says_so():
    words = ["cat", "cap", "act", "tact", "pat", "apt", "tapa", "tap", "pact"]
    g = lexicon_graph(words)
    tok = g.tokens
    seqs = [[tok.id(c) for c in "catpacttap"], [tok.id(c) for c in "apt"]]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=1, confusion_prob=0.3, noise=2.0)
    wide = CtcBeamOptions(beam=30.0, max_active=1000)
    exact = decode_ctc(lp, lengths, g, wide, backend="cuda")
    assert not any(h[0].notes for h in exact)
    assert_hypotheses_equal(decode_ctc(lp, lengths, g, wide, backend="cpu"), exact, 1e-5)
    small = CtcBeamOptions(beam=30.0, max_active=1000, max_candidates=4)
    tight = decode_ctc(lp, lengths, g, small, backend="cuda")
    for h in tight:
        assert h[0].notes and "token table full" in h[0].notes[0], h[0].notes
        assert "beam tightened" in h[0].notes[0]
        assert np.isfinite(h[0].score) or "died" in h[0].notes[-1]


def test_max_candidates_is_validated():
    with pytest.raises(OptionsError, match="max_candidates"):
        CtcBeamOptions(max_candidates=0)
    with pytest.raises(OptionsError, match="max_candidates"):
        CtcBeamOptions(max_candidates=2.5)


def test_table_size_follows_the_options_and_the_graph():
    from wfstdecode.ctc.cuda.memory import table_size

    assert table_size(10**6, CtcBeamOptions(max_active=10_000)) == 65536  # 2 x 20000 -> 2^16
    assert table_size(10**6, CtcBeamOptions(max_candidates=1000)) == 2048
    assert table_size(40, CtcBeamOptions(max_active=10_000)) == 128  # every state fits


def test_cuda_memory_of_a_batch_and_the_largest_batch_that_fits():
    """The public sizing: per utterance and with host log-probs, the largest batch exact at the
    budget's edge, 0 when the graph alone does not fit, capped by int32 record indices."""
    from wfstdecode.ctc import cuda_memory_bytes, max_cuda_batch_size
    from wfstdecode.ctc.cuda.memory import table_size

    g = random_graph(1, num_states=3000, num_tokens=6)
    opts = CtcBeamOptions(max_active=500)
    H = table_size(g.num_states, opts)
    one, two = cuda_memory_bytes(g, opts, 1), cuda_memory_bytes(g, opts, 2)
    per_utterance = two - one
    with_upload = cuda_memory_bytes(g, opts, 2, frames=100) - two
    assert with_upload == 2 * 100 * (g.num_tokens + 1) * 4  # float32 host costs, frame maxima
    budget = cuda_memory_bytes(g, opts, 37) + per_utterance - 1
    assert max_cuda_batch_size(g, opts, memory_bytes=budget) == 37
    assert max_cuda_batch_size(g, opts, memory_bytes=one - per_utterance - 1) == 0
    assert max_cuda_batch_size(g, opts, memory_bytes=2**60) == (2**31 - 3) // (4 * H)
    with pytest.raises(ValueError, match="batch_size must be >= 0; got -1"):
        cuda_memory_bytes(g, opts, -1)
    with pytest.raises(ValueError, match="contexts must be >= 1; got 0"):
        max_cuda_batch_size(g, opts, memory_bytes=2**30, contexts=0)
    lattices = CtcBeamOptions(max_active=500, lattice_beam=6.0)
    assert cuda_memory_bytes(g, lattices, 2) - cuda_memory_bytes(g, lattices, 1) > per_utterance
    assert max_cuda_batch_size(g, lattices, memory_bytes=budget) < 37


@needs_cuda
@pytest.mark.parametrize(
    ("batch", "lattice", "phrases"), [(1, False, False), (3, False, False), (2, True, False),
                                      (2, False, True), (2, True, True)],
)  # fmt: skip
def test_cuda_memory_bytes_counts_what_the_search_allocates(batch, lattice, phrases):
    """cuda_memory_bytes against the device arrays a search really allocates (the graph's, and
    every per-search buffer, host log-probs uploaded): equal up to a few small control arrays,
    so a buffer added to the search without its bytes in the sizing fails here. A lattice
    search keeps each record's lane, state and context state (48 bytes a slot an utterance);
    phrases widen the tables of a graph with fewer states than the candidate capacity."""
    from wfstdecode.ctc import cuda_memory_bytes
    from wfstdecode.ctc.cuda.buffers import allocate, device_graph
    from wfstdecode.ctc.cuda.memory import record_capacity, table_size
    from wfstdecode.ctc.search import prepare_problem
    from wfstdecode.testing import random_log_probs

    g = random_graph(1, num_states=40 if phrases else 3000, num_tokens=6)
    opts = CtcBeamOptions(max_active=500, lattice_beam=4.0 if lattice else None)
    boosts = {"w1 w2": 1.0, "w1 w3 w2": 2.0, "w2 w3": 1.0} if phrases else None
    lp = random_log_probs(1, batch, 7, g.num_tokens)
    p = prepare_problem(lp, None, g, opts, boosts)
    contexts = int(p.boosts.contexts.max())
    assert (contexts > 1) == phrases
    H = table_size(g.num_states, opts, contexts)
    d = allocate(p, H, record_capacity(batch, H), 16, cuda.stream(), keep_survivors=lattice)
    # (the phrase tables, which the sizing cannot know, aside: bytes per phrase word)
    arrays = [*(a for bundle in d if bundle is not d.boosts for a in bundle), *device_graph(p)]
    info = d.control.info
    allocated = sum(a.nbytes for a in arrays if hasattr(a, "copy_to_host") and a is not info)
    expected = cuda_memory_bytes(g, opts, batch, frames=7, contexts=contexts)
    assert H >= 256 and abs(allocated - expected) <= 64 * batch + 256, (allocated, expected)
    if phrases:
        assert cuda_memory_bytes(g, opts, batch, frames=7) < expected  # contexts counted


@needs_cuda
def test_device_graph_is_cached_per_graph_and_arc_cost_options():
    """A graph's arrays go to the device once; its arc costs once per setting of what they are
    computed from (blank penalty, word insertion penalty, blank: the host cache's key), the
    last four at most; the cache keeps no graph alive."""
    import gc
    import weakref

    from wfstdecode.ctc.cuda import buffers
    from wfstdecode.ctc.search import prepare_problem
    from wfstdecode.testing import random_log_probs

    g = random_graph(2, num_states=20, num_tokens=5, arcs_per_state=3)
    lp = random_log_probs(2, 1, 3, g.num_tokens)

    def upload(graph, **opts):
        p = prepare_problem(lp, None, graph, CtcBeamOptions(**opts), None)
        return buffers.device_graph(p), p.arc_cost

    first, _ = upload(g)
    again, _ = upload(g, beam=3.0, nbest=2)  # other options, same arc costs: nothing uploaded
    assert all(a is b for a, b in zip(first, again, strict=True))
    penalised, costs = upload(g, word_insertion_penalty=1.5)
    assert penalised.arc_cost is not first.arc_cost and penalised.next_state is first.next_state
    assert np.array_equal(penalised.arc_cost.copy_to_host(), costs)
    for k in range(1, 4):
        upload(g, blank_penalty=float(k))
    assert len(buffers._GRAPHS[g].arc_costs) == 4
    assert upload(g)[0].arc_cost is not first.arc_cost  # the oldest was dropped: uploaded again
    alive = weakref.ref(g)
    del g, first, again, penalised
    gc.collect()
    assert alive() is None


def test_explicit_cuda_without_gpu_or_simulator_raises():
    if "cuda" in available_ctc_backends() and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        pytest.skip("this machine has a GPU")
    code = (
        "import numpy as np\n"
        "from wfstdecode import BackendUnavailableError\n"
        "from wfstdecode.ctc import decode_ctc\n"
        "from wfstdecode.testing import random_graph, random_log_probs\n"
        "g = random_graph(0)\n"
        "try:\n"
        "    decode_ctc(random_log_probs(0, 1, 3, g.num_tokens), None, g, backend='cuda')\n"
        "except BackendUnavailableError as e:\n"
        "    print('raised:', e)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "raised: backend='cuda' needs a CUDA GPU" in out.stdout, out.stdout


@pytest.mark.gpu
@pytest.mark.skipif(
    os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or "cuda" not in available_ctc_backends(),
    reason="needs a real CUDA GPU",
)
def test_real_gpu_large_batches_equal_cpu():
    """On a GPU: many utterances and frames, random graphs with epsilon cycles."""
    from wfstdecode.testing import random_log_probs

    for seed in range(6):
        g = random_graph(seed, num_states=200, num_tokens=30, arcs_per_state=6,
                         eps_arcs_per_state=0.8, eps_cycles=seed % 2 == 1)  # fmt: skip
        lp = random_log_probs(seed, 64, 120, g.num_tokens, peaky=2.0)
        lengths = np.random.default_rng(seed).integers(0, 121, 64)
        for opts in (CtcBeamOptions(beam=8.0, max_active=50), CtcBeamOptions(beam=5.0, nbest=3)):
            cpu = decode_ctc(lp, lengths, g, opts, backend="cpu")
            gpu = decode_ctc(lp, lengths, g, opts, backend="cuda")
            assert_hypotheses_equal(cpu, gpu, 1e-5, f"seed {seed} {opts}")


def _raw(lp, lengths, g, opts, **run):
    """The cuda backend's RawResults with run settings (chunking, double buffering)."""
    from wfstdecode.ctc.cuda.decode import decode_cuda
    from wfstdecode.ctc.search import prepare_problem

    return decode_cuda(prepare_problem(lp, lengths, g, opts, None), CudaTuning(**run))


def _same_raw(a, b):
    assert len(a) == len(b)
    for ra, rb in zip(a, b, strict=True):
        assert (ra.status, ra.died_frame, ra.notes) == (rb.status, rb.died_frame, rb.notes)
        assert len(ra.paths) == len(rb.paths)
        for (arcs_a, frames_a, cost_a), (arcs_b, frames_b, cost_b) in zip(
            ra.paths, rb.paths, strict=True
        ):
            assert np.array_equal(arcs_a, arcs_b) and np.array_equal(frames_a, frames_b)
            assert np.float32(cost_a) == np.float32(cost_b)


@needs_cuda
@pytest.mark.filterwarnings("ignore:Simulator timings are bogus")
def test_chunking_and_double_buffering_change_nothing():
    """One frame per chunk, odd chunk sizes, chunks cut short by a full record buffer (many
    records per frame relative to the small tables), and no double buffering: the same paths,
    bit for bit, as the default run."""
    from wfstdecode.testing import random_log_probs

    g = random_graph(3, num_states=40, num_tokens=6, arcs_per_state=4, eps_arcs_per_state=0.5)
    lp = random_log_probs(3, 3, 12, g.num_tokens, peaky=1.0)
    lengths = np.array([12, 0, 7])
    opts = CtcBeamOptions(beam=12.0, max_active=30, nbest=2)
    base = _raw(lp, lengths, g, opts)
    runs = [{"frames_per_chunk": 1, "double_buffer": False}, {"frames_per_chunk": 5}]
    for run in [*runs, {"frames_per_chunk": 64}]:
        stats: dict = {}
        _same_raw(base, _raw(lp, lengths, g, opts, profile=stats, **run))
        steps, chunks = stats["frame_steps"], stats["chunks"]
        assert steps >= 13 and chunks >= -(-13 // run["frames_per_chunk"]), (run, stats)
        if run["frames_per_chunk"] == 64:
            assert chunks > 1, "a 64-frame chunk should have stopped at its full record buffer"


def test_resident_block_size_follows_registers_and_batch():
    """H100 figures (132 SMs of 64K registers, 2048 threads, 228 KB shared memory) and the
    closure/prune kernel's 56 registers and ~22 KB of shared memory (tools/check_ptx.py): one
    1024-thread block fits per SM, two of 512, so up to 132 utterances get 1024 threads and up
    to 264 get 512."""
    from wfstdecode.ctc.cuda.driver import SmLimits, resident_block_size

    h100 = SmLimits(count=132, registers=65536, threads=2048, shared=233472)
    sizes = {b: resident_block_size(b, 56, 22_000, h100) for b in (1, 132, 133, 264, 265, 512)}
    assert sizes == {1: 1024, 132: 1024, 133: 512, 264: 512, 265: 256, 512: 256}
    assert resident_block_size(1, 128, 22_000, h100) == 512  # 1024 x 128 registers never fit
    assert resident_block_size(132, 32, 120_000, h100) == 1024  # one block per SM, any size
    assert resident_block_size(133, 32, 120_000, h100) == 256  # shared memory: not all at once


@needs_cuda
def test_closure_prune_block_size_changes_nothing():
    """The closure/prune kernel gives the same paths, bit for bit, whatever its block size
    (the fixed point and the tie-breaks do not depend on how the block's threads share work)."""
    from wfstdecode.ctc.cuda.driver import prune_block_size
    from wfstdecode.testing import random_log_probs

    g = random_graph(6, num_states=40, num_tokens=6, arcs_per_state=4, eps_arcs_per_state=0.8)
    lp = random_log_probs(6, 2, 8, g.num_tokens, peaky=1.0)
    opts = CtcBeamOptions(beam=10.0, max_active=25, nbest=3)
    base = _raw(lp, np.array([8, 5]), g, opts)
    assert prune_block_size(2) in ((8,) if SIM else (256, 512, 1024))
    for threads in (3, 16):
        _same_raw(base, _raw(lp, np.array([8, 5]), g, opts, prune_threads=threads))
    with pytest.raises(OptionsError, match=r"prune_threads must be in 1\.\.\d+ .*; got 2048"):
        _raw(lp, None, g, opts, prune_threads=2048)


@needs_cuda
def test_pinned_record_buffers_are_kept_across_calls(monkeypatch):
    """The pinned record memory of one call serves the next (no new pinned allocation), also
    after a call that stopped with copies not taken; calls running at once get a buffer each;
    release_cuda_buffers drops the kept ones."""
    from wfstdecode.ctc import release_cuda_buffers
    from wfstdecode.ctc.cuda import records
    from wfstdecode.testing import random_log_probs

    monkeypatch.setattr(records, "_KEPT", [])
    g = random_graph(4, num_states=20, num_tokens=5, arcs_per_state=3, eps_arcs_per_state=0.4)
    lp = random_log_probs(4, 2, 8, g.num_tokens)
    opts = CtcBeamOptions(beam=8.0, max_active=20)
    first = _raw(lp, None, g, opts, frames_per_chunk=2)
    assert len(records._KEPT) == 1
    kept = records._KEPT[0][1]
    pinned = [id(a) for slot in kept._pinned for a in slot]
    collect = records.RecordCopier.collect

    def stop_at_chunk_2(self, c):
        if c == 2:
            raise RuntimeError("stopped")
        return collect(self, c)

    with monkeypatch.context() as m:
        m.setattr(records.RecordCopier, "collect", stop_at_chunk_2)
        with pytest.raises(RuntimeError, match="stopped"):
            _raw(lp, None, g, opts, frames_per_chunk=2)
    assert kept.holds(0) or kept.holds(1)  # left behind by the stopped call
    _same_raw(first, _raw(lp, None, g, opts, frames_per_chunk=2))
    assert [b for _, b in records._KEPT] == [kept]
    assert [id(a) for slot in kept._pinned for a in slot] == pinned
    a, b = records.take_record_buffer(False), records.take_record_buffer(False)  # two at once
    assert a is kept and b is not kept
    records.keep_record_buffer(a), records.keep_record_buffer(b)
    release_cuda_buffers()
    assert records._KEPT == []


@needs_cuda
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_device_resident_log_probs_equal_host_ones(dtype):
    """Log-probs already on the device are read in place (strided views too), scaled there, and
    give the host path's hypotheses, scores included; ``auto`` picks cuda for them."""
    from wfstdecode.backends import is_device_array

    g = lexicon_graph(["cat", "cap", "act", "tact", "pat"])
    tok = g.tokens
    seqs = [[tok.id(c) for c in "cattap"], [tok.id(c) for c in "act"], []]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=4, confusion_prob=0.2, noise=1.0)
    lp = lp.astype(dtype)
    opts = CtcBeamOptions(beam=10.0, acoustic_scale=0.7, nbest=2)
    host = decode_ctc(lp, lengths, g, opts, backend="cpu")
    doubled = np.repeat(lp, 2, axis=1)  # frames duplicated: [:, ::2] is lp, as a strided view
    dev = cuda.to_device(doubled)[:, ::2]
    assert is_device_array(dev)
    assert_hypotheses_equal(host, decode_ctc(dev, lengths, g, opts, backend="cuda"), 0.0)
    if dtype == np.float32:
        assert_hypotheses_equal(host, decode_ctc(dev, lengths, g, opts), 0.0)  # auto: cuda
        assert_hypotheses_equal(host, decode_ctc(dev, lengths, g, opts, backend="cpu"), 0.0)


@needs_cuda
def test_device_resident_log_probs_are_checked_like_host_ones():
    from wfstdecode import DecodeInputError

    g = random_graph(1)
    lp = np.full((2, 5, g.num_tokens), -2.0, np.float32)
    lengths = np.array([5, 3])
    for where, value, message in (
        ((1, 2, 0), np.nan, r"log_probs\[1, 2\] contains NaN"),
        ((0, 4, 1), np.inf, r"log_probs\[0, 4\] contains \+inf"),
        ((1, 1, slice(None)), -np.inf, r"log_probs\[1, 1\] is -inf in every column"),
    ):
        bad = lp.copy()
        bad[where] = value
        for x in (bad, cuda.to_device(bad)):
            with pytest.raises(DecodeInputError, match=message):
                decode_ctc(x, lengths, g, backend="cuda")
    beyond = lp.copy()
    beyond[1, 4, :] = np.nan  # past lengths[1]: never read
    decode_ctc(cuda.to_device(beyond), lengths, g, backend="cuda")


def test_cuda_graphs_option():
    from wfstdecode import BackendUnavailableError
    from wfstdecode.ctc.cuda.driver import _use_graphs

    with pytest.raises(OptionsError, match="cuda_graphs"):
        CtcBeamOptions(cuda_graphs="yes")
    assert not _use_graphs("off", None, 1000, 16)
    if not SIM:
        pytest.skip("the rest is about machines that cannot capture graphs")
    assert not _use_graphs("auto", None, 1000, 16)
    with pytest.raises(BackendUnavailableError, match="cuda_graphs='on' but the CUDA simulator"):
        _use_graphs("on", None, 1000, 16)


def test_the_capture_stream_lives_as_long_as_its_numba_view(monkeypatch):
    """The search's arrays are made on the Numba view of CuPy's capture stream and are copied
    after `run_search` returns: CuPy destroys a stream it no longer references, so the view must
    hold it (without that, an H100 failed those copies with CUDA_ERROR_INVALID_CONTEXT)."""
    import gc
    import types
    import weakref

    from wfstdecode.ctc.cuda import driver

    class FakeCupyStream:
        def __init__(self, non_blocking):
            self.ptr = 1234

    class FakeNumbaView:
        def __init__(self, ptr):
            self.ptr = ptr

    fake_cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(Stream=FakeCupyStream))
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setattr(cuda, "external_stream", FakeNumbaView, raising=False)
    capture, view = driver._capture_streams()
    assert view.ptr == capture.ptr
    alive = weakref.ref(capture)
    del capture
    gc.collect()
    assert alive() is not None
    del view
    gc.collect()
    assert alive() is None


class _DLPackOnly:
    """Stands for a GPU array with only a DLPack interface (a JAX array, say)."""

    def __init__(self, device_type):
        self.device_type = device_type

    def __dlpack_device__(self):
        return (self.device_type, 0)


def test_dlpack_only_device_arrays_are_recognised():
    from wfstdecode.backends import is_device_array

    assert is_device_array(_DLPackOnly(2))  # kDLCUDA
    assert not is_device_array(_DLPackOnly(1))  # kDLCPU
    assert not is_device_array(np.zeros(3))


@needs_cuda
def test_dlpack_only_input_without_cupy_names_what_is_missing():
    import importlib.util

    from wfstdecode import DecodeInputError

    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed: DLPack inputs are wrapped by it")
    with pytest.raises(DecodeInputError, match="only a DLPack interface.*needs CuPy"):
        decode_ctc(_DLPackOnly(2), None, random_graph(0), backend="cuda")


@pytest.mark.gpu
@pytest.mark.skipif(
    os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or "cuda" not in available_ctc_backends(),
    reason="needs a real CUDA GPU",
)
@pytest.mark.parametrize("graphs", ["on", "off"])
def test_real_gpu_torch_and_cupy_inputs_stay_on_the_device(graphs):
    """torch CUDA tensors (float32, bfloat16, a transposed view) and CuPy arrays give the host
    input's hypotheses, with and without CUDA graphs; with an acoustic scale that is not a power
    of two, bit for bit (the device must round the scaled log-prob before adding, not fuse)."""
    import torch

    if graphs == "on":
        pytest.importorskip("cupy", reason="CUDA graphs are captured with CuPy")

    g = lexicon_graph(["cat", "cap", "act", "tact", "pat"])
    tok = g.tokens
    seqs = [[tok.id(c) for c in w] for w in ("cattap", "act", "pat", "tact")] * 10
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=5, confusion_prob=0.2, noise=1.0)
    opts = CtcBeamOptions(beam=10.0, nbest=2, cuda_graphs=graphs)
    host = decode_ctc(lp, lengths, g, opts, backend="cpu")
    t = torch.from_numpy(lp).cuda()
    assert_hypotheses_equal(host, decode_ctc(t, lengths, g, opts), 1e-4)  # auto: cuda
    swapped = torch.from_numpy(np.ascontiguousarray(lp.transpose(1, 0, 2))).cuda()
    assert_hypotheses_equal(host, decode_ctc(swapped.transpose(0, 1), lengths, g, opts), 1e-4)
    bf16 = t.to(torch.bfloat16)
    ref16 = decode_ctc(bf16.float().cpu().numpy(), lengths, g, opts, backend="cpu")
    assert_hypotheses_equal(ref16, decode_ctc(bf16, lengths, g, opts, backend="cuda"), 1e-4)
    scaled = CtcBeamOptions(beam=10.0, nbest=2, cuda_graphs=graphs, acoustic_scale=0.7)
    from_host = decode_ctc(lp, lengths, g, scaled, backend="cuda")
    assert_hypotheses_equal(from_host, decode_ctc(t, lengths, g, scaled, backend="cuda"), 0.0)
    cupy = pytest.importorskip("cupy")
    assert_hypotheses_equal(host, decode_ctc(cupy.asarray(lp), lengths, g, opts), 1e-4)


@needs_cuda
@pytest.mark.parametrize("kernels_loaded", [False, True])
def test_graph_replay_loop_gives_the_same_paths(monkeypatch, kernels_loaded):
    """The host loop of the CUDA-graph path (every chunk replays all its frame steps, idle ones
    included; the first chunk runs uncaptured when the kernels never ran in this context) with
    the capture stood in for by a replay of the same launches: the paths of the plain loop."""
    from wfstdecode.ctc.cuda import driver as _cuda
    from wfstdecode.testing import random_log_probs

    class Replay:
        def __init__(self, launch_chunk, _capture_stream, stream):
            self.launch_chunk, self.stream, self.launches = launch_chunk, stream, 0

        def launch(self, _capture_stream):
            self.launches += 1
            self.launch_chunk(self.stream)

    replays = []
    monkeypatch.setattr(_cuda, "_use_graphs", lambda mode, *_: mode != "off")
    monkeypatch.setattr(_cuda, "_capture_streams", lambda: (None, cuda.stream()))
    monkeypatch.setattr(_cuda, "_capture", lambda *a: replays.append(Replay(*a)) or replays[-1])
    monkeypatch.setattr(_cuda.FrameSequence, "kernels_loaded", lambda self: kernels_loaded)
    g = random_graph(5, num_states=30, num_tokens=5, arcs_per_state=3, eps_arcs_per_state=0.4)
    lp = random_log_probs(5, 2, 11, g.num_tokens, peaky=1.5)
    lengths = np.array([11, 4])
    opts = CtcBeamOptions(beam=10.0, max_active=20)
    plain = _raw(lp, lengths, g, CtcBeamOptions(beam=10.0, max_active=20, cuda_graphs="off"))
    _same_raw(plain, _raw(lp, lengths, g, opts, frames_per_chunk=4))
    # 12 frame steps, 4 per chunk: 3 replays, or 1 plain chunk and 2 replays
    assert len(replays) == 1 and replays[0].launches == (3 if kernels_loaded else 2)


@pytest.mark.skipif(SIM or "cuda" not in available_ctc_backends(), reason="needs a CUDA GPU")
def test_kernels_launch_without_numba_dispatch_after_the_first(monkeypatch):
    """`launch.Launch` finds each kernel's compiled overload after its first launch (skipping
    Numba's typing of every argument at every launch), and a second search of the same kinds
    captures its first chunk at once: no plain chunk."""
    from wfstdecode.ctc.cuda import driver as _cuda
    from wfstdecode.ctc.cuda import launch

    launches, plain_chunks = [], []
    call, chunk = launch.Launch.__call__, _cuda.FrameSequence.launch_chunk
    monkeypatch.setattr(launch.Launch, "__call__",
                        lambda self, *a: call(self, *a) or launches.append(self))  # fmt: skip
    monkeypatch.setattr(_cuda.FrameSequence, "launch_chunk",
                        lambda self, *a: plain_chunks.append(a) or chunk(self, *a))  # fmt: skip
    g = random_graph(3, num_states=30, num_tokens=5, arcs_per_state=3, eps_arcs_per_state=0.4)
    lp, lengths = simulate_ctc([[1, 2, 3, 1] * 10], g.num_tokens, seed=3)
    opts = CtcBeamOptions(beam=10.0, max_active=20)
    host = decode_ctc(lp, lengths, g, opts, backend="cpu")
    for _ in range(2):
        launches.clear()
        plain_chunks.clear()
        assert_hypotheses_equal(host, decode_ctc(lp, lengths, g, opts, backend="cuda"), 1e-4)
        assert len(launches) > 8 and all(one.compiled for one in launches)
    if _cuda._graphs_unavailable() == "":  # graphs need CuPy
        assert len(plain_chunks) == 1  # the second search: only inside its capture


@needs_cuda
@pytest.mark.parametrize("double_buffer", [True, False])
def test_host_loop_orders_launches_copies_and_waits(monkeypatch, double_buffer):
    """The simulator runs streams synchronously, so a misplaced wait could never show there as
    wrong paths: this checks the order of the host loop's stream operations instead. With
    double buffering, chunk ``c`` is launched only after the stream waits for the copy-out of
    chunk ``c - 2`` (same record buffer), and each chunk is collected before the chunk that
    reuses its buffer; without, every launch waits for the previous chunk's copy."""
    from wfstdecode.ctc.cuda import driver as _cuda
    from wfstdecode.ctc.cuda import records
    from wfstdecode.testing import random_log_probs

    log = []
    names = iter(["computed0", "computed1", "copied0", "copied1"])
    real_event = cuda.event

    class Event:
        """Logs, and still orders the streams: on a GPU, events that did nothing let a copy
        race the kernels it must wait for (negative record counts, found on an H200)."""

        def __init__(self):
            self.name = next(names, "profile")
            self.event = real_event()

        def record(self, stream=0):
            log.append(("record", self.name))
            self.event.record(stream)

        def wait(self, stream=0):
            log.append(("wait", self.name))
            self.event.wait(stream)

        def synchronize(self):
            self.event.synchronize()

    launch, collect = _cuda.FrameSequence.launch_chunk, records.RecordCopier.collect
    monkeypatch.setattr(cuda, "event", Event)
    monkeypatch.setattr(records, "_KEPT", [])  # a fresh copier
    monkeypatch.setattr(_cuda.FrameSequence, "launch_chunk",
                        lambda self, *a: log.append(("launch",)) or launch(self, *a))  # fmt: skip
    monkeypatch.setattr(records.RecordCopier, "collect",
                        lambda self, c: log.append(("collect", c)) or collect(self, c))  # fmt: skip
    g = random_graph(2, num_states=20, num_tokens=5, arcs_per_state=3)
    lp = random_log_probs(2, 1, 9, g.num_tokens)
    # Graphs off: on a GPU "auto" captures chunks 2.. as one graph, replayed without
    # launch_chunk (found on an H200, 2026-11-26); the waits and records are the same either way.
    opts = CtcBeamOptions(beam=6.0, max_active=10, cuda_graphs="off")
    _raw(lp, None, g, opts, frames_per_chunk=2, double_buffer=double_buffer)
    launches = [i for i, op in enumerate(log) if op == ("launch",)]
    assert len(launches) == 5  # 10 frames, 2 per chunk
    collected = {op[1]: i for i, op in enumerate(log) if op[0] == "collect"}
    assert sorted(collected) == list(range(5))
    for c, at in enumerate(launches):
        assert log[at + 1] == ("record", f"computed{c % 2}")
        before = log[:at]
        if double_buffer and c >= 2:
            assert collected[c - 2] < at and before[-1] == ("wait", f"copied{c % 2}")
            assert ("record", f"copied{c % 2}") in log[collected[c - 2] : at]
        if not double_buffer and c >= 1:
            assert collected[c - 1] < at and before[-1] == ("wait", f"copied{(c - 1) % 2}")
        if double_buffer and c + 2 < len(launches):
            assert at < collected[c] < launches[c + 2]


@needs_cuda
@pytest.mark.parametrize("seed", range(3))
def test_long_utterances_decoded_in_calls_equal_one_call(seed):
    """`CudaTuning.max_frames_per_call`: utterances longer than it are searched in calls of that
    many frames, their records collected on the host in between (memory follows the active
    tokens); the paths, scores, notes and errors are those of one call, bit for bit — with a
    crowded token table (the beam tightened, carried from call to call) and a search that
    dies too."""
    from wfstdecode.testing import random_log_probs

    g = random_graph(seed, num_states=25, num_tokens=5, arcs_per_state=3, eps_arcs_per_state=0.8,
                     word_prob=0.5)  # fmt: skip
    lp = random_log_probs(seed, 3, 14, g.num_tokens, peaky=1.0)
    lengths = np.array([14, 5, 0])
    opts = CtcBeamOptions(beam=8.0, nbest=3)
    one = _raw(lp, lengths, g, opts)
    for per_call, collect_at in ((1, 1 + seed), (4, 2**16)):
        calls = _raw(lp, lengths, g, opts, max_frames_per_call=per_call,
                     collect_records_at=collect_at)  # fmt: skip
        _same_raw(one, calls)
    words = ["cat", "cap", "act", "tact", "pat", "apt", "tapa", "tap", "pact"]
    lex = lexicon_graph(words)
    seqs = [[lex.tokens.id(c) for c in "catpacttap"], [lex.tokens.id(c) for c in "apt"]]
    lp, lengths = simulate_ctc(seqs, lex.num_tokens, seed=1, confusion_prob=0.3, noise=2.0)
    crowded = CtcBeamOptions(beam=30.0, max_active=1000, max_candidates=12)  # never full
    one = _raw(lp, lengths, lex, crowded)
    assert all("token table full" in r.notes[0] for r in one)
    _same_raw(one, _raw(lp, lengths, lex, crowded, max_frames_per_call=3 + seed))
    lex = lexicon_graph(["ab"], word_cost=[0.0])
    dead = np.full((1, 9, lex.num_tokens), -np.inf, np.float32)
    dead[0, :, lex.tokens.id("<blk>")] = 0.0
    dead[0, 5, :] = -np.inf
    dead[0, 5, lex.tokens.id("b")] = 0.0  # "b" cannot start a word: every token dies
    died = _raw(dead, None, lex, CtcBeamOptions())
    assert died[0].died_frame == 5
    _same_raw(died, _raw(dead, None, lex, CtcBeamOptions(), max_frames_per_call=2))

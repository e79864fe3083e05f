"""Finite but hostile inputs (issue 11): huge log-prob magnitudes keep float32 costs meaningful
(per-frame relative costs, a log-prob floor, cost offsets), out-of-range boosts and scales are
refused naming the range, a huge nbest allocates only for the paths that exist, and a decode
stops on KeyboardInterrupt."""

import _thread
import signal
import threading
import time

import numpy as np
import pytest

from wfstdecode.ctc import CpuTuning, CtcBeamOptions, decode_ctc
from wfstdecode.ctc._problem import (
    ALL_NEG_INF,
    FINE,
    NAN_OR_POS_INF,
    _frame_rows,
    costs_and_first_bad,
    search_costs,
)
from wfstdecode.ctc.options import LOG_PROB_FLOOR
from wfstdecode.errors import DecodeInputError, OptionsError
from wfstdecode.testing import (
    assert_hypotheses_equal,
    fast_backends,
    lexicon_graph,
    random_graph,
    simulate_ctc,
)

BACKENDS = ["reference", *fast_backends()]
WORDS = ["cat", "cap", "act", "tact", "pat", "apt", "tapa"]


def _lexicon_case(seed=0, repeat=1):
    """One simulated utterance of three lexicon words (``repeat`` times over), noisy enough
    that several paths compete."""
    g = lexicon_graph(WORDS, word_cost=[1.0, 1.2, 2.0, 2.5, 1.1, 2.2, 2.4])
    words = [WORDS[i] for i in np.random.default_rng(seed).integers(len(WORDS), size=3)]
    seq = [g.tokens.id(c) for c in "".join(words)] * repeat
    lp, lengths = simulate_ctc([seq], g.num_tokens, seed=seed, confusion_prob=0.3, noise=1.5)
    return g, lp, lengths


def _numpys_costs(lp, scale):
    with np.errstate(invalid="ignore", over="ignore"):
        want = lp - lp.max(axis=-1, keepdims=True)
        np.maximum(want, np.float32(LOG_PROB_FLOOR), out=want)
        want[lp == -np.inf] = -np.inf
        want *= np.float32(-scale)
    return want


@pytest.mark.parametrize("scale", [1.0, 0.7, 2.5])
def test_search_costs_equal_numpys_operations_bit_for_bit(scale):
    """The one-pass `search_costs` against the NumPy operations it replaces, on values with
    -inf columns, dead frames, huge magnitudes and NaN / +inf (beyond lengths: never read, but
    computed all the same)."""
    rng = np.random.default_rng(int(scale * 10))
    lp = (rng.standard_normal((5, 9, 7)) * rng.choice([0.1, 10.0, 1e6], (5, 9, 1))).astype(
        np.float32
    )
    lp[rng.random(lp.shape) < 0.2] = -np.inf
    lp[1, 2] = -np.inf
    lp[2, 3, 4] = np.nan
    lp[3, 4, 1] = np.inf
    want = _numpys_costs(lp, scale)
    got = search_costs(lp, scale)
    assert got.dtype == np.float32 and got.shape == lp.shape
    assert np.array_equal(got, want, equal_nan=True)  # -0.0 == 0.0; NaN where NumPy has it


VIEWED = ("c", "time sliced", "every other utterance", "one frame", "time major", "broadcast")


@pytest.mark.parametrize("layout", [*VIEWED, "fortran", "columns sliced"])
@pytest.mark.parametrize("threads", [1, 2])
def test_search_costs_of_any_memory_layout_equal_numpys(layout, threads):
    """Views read in place (`_frame_rows`: frames that are rows of one buffer) or copied give
    NumPy's costs bit for bit, with as many columns as take the row maximum's eight running
    maxima and its tail (21), the largest in any of them, -inf columns, and lengths."""
    rng = np.random.default_rng(7)
    full = (rng.standard_normal((6, 11, 23)) * 4).astype(np.float32)
    full[rng.random(full.shape) < 0.2] = -np.inf
    for b in range(6):
        for t in range(11):  # the largest in each of the 21 columns somewhere
            full[b, t, (b * 11 + t * 5) % 21] = 9.0
    c = full[:, :, :21].copy()
    lp = {
        "c": c,
        "time sliced": c[:, :7],
        "every other utterance": c[::2],
        "one frame": c[:, :1],
        "time major": np.ascontiguousarray(c.transpose(1, 0, 2)).transpose(1, 0, 2),
        "broadcast": np.broadcast_to(c[:1], c.shape),
        "fortran": np.asfortranarray(c),
        "columns sliced": full[:, :, :21],
    }[layout]
    assert np.shares_memory(_frame_rows(lp)[0], lp) == (layout in VIEWED)
    lens = np.minimum(np.arange(len(lp)) % 4 + 5, lp.shape[1])
    ac, bad = costs_and_first_bad(lp, 1.5, lens, threads)
    assert bad[2] == FINE
    _assert_equal_within_lengths(ac, _numpys_costs(lp, 1.5), lens)


def _assert_equal_within_lengths(ac, want, lens):
    """``ac`` equals ``want`` within each utterance's length, and is 0 beyond it."""
    for b, n in enumerate(lens):
        np.testing.assert_array_equal(ac[b, :n], want[b, :n])
        assert not ac[b, n:].any()


@pytest.mark.parametrize("threads", [1, 2, None])
def test_costs_stop_at_the_lengths_and_report_the_first_bad_frame(threads):
    """The one pass reads frames within the lengths only (costs 0 beyond) and reports the first
    NaN / +inf frame in (utterance, frame) order before the first all--inf frame, on one
    thread or with the utterances spread over several."""
    lp = np.zeros((3, 4, 2), np.float32)
    lp[..., 1] = -1.0
    lp[0, 3] = np.nan  # beyond lengths[0]: never read
    lp[1, 2] = -np.inf  # a dead frame
    lp[2, 1, 0] = np.inf  # after the dead frame in order, but NaN / +inf come first
    lens = [3, 4, 2]
    ac, bad = costs_and_first_bad(lp, 1.0, lens, threads)
    assert bad == (2, 1, NAN_OR_POS_INF)
    assert not ac[0, 3].any() and np.isfinite(ac[0, :3]).all()
    lp[2, 1, 0] = 0.0
    lp[2, 0] = -np.inf  # a later dead frame, in another utterance
    assert costs_and_first_bad(lp, 1.0, lens, threads)[1] == (1, 2, ALL_NEG_INF)
    lp[1, 2] = lp[2, 0] = 0.0
    ac, bad = costs_and_first_bad(lp, 1.0, lens, threads)
    assert bad[2] == FINE
    _assert_equal_within_lengths(ac, search_costs(lp, 1.0), lens)


def test_search_costs_are_relative_floored_and_scaled():
    lp = np.array([[[-1.0, -3.0, -np.inf], [-1e10, -1e10, -1e10], [0.0, -5000.0, -2.0]]])
    ac = search_costs(lp, 2.0)
    expected = [[[0.0, 4.0, np.inf], [0.0, 0.0, 0.0], [0.0, -2.0 * LOG_PROB_FLOOR, 4.0]]]
    np.testing.assert_array_equal(ac, np.array(expected, np.float32))
    assert ac.dtype == np.float32


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_frame_of_minus_1e10_decodes_as_any_uniform_frame(backend):
    """The issue's case: one frame at -1e10 in every column. Every path takes one log-prob of
    that frame, so it ranks paths as a frame of zeros does: same paths, scores 1e10 apart."""
    g, lp, lengths = _lexicon_case(1)
    opts = CtcBeamOptions(beam=8.0, nbest=3)
    hostile, uniform = lp.copy(), lp.copy()
    hostile[0, 9, :] = -1e10
    uniform[0, 9, :] = 0.0
    got = decode_ctc(hostile, lengths, g, opts, backend=backend)
    want = decode_ctc(uniform, lengths, g, opts, backend=backend)
    assert got[0][0].words  # the old search returned no words here
    for h, w in zip(got[0], want[0], strict=True):
        assert (h.words, h.tokens, h.timestamps) == (w.words, w.tokens, w.timestamps)
        assert h.acoustic_score == pytest.approx(w.acoustic_score - 1e10, rel=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_log_probs_below_the_floor_decode_as_at_the_floor(backend):
    """A column far below the frame's best (a masked token, say) is floored: -1e10 and -1e4
    give the same paths; -inf stays impossible. Scores use the raw values."""
    g, lp, lengths = _lexicon_case(2)
    masked, floored = lp.copy(), lp.copy()
    masked[0, :, 3] = -1e10
    floored[0, :, 3] = lp[0].max(axis=1) - 1e4
    opts = CtcBeamOptions(beam=8.0, nbest=2)
    a = decode_ctc(masked, lengths, g, opts, backend=backend)
    b = decode_ctc(floored, lengths, g, opts, backend=backend)
    assert [h.words for h in a[0]] == [h.words for h in b[0]]
    assert [h.tokens for h in a[0]] == [h.tokens for h in b[0]]


@pytest.mark.parametrize("backend", fast_backends())
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda lp: lp * np.float32(1e30 / 50), id="magnitude_1e30"),
        pytest.param(lambda lp: np.where(lp < -5, np.float32(-3e38), lp), id="near_float32_min"),
        pytest.param(lambda lp: lp + np.float32(1e9), id="offset_1e9"),
    ],
)
def test_extreme_magnitudes_equal_the_reference(backend, make):
    g = random_graph(4, num_states=30, num_tokens=7, arcs_per_state=4)
    lp = make(np.random.default_rng(4).normal(-10, 5, size=(3, 25, 7)).astype(np.float32))
    opts = CtcBeamOptions(beam=6.0, max_active=20, acoustic_scale=1000.0, nbest=2)
    boosts = [{"w1": 1000.0}, {"w2": -1000.0}, None]
    want = decode_ctc(lp, None, g, opts, boosts, backend="reference")
    got = decode_ctc(lp, None, g, opts, boosts, backend=backend)
    assert_hypotheses_equal(want, got, 1e-6)


def test_long_utterance_costs_stay_small():
    """Cost offsets: after 20,000 frames the search's path costs are still within a few beams
    of zero, while the path's score is in the tens of thousands."""
    from wfstdecode.ctc.cpu import decode_cpu
    from wfstdecode.ctc.search import prepare_problem

    g, lp, lengths = _lexicon_case(3, repeat=700)
    assert lengths[0] > 20_000
    p = prepare_problem(lp, lengths, g, CtcBeamOptions(beam=8.0), None)
    (_arcs, _frames, cost), *_ = decode_cpu(p)[0].paths
    hyp = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=8.0), backend="cpu")[0][0]
    assert abs(cost) < 50 and hyp.score < -5000, (cost, hyp.score)
    assert len(hyp.words) >= 1500


@pytest.mark.parametrize(
    ("kwargs", "boosts", "error", "match"),
    [
        ({"acoustic_scale": 1e30}, None, OptionsError, r"acoustic_scale must be in \[0.001, 1000"),
        ({}, {"cat": 1e10}, DecodeInputError, r"boosts\[0\]\['cat'\] must be in \[-1000, 1000\]"),
        ({}, {"cat": 1e39}, DecodeInputError, r"must be in \[-1000, 1000\]; got 1e\+39"),
        ({"blank_penalty": 1e30}, None, OptionsError, r"blank_penalty must be in"),
    ],
)
def test_out_of_range_terms_are_refused_with_the_range(kwargs, boosts, error, match):
    g, lp, lengths = _lexicon_case(0)
    with pytest.raises(error, match=match):
        decode_ctc(lp, lengths, g, CtcBeamOptions(**kwargs), boosts, backend="cpu")


@pytest.mark.parametrize("backend", BACKENDS)
def test_huge_nbest_allocates_only_what_exists(backend):
    """nbest=10**8 used to allocate nbest x 2T output rows (MemoryError). Now the rows grow
    with the paths found: the result equals the one at an nbest just above their count."""
    g = random_graph(5, num_states=60, num_tokens=6, num_words=40, word_prob=0.8, final_prob=1)
    lp = np.random.default_rng(5).normal(0, 0.5, size=(2, 12, 6)).astype(np.float32)
    huge = decode_ctc(lp, None, g, CtcBeamOptions(beam=50.0, nbest=10**8), backend=backend)
    n = len(huge[0])
    assert n > 16  # more than the first rows the backends try: the retry ran
    enough = decode_ctc(lp, None, g, CtcBeamOptions(beam=50.0, nbest=n + 1), backend=backend)
    assert_hypotheses_equal(huge, enough, 1e-9)


@pytest.mark.parametrize("bad", [0, -1, 2.0, "4", True])
def test_num_threads_must_be_a_positive_int(bad):
    g, lp, lengths = _lexicon_case(0)
    with pytest.raises(OptionsError, match=r"num_threads must be None or an int >= 1; got"):
        decode_ctc(lp, lengths, g, backend="cpu", num_threads=bad)


def test_num_threads_above_the_pool_is_capped():
    g, lp, lengths = _lexicon_case(0)
    a = decode_ctc(lp, lengths, g, backend="cpu", num_threads=10_000)
    assert_hypotheses_equal(a, decode_ctc(lp, lengths, g, backend="cpu"), 0.0)


def test_cancel_flag_stops_every_utterance_at_its_next_frame():
    from wfstdecode.ctc._traceback import PathRows
    from wfstdecode.ctc.cpu import _run
    from wfstdecode.ctc.search import prepare_problem
    from wfstdecode.ctc.status import CANCELLED

    g, lp, _ = _lexicon_case(0)
    p = prepare_problem(np.repeat(lp, 3, axis=0), None, g, CtcBeamOptions(), None)
    out = _run(p, np.arange(3), PathRows(3, 1, 100), CpuTuning(), np.ones(1, np.int32))
    assert (out.status & CANCELLED).all() and (out.n == 0).all()


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler for the test: `_thread.interrupt_main` does nothing while
    another handler is installed, as something earlier in a test process may leave it (seen
    once in 3 full CI runs: both tests below then waited for an interrupt that never came)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _interrupt_and_wait(cancel, seen: dict, seconds: float = 60) -> None:
    """Ctrl-C (simulated) from inside a stand-in worker step, then wait till the main thread
    sets ``cancel`` (or ``seconds`` pass: a broken wiring fails the test, not hangs it)."""
    _thread.interrupt_main()
    deadline = time.monotonic() + seconds
    while not cancel[0] and time.monotonic() < deadline:
        time.sleep(0.01)
    seen["cancelled"] = bool(cancel[0])


def _long_case():
    """A batch of more than `DIRECT_FRAMES` frames (searched on the worker)."""
    from wfstdecode.ctc import cpu

    g, lp, lengths = _lexicon_case(0)
    lp, lengths = np.repeat(lp, 8, axis=0), np.repeat(lengths, 8)
    assert lengths.sum() > cpu.DIRECT_FRAMES
    return g, lp, lengths


def test_keyboard_interrupt_cancels_the_search_on_the_worker(monkeypatch, python_sigint):
    """Ctrl-C (simulated with interrupt_main) while the worker runs a search: the main thread
    raises KeyboardInterrupt and the search is told to stop (the stand-in search below only
    returns once it sees the cancel flag, or after a minute, so a broken wiring fails). The
    stand-in sends the Ctrl-C itself, once it runs (a timer raced the first decode's loading
    of compiled code on a loaded machine)."""
    from wfstdecode.ctc import cpu

    seen = {}

    def search_until_cancelled(problem, lanes, rows, tuning, cancel):
        _interrupt_and_wait(cancel, seen)

    g, lp, lengths = _long_case()
    monkeypatch.setattr(cpu, "_run", search_until_cancelled)
    with pytest.raises(KeyboardInterrupt):
        decode_ctc(lp, lengths, g, backend="cpu")
    assert seen == {"cancelled": True}


def test_keyboard_interrupt_cancels_a_lattice_search_on_the_worker(monkeypatch, python_sigint):
    """The same for a lattice decode: its utterances ran with Ctrl-C held till each was done,
    searched and its lattice built (33 s on an 11,040-frame line); now a long one runs on the
    worker, Ctrl-C stops its search at the next frame and no lattice is built (the stand-in
    search only returns once it sees the cancel flag, or after a minute)."""
    from wfstdecode.ctc import cpu_streams, ctc_lattices
    from wfstdecode.ctc import lattice as lattice_module

    seen, built = {}, []
    real = cpu_streams.search_keeping

    def keeping_until_cancelled(*args):
        cancel = args[10]
        if not seen:
            _interrupt_and_wait(cancel, seen)
        return real(*args)

    g, lp, lengths = _long_case()
    options = CtcBeamOptions(beam=8.0, lattice_beam=4.0)
    ctc_lattices(lp[:1], lengths[:1], g, options, backend="cpu")  # compiled before
    monkeypatch.setattr(cpu_streams, "search_keeping", keeping_until_cancelled)
    monkeypatch.setattr(lattice_module, "build_lattice", lambda *a: built.append(1))
    with pytest.raises(KeyboardInterrupt):
        ctc_lattices(lp, lengths, g, options, backend="cpu")
    assert seen == {"cancelled": True} and not built


def test_keyboard_interrupt_stops_a_lattice_pruning_on_the_worker(monkeypatch, python_sigint):
    """A Ctrl-C after a long lattice's build: its pruning (3.5 s for a 50M-arc lattice of a
    3,680-frame line at beam 30) ran on the main thread after the search, one compiled call
    that Ctrl-C could not stop; it now runs on the worker and stops at the cancel flag (the
    stand-in pruning pass only goes on once it sees the flag, or after 20 s)."""
    from wfstdecode import lattice as lattice_module
    from wfstdecode.ctc import ctc_lattices

    seen = {}
    real = lattice_module.viterbi_backward

    def backward_until_cancelled(final, src, dst, w, graph_cost, acoustic_cost, scale, cancel):
        if not seen and w.shape[0] == 0:  # (the pruning's pass over a fresh lattice)
            _interrupt_and_wait(cancel, seen, 20)
        return real(final, src, dst, w, graph_cost, acoustic_cost, scale, cancel)

    g, lp, lengths = _long_case()
    options = CtcBeamOptions(beam=8.0, lattice_beam=4.0)
    ctc_lattices(lp[:1], lengths[:1], g, options, backend="cpu")  # compiled before
    monkeypatch.setattr(lattice_module, "viterbi_backward", backward_until_cancelled)
    with pytest.raises(KeyboardInterrupt):
        ctc_lattices(lp, lengths, g, options, backend="cpu")
    assert seen == {"cancelled": True}


def test_a_cancelled_lattice_build_stops_linking():
    """A Ctrl-C during a lattice's build (one compiled call, 17 s on a 4,000-frame line at
    beam 30) stops its links' pass at the next frame: with the flag set it links nothing."""
    from wfstdecode.backends import ctc_stream_backend
    from wfstdecode.ctc import search
    from wfstdecode.ctc.lattice import build_lattice

    g, lp, lengths = _lexicon_case(0)
    options = CtcBeamOptions(beam=8.0, lattice_beam=4.0)
    problem, name, tuning = search.prepared(lp, lengths, g, options, None, "cpu", None, 1, None)
    streams = ctc_stream_backend(name)(tuning)
    p = problem.utterance(0)
    state = streams.begin(p)
    first = streams.survivors(state)
    ((state, kept),) = streams.advance_keeping([(p, state, p.ac[0, : p.lengths[0]])])
    raw = streams.end(p, state)
    whole = build_lattice(p, first, kept, raw)
    assert whole.num_arcs > 10
    assert build_lattice(p, first, kept, raw, np.zeros(1, np.int32)).num_arcs == whole.num_arcs
    assert build_lattice(p, first, kept, raw, np.ones(1, np.int32)).num_arcs == 0
    assert build_lattice(p, first, kept, raw).num_arcs == whole.num_arcs  # (its map left clean)


def test_a_keyboard_interrupt_while_the_inputs_are_prepared_comes_after_them(
    monkeypatch, python_sigint
):
    """The input pass is compiled code, loaded on a process's first call, where a Ctrl-C was
    swallowed (the decode went on) or left Numba half initialised (`wfstdecode.interrupts`):
    one arriving during the preparation is held back until it ends, then raised; the next
    decode gives the same answer as one never interrupted."""
    from wfstdecode.ctc import search

    g, lp, lengths = _lexicon_case(0)
    want = decode_ctc(lp, lengths, g, backend="cpu")
    real, ended = search.costs_and_first_bad, []

    def interrupted_pass(*args, **kwargs):
        _thread.interrupt_main()
        out = real(*args, **kwargs)
        ended.append(True)
        return out

    monkeypatch.setattr(search, "costs_and_first_bad", interrupted_pass)
    with pytest.raises(KeyboardInterrupt):
        decode_ctc(lp, lengths, g, backend="cpu")
    assert ended == [True]
    monkeypatch.undo()
    assert_hypotheses_equal(want, decode_ctc(lp, lengths, g, backend="cpu"), 0.0)


def test_short_searches_run_on_the_calling_thread_and_long_ones_on_the_worker(monkeypatch):
    """Up to `cpu.DIRECT_FRAMES` frames in all a search runs where it is called (no hand-off
    to the worker and back); longer ones run on the worker, so that Ctrl-C stays responsive.
    The answers are the same either way."""
    from wfstdecode.ctc import cpu

    g, lp, lengths = _lexicon_case(0)
    many = np.repeat(lp, 8, axis=0), np.repeat(lengths, 8)
    assert lengths.sum() <= cpu.DIRECT_FRAMES < many[1].sum()
    with monkeypatch.context() as m:
        m.setattr(cpu, "DIRECT_FRAMES", 0)  # everything on the worker, as before the limit
        want_one = decode_ctc(lp, lengths, g, backend="cpu")
    want_many = decode_ctc(*many, g, backend="cpu")
    ran_on = []
    real_run = cpu._run

    def recording(*args):
        ran_on.append(threading.current_thread())
        return real_run(*args)

    monkeypatch.setattr(cpu, "_run", recording)
    assert_hypotheses_equal(want_one, decode_ctc(lp, lengths, g, backend="cpu"))
    assert_hypotheses_equal(want_many, decode_ctc(*many, g, backend="cpu"))
    assert ran_on[0] is threading.main_thread() and ran_on[1] is not threading.main_thread()


def _signals_deferred_now() -> bool:
    return signal.getsignal(signal.SIGINT) is not signal.default_int_handler


def test_a_stream_call_defers_ctrl_c_till_it_is_done(monkeypatch, python_sigint):
    """Stream calls run with signals deferred: a Ctrl-C landing in Numba's boxing of a search
    state crashed the process (SIGSEGV). Ctrl-C during a call (a stand-in that is slow on
    purpose) raises KeyboardInterrupt once the call is done, so the stream has taken its chunk
    and ends as `decode_ctc` on everything it received."""
    from wfstdecode.ctc import CtcStreamDecoder, cpu_streams

    g, lp, lengths = _lexicon_case(0)
    deferred = []
    real_advance = cpu_streams.CpuStreams.advance

    def slow_advance(self, jobs):
        deferred.append(_signals_deferred_now())
        time.sleep(0.5)
        return real_advance(self, jobs)

    decoder = CtcStreamDecoder(g)
    sid = decoder.open()
    half = int(lengths[0]) // 2
    decoder.advance({sid: lp[0, :half]})
    monkeypatch.setattr(cpu_streams.CpuStreams, "advance", slow_advance)
    timer = threading.Timer(0.1, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        decoder.advance({sid: lp[0, half : lengths[0]]})
    timer.join()
    assert deferred == [True] and not _signals_deferred_now()
    assert decoder.frames(sid) == lengths[0]
    assert_hypotheses_equal([decoder.finish(sid)], decode_ctc(lp, lengths, g, backend="cpu"))


@pytest.mark.parametrize("lattice_beam", [None, 4.0])
def test_a_finish_or_open_cut_off_by_ctrl_c_loses_nothing(monkeypatch, python_sigint,
                                                          lattice_beam):  # fmt: skip
    """The worker finishes a call the Ctrl-C cut off: a finish's result is kept for the next
    finish (the stream was already marked finished), an open's stream is closed (its id never
    reached the caller)."""
    from wfstdecode.ctc import CtcStreamDecoder, cpu_streams

    g, lp, lengths = _lexicon_case(0)
    options = CtcBeamOptions(lattice_beam=lattice_beam)
    want = decode_ctc(lp, lengths, g, options, backend="reference")
    decoder = CtcStreamDecoder(g, options)
    sid = decoder.open()
    decoder.advance({sid: lp[0, : lengths[0]]})

    def slowly(real):
        def call(*args):
            time.sleep(0.5)
            return real(*args)

        return call

    for name, call in (("end", lambda: decoder.finish(sid)), ("begin", decoder.open)):
        with monkeypatch.context() as m:
            m.setattr(cpu_streams.CpuStreams, name, slowly(getattr(cpu_streams.CpuStreams, name)))
            timer = threading.Timer(0.1, _thread.interrupt_main)
            timer.start()
            with pytest.raises(KeyboardInterrupt):
                call()
            timer.join()
    assert decoder.streams == [sid]  # the interrupted open's stream is gone
    assert_hypotheses_equal([decoder.finish(sid)], want)
    with pytest.raises(DecodeInputError, match="is finished"):
        decoder.finish(sid)


def test_lattice_searches_and_short_searches_defer_signals(monkeypatch):
    """`decode_ctc` with a lattice beam runs each utterance's search, which returns a search
    state (as streams do), with signals deferred (one at a time: a Ctrl-C comes out between
    two), and so does a short search (the first one of a process loads the compiled code: a
    Ctrl-C inside LLVM's loading aborted)."""
    from wfstdecode.ctc import cpu, cpu_streams

    g, lp, lengths = _lexicon_case(0)
    deferred = []

    def recording(real):
        def call(*args):
            deferred.append(_signals_deferred_now())
            return real(*args)

        return call

    monkeypatch.setattr(cpu_streams, "search_keeping", recording(cpu_streams.search_keeping))
    monkeypatch.setattr(cpu, "_run", recording(cpu._run))
    decode_ctc(lp, lengths, g, CtcBeamOptions(lattice_beam=4.0), backend="cpu")
    decode_ctc(lp, lengths, g, backend="cpu")
    assert deferred == [True, True] and not _signals_deferred_now()


def test_deferred_signals_are_handled_once_the_call_is_done():
    from wfstdecode.interrupts import signals_deferred

    seen = []

    def handler(signum, frame):
        seen.append(signum)
        raise TimeoutError("alarm")

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        dropped = []

        def slow(x):
            signal.raise_signal(signal.SIGALRM)
            seen.append("call done")
            return x

        with pytest.raises(TimeoutError):
            signals_deferred(slow, 7, dropped=dropped.append)
        assert seen == ["call done", signal.SIGALRM] and dropped == [7]
        seen.clear()
        nested = lambda: signals_deferred(slow, 8)  # noqa: E731
        with pytest.raises(TimeoutError):
            signals_deferred(nested)
        assert seen == ["call done", signal.SIGALRM]  # handled once, by the outer call
        seen.clear()

        def failing():
            signal.raise_signal(signal.SIGALRM)
            raise ValueError("own")

        with pytest.raises(TimeoutError) as info:
            signals_deferred(failing)
        assert isinstance(info.value.__context__, ValueError)
        assert signal.getsignal(signal.SIGALRM) is handler
        seen.clear()

        def twice():  # a signal noted twice runs its handler once, as Python's own do
            signal.raise_signal(signal.SIGALRM)
            signal.raise_signal(signal.SIGALRM)

        with pytest.raises(TimeoutError):
            signals_deferred(twice)
        assert seen == [signal.SIGALRM]
        seen.clear()
        usr1 = signal.signal(signal.SIGUSR1, lambda signum, frame: seen.append(signum))
        try:

            def both():
                signal.raise_signal(signal.SIGALRM)
                signal.raise_signal(signal.SIGUSR1)

            with pytest.raises(TimeoutError):  # the first raises; the second still runs
                signals_deferred(both)
            time.sleep(0.01)
            assert seen == [signal.SIGALRM, signal.SIGUSR1]
        finally:
            signal.signal(signal.SIGUSR1, usr1)
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_a_handlers_exception_wrapped_by_numbas_boxing_is_raised_as_itself():
    from wfstdecode.interrupts import interrupts_raised

    def wrapped(exc, times):
        for _ in range(times):
            try:
                raise exc
            except BaseException as inner:
                exc = SystemError("<function f> returned a result with an exception set")
                exc.__cause__ = inner
        return exc

    for times in (1, 2):
        with pytest.raises(KeyboardInterrupt), interrupts_raised():
            raise wrapped(KeyboardInterrupt(), times)
    with pytest.raises(SystemError, match="something else"), interrupts_raised():
        raise SystemError("something else")


def test_a_call_handed_to_the_worker_raises_its_own_errors():
    from wfstdecode.interrupts import on_worker

    def failing():
        raise DecodeInputError("bad")

    with pytest.raises(DecodeInputError, match="bad"):
        on_worker(failing)
    assert on_worker(threading.current_thread) is not threading.main_thread()


def test_keyboard_interrupt_stops_a_long_cpu_decode_and_leaves_the_worker_free(python_sigint):
    """The same with the real search, many seconds long: interrupted, and the next decode
    gives the reference's answer (the worker is not left busy or in a bad state)."""
    g = random_graph(7, num_states=400, num_tokens=8, arcs_per_state=6)
    lp = np.random.default_rng(7).normal(0, 1, size=(2, 60_000, 8)).astype(np.float32)
    opts = CtcBeamOptions(beam=1e6, max_active=400)  # every state active: slow on purpose
    decode_ctc(lp[:, :5], None, g, opts, backend="cpu")  # compiled before the interrupt
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        decode_ctc(lp, None, g, opts, backend="cpu")
        timer.cancel()
        pytest.fail("the decode finished before the interrupt: make the input longer")
    timer.join()
    short = decode_ctc(lp[:, :50], None, g, opts, backend="cpu")
    assert_hypotheses_equal(short, decode_ctc(lp[:, :50], None, g, opts, backend="reference"))


def test_tuning_goes_to_the_backend_that_runs():
    from wfstdecode.ctc import CpuTuning, CudaTuning

    g, lp, lengths = _lexicon_case(0)
    a = decode_ctc(lp, lengths, g, backend="cpu", tuning=CpuTuning(num_threads=1))
    assert_hypotheses_equal(a, decode_ctc(lp, lengths, g, backend="cpu"), 0.0)
    with pytest.raises(OptionsError, match=r"CudaTuning tunes another backend; .* 'cpu'"):
        decode_ctc(lp, lengths, g, backend="cpu", tuning=CudaTuning())
    with pytest.raises(OptionsError, match=r"'reference' \(takes no tuning\)"):
        decode_ctc(lp, lengths, g, backend="reference", tuning=CpuTuning())
    with pytest.raises(OptionsError, match="not both"):
        decode_ctc(lp, lengths, g, backend="cpu", tuning=CpuTuning(), num_threads=1)
    with pytest.raises(OptionsError, match="num_threads=2 sets the cpu backend's threads; .* "
                       "'reference'"):  # fmt: skip
        decode_ctc(lp, lengths, g, backend="reference", num_threads=2)
    with pytest.raises(OptionsError, match=r"CudaTuning.frames_per_chunk must be an int >= 1"):
        CudaTuning(frames_per_chunk=0)


def test_lengths_tensors_and_tunings_that_cannot_be_used_are_named():
    """Found by probing: raw NumPy / torch / Numba errors where the input was the problem."""
    import torch

    from wfstdecode.testing import random_graph, random_log_probs

    g = random_graph(0)
    lp = random_log_probs(1, 2, 5, g.num_tokens)
    cases = [
        (dict(lengths=[[5], [3, 1]]), DecodeInputError, r"lengths cannot be read as \(2,\)"),
        (dict(lengths=torch.tensor([5, 3]).to("meta")), DecodeInputError, "cannot be read"),
        (dict(lengths=np.array([1e30, 3.0])), DecodeInputError, r"lengths\[0\] = 1e\+30 is"),
        (dict(lengths=np.array([2**64 - 1, 3], np.uint64)), DecodeInputError,
         r"lengths\[0\] = 18446744073709551615 is outside"),  # (was -1: a wrapped cast)
        (dict(log_probs=torch.from_numpy(lp).to("meta")), DecodeInputError, "dense tensor"),
        (dict(log_probs=torch.from_numpy(lp).to_sparse()), DecodeInputError, "dense tensor"),
        (dict(backend="CPU"), OptionsError, "unknown backend 'CPU'"),
        (dict(num_threads=np.float64(2.5)), OptionsError, "num_threads must be None or an int"),
    ]  # fmt: skip
    for kw, error, says in cases:
        args = dict(log_probs=lp, lengths=None, backend="cpu") | kw
        with pytest.raises(error, match=says):
            decode_ctc(args.pop("log_probs"), args.pop("lengths"), g, **args)
    bf16 = decode_ctc(lp, torch.tensor([5.0, 3.0], dtype=torch.bfloat16), g, backend="cpu")
    assert bf16 == decode_ctc(lp, [5, 3], g, backend="cpu")
    with pytest.raises(OptionsError, match="first_room must be at most"):
        CpuTuning(first_room=2**40)

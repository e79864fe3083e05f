"""cpu == reference and cuda == reference (on a GPU or Numba's CUDA simulator); batch == items
alone; re-scoring a path reproduces its score."""

import math

import numpy as np
import pytest

from wfstdecode.ctc import CtcBeamOptions, decode_ctc
from wfstdecode.ctc.cpu import decode_cpu
from wfstdecode.ctc.reference import decode_reference
from wfstdecode.decoding_graph import DecodingGraph
from wfstdecode.fstio import FstArrays
from wfstdecode.testing import (
    assert_hypotheses_equal,
    fast_backends,
    lexicon_graph,
    random_graph,
    random_log_probs,
    raw_backend,
    simulate_ctc,
)
from wfstdecode.testing.paths import occurrence_bonus

OPTIONS = {
    "wide": CtcBeamOptions(beam=math.inf, max_active=100_000),
    "beam": CtcBeamOptions(beam=4.0),
    "max_active": CtcBeamOptions(beam=10.0, max_active=3),
    "min_active": CtcBeamOptions(beam=0.5, max_active=8, min_active=4),
    "penalties": CtcBeamOptions(
        beam=6.0, acoustic_scale=0.7, blank_penalty=0.8, word_insertion_penalty=-0.5
    ),
    "nbest": CtcBeamOptions(beam=8.0, nbest=4),
}


def _case(seed, B=4, T=12):
    g = random_graph(
        seed, num_states=8 + seed % 10, num_tokens=4 + seed % 5, arcs_per_state=2 + seed % 4,
        eps_arcs_per_state=0.3 + 0.3 * (seed % 3), eps_cycles=seed % 4 == 3,
    )  # fmt: skip
    lp = random_log_probs(seed + 100, B, T, g.num_tokens, peaky=1.0 + seed % 3)
    lengths = np.random.default_rng(seed).integers(0, T + 1, size=B)
    lengths[0] = T
    return g, lp, lengths


BACKENDS = fast_backends()


@pytest.mark.parametrize("min_active", [2, 3, 6])
@pytest.mark.parametrize("seed", range(6))
def test_cpu_min_active_through_runs_of_narrow_frames_equals_reference(seed, min_active):
    """With min_active > 1 the cpu search bounds each frame's candidates at best + beam as with
    1, expands again without the bound where fewer than min_active are within the beam, and
    then expands the next frame unbounded until one has enough (`cpu._frames`): long utterances
    at beams that hold a few tokens go in and out of such runs; every hypothesis as the
    reference's."""
    g, lp, lengths = _case(seed, B=3, T=60)
    options = CtcBeamOptions(beam=1.0 + seed % 3, max_active=50, min_active=min_active,
                             nbest=2)  # fmt: skip
    ref = decode_ctc(lp, lengths, g, options, backend="reference")
    assert_hypotheses_equal(ref, decode_ctc(lp, lengths, g, options, backend="cpu"), 1e-5,
                            f"seed {seed} min_active {min_active}")  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opt", list(OPTIONS))
@pytest.mark.parametrize("seed", range(8))
def test_backend_equals_reference_random_graphs(seed, opt, backend):
    g, lp, lengths = _case(seed)
    boosts = [{"w1": 1.5, "w2": -0.5}, None, {"w3": 3.0}, None] if seed % 2 else None
    ref = decode_ctc(lp, lengths, g, OPTIONS[opt], boosts, backend="reference")
    got = decode_ctc(lp, lengths, g, OPTIONS[opt], boosts, backend=backend)
    assert_hypotheses_equal(ref, got, 1e-5, f"seed {seed} {opt}")


@pytest.mark.parametrize("opt", list(OPTIONS))
@pytest.mark.parametrize("seed", range(8))
def test_cpu_buffers_grown_from_one_slot_change_nothing(seed, opt):
    """`CpuTuning.first_room=1`: the candidates grow before a frame's expansion and inside its
    epsilon closure (which then goes on where it stopped), the survivors and records with them,
    and the records are collected every few frames; the search is still the reference's."""
    from wfstdecode.ctc import CpuTuning

    g, lp, lengths = _case(seed)
    boosts = [{"w1": 1.5, "w2": -0.5}, None, {"w3": 3.0}, None] if seed % 2 else None
    ref = decode_ctc(lp, lengths, g, OPTIONS[opt], boosts, backend="reference")
    for tuning in (CpuTuning(first_room=1), CpuTuning(first_room=1, collect_records_at=3)):
        got = decode_ctc(lp, lengths, g, OPTIONS[opt], boosts, backend="cpu", tuning=tuning)
        assert_hypotheses_equal(ref, got, 1e-5, f"seed {seed} {opt} {tuning}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", range(3))
def test_backend_equals_reference_raw_costs_bitwise(seed, backend, problem_of):
    g, lp, lengths = _case(seed, B=3, T=15)
    p = problem_of(lp, g, CtcBeamOptions(beam=5.0, nbest=3), lengths)
    for r, c in zip(decode_reference(p), raw_backend(backend)(p), strict=True):
        assert (r.status, r.died_frame, len(r.paths)) == (c.status, c.died_frame, len(c.paths))
        for (ra, rf, rc), (ca, cf, cc) in zip(r.paths, c.paths, strict=True):
            assert np.array_equal(ra, ca) and np.array_equal(rf, cf)
            assert np.float32(rc) == np.float32(cc)


@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_equals_reference_lexicon_graph(backend):
    words = ["cat", "cap", "act", "tact", "pat", "apt", "tapa"]
    g = lexicon_graph(words, word_cost=[1.0, 1.2, 2.0, 2.5, 1.1, 2.2, 2.4])
    tok = g.tokens
    seqs = [[tok.id(c) for c in "".join(ws)] for ws in (["cat", "pat"], ["tapa"], ["apt", "act"])]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=3, confusion_prob=0.3, noise=1.5)
    for opts in (CtcBeamOptions(beam=10.0), CtcBeamOptions(beam=3.0, max_active=4, nbest=3)):
        ref = decode_ctc(lp, lengths, g, opts, backend="reference")
        got = decode_ctc(lp, lengths, g, opts, backend=backend)
        assert_hypotheses_equal(ref, got, 1e-5)


@pytest.mark.parametrize("backend", ["reference", *BACKENDS])
def test_batch_equals_items_alone(backend):
    g, lp, lengths = _case(5, B=5, T=14)
    boosts = [{"w1": 2.0}, None, {"w2": 1.0, "w4": 0.5}, None, {"w1": -1.0}]
    opts = CtcBeamOptions(beam=5.0, nbest=2)
    batch = decode_ctc(lp, lengths, g, opts, boosts, backend=backend)
    for b in range(len(lengths)):
        item = lp[b : b + 1, : lengths[b]]
        alone = decode_ctc(item, lengths[b : b + 1], g, opts, boosts[b : b + 1], backend=backend)
        assert_hypotheses_equal([batch[b]], alone, 1e-6, f"utterance {b}")


def lp_of(p, b):
    return p.log_probs[b].astype(np.float64)


def _rescore(p, b, arcs, frames, final):
    """Independent float64 re-scoring of an arc path, checking that it is a path."""
    g = p.graph
    state, cost, t = g.start, 0.0, 0
    automaton = p.boosts.automata[b]
    words = []
    for a, f in zip(arcs.tolist(), frames.tolist(), strict=True):
        emitting = a < g.num_emitting_arcs
        lo, hi = (g.e_offsets if emitting else g.ne_offsets)[state : state + 2]
        assert lo <= a < hi, f"arc {a} does not leave state {state}"
        if emitting:
            assert f == t, f"emitting arc at frame {f}, expected {t}"
            cost += -p.options.acoustic_scale * float(lp_of(p, b)[t, g.ilabel[a] - 1])
            t += 1
        else:
            assert f == t - 1
        cost += float(g.weight[a])
        if g.ilabel[a] == p.blank_ilabel:
            cost += p.options.blank_penalty
        if g.olabel[a]:
            cost += p.options.word_insertion_penalty
            words.append(int(g.olabel[a]))
        state = int(g.next_state[a])
    assert t == p.lengths[b], "path does not consume every frame"
    if final:
        cost += float(g.final_cost[state])
    return cost - (occurrence_bonus(automaton.phrases, words) if automaton else 0.0)


def test_rescoring_reproduces_scores(problem_of):
    """Scores equal an independent float64 re-scoring of the path; differences between an
    utterance's search costs equal differences of re-scored costs (the search subtracts per-frame
    offsets that every path of an utterance shares)."""
    opts = CtcBeamOptions(beam=10.0, blank_penalty=0.3, word_insertion_penalty=0.4, nbest=4)
    boosts = [{"w1": 1.0}, None, {"w2": 2.0}, None]
    pairs = 0
    for seed in range(6):
        g, lp, lengths = _case(seed, B=4, T=16)
        p = problem_of(lp, g, opts, lengths, boosts)
        hyps = decode_ctc(lp, lengths, g, opts, boosts, backend="cpu")
        for b, r in enumerate(decode_cpu(p)):
            first = None
            for (arcs, frames, cost), h in zip(r.paths, hyps[b], strict=True):
                rescored = _rescore(p, b, arcs, frames, final=not r.status & 1)
                if first is None:
                    first = (rescored, cost)
                else:
                    diff = cost - first[1]
                    assert rescored - first[0] == pytest.approx(diff, rel=1e-5, abs=1e-4)
                    pairs += 1
                assert -rescored == pytest.approx(h.score, rel=1e-6, abs=1e-6)
                assert h.score == pytest.approx(h.acoustic_score + h.graph_score, abs=1e-12)
    assert pairs >= 5


@pytest.mark.parametrize("backend", ["reference", *BACKENDS])
def test_negative_epsilon_cycle_raises(backend):
    from wfstdecode import GraphError
    from wfstdecode.decoding_graph import DecodingGraph
    from wfstdecode.fstio import FstArrays

    final = np.array([0.0, 0.0], np.float32)
    src, dst, ilabel = np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([1, 0, 0])
    fst = FstArrays(0, final, src, dst, ilabel, np.zeros(3), np.array([0.0, -1.0, 0.5]))
    g = DecodingGraph.from_arrays(fst)
    lp = np.zeros((1, 2, 1), np.float32)
    with pytest.raises(GraphError, match="negative-cost epsilon cycle"):
        decode_ctc(lp, None, g, CtcBeamOptions(beam=5.0), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_closure_cutoff_ignores_candidates_beyond_the_beam(backend):
    """Exactly ``max_active`` emitting tokens within the beam, one beyond it (which the fast
    backends never create), and a negative-cost epsilon path through a state above the
    max_active-th cost: the closure cutoff must be that cost in every backend, or the path
    would reach the final state 5 in some and not in others."""
    from wfstdecode.decoding_graph import DecodingGraph
    from wfstdecode.fstio import FstArrays

    src, dst = np.array([0, 0, 0, 1, 4]), np.array([1, 2, 3, 4, 5])
    ilabel, olabel = np.array([1, 1, 1, 0, 0]), np.array([0, 0, 0, 0, 1])
    weight = np.array([0.0, 1.0, 100.0, 3.0, -2.5])
    final = np.array([np.inf, 10.0, 10.0, np.inf, np.inf, 0.0], np.float32)
    g = DecodingGraph.from_arrays(FstArrays(0, final, src, dst, ilabel, olabel, weight))
    lp = np.zeros((1, 1, 1), np.float32)
    opts = CtcBeamOptions(beam=5.0, max_active=2)
    ref = decode_ctc(lp, None, g, opts, backend="reference")
    assert ref[0][0].word_ids == () and ref[0][0].score == pytest.approx(-10.0)
    assert_hypotheses_equal(ref, decode_ctc(lp, None, g, opts, backend=backend), 1e-6)
    wider = decode_ctc(lp, None, g, CtcBeamOptions(beam=5.0, max_active=3), backend=backend)
    assert wider[0][0].word_ids == (1,)  # the epsilon path exists when the cutoff allows it


def test_equivalence_cases_exercise_pruning_and_fallbacks(problem_of):
    """Guard against a vacuous equivalence test: some cases must prune, end without a final
    state, and take epsilon arcs."""
    pruned = no_final = eps = 0
    for seed in range(8):
        g, lp, lengths = _case(seed)
        wide = decode_ctc(lp, lengths, g, OPTIONS["wide"], backend="cpu")
        narrow = decode_ctc(lp, lengths, g, OPTIONS["max_active"], backend="cpu")
        pruned += sum(w[0].score != n[0].score for w, n in zip(wide, narrow, strict=True))
        no_final += sum(bool(h[0].notes) for h in narrow)
        p = problem_of(lp, g, OPTIONS["beam"], lengths)
        eps += sum(
            int((a >= g.num_emitting_arcs).sum()) for r in decode_cpu(p) for a, _, _ in r.paths
        )
    assert pruned >= 3 and no_final >= 1 and eps >= 5, (pruned, no_final, eps)


@pytest.mark.parametrize("backend", BACKENDS)
def test_long_epsilon_chains_overflow_the_first_buffer_and_retry(backend):
    from wfstdecode.decoding_graph import DecodingGraph
    from wfstdecode.fstio import FstArrays

    # state 0 --token 1--> 1 --eps--> 2 --eps--> ... --eps--> 0 (30 epsilon arcs per frame)
    n = 31
    src = [0, *range(1, n)]
    dst = [1, *range(2, n), 0]
    ilabel = [2] + [0] * (n - 1)
    olabel = [0] * n
    olabel[5] = 1
    final = np.full(n, np.inf, np.float32)
    final[0] = 0.0
    fst = FstArrays(0, final, np.array(src), np.array(dst), np.array(ilabel), np.array(olabel),
                    np.full(n, 0.1))  # fmt: skip
    g = DecodingGraph.from_arrays(fst)
    lp = np.log(np.full((2, 4, 2), 0.5, np.float32))
    ref = decode_ctc(lp, [4, 2], g, CtcBeamOptions(beam=5.0), backend="reference")
    got = decode_ctc(lp, [4, 2], g, CtcBeamOptions(beam=5.0), backend=backend)
    assert_hypotheses_equal(ref, got, 1e-6)
    assert got[0][0].word_ids == (1,) * 4 and got[0][0].tokens == (1,) * 4  # no self-loop


def test_concurrent_calls_from_python_threads():
    """The CPU backend releases the GIL; concurrent calls must not disturb each other."""
    from concurrent.futures import ThreadPoolExecutor

    cases = [_case(seed, B=3, T=12) for seed in range(4)]
    opts = CtcBeamOptions(beam=6.0)
    want = [decode_ctc(lp, lengths, g, opts, backend="cpu") for g, lp, lengths in cases]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda c: decode_ctc(c[1], c[2], c[0], opts, backend="cpu"), cases))
    assert got == want


@pytest.mark.parametrize("threads", [1, 2])
def test_state_maps_kept_between_calls_are_left_clean(monkeypatch, threads):
    """The cpu search's state maps (one per thread, `scratch.state_maps`) are made once per graph
    and calling thread and reused: after every call, a negative cycle's stop and a search that
    died included, they are all -1, and the results equal those with maps made per call or
    made by each chunk itself (the fallback when a thread's number is beyond the maps)."""
    from contextlib import nullcontext

    from wfstdecode.ctc import cpu, scratch
    from wfstdecode.decoding_graph import DecodingGraph
    from wfstdecode.fstio import FstArrays

    cases = [_case(seed, B=5) for seed in range(6)]
    # a negative-cost epsilon cycle (the search stops inside a frame), and a search that dies
    cycle = FstArrays(0, np.array([0.0, 0.0], np.float32), np.array([0, 0, 1]), np.array([0, 1, 0]),
                      np.array([1, 0, 0]), np.zeros(3), np.array([0.0, -1.0, 0.5]))  # fmt: skip
    cases.append((DecodingGraph.from_arrays(cycle), np.zeros((2, 2, 1), np.float32), None))
    dead = FstArrays(0, np.array([0.0], np.float32), np.array([0]), np.array([0]),
                     np.array([2]), np.array([0]), np.array([0.0]))  # fmt: skip
    lp = np.zeros((2, 3, 2), np.float32)
    lp[:, 1, 1] = -np.inf
    cases.append((DecodingGraph.from_arrays(dead), lp, None))
    options = CtcBeamOptions(beam=6.0, max_active=5)

    def decode_all():
        out = []
        for g, lp, lengths in cases:
            try:
                out.append(decode_ctc(lp, lengths, g, options, backend="cpu", num_threads=threads))
            except Exception as exc:  # a negative epsilon cycle: its message
                out.append(str(exc))
        return out

    kept = decode_all()
    assert "negative-cost epsilon cycle" in kept[-2] and "died" in kept[-1][0][0].notes[0]
    for g, *_ in cases:
        for maps in scratch._MAPS[g].values():
            assert maps.shape[0] >= threads and (maps == -1).all()
        assert len(scratch._MAPS[g]) == 1  # one calling thread, one set of maps
    again = decode_all()

    def made(rows):
        return lambda g, n=1: nullcontext(np.full((rows(n), g.num_states), -1, np.int32))

    monkeypatch.setattr(cpu, "state_maps", made(lambda n: n))
    fresh = decode_all()
    monkeypatch.setattr(cpu, "state_maps", made(lambda n: 0))
    own = decode_all()
    for x in (again, fresh, own):
        for a, b in zip(kept, x, strict=True):
            if isinstance(a, str):
                assert a == b
            else:
                assert_hypotheses_equal(a, b)


def test_state_maps_go_with_the_threads_that_made_them():
    """Each calling thread gets its own maps (no two searches share one), and they are freed
    when the thread is gone: a server starting a thread per request keeps no maps of old ones."""
    import gc
    import threading

    from wfstdecode.ctc import scratch

    g, lp, lengths = _case(1)
    want = decode_ctc(lp, lengths, g, OPTIONS["beam"], backend="cpu", num_threads=1)
    got = []

    def work():
        got.append(decode_ctc(lp, lengths, g, OPTIONS["beam"], backend="cpu", num_threads=1))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(scratch._MAPS[g]) == 1 + 3  # the main thread's worker and the three
    for x in got:
        assert_hypotheses_equal(want, x)
    del threads, t
    gc.collect()
    assert len(scratch._MAPS[g]) == 1


def test_the_work_counter_hands_out_every_item_once():
    """`scratch.take_next` (the cpu search's utterance counter): workers of a parallel loop,
    more than there are threads, taking items until none is left, take each exactly once."""
    import numba

    from wfstdecode.ctc.scratch import take_next

    @numba.njit(parallel=True)
    def take_all(n_items, n_workers):
        taken_by = np.full(n_items, -1, np.int64)
        counter = np.zeros(1, np.int64)
        for w in numba.prange(n_workers):
            i = take_next(counter)
            while i < n_items:
                taken_by[i] = w
                i = take_next(counter)
        return taken_by, counter  # (the array: Numba folds a read of counter[0] here to 0)

    for n_items, n_workers in [(0, 2), (1, 3), (1000, 2), (5000, 7)]:
        taken_by, counter = take_all(n_items, n_workers)
        assert (taken_by >= 0).all()  # none left out; a second take would not show, so:
        assert counter[0] == n_items + n_workers  # each worker's last take found nothing


def _two_word_tie_graph():
    """Start 0 -x:a-> 1 and -y:b-> 2, both final at cost 0: on a frame where x and y are equally
    likely, the two paths' costs tie exactly."""
    from wfstdecode.decoding_graph import DecodingGraph
    from wfstdecode.fstio import FstArrays
    from wfstdecode.symbols import BLANK, EPSILON, SymbolTable

    tokens = SymbolTable.from_list([BLANK, "x", "y"])
    words = SymbolTable.from_list([EPSILON, "a", "b"])
    fst = FstArrays(0, np.array([np.inf, 0, 0], np.float32), np.array([0, 0, 0, 1, 2]),
                    np.array([0, 1, 2, 1, 2]), np.array([1, 2, 3, 1, 1]),
                    np.array([0, 1, 2, 0, 0]), np.zeros(5))  # fmt: skip
    return DecodingGraph.from_arrays(fst, tokens, words, {})


@pytest.mark.parametrize("nbest", [1, 2])
def test_exact_ties_rank_by_state_as_the_reference_does(nbest):
    """Survivors of equal cost rank by graph state (finish_paths; mutant T1: reversed)."""
    from wfstdecode import CtcBeamOptions, decode_ctc

    g = _two_word_tie_graph()
    lp = np.log(np.array([[[0.2, 0.4, 0.4]]], np.float32))
    opts = CtcBeamOptions(nbest=nbest)
    want = [("a",), ("b",)][:nbest]
    for backend in ("reference", "cpu"):
        got = decode_ctc(lp, None, g, opts, backend=backend)[0]
        assert [h.words for h in got] == want, backend


ALL_BACKENDS = ["reference", *fast_backends()]


def _hand_graph(src, dst, ilabel, olabel, weight, final, tokens=None, words=None, metadata=None):
    fst = FstArrays(
        0,
        np.array(final, np.float32),
        np.array(src),
        np.array(dst),
        np.array(ilabel),
        np.array(olabel),
        np.array(weight, np.float64),
    )
    return DecodingGraph.from_arrays(fst, tokens, words, metadata or {})


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_arc_cost_cache_tells_word_insertion_penalties_apart(backend):
    """One graph decoded with one word insertion penalty, then another: the second decode must
    use its own penalty (the per-graph arc-cost cache is keyed on every penalty), i.e. equal a
    decode of a fresh copy of the graph."""
    lp = random_log_probs(7, 2, 10, random_graph(4).num_tokens)
    shared = random_graph(4)
    decode_ctc(lp, None, shared, CtcBeamOptions(beam=8.0), backend=backend)  # fills the cache
    opts = CtcBeamOptions(beam=8.0, word_insertion_penalty=2.5)
    got = decode_ctc(lp, None, shared, opts, backend=backend)
    want = decode_ctc(lp, None, random_graph(4), opts, backend=backend)
    assert_hypotheses_equal(want, got, 1e-6)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_blank_penalty_without_token_table_falls_on_token_0(backend):
    """A graph with no token table and no ``blank_id`` metadata: the blank is token 0
    (ilabel 1), so blank_penalty is charged on the ilabel-1 arcs and nowhere else."""
    # state 0: blank self-loop (ilabel 1) and token-1 self-loop (ilabel 2), both final
    g = _hand_graph([0, 0], [0, 0], [1, 2], [0, 0], [0.0, 0.0], [0.0])
    lp = np.log(np.full((1, 3, 2), 0.5, np.float32))
    lp[0, :, 0] = np.log(0.9)  # blank is likelier...
    lp[0, :, 1] = np.log(0.1)
    plain = decode_ctc(lp, None, g, CtcBeamOptions(), backend=backend)[0][0]
    assert plain.tokens == ()  # (blanks only)
    pen = decode_ctc(lp, None, g, CtcBeamOptions(blank_penalty=5.0), backend=backend)[0][0]
    # ...but at 5 per blank frame token 1 wins every frame, at its own acoustic cost
    assert pen.tokens == (1,)
    assert pen.score == pytest.approx(3 * np.log(0.1), abs=1e-4)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize(
    "arcs",
    [
        # 0 -t1-> 1 (cost 0, not final), 0 -t1:w1-> 2 (cost 4 = beam, final): the cpu
        # backend's early bound in `expand` drops only candidates strictly beyond best + beam
        ([0, 0], [1, 2], [1, 1]),
        # 0 -t1-> 1 (cost 0, not final), 1 -eps:w1-> 2 (cost 4 = beam, final): step 4 keeps
        # epsilon targets with cost <= C (C = best + beam)
        ([0, 1], [1, 2], [1, 0]),
    ],
    ids=["emitting", "epsilon"],
)
def test_a_token_exactly_at_best_plus_beam_survives(backend, arcs):
    """Ties at the cutoff survive (reference steps 4 and 5): a candidate reached at exactly
    best + beam, by an emitting arc or through the epsilon closure, is a token and here the only
    final one."""
    src, dst, ilabel = arcs
    g = _hand_graph(src, dst, ilabel, [0, 1], [0.0, 4.0], [0.0, np.inf, 0.0])
    lp = np.zeros((1, 1, 1), np.float32)
    hyp = decode_ctc(lp, None, g, CtcBeamOptions(beam=4.0), backend=backend)[0][0]
    assert hyp.word_ids == (1,) and hyp.notes == () and hyp.score == -4.0, backend


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_recombination_at_equal_cost_keeps_the_smaller_arc(backend):
    """Two emitting arcs reach one state at exactly the same cost: recombination keeps the
    lower arc index (reference step 2), in every backend."""
    # 0 -t1:w1-> 1 and 0 -t1:w2-> 1, both cost 0.5; 1 final
    g = _hand_graph([0, 0], [1, 1], [1, 1], [1, 2], [0.5, 0.5], [np.inf, 0.0])
    lp = np.zeros((1, 1, 1), np.float32)
    hyp = decode_ctc(lp, None, g, CtcBeamOptions(), backend=backend)[0][0]
    assert hyp.word_ids == (1,), backend


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_log_probs_narrower_than_the_columns_the_graph_reads_raise(backend):
    """A graph without a token table whose arcs read column 2 (ilabel 3): log-probs with 2
    columns are refused naming that column (not read out of bounds); 3 columns decode."""
    from wfstdecode import DecodeInputError

    g = _hand_graph([0, 0, 0], [0, 0, 0], [1, 2, 3], [0, 0, 0], [0.0, 0.0, 0.0], [0.0])
    with pytest.raises(DecodeInputError, match="V=2 columns but the graph reads column 2"):
        decode_ctc(np.zeros((1, 2, 2), np.float32), None, g, backend=backend)
    assert decode_ctc(np.zeros((1, 2, 3), np.float32), None, g, backend=backend)[0][0].notes == ()


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_closure_cutoff_with_exactly_max_active_emitting_tokens(backend):
    """Exactly ``max_active`` emitting tokens (costs 0 and 1, max_active=2): the closure cutoff
    C is lowered to the 2nd smallest cost, 1 ("at least", reference step 3), so the epsilon
    arc 1 -> 3 (cost 3 > C) is not taken and the cheap path 3 -> 4 (final, word 1) never
    exists. Both backends must agree on that."""
    #      0 -t1-> 1 (0), 0 -t1-> 2 (1); 1 -eps-> 3 (3); 3 -eps:w1-> 4 (-2.5); 1, 2 final 10
    g = _hand_graph(
        [0, 0, 1, 3],
        [1, 2, 3, 4],
        [1, 1, 0, 0],
        [0, 0, 0, 1],
        [0.0, 1.0, 3.0, -2.5],
        [np.inf, 10.0, 10.0, np.inf, 0.0],
    )
    lp = np.zeros((1, 1, 1), np.float32)
    opts = CtcBeamOptions(beam=5.0, max_active=2)
    hyp = decode_ctc(lp, None, g, opts, backend=backend)[0][0]
    assert hyp.word_ids == () and hyp.score == pytest.approx(-10.0), backend
    wider = decode_ctc(lp, None, g, CtcBeamOptions(beam=5.0, max_active=3), backend="reference")
    assert wider[0][0].word_ids == (1,)  # (the path exists when the cutoff allows it)

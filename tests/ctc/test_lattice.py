"""Lattices of the CTC search: with unbounded beams the n-best distinct word sequences are
OpenFst's n-shortest unique paths of E ∘ TLG (∘ the phrase automaton); the lattice's best path is
the search's; every lattice arc and path re-scores exactly through the graph; pruning keeps
exactly the arcs within the lattice beam; posteriors sum to one per frame; reference == cpu
array for array; Kaldi reads what is written."""

import math
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import pytest

from wfstdecode import OptionsError
from wfstdecode.compact_lattice import determinize
from wfstdecode.ctc import CtcBeamOptions, ctc_lattices, decode_ctc
from wfstdecode.ctc.boost import resolve_boosts
from wfstdecode.ctc.phrases import PhraseAutomaton
from wfstdecode.lattice import Lattice
from wfstdecode.lattice_io import write_kaldi_archive
from wfstdecode.testing import (
    assert_hypotheses_equal,
    fast_backends,
    lexicon_graph,
    random_graph,
    random_log_probs,
    simulate_ctc,
)
from wfstdecode.testing.lm import random_arpa
from wfstdecode.testing.oracles import openfst_nbest, pynini_fst

WIDE = dict(beam=math.inf, max_active=1_000_000, lattice_beam=math.inf)


def _case(seed, **graph_args):
    g = random_graph(seed, num_states=8 + seed % 7, num_tokens=5, arcs_per_state=3, **graph_args)
    lp = random_log_probs(seed, 2, 6 + seed % 5, g.num_tokens, peaky=1.5 + seed % 3)
    return g, lp


def _assert_nbest_matches(hyps, want):
    """Same costs in order; same word sequences, where exact ties may come in either order (and
    a tie at the n-th cost may bring in another sequence of that cost)."""
    got = [(h.word_ids, -h.score) for h in hyps]
    assert len(got) == len(want)
    assert [c for _, c in got] == pytest.approx([c for _, c in want], rel=1e-5, abs=1e-3)
    cost_of = dict(want)
    assert len({w for w, _ in got}) == len(got)
    for words, cost in got:
        if words in cost_of:
            assert cost == pytest.approx(cost_of[words], rel=1e-5, abs=1e-3)
        else:
            assert cost == pytest.approx(want[-1][1], rel=1e-5, abs=1e-3), (words, want)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("seed", range(8))
def test_nbest_equals_openfst_n_shortest_unique_paths(seed, backend):
    pytest.importorskip("pynini")
    g, lp = _case(seed)
    n = 2 + seed % 6
    hyps = decode_ctc(lp, None, g, CtcBeamOptions(nbest=n, **WIDE), backend=backend)
    fst = pynini_fst(g.to_arrays())
    for b in range(len(lp)):
        _assert_nbest_matches(hyps[b], openfst_nbest(lp[b], fst, 1.0, n))


@pytest.mark.parametrize("seed", range(4))
def test_nbest_with_phrases_equals_openfst_on_tlg_composed_with_the_context(seed):
    pynini = pytest.importorskip("pynini")
    g, lp = _case(seed, word_prob=0.6)
    rng = np.random.default_rng(seed)
    boosts = {}
    while len(boosts) < 3:
        k = tuple(g.words.symbol(int(w)) for w in rng.integers(1, 6, size=rng.integers(1, 3)))
        boosts[k] = float(np.float32(rng.uniform(-1.0, 3.0)))
    hyps = decode_ctc(lp, None, g, CtcBeamOptions(nbest=5, **WIDE), boosts, backend="cpu")
    (resolved,) = resolve_boosts(boosts, 1, g.words)
    context = pynini_fst(PhraseAutomaton(resolved).fst_arrays(range(1, g.words.next_id)))
    composed = pynini.compose(pynini_fst(g.to_arrays()).arcsort("olabel"),
                              context.arcsort("ilabel"))  # fmt: skip
    for b in range(len(lp)):
        _assert_nbest_matches(hyps[b], openfst_nbest(lp[b], composed, 1.0, 5))


def test_nbest_on_a_lexicon_graph_with_scale_and_penalties():
    pytest.importorskip("pynini")
    words = ["cat", "cap", "act", "tact", "pat", "tapa"]
    g = lexicon_graph(words, word_cost=[1.0, 1.2, 2.0, 2.5, 1.1, 2.4])
    seqs = [[g.tokens.id(c) for c in "".join(ws)] for ws in (["cat", "pat"], ["tapa", "act"])]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=1, confusion_prob=0.4, noise=2.0)
    options = CtcBeamOptions(nbest=4, acoustic_scale=0.8, **WIDE)
    hyps = decode_ctc(lp, lengths, g, options, backend="cpu")
    fst = pynini_fst(g.to_arrays())
    for b in range(len(lp)):
        # OpenFst prunes before it determinizes (every path of this composition: 15 s)
        spread = hyps[b][0].score - hyps[b][-1].score
        want = openfst_nbest(lp[b, : lengths[b]], fst, 0.8, 4, within=spread + 2.0)
        _assert_nbest_matches(hyps[b], want)
    assert max(len(h) for h in hyps) > 1


@pytest.mark.parametrize("seed", range(10))
def test_the_lattice_best_path_is_the_search_best_path_at_finite_beams(seed):
    g, lp = _case(seed, eps_cycles=seed % 3 == 2)
    options = CtcBeamOptions(beam=2.0 + seed % 4, max_active=4 + seed, lattice_beam=3.0)
    one = decode_ctc(lp, None, g, options, backend="cpu")
    for b, lat in enumerate(ctc_lattices(lp, None, g, options, backend="cpu")):
        if lat is None:
            assert one[b][0].score == -math.inf
            continue
        ((arcs, cost),) = lat.nbest(1)  # the Viterbi traceback
        labels = lat.olabel[arcs]
        assert tuple(labels[labels != 0]) == one[b][0].word_ids
        assert cost == pytest.approx(-one[b][0].score, rel=1e-5, abs=1e-3)
        # a complete path, as good as the A* search's first
        _, astar = lat.nbest(2)[0]
        path, viterbi = lat.best_path()
        assert viterbi == lat.best_cost == cost and viterbi == pytest.approx(astar, rel=1e-12)
        assert lat.src[path[0]] == 0 and (lat.src[path[1:]] == lat.dst[path[:-1]]).all()
        end = lat.dst[path[-1]]
        assert lat.arc_cost()[path].sum() + lat.final[end] == pytest.approx(viterbi, rel=1e-9)


@pytest.mark.parametrize("backend", fast_backends())
@pytest.mark.parametrize("seed", range(6))
def test_every_backend_makes_the_reference_lattice(seed, backend):
    """cpu and cuda (on a GPU or the simulator) build the reference's lattice, array for
    array, and the same n-best from it."""
    g, lp = _case(seed, eps_cycles=seed % 2 == 1)
    rng = np.random.default_rng(seed)
    boosts = [{(g.words.symbol(1), g.words.symbol(2)): 1.5}, {g.words.symbol(3): 2.0}]
    options = CtcBeamOptions(beam=4.0, max_active=10 + seed, lattice_beam=float(rng.uniform(1, 6)))
    ref = ctc_lattices(lp, None, g, options, boosts, backend="reference")
    got = ctc_lattices(lp, None, g, options, boosts, backend=backend)
    for a, b in zip(ref, got, strict=True):
        assert (a is None) == (b is None)
        if a is None:
            continue
        for name in ("node_frame", "node_state", "final", "src", "dst", "graph_arc", "frame",
                     "graph_cost", "acoustic_cost"):  # fmt: skip
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    n5 = CtcBeamOptions(beam=4.0, max_active=10 + seed, lattice_beam=5.0, nbest=5)
    for x, y in zip(decode_ctc(lp, None, g, n5, boosts, backend="reference"),
                    decode_ctc(lp, None, g, n5, boosts, backend=backend), strict=True):  # fmt: skip
        assert len(x) == len(y)
        assert_hypotheses_equal([x], [y])


@pytest.mark.parametrize("seed", range(3))
def test_the_state_scratch_reused_across_lattices_is_left_clean(monkeypatch, seed):
    """The per-state array `_links` works in (`scratch.state_maps`, shared with the search) is
    made once per thread and reused for every lattice: each lattice leaves it all -1, and the
    lattices equal those built on fresh ones."""
    from contextlib import nullcontext

    from wfstdecode.ctc import lattice as ctc_lattice

    g, lp = _case(seed, eps_cycles=True)
    lp = np.concatenate([lp, lp[::-1]])  # more utterances through the same scratch
    options = CtcBeamOptions(beam=4.0, lattice_beam=5.0)
    kept = ctc_lattice.state_maps

    def fresh(g):
        return nullcontext(np.full((1, g.num_states), -1, np.int32))

    monkeypatch.setattr(ctc_lattice, "state_maps", fresh)
    want = ctc_lattices(lp, None, g, options, backend="cpu", num_threads=1)
    seen = []

    def recorded(g):
        with kept(g) as maps:
            seen.append(maps)
            yield maps

    monkeypatch.setattr(ctc_lattice, "state_maps", contextmanager(recorded))
    got = ctc_lattices(lp, None, g, options, backend="cpu", num_threads=1)
    assert len(seen) == len(lp) and len({id(h) for h in seen}) == 1  # one array, reused
    assert (seen[0] == -1).all()
    for a, b in zip(want, got, strict=True):
        for name in ("node_state", "final", "src", "dst", "graph_arc", "graph_cost"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.parametrize("seed", range(3))
def test_cpu_lattice_of_a_long_utterance_with_grown_buffers_is_the_reference(seed):
    """Over a thousand survivors kept (the cpu search's first kept-survivor buffer holds 1,024:
    it grows between frames) and candidate buffers grown from one slot: the reference's
    lattice all the same."""
    from wfstdecode.ctc import CpuTuning

    g = random_graph(seed, num_states=14, num_tokens=5, arcs_per_state=3)
    lp = random_log_probs(seed, 2, 120, g.num_tokens, peaky=1.0)
    options = CtcBeamOptions(beam=8.0, lattice_beam=3.0)
    ref = ctc_lattices(lp, None, g, options, backend="reference")
    got = ctc_lattices(lp, None, g, options, backend="cpu",
                       tuning=CpuTuning(first_room=1, collect_records_at=7))  # fmt: skip
    for a, b in zip(ref, got, strict=True):
        for name in ("node_frame", "node_state", "final", "src", "dst", "graph_arc", "frame",
                     "graph_cost", "acoustic_cost"):  # fmt: skip
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    from wfstdecode.ctc.cpu_streams import CpuStreams
    from wfstdecode.ctc.search import prepare_problem

    p = prepare_problem(lp[:1], None, g, options, None)
    streams = CpuStreams()
    ((_, kept),) = streams.advance_keeping([(p, streams.begin(p), p.ac[0])])
    assert len(kept.state) > 1024 and kept.num_frames == 120
    assert kept.ends[-1] == len(kept.state) == len(kept.ctx)


@pytest.mark.parametrize("seed", range(4))
def test_cpu_lattice_searches_whose_paths_outgrow_their_buffers_run_again(seed, monkeypatch):
    """cpu's lattice searches write their paths into buffers sized for usual paths (one
    compiled call per utterance, `CpuStreams.search_keeping`); one whose paths do not fit —
    longer, or more than the rows — runs again with larger buffers: the reference's lattices
    and hypotheses all the same (here every first buffer holds one arc of one path)."""
    from wfstdecode.ctc._traceback import PathRows
    from wfstdecode.ctc.cpu_streams import CpuStreams

    g, lp = _case(seed, eps_cycles=seed % 2 == 1)
    options = CtcBeamOptions(beam=6.0, lattice_beam=4.0, nbest=4)
    want = decode_ctc(lp, None, g, options, backend="reference")
    want_lattices = ctc_lattices(lp, None, g, options, backend="reference")
    grown, real_grown = [], PathRows.grown

    def counted(self, *args):
        grown.append(args)
        return real_grown(self, *args)

    monkeypatch.setattr(PathRows, "first", classmethod(lambda cls, lanes, *_: cls(lanes, 1, 1)))
    monkeypatch.setattr(PathRows, "grown", counted)
    assert_hypotheses_equal(decode_ctc(lp, None, g, options, backend="cpu"), want)
    assert grown
    for a, b in zip(want_lattices, ctc_lattices(lp, None, g, options, backend="cpu"), strict=True):
        np.testing.assert_array_equal(a.graph_arc, b.graph_arc)
        np.testing.assert_array_equal(a.final, b.final)
    assert hasattr(CpuStreams, "search_keeping")


@pytest.mark.parametrize("composed", [False, True])
@pytest.mark.parametrize("backend", fast_backends())
def test_a_lattice_search_names_the_utterance_of_a_graph_error(backend, composed, monkeypatch):
    """A negative-cost epsilon cycle that only utterance 2's boost makes: a lattice decode
    names utterance 2, as a decode without lattices does, on every backend — cuda composes
    ``begin``, ``advance_keeping`` and ``end`` (`lattice._search_keeping`; ``composed``: cpu
    made to as well), and its ``end`` was not told the utterance (it named utterance 0)."""
    from wfstdecode import GraphError, SymbolTable
    from wfstdecode.ctc.cpu_streams import CpuStreams
    from wfstdecode.decoding_graph import DecodingGraph
    from wfstdecode.fstio import FstArrays

    if composed:
        if backend != "cpu":
            pytest.skip("only cpu has a search of its own to hide")
        monkeypatch.delattr(CpuStreams, "search_keeping")
    final = np.array([0.0, np.inf], np.float32)
    src, dst, ilabel, olabel = np.array([0, 0, 1]), np.array([0, 1, 0]), [1, 0, 0], [0, 1, 0]
    fst = FstArrays(0, final, src, dst, np.array(ilabel), np.array(olabel),
                    np.array([0.0, 0.5, 0.5]))  # fmt: skip
    g = DecodingGraph.from_arrays(fst, SymbolTable.from_list(["<blk>"]),
                                  SymbolTable.from_list(["<eps>", "w"]))  # fmt: skip
    lp = np.zeros((3, 2, 1), np.float32)
    boosts = [None, None, {"w": 2.0}]  # (the cycle: 1.0 less 2.0 for w)
    for lattice_beam in (None, 4.0):
        options = CtcBeamOptions(beam=5.0, lattice_beam=lattice_beam)
        with pytest.raises(GraphError, match=r"negative-cost epsilon cycle.*\(utterance 2,"):
            decode_ctc(lp, None, g, options, boosts, backend=backend)


@pytest.mark.parametrize("seed", range(6))
def test_every_lattice_arc_and_path_rescores_through_the_graph(seed):
    g, lp = _case(seed)
    options = CtcBeamOptions(beam=5.0, lattice_beam=4.0, acoustic_scale=0.7,
                             blank_penalty=0.3, word_insertion_penalty=-0.2)  # fmt: skip
    hyps = decode_ctc(lp, None, g, CtcBeamOptions(**{**options.__dict__, "nbest": 6}),
                      backend="cpu")  # fmt: skip
    for b, lat in enumerate(ctc_lattices(lp, None, g, options, backend="cpu")):
        a = lat.graph_arc
        assert (lat.src < lat.dst).all()
        assert (np.diff(lat.src) >= 0).all()
        assert (g.arc_source[a] == lat.node_state[lat.src]).all()
        assert (g.next_state[a] == lat.node_state[lat.dst]).all()
        emitting = a < g.num_emitting_arcs
        assert (lat.node_frame[lat.dst] - lat.node_frame[lat.src] == emitting).all()
        assert (lat.frame == lat.node_frame[lat.dst] - 1).all()
        want = (
            g.weight[a]
            + np.where(g.ilabel[a] == 1, np.float32(0.3), 0)
            + np.where(g.olabel[a] != 0, np.float32(-0.2), 0)
        )  # blank is token 0: ilabel 1
        np.testing.assert_allclose(lat.graph_cost, want, atol=1e-5)
        acoustic = np.where(emitting, -lp[b, lat.frame, np.maximum(lat.ilabel - 1, 0)], 0)
        np.testing.assert_allclose(lat.acoustic_cost, acoustic, atol=1e-6)
        # each of the n best lattice paths is a path of the graph at the cost the graph gives
        by_words = {}
        for arcs, cost in lat.nbest(6):
            ga = lat.graph_arc[arcs]
            assert g.arc_source[ga[0]] == g.start
            assert (g.next_state[ga[:-1]] == g.arc_source[ga[1:]]).all()
            assert int((ga < g.num_emitting_arcs).sum()) == lat.num_frames
            graph = sum(float(g.weight[x]) + 0.3 * (g.ilabel[x] == 1) - 0.2 * (g.olabel[x] != 0)
                        for x in ga)  # fmt: skip
            acoustic = sum(-0.7 * float(lp[b, f, g.ilabel[x] - 1])
                           for x, f in zip(ga, lat.frame[arcs], strict=True)
                           if x < g.num_emitting_arcs)  # fmt: skip
            end = float(g.final_cost[g.next_state[ga[-1]]])
            assert cost == pytest.approx(graph + acoustic + end, rel=1e-5, abs=1e-4)
            by_words[tuple(int(w) for w in g.olabel[ga] if w)] = cost
        for h in hyps[b][1:]:  # the n-best after the first come from the lattice
            assert -h.score == pytest.approx(by_words[h.word_ids], rel=1e-5, abs=1e-4)
        assert (lat.final[lat.node_frame != lat.num_frames] == np.inf).all()


@pytest.mark.parametrize("seed", range(6))
def test_pruning_keeps_exactly_the_arcs_within_the_lattice_beam(seed):
    g, lp = _case(seed)
    full = ctc_lattices(lp, None, g, CtcBeamOptions(beam=6.0, lattice_beam=math.inf))
    for lat in full:
        beam = 0.5 + seed
        pruned = lat.pruned(beam)
        alpha, beta, w = lat.forward(), lat.backward(), lat.arc_cost()
        within = alpha[lat.src] + w + beta[lat.dst] <= lat.best_cost + beam
        assert pruned.num_arcs == int(within.sum())
        every = lat.pruned(math.inf)  # every arc on a complete path, no dead ends
        assert np.isfinite(every.forward()[every.src] + every.backward()[every.dst]).all()
        assert every.num_arcs == int(np.isfinite(alpha[lat.src] + beta[lat.dst]).sum())
        np.testing.assert_array_equal(pruned.graph_arc, lat.graph_arc[within])
        assert pruned.best_cost == pytest.approx(lat.best_cost)
        assert (pruned.forward()[pruned.src] + pruned.arc_cost() + pruned.backward()[pruned.dst]
                <= pruned.best_cost + beam + 1e-9).all()  # fmt: skip
        for cut in (pruned, every):  # the costs it kept are those it would compute again
            fresh = replace(cut, _cache={})
            for name in ("forward", "backward", "arc_cost"):
                np.testing.assert_array_equal(getattr(cut, name)(), getattr(fresh, name)())


@pytest.mark.parametrize("seed", range(6))
def test_a_fresh_lattice_prunes_as_one_whose_costs_were_summed_first(seed):
    """A lattice fresh from the search is pruned summing each arc's costs as the passes read
    them (`wfstdecode.lattice_costs`: its float64 costs are never stored): the same arcs, nodes
    and kept costs, bit for bit, as pruning it after `arc_cost` summed them all."""
    g, lp = _case(seed)
    for lat in ctc_lattices(lp, None, g, CtcBeamOptions(beam=6.0, lattice_beam=math.inf)):
        for beam in (0.5 + seed, math.inf):
            fresh = replace(lat, _cache={})
            summed = replace(lat, _cache={})
            summed.arc_cost()
            a, b = fresh.pruned(beam), summed.pruned(beam)
            assert "w" not in fresh._cache  # (it summed nothing beforehand)
            for name in ("node_frame", "node_state", "final", "src", "dst", "graph_arc",
                         "graph_cost", "acoustic_cost"):  # fmt: skip
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
            assert a._cache.keys() == b._cache.keys()
            for key in ("w", "alpha", "beta"):
                np.testing.assert_array_equal(a._cache[key], b._cache[key])
            for x, y in zip(a._cache["rank"], b._cache["rank"], strict=True):
                np.testing.assert_array_equal(x, y)


def test_a_cancelled_pruning_gives_nothing():
    """A set cancel flag (a Ctrl-C during a long decode) stops the pruning's passes: None, for
    the caller to drop, whether the lattice's costs were summed before or not."""
    g, lp = _case(0)
    (lat,) = ctc_lattices(lp[:1], None, g, CtcBeamOptions(beam=6.0, lattice_beam=math.inf))
    stop, go = np.ones(1, np.int32), np.zeros(1, np.int32)
    assert replace(lat, _cache={}).pruned(2.0, stop) is None
    assert lat.pruned(2.0, stop) is None
    assert replace(lat, _cache={}).pruned(2.0, go).num_arcs == lat.pruned(2.0).num_arcs


@pytest.mark.parametrize("seed", range(5))
def test_posteriors_sum_to_one_per_frame_and_over_word_sequences(seed):
    g, lp = _case(seed)
    (lat, _) = ctc_lattices(lp, None, g, CtcBeamOptions(lattice_beam=8.0))
    post = lat.arc_posteriors()
    emitting = lat.graph_arc < g.num_emitting_arcs
    per_frame = np.bincount(lat.frame[emitting], post[emitting], minlength=lat.num_frames)
    np.testing.assert_allclose(per_frame, 1.0, rtol=1e-9)
    sequences = lat.nbest(10_000)
    total = 0.0
    for arcs, _ in sequences:
        labels = lat.olabel[arcs]
        total += lat.path_posterior(labels[labels != 0])
    assert total == pytest.approx(1.0, rel=1e-6)


PEAK_MB = """
try:  # this process's own peak: ru_maxrss starts at the parent's (Linux carries it over exec)
    with open("/proc/self/status") as status:
        print(next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) // 1024)
except OSError:
    import resource
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""
LONG_LATTICE = """
import numpy as np
from wfstdecode.posteriors import position_posteriors, sequence_posterior
n = 20_000
src = np.repeat(np.arange(n), 2)
dst, olabel = src + 1, np.tile(np.array([1, 2], np.int32), n)
w = np.tile(np.array([0.0, np.log(3.0)]), n)  # word 1 three times as likely as word 2
final = np.full(n + 1, np.inf)
final[n] = 0.0
posteriors = position_posteriors(src, dst, olabel, w, final)
assert len(posteriors) == n
assert abs(posteriors[0][1] - 0.75) < 1e-9 and abs(posteriors[-1][2] - 0.25) < 1e-9
assert 0.0 <= sequence_posterior(src, dst, olabel, w, final, [1] * n) <= 1.0  # (0.75**n)
"""
# at each of n positions one word (p = 0.999) or two (0.001): 2i words reach position node 2i
SPLIT_LATTICE = """
import numpy as np
from wfstdecode.posteriors import position_posteriors, sequence_posterior
n = 20_000
src = np.stack([2 * np.arange(n), 2 * np.arange(n), 2 * np.arange(n) + 1], 1).ravel()
dst = np.stack([2 * np.arange(n) + 2, 2 * np.arange(n) + 1, 2 * np.arange(n) + 2], 1).ravel()
olabel = np.tile(np.array([1, 2, 3], np.int32), n)
w = np.tile(-np.log([0.999, 0.001, 1.0]), n)
final = np.full(2 * n + 1, np.inf)
final[2 * n] = 0.0
posteriors = position_posteriors(src, dst, olabel, w, final)
assert abs(posteriors[0][1] - 0.999) < 1e-9 and abs(posteriors[0][2] - 0.001) < 1e-9
assert abs(sum(posteriors[n - 1].values()) - 1.0) < 1e-9  # every path has n words or more
assert n < len(posteriors) < n + 200  # (more words than that: below 1e-12)
one_each = sequence_posterior(src, dst, olabel, w, final, [1] * n)
assert abs(one_each / 0.999**n - 1.0) < 1e-6, one_each
"""


# a chain of words from which every node also ends at the last one: 20,000 arcs into one node,
# each reaching one word count more (its row moved once per arc: 2.6 GB); arcs given unsorted
FAN_IN_LATTICE = """
import numpy as np
from wfstdecode.posteriors import position_posteriors, sequence_posterior
n = 20_000
src = np.concatenate([np.arange(n - 1), np.arange(n - 2)])
dst = np.concatenate([np.arange(1, n), np.full(n - 2, n - 1)])
olabel = np.concatenate([np.ones(n - 1, np.int32), np.zeros(n - 2, np.int32)])
w = np.concatenate([np.zeros(n - 1), np.full(n - 2, 12.0)])
final = np.full(n, np.inf)
final[n - 1] = 0.0
posteriors = position_posteriors(src, dst, olabel, w, final)
assert len(posteriors) == n - 1 and abs(posteriors[0][1] - 1.0) < 1e-4
order = np.argsort(src, kind="stable")
assert position_posteriors(src[order], dst[order], olabel[order], w[order], final) == posteriors
assert 0.0 < sequence_posterior(src, dst, olabel, w, final, [1] * (n - 1)) <= 1.0
"""


@pytest.mark.parametrize("script", ["LONG_LATTICE", "SPLIT_LATTICE", "FAN_IN_LATTICE"])
def test_word_posteriors_of_a_long_lattice_take_memory_by_its_width(script):
    """Word posteriors and a sequence's posterior over 20,000 positions: the forward passes over
    (node, words so far) keep each node's cells that matter, not nodes x (words + 1) float64
    cells (3.2 GB for LONG_LATTICE; a 50,000-frame lattice failed with MemoryError), nor the
    node's whole band of word counts (up to 2 x 20,000 for SPLIT_LATTICE: 6.4 GB), nor a row
    moved once per arc into its node (FAN_IN_LATTICE). Measured in
    a process of its own, whose peak memory is this alone (its VmHWM: its ru_maxrss began at
    pytest's)."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", globals()[script] + PEAK_MB],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert int(run.stdout.split()[-1]) < 800  # peak MB: the interpreter, Numba and the arrays


@pytest.mark.parametrize("seed", range(4))
def test_word_posteriors_equal_sums_over_the_word_sequences(seed):
    g, lp = _case(seed)
    hyps = decode_ctc(lp, None, g, CtcBeamOptions(lattice_beam=6.0, nbest=3))
    lattices = ctc_lattices(lp, None, g, CtcBeamOptions(lattice_beam=6.0))
    for b, lat in enumerate(lattices):
        sequences = {}
        for arcs, _ in lat.nbest(100_000):
            labels = lat.olabel[arcs]
            words = tuple(labels[labels != 0].tolist())
            sequences[words] = lat.path_posterior(words)
        assert sum(sequences.values()) == pytest.approx(1.0, rel=1e-6)
        posteriors = lat.word_posteriors()
        assert len(posteriors) == max(len(w) for w in sequences)
        for k, at_k in enumerate(posteriors):
            brute = {}
            for words, p in sequences.items():
                if len(words) > k:
                    brute[words[k]] = brute.get(words[k], 0.0) + p
            assert at_k.keys() <= brute.keys()
            for w, p in brute.items():
                assert at_k.get(w, 0.0) == pytest.approx(p, rel=1e-6, abs=1e-9)
            # summed over the words: the paths with more than k words; the rest have fewer
            longer = sum(p for words, p in sequences.items() if len(words) > k)
            assert sum(at_k.values()) == pytest.approx(longer, rel=1e-6, abs=1e-9)
        for h in hyps[b]:
            want = [posteriors[k].get(w, 0.0) for k, w in enumerate(h.word_ids)]
            assert h.word_confidences == pytest.approx(want)
            assert all(0.0 <= c <= 1.0 + 1e-9 for c in h.word_confidences)


@pytest.mark.parametrize("backend", fast_backends())
def test_a_died_search_has_no_lattice_and_the_nbest_says_so(backend):
    g = lexicon_graph(["ab"], word_cost=[0.0])
    lp = np.full((1, 3, g.num_tokens), -np.inf, np.float32)
    lp[0, :, g.tokens.id("<blk>")] = 0.0
    lp[0, 1, :] = -np.inf
    lp[0, 1, g.tokens.id("b")] = 0.0  # "b" cannot start a word
    options = CtcBeamOptions(lattice_beam=5.0, nbest=3)
    assert ctc_lattices(lp, None, g, options, backend=backend) == [None]
    (hyps,) = decode_ctc(lp, None, g, options, backend=backend)
    assert hyps[0].score == -math.inf and "died" in hyps[0].notes[-1]


def test_kaldi_reads_the_written_lattice(tmp_path):
    kaldifst = pytest.importorskip("kaldifst")
    g, lp = _case(3)
    lats = ctc_lattices(lp, None, g, CtcBeamOptions(lattice_beam=4.0))
    path = tmp_path / "one.fst"
    path.write_bytes(lats[0].kaldi_bytes())
    fst = kaldifst.Lattice.read(str(path))
    assert fst.num_states == lats[0].num_nodes
    arcs, finals = [], {}
    for line in fst.to_str().splitlines():  # fstprint: src dst in out graph,acoustic / s final
        fields = line.split()
        if len(fields) == 5:
            cost = tuple(float(x) for x in fields[4].split(","))
            arcs.append((*map(int, fields[:4]), *cost))
        else:
            finals[int(fields[0])] = float(fields[1].split(",")[0]) if len(fields) > 1 else 0.0
    lat = lats[0]
    assert len(arcs) == lat.num_arcs
    for got, want in zip(arcs, zip(lat.src, lat.dst, lat.ilabel, lat.olabel, lat.graph_cost,
                                   lat.acoustic_cost, strict=True), strict=True):  # fmt: skip
        assert got[:4] == tuple(int(x) for x in want[:4])
        assert got[4:] == pytest.approx([float(x) for x in want[4:]], rel=1e-5, abs=1e-5)
    is_final = np.flatnonzero(np.isfinite(lat.final))
    assert sorted(finals) == is_final.tolist()
    assert [finals[s] for s in is_final] == pytest.approx(lat.final[is_final].tolist(), abs=1e-5)
    ark = tmp_path / "lat.ark"
    write_kaldi_archive({"utt1": lats[0], "utt2": lats[1]}, ark)
    data = ark.read_bytes()
    assert data.startswith(b"utt1 \0B" + lats[0].kaldi_bytes() + b"utt2 \0B")
    with pytest.raises(OptionsError, match="whitespace"):
        write_kaldi_archive({"a b": lats[0]}, tmp_path / "bad.ark")
    assert not (tmp_path / "bad.ark").exists()


def test_lattice_options_are_checked():
    g, lp = _case(0)
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(OptionsError, match="lattice_beam"):
            CtcBeamOptions(lattice_beam=bad)
    with pytest.raises(OptionsError, match="lattice_beam set"):
        ctc_lattices(lp, None, g, CtcBeamOptions())
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        decode_ctc(lp, None, g, CtcBeamOptions(lattice_beam=2.0, nbest=2), backend="gpu")
    # nbest=1 with a lattice beam is the search's result as it is (with word confidences)
    assert_hypotheses_equal(
        decode_ctc(lp, None, g, CtcBeamOptions(lattice_beam=2.0)),
        decode_ctc(lp, None, g, CtcBeamOptions()),
    )


def test_decode_command_writes_a_kaldi_archive_and_lattice_nbest(tmp_path, capsys):
    from wfstdecode.cli import main

    words = ["cat", "cap", "act", "tact", "pat", "tapa"]
    g = lexicon_graph(words, word_cost=[1.0, 1.2, 2.0, 2.5, 1.1, 2.4])
    g.save(tmp_path / "TLG.npz")
    seqs = [[g.tokens.id(c) for c in "".join(ws)] for ws in (["cat", "pat"], ["tapa", "act"])]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=1, confusion_prob=0.4, noise=2.0)
    np.savez(tmp_path / "e.npz", log_probs=lp, lengths=lengths, ids=np.array(["u1", "u2"]))
    ark = tmp_path / "lat.ark"
    args = ["decode", str(tmp_path / "TLG.npz"), str(tmp_path / "e.npz"), "--backend", "cpu"]
    assert main([*args, "--nbest", "3"]) == 0
    plain = capsys.readouterr().out
    assert main([*args, "--nbest", "3", "--lattice-beam", "6", "--write-lattices", str(ark)]) == 0
    out = capsys.readouterr()
    assert "wrote 2 word-determinized CompactLattice lattices" in out.err
    options = CtcBeamOptions(nbest=3, lattice_beam=6.0)
    lats = ctc_lattices(lp, lengths, g, options)

    def archive(lattices):
        keys = (b"u1", b"u2")
        return b"".join(k + b" \0B" + x.kaldi_bytes() for k, x in zip(keys, lattices, strict=True))

    assert ark.read_bytes() == archive([determinize(lat) for lat in lats])
    state = tmp_path / "state.ark"
    assert main([*args, "--lattice-beam", "6", "--write-lattices", str(state),
                 "--no-determinize-lattice"]) == 0  # fmt: skip
    assert "state-level" in capsys.readouterr().err
    assert state.read_bytes() == archive(lats)
    hyps = decode_ctc(lp, lengths, g, options)
    want = [
        f"{u}-{r + 1}\t{h.score:.3f}\t{h.text}"
        for u, hs in zip(["u1", "u2"], hyps, strict=True)
        for r, h in enumerate(hs)
    ]
    assert out.out.splitlines() == want
    assert plain.splitlines()[0] == want[0]  # the best path is the search's, lattice or not
    assert hyps[0][0].word_confidences  # the best path's words have confidences
    assert main([*args, "--lattice-beam", "6", "--ctm", "--frame-shift", "0.04"]) == 0
    ctm = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert [float(f[5]) for f in ctm] == pytest.approx(
        [c for h in hyps for c in h[0].word_confidences], abs=1e-4
    )
    assert main([*args, "--write-lattices", str(tmp_path / "x.ark")]) == 2
    assert "--lattice-beam" in capsys.readouterr().err
    assert not (tmp_path / "x.ark").exists()


def test_a_lattice_file_in_any_state_order_reads_back_the_same(tmp_path):
    from wfstdecode.fstio import write_lattice_bytes
    from wfstdecode.lattice_io import read_kaldi_archive

    g, lp = _case(4)
    (lat, _) = ctc_lattices(lp, None, g, CtcBeamOptions(lattice_beam=6.0))
    perm = np.random.default_rng(0).permutation(lat.num_nodes)  # old node -> new state number
    src, dst = perm[lat.src], perm[lat.dst]
    order = np.argsort(src, kind="stable")
    final = np.empty_like(lat.final)
    final[perm] = lat.final
    data = write_lattice_bytes(final, src[order], dst[order], lat.ilabel[order],
                               lat.olabel[order], lat.graph_cost[order], lat.acoustic_cost[order],
                               start=int(perm[0]))  # fmt: skip
    (tmp_path / "p.ark").write_bytes(b"x \0B" + data)
    back = read_kaldi_archive(tmp_path / "p.ark")["x"]
    assert (back.num_nodes, back.num_arcs) == (lat.num_nodes, lat.num_arcs)
    assert (back.src < back.dst).all()
    assert sorted(back.node_frame.tolist()) == sorted(lat.node_frame.tolist())
    got, want = back.nbest(5), lat.nbest(5)
    assert [c for _, c in got] == pytest.approx([c for _, c in want])
    assert [back.olabel[a].tolist() for a, _ in got] == [lat.olabel[a].tolist() for a, _ in want]


@pytest.mark.parametrize("seed", range(3))
def test_nbest_through_an_oov_slot_equals_openfst(tmp_path, seed):
    """Boosted words the graph lacks are spelled through its slot: the n best label sequences
    of TLG ∘ C, collapsed to words, are the lattice n-best's words."""
    pynini = pytest.importorskip("pynini")
    from wfstdecode import SymbolTable
    from wfstdecode.ctc.oov import OovSpeller
    from wfstdecode.graph import build_tlg
    from wfstdecode.graph.lexicon import spell_lexicon
    from wfstdecode.graph.oov_slot import OovSlot
    from wfstdecode.testing.lm import random_words

    tokens = SymbolTable.from_list(["<blk>", "|", *"abcd"])
    words = random_words(5, "abcd", seed, max_len=3)
    lexicon, _ = spell_lexicon(words, tokens, separator="|")
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(random_arpa(words, order=2, seed=seed, unk=True))
    g = build_tlg(tokens, lexicon, arpa, "compact", separator="|",
                  oov_slot={"spelling": "chars"}).graph  # fmt: skip
    oov = next(w for w in ("dcba", "abcd", "cadd", "bbad") if w not in words)
    boosts = {oov: 3.0}
    spoken = [[words[0], oov, words[1]], [oov, words[2]]]
    seqs = [[tokens.id(c) for c in "|".join(s)] for s in spoken]
    lp, lengths = simulate_ctc(seqs, tokens.next_id, seed=seed, noise=1.5, confusion_prob=0.2)
    hyps = decode_ctc(lp, lengths, g, CtcBeamOptions(nbest=4, **WIDE), boosts)
    speller = OovSpeller(g)
    (resolved,) = resolve_boosts(boosts, 1, g.words, speller)
    context = pynini_fst(PhraseAutomaton(resolved, OovSlot.of(g).open).fst_arrays(
        range(1, g.words.next_id)))  # fmt: skip
    composed = pynini.compose(pynini_fst(g.to_arrays()).arcsort("olabel"),
                              context.arcsort("ilabel"))  # fmt: skip
    assert any(oov in h.words for h in hyps[0] + hyps[1])
    for b in range(len(lp)):
        spread = -hyps[b][-1].score + hyps[b][0].score
        want = openfst_nbest(lp[b, : lengths[b]], composed, 1.0, 4, within=spread + 2.0)
        collapsed = []
        for labels, cost in want:
            ids, spelled, _ = speller.collapse(list(labels))
            names = tuple(
                s[0] if s else g.words.symbol(w) for w, s in zip(ids, spelled, strict=True)
            )
            collapsed.append((names, cost))
        got = [(h.words, -h.score) for h in hyps[b]]
        assert [c for _, c in got] == pytest.approx([c for _, c in collapsed], rel=1e-5,
                                                    abs=1e-3)  # fmt: skip
        assert {w for w, _ in got} <= {w for w, _ in collapsed} | {got[-1][0]}
        assert not hyps[b][0].word_confidences  # spelled words are several labels: none given


@pytest.mark.parametrize("seed", range(4))
def test_mbr_ranks_the_candidates_by_expected_word_errors(seed):
    from wfstdecode.metrics import edit_distance

    g, lp = _case(seed, word_prob=0.6)
    k = 6
    base = CtcBeamOptions(lattice_beam=6.0, nbest=k)
    mbr = decode_ctc(lp, None, g, CtcBeamOptions(lattice_beam=6.0, nbest=3, mbr_candidates=k))
    candidates = decode_ctc(lp, None, g, base)
    for b, lat in enumerate(ctc_lattices(lp, None, g, base)):
        words = [h.word_ids for h in candidates[b]]
        post = np.array([lat.path_posterior(w) for w in words])
        post /= post.sum()
        risk = [sum(q * edit_distance(w, v) for q, v in zip(post, words, strict=True))
                for w in words]  # fmt: skip
        order = sorted(range(len(words)), key=lambda i: (risk[i], i))[:3]
        assert [h.word_ids for h in mbr[b]] == [words[i] for i in order]
        assert risk[order[0]] <= risk[0]  # never worse than the most probable path
        for h, i in zip(mbr[b], order, strict=True):
            assert h.notes[-1] == f"MBR over {len(words)} candidates: expected word errors " \
                                  f"{risk[i]:.3f}"  # fmt: skip
            assert h.score == pytest.approx(candidates[b][i].score)


@pytest.mark.parametrize("seed", [1, 5])
def test_mbr_ranks_mbr_candidates_whatever_nbest(seed):
    """MBR ranks the lattice's ``mbr_candidates`` best sequences: asking for more hypotheses
    (nbest above mbr_candidates) must not change the candidates, hence the MBR winner. It
    ranked max(nbest, mbr_candidates) of them: nbest=8 with mbr_candidates=2 said "MBR over 8
    candidates" and put another sequence first than nbest=1 did."""
    g = random_graph(seed, num_states=8, num_tokens=5, arcs_per_state=3, word_prob=0.6)
    lp = random_log_probs(seed, 1, 6, g.num_tokens, peaky=1.5)
    one = decode_ctc(lp, None, g, CtcBeamOptions(lattice_beam=6.0, nbest=1, mbr_candidates=2))
    ranked = decode_ctc(lp, None, g, CtcBeamOptions(lattice_beam=6.0, nbest=2, mbr_candidates=2))
    many = decode_ctc(lp, None, g, CtcBeamOptions(lattice_beam=6.0, nbest=8, mbr_candidates=2))
    plain = decode_ctc(lp, None, g, CtcBeamOptions(lattice_beam=6.0, nbest=8))
    assert many[0][0] == one[0][0]
    assert many[0][:2] == ranked[0]
    assert many[0][0].notes[-1].startswith("MBR over 2 candidates")
    assert many[0][2:] == plain[0][2:]  # the rest: the lattice's next best, as they came
    assert len(many[0]) == len(plain[0]) > 2


def test_mbr_options_are_checked():
    for bad in (1, -1):
        with pytest.raises(OptionsError, match="mbr_candidates"):
            CtcBeamOptions(lattice_beam=4.0, mbr_candidates=bad)
    with pytest.raises(OptionsError, match="set lattice_beam"):
        CtcBeamOptions(mbr_candidates=4)


@pytest.mark.parametrize("backend", ["reference", *fast_backends()])
def test_empty_utterances_and_paths_without_a_final_state(backend):
    g, lp = _case(3)
    lengths = np.array([6, 0])
    with_lattice = decode_ctc(lp, lengths, g, CtcBeamOptions(lattice_beam=5.0, nbest=3),
                              backend=backend)  # fmt: skip
    plain = decode_ctc(lp, lengths, g, CtcBeamOptions(), backend=backend)
    for x, y in zip(with_lattice, plain, strict=True):
        assert_hypotheses_equal([x[:1]], [y])
    ends_mid_word = lexicon_graph(["abc"], word_cost=[0.0])
    lp2 = np.full((1, 2, ends_mid_word.num_tokens), -np.inf, np.float32)
    lp2[0, 0, ends_mid_word.tokens.id("a")] = lp2[0, 1, ends_mid_word.tokens.id("b")] = 0.0
    options = CtcBeamOptions(lattice_beam=5.0, nbest=3)
    (hyps,) = decode_ctc(lp2, None, ends_mid_word, options, backend=backend)
    assert_hypotheses_equal([hyps], decode_ctc(lp2, None, ends_mid_word, CtcBeamOptions(),
                                               backend=backend))  # fmt: skip
    (lat,) = ctc_lattices(lp2, None, ends_mid_word, options, backend=backend)
    assert "without final costs" in lat.notes[0]


def test_word_confidences_stay_within_one():
    """A word's posterior sums many paths' and can round just past 1; the confidence cannot."""
    from types import SimpleNamespace

    from wfstdecode.ctc.lattice import with_confidences
    from wfstdecode.results import Hypothesis

    lattice = SimpleNamespace(word_posteriors=lambda: [{5: 1.0000000000000118}, {6: 0.25}])
    hyp = Hypothesis((1, 2), (0, 2), -1.0, words=("a", "b"), word_ids=(5, 6),
                     word_timestamps=((0, 1), (2, 3)))  # fmt: skip
    (got,) = with_confidences(SimpleNamespace(oov=None), [[hyp]], [lattice])
    assert got[0].word_confidences == (1.0, 0.25)


def _pruned_start_graph():
    """0 -eps:a/-1-> 1 -x/5-> 2 and 0 -x:b/0-> 2 (final): with max_active 1 the start (cost 0)
    is pruned at token frame 0 for state 1 (cost -1), so the search never expands 0 -x:b-> 2."""
    from wfstdecode import DecodingGraph, SymbolTable
    from wfstdecode.fstio import FstArrays

    arcs = FstArrays(0, np.array([np.inf, np.inf, 0.0]), np.array([0, 1, 0]),
                     np.array([1, 2, 2]), np.array([0, 2, 2]), np.array([1, 0, 2]),
                     np.array([-1.0, 5.0, 0.0]))  # fmt: skip
    tokens, words = (
        SymbolTable.from_list(["<blk>", "x"]),
        SymbolTable.from_list(["<eps>", "a", "b"]),
    )
    return DecodingGraph.from_arrays(arcs, tokens, words)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_a_pruned_token_adds_no_arcs_or_ends_to_the_lattice(backend):
    """The lattice keeps tokens the search pruned when they lie on its result path (the start,
    an epsilon ancestor); their emitting arcs, never expanded, and final costs went in too: the
    lattice's best beat the search's, the n-best came unsorted, confidences were wrong."""
    g = _pruned_start_graph()
    lp = np.log(np.full((1, 1, 2), 0.5, np.float32))
    options = CtcBeamOptions(beam=math.inf, max_active=1, lattice_beam=math.inf, nbest=2)
    plain = decode_ctc(lp, None, g, replace(options, lattice_beam=None, nbest=1), backend=backend)
    hyps = decode_ctc(lp, None, g, options, backend=backend)[0]
    assert [h.words for h in hyps] == [("a",)] and hyps[0].score == plain[0][0].score
    assert hyps[0].word_confidences == (1.0,)
    (lat,) = ctc_lattices(lp, None, g, options, backend=backend)
    assert lat.best_cost == pytest.approx(-plain[0][0].score)
    # no frames: the pruned start ends no path
    lp0 = np.zeros((1, 0, 2), np.float32)
    g0 = replace(g, final_cost=np.array([0.0, 2.0, np.inf], np.float32))
    assert [h.words for h in decode_ctc(lp0, None, g0, options, backend=backend)[0]] == [("a",)]


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_lattice_nbest_starts_with_the_search_best_and_is_sorted_under_tight_pruning(backend):
    found = 0
    for seed in range(150):
        rng = np.random.default_rng(seed)
        size = dict(num_states=int(rng.integers(2, 10)), num_tokens=int(rng.integers(2, 5)),
                    arcs_per_state=int(rng.integers(1, 4)))  # fmt: skip
        g = random_graph(seed, num_words=4, eps_arcs_per_state=1.0, word_prob=0.5,
                         final_prob=0.4, **size)  # fmt: skip
        lp = random_log_probs(seed, 1, int(rng.integers(0, 6)), g.num_tokens, peaky=1.0)
        beam, max_active = float(rng.choice([1.0, 3.0, math.inf])), int(rng.choice([1, 2, 3]))
        options = CtcBeamOptions(beam=beam, max_active=max_active, nbest=3, lattice_beam=5.0)
        plain = decode_ctc(
            lp, None, g, replace(options, lattice_beam=None, nbest=1), backend=backend
        )
        hyps = decode_ctc(lp, None, g, options, backend=backend)[0]
        if plain[0][0].score == -math.inf:
            continue
        assert hyps[0] == replace(plain[0][0], word_confidences=hyps[0].word_confidences), seed
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True), (seed, scores)
        found += len(hyps) > 1
    assert found > 20


@pytest.mark.parametrize("posteriors", ["lattice", "determinized"])
def test_mbr_over_a_long_lattice_whose_sequence_posteriors_underflow(posteriors):
    """1,100 positions, each "a" or "b" (the first "a" at 0.6, the others at 0.5): each word
    sequence holds under 2^-1100 of the total, below the smallest float64, so every candidate's
    posterior was 0, their normalisation 0 / 0 and every expected error NaN (ranked anyhow).
    Each sequence here has one path: the posteriors go as exp(score)."""
    from wfstdecode.metrics import edit_distance

    g = lexicon_graph(["a", "b"], word_cost=0.0)
    n = 1100
    lp = np.full((1, 2 * n, g.num_tokens), -np.inf, np.float32)
    lp[0, 0::2, g.tokens.id("a")] = lp[0, 0::2, g.tokens.id("b")] = np.log(0.5)
    lp[0, 0, g.tokens.id("a")], lp[0, 0, g.tokens.id("b")] = np.log(0.6), np.log(0.4)
    lp[0, 1::2, g.tokens.id("<blk>")] = 0.0
    base = dict(lattice_beam=4.0, posteriors=posteriors)
    (candidates,) = decode_ctc(lp, None, g, CtcBeamOptions(nbest=3, **base))
    (mbr,) = decode_ctc(lp, None, g, CtcBeamOptions(nbest=3, mbr_candidates=3, **base))
    scores = np.array([h.score for h in candidates])
    post = np.exp(scores - scores.max())
    post /= post.sum()
    words = [h.word_ids for h in candidates]
    risk = [sum(q * edit_distance(w, v) for q, v in zip(post, words, strict=True))
            for w in words]  # fmt: skip
    order = sorted(range(3), key=lambda i: (risk[i], i))
    assert [h.word_ids for h in mbr] == [words[i] for i in order]
    for h, i in zip(mbr, order, strict=True):
        assert h.notes[-1] == f"MBR over 3 candidates: expected word errors {risk[i]:.3f}"


@pytest.mark.parametrize("seed", range(3))
def test_posteriors_ignore_a_frame_of_huge_log_probs(seed):
    """A frame whose every log-prob is -1e20 searches as one of zeros (each frame is taken
    relative to its best), and so must its lattice's posteriors: every path's float64 cost was
    1e20, swamping the other frames, and every path's share of the total 1 (arc posteriors
    summing to dozens per frame, word confidences 0)."""
    g, lp = _case(seed)
    options = CtcBeamOptions(lattice_beam=math.inf)
    lattices = {}
    for value in (0.0, -1e20):
        x = lp.copy()
        x[:, 2, :] = value
        lattices[value] = ctc_lattices(x, None, g, options)
    for plain, huge in zip(lattices[0.0], lattices[-1e20], strict=True):
        np.testing.assert_array_equal(huge.graph_arc, plain.graph_arc)
        post = huge.arc_posteriors()
        np.testing.assert_allclose(post, plain.arc_posteriors(), rtol=1e-9, atol=1e-12)
        emitting = huge.ilabel != 0
        per_frame = np.bincount(huge.frame[emitting], post[emitting], minlength=huge.num_frames)
        np.testing.assert_allclose(per_frame, 1.0, rtol=1e-9)
        want = plain.word_posteriors()
        got = huge.word_posteriors()
        assert [k.keys() for k in got] == [k.keys() for k in want]
        for at_k, want_k in zip(got, want, strict=True):
            assert at_k == pytest.approx(want_k, rel=1e-9, abs=1e-12)
        for arcs, _ in plain.nbest(5):
            labels = plain.olabel[arcs]
            words = labels[labels != 0]
            assert huge.path_posterior(words) == pytest.approx(plain.path_posterior(words),
                                                               rel=1e-9)  # fmt: skip


@pytest.mark.parametrize("seed", range(3))
def test_pruning_nbest_and_determinized_posteriors_ignore_a_frame_of_huge_log_probs(seed):
    """As the posteriors above: a frame of -1e20 log-probs changes no ranking, so not which arcs
    a lattice beam keeps (it kept every arc: every path's float64 cost was the same 1e20), nor
    the n-best's word sequences and order (they came in any order), nor the word confidences
    of the lattice determinized on words (there were none: every one 0)."""
    g, lp = _case(seed)
    hyps, lattices = {}, {}
    for value in (0.0, -1e20):
        x = lp.copy()
        x[:, 2, :] = value
        lattices[value] = ctc_lattices(x, None, g, CtcBeamOptions(lattice_beam=2.0))
        options = CtcBeamOptions(nbest=4, lattice_beam=math.inf, posteriors="determinized")
        hyps[value] = decode_ctc(x, None, g, options)
    for plain, huge in zip(lattices[0.0], lattices[-1e20], strict=True):
        np.testing.assert_array_equal(huge.graph_arc, plain.graph_arc)
    for plain, huge in zip(hyps[0.0], hyps[-1e20], strict=True):
        assert [h.word_ids for h in huge] == [h.word_ids for h in plain]
        for h, want in zip(huge, plain, strict=True):
            assert h.word_confidences == pytest.approx(want.word_confidences, abs=1e-6)


def test_a_fresh_lattice_with_a_minus_inf_cost_prunes_as_one_summed_first():
    """A hand-made lattice whose best cost is -inf (an arc of -inf graph cost) is ranked by
    `_posterior_cost` (`_ranking`: beyond `_EXACT_COSTS`) whether its costs were summed before
    pruning or not: the fresh one took the summed passes instead (its best path's cost -inf where
    the summed-first one's is inf, other caches)."""
    i32, f32 = (lambda *a: np.array(a, np.int32)), (lambda *a: np.array(a, np.float32))
    lat = Lattice(2, i32(0, 1, 2), i32(0, 0, 0), f32(np.inf, np.inf, 0.0), i32(0, 0, 1, 1),
                  i32(1, 1, 2, 2), i32(0, 1, 2, 3), i32(1, 2, 1, 2), i32(1, 2, 0, 0),
                  i32(0, 0, 1, 1), f32(-np.inf, 0.5, 0.0, 0.25), f32(1.0, 2.0, 1.5, 0.5),
                  1.0)  # fmt: skip
    for beam in (0.5, math.inf):
        fresh, summed = replace(lat, _cache={}), replace(lat, _cache={})
        summed.arc_cost()
        with np.errstate(invalid="ignore"):  # (-inf + inf: the beam's limit)
            a, b = fresh.pruned(beam), summed.pruned(beam)
        for name in ("src", "dst", "graph_arc", "final"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        assert a._cache.keys() == b._cache.keys()
        assert a.best_cost == b.best_cost or (math.isnan(a.best_cost) and math.isnan(b.best_cost))

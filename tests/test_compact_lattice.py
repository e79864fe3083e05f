"""Word-determinized lattices (`wfstdecode.compact_lattice`): one path per word sequence of the
state-level lattice, carrying that sequence's best alignment (checked against every path of the
lattice, enumerated here, and against OpenFst's determinization of the word acceptor); Kaldi
CompactLattice files written and read back; the expansion back to a state-level lattice."""

import math
import struct
from dataclasses import replace

import numpy as np
import pytest

from wfstdecode import OptionsError
from wfstdecode.compact_lattice import CompactLattice, compact_from_fst, determinize
from wfstdecode.ctc import CtcBeamOptions, ctc_lattices
from wfstdecode.errors import GraphError, InputFileError
from wfstdecode.lattice import _NOTHING
from wfstdecode.lattice_io import read_kaldi_archive, write_kaldi_archive
from wfstdecode.testing import random_graph, random_log_probs

WIDE = dict(beam=math.inf, max_active=1_000_000, lattice_beam=math.inf)


def _lattices(seed, backend="cpu", **options):
    g = random_graph(seed, num_states=8 + seed % 7, num_tokens=5, arcs_per_state=3,
                     eps_arcs_per_state=0.3 * (seed % 3))  # fmt: skip
    lp = random_log_probs(seed, 2, 5 + seed % 4, g.num_tokens, peaky=1.5 + seed % 3)
    return ctc_lattices(lp, None, g, CtcBeamOptions(**{**WIDE, **options}), backend=backend)


def _best_alignments(lat):
    """Per word sequence of the state-level lattice, its best path by Kaldi's order (cost, then
    graph cost, then shorter string, then smaller string), as ``(cost, graph, acoustic,
    string)``: the best path into each (node, words so far), nodes in topological order (the
    order is kept by extending paths, so this is the best over every path)."""
    scale = lat.acoustic_scale
    at: list[dict] = [{} for _ in range(lat.num_nodes)]
    if lat.num_nodes:
        at[0][()] = (0.0, 0.0, 0, (), 0.0)
    first = np.searchsorted(lat.src, np.arange(lat.num_nodes + 1))
    best: dict = {}
    for node in range(lat.num_nodes):  # arcs go forward: every arc into it was taken
        for words, (_, g, _, labels, a) in at[node].items():
            if np.isfinite(lat.final[node]):
                gf = g + float(lat.final[node])
                w = (gf + scale * a, gf, len(labels), labels, a)
                if words not in best or w < best[words]:
                    best[words] = w
            for i in range(first[node], first[node + 1]):
                word, label = int(lat.olabel[i]), int(lat.ilabel[i])
                g2, a2 = g + float(lat.graph_cost[i]), a + float(lat.acoustic_cost[i])
                l2 = labels + ((label,) if label else ())
                w2 = words + ((word,) if word else ())
                w = (g2 + scale * a2, g2, len(l2), l2, a2)
                old = at[int(lat.dst[i])].get(w2)
                if old is None or w < old:
                    at[int(lat.dst[i])][w2] = w
    return {words: (c, g, a, labels) for words, (c, g, _, labels, a) in best.items()}


def _assert_same_paths(compact: CompactLattice, want: dict, tol=1e-3):
    got = compact.paths()
    assert len({words for words, *_ in got}) == len(got)  # one path per word sequence
    assert {words for words, *_ in got} == set(want)
    for words, g, a, labels in got:
        cost, g_want, a_want, labels_want = want[words]
        assert g + compact.acoustic_scale * a == pytest.approx(cost, abs=tol)
        assert g == pytest.approx(g_want, abs=tol) and a == pytest.approx(a_want, abs=tol)
        assert labels == labels_want  # the best alignment's tokens, one per frame


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("seed", range(8))
def test_one_path_per_word_sequence_with_its_best_alignment(seed, backend):
    for lat in _lattices(seed, backend):
        compact = determinize(lat)
        _assert_same_paths(compact, _best_alignments(lat))
        assert (compact.src < compact.dst).all()  # topological, arcs by source
        assert (np.diff(compact.src) >= 0).all()
        for *_, labels in compact.paths():
            assert len(labels) == lat.num_frames  # every frame's token, once
        assert compact.num_paths() == len(compact.paths())


@pytest.mark.parametrize("seed", range(4))
def test_costs_equal_openfst_determinization_of_the_word_acceptor(seed):
    pynini = pytest.importorskip("pynini")
    from wfstdecode.fstio import FstArrays
    from wfstdecode.testing.oracles import paths, pynini_fst

    for lat in _lattices(seed, lattice_beam=5.0):
        words_fst = pynini_fst(FstArrays(0, lat.final, lat.src, lat.dst, lat.olabel, lat.olabel,
                                         lat.arc_cost().astype(np.float32)))  # fmt: skip
        det = pynini.determinize(pynini.rmepsilon(words_fst))
        want = {tuple(o): w for _, o, w in paths(det)}
        got = {words: g + lat.acoustic_scale * a for words, g, a, _ in determinize(lat).paths()}
        assert set(got) == set(want)
        for words, cost in got.items():
            assert cost == pytest.approx(want[words], abs=2e-3)


def test_finite_lattice_beams_and_the_beam_argument():
    (lat, _) = _lattices(3)
    for beam in (1.0, 4.0):
        pruned = determinize(lat.pruned(beam))
        assert {w for w, *_ in determinize(lat, beam=beam).paths()} == {
            w for w, *_ in pruned.paths()
        }
        _assert_same_paths(pruned, _best_alignments(lat.pruned(beam)))
        best = min(g + lat.acoustic_scale * a for _, g, a, _ in pruned.paths())
        assert best == pytest.approx(lat.best_cost, abs=1e-3)  # the best path survives


def test_too_many_states_raise_with_the_remedy():
    (lat, _) = _lattices(2)
    with pytest.raises(OptionsError, match="smaller lattice beam"):
        determinize(lat, max_states=2)


def test_a_lattice_too_large_to_determinize_is_pruned_until_it_fits():
    from wfstdecode.compact_lattice import determinize_pruned

    (lat, _) = _lattices(2)
    full = determinize(lat)
    same, beam = determinize_pruned(lat, math.inf)
    assert beam == math.inf and not same.notes and same.num_states == full.num_states
    smaller, beam = determinize_pruned(lat, math.inf, max_states=full.num_states - 1)
    assert beam < math.inf and smaller.num_states < full.num_states
    assert smaller.notes[-1].startswith(f"determinized at lattice beam {beam:.3g}")
    _assert_same_paths(smaller, _best_alignments(lat.pruned(beam)))
    with pytest.raises(OptionsError, match="smaller lattice beam"):
        determinize_pruned(lat, 8.0, max_states=1)  # not even the best path alone fits


def test_a_determinization_too_long_is_pruned_until_it_is_not(monkeypatch):
    """Strings carried along many arcs can take minutes with few states (acoustic scale 0.5 at
    lattice beam 8: 32 s on one OCR line): past `MAX_WORK` steps the beam is halved too."""
    import wfstdecode.compact_lattice as module

    (lat, _) = _lattices(2)
    full = determinize(lat)

    def fits(limit):
        try:
            determinize(lat, max_work=limit)
        except OptionsError:
            return False
        return True

    need = next(2**i for i in range(4, 40) if fits(2**i))  # the full lattice's, within 2x
    monkeypatch.setattr(module, "MAX_WORK", need // 2)
    with pytest.raises(OptionsError, match=f"passed {need // 2:,} steps"):
        determinize(lat)
    smaller, beam = module.determinize_pruned(lat, math.inf)
    assert beam < math.inf and smaller.num_states <= full.num_states
    assert smaller.notes[-1].endswith(f"passed {need // 2:,} steps")
    _assert_same_paths(smaller, _best_alignments(lat.pruned(beam)))


def test_expanding_back_gives_the_same_paths():
    for seed in range(4):
        for lat in _lattices(seed, lattice_beam=6.0):
            compact = determinize(lat)
            state_level = compact.to_lattice()
            assert state_level.num_frames == lat.num_frames
            again = determinize(state_level)
            _assert_same_paths(again, {w: (g + lat.acoustic_scale * a, g, a, s)
                                       for w, g, a, s in compact.paths()})  # fmt: skip
            assert state_level.best_cost == pytest.approx(lat.best_cost, abs=1e-3)


def test_kaldi_compact_lattice_file_layout_and_round_trip(tmp_path):
    """The bytes of a two-arc CompactLattice as Kaldi's CompactLatticeWeight and OpenFst's
    VectorFst write them, then a real one written and read back."""
    tiny = compact_from_fst(dict(
        start=0, src=np.array([0, 1], np.int32), dst=np.array([1, 2], np.int32),
        word=np.array([7, 9], np.int32), graph_cost=np.array([1.5, 0.25]),
        acoustic_cost=np.array([3.0, 2.0]), string=np.array([4, 1, 2], np.int32),
        string_start=np.array([0, 2, 3]), final_graph=np.array([np.inf, np.inf, 0.5]),
        final_acoustic=np.array([np.inf, np.inf, 0.75]), final_string=np.array([3], np.int32),
        final_string_start=np.array([0, 0, 0, 1]),
    ), 1.0)  # fmt: skip

    def text(s: str) -> bytes:
        return struct.pack("<i", len(s)) + s.encode()

    zero = struct.pack("<ffi", np.inf, np.inf, 0)
    want = (struct.pack("<i", 2125659606) + text("vector") + text("compactlattice44")
            + struct.pack("<iiQqqq", 2, 0, 3, 0, 3, 2)
            + zero + struct.pack("<q", 1)
            + struct.pack("<iiffiiii", 7, 7, 1.5, 3.0, 2, 4, 1, 1)
            + zero + struct.pack("<q", 1)
            + struct.pack("<iiffiii", 9, 9, 0.25, 2.0, 1, 2, 2)
            + struct.pack("<ffii", 0.5, 0.75, 1, 3) + struct.pack("<q", 0))  # fmt: skip
    assert tiny.kaldi_bytes() == want
    (lat, _) = _lattices(5, lattice_beam=6.0)
    compact = determinize(lat)
    ark = tmp_path / "c.ark"
    write_kaldi_archive({"tiny": tiny, "u1": compact}, ark)
    back = read_kaldi_archive(ark, keep_compact=True)
    for name in ("src", "dst", "word", "string", "string_start", "final_string",
                 "final_string_start"):  # fmt: skip
        np.testing.assert_array_equal(getattr(back["u1"], name), getattr(compact, name))
    for name in ("graph_cost", "acoustic_cost", "final_graph", "final_acoustic"):
        np.testing.assert_allclose(getattr(back["u1"], name),
                                   getattr(compact, name).astype(np.float32))  # fmt: skip
    expanded = read_kaldi_archive(ark)["u1"]  # as rescoring reads it: state-level
    assert expanded.best_cost == pytest.approx(lat.best_cost, abs=1e-3)
    assert {tuple(w for w in expanded.olabel[arcs] if w) for arcs, _ in expanded.nbest(50)} == {
        w for w, *_ in compact.paths()
    }


def test_a_truncated_compact_lattice_names_the_entry(tmp_path):
    (lat, _) = _lattices(1, lattice_beam=4.0)
    data = determinize(lat).kaldi_bytes()
    (tmp_path / "bad.ark").write_bytes(b"u9 \0B" + data[: len(data) - 7])
    with pytest.raises(InputFileError, match="u9"):
        read_kaldi_archive(tmp_path / "bad.ark")


def test_an_empty_lattice_determinizes_to_nothing(tmp_path):
    (lat, _) = _lattices(0, lattice_beam=4.0)
    empty = lat._subset(*_NOTHING)
    compact = determinize(empty)
    assert compact.num_states == 0 and compact.paths() == []
    write_kaldi_archive({"e": compact}, tmp_path / "e.ark")
    assert read_kaldi_archive(tmp_path / "e.ark", keep_compact=True)["e"].num_states == 0
    assert read_kaldi_archive(tmp_path / "e.ark")["e"].num_nodes == 0


@pytest.mark.parametrize("seed", range(4))
def test_posteriors_count_each_word_sequence_once_by_its_best_alignment(seed):
    for lat in _lattices(seed, lattice_beam=5.0):
        compact = determinize(lat)
        paths = compact.paths()
        weight = {w: math.exp(-(g + compact.acoustic_scale * a)) for w, g, a, _ in paths}
        total = sum(weight.values())
        for words, p in weight.items():
            assert compact.path_posterior(words) == pytest.approx(p / total, rel=1e-6)
        for k, at_k in enumerate(compact.word_posteriors()):
            brute: dict = {}
            for words, p in weight.items():
                if len(words) > k:
                    brute[words[k]] = brute.get(words[k], 0.0) + p / total
            assert at_k == pytest.approx(brute, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_without_alignments_the_same_sequences_costs_and_posteriors(seed):
    for lat in _lattices(seed, lattice_beam=5.0):
        full, bare = determinize(lat), determinize(lat, alignments=False)
        costs = {w: g + lat.acoustic_scale * a for w, g, a, _ in full.paths()}
        got = {w: g + lat.acoustic_scale * a for w, g, a, _ in bare.paths()}
        assert got.keys() == costs.keys() and not len(bare.string) + len(bare.final_string)
        assert [got[w] for w in costs] == pytest.approx(list(costs.values()), abs=1e-6)
        assert bare.word_posteriors() == [pytest.approx(p) for p in full.word_posteriors()]


def test_decoding_with_determinized_posteriors():
    from wfstdecode.ctc import decode_ctc
    from wfstdecode.metrics import edit_distance

    g = random_graph(6, num_states=12, num_tokens=5, arcs_per_state=3, word_prob=0.6)
    lp = random_log_probs(6, 2, 8, g.num_tokens, peaky=2.0)
    base = dict(lattice_beam=6.0, nbest=5)
    plain = decode_ctc(lp, None, g, CtcBeamOptions(**base))
    hyps = decode_ctc(lp, None, g, CtcBeamOptions(**base, posteriors="determinized"))
    mbr = decode_ctc(lp, None, g, CtcBeamOptions(**base, posteriors="determinized",
                                                 mbr_candidates=5))  # fmt: skip
    for b, lat in enumerate(ctc_lattices(lp, None, g, CtcBeamOptions(**base))):
        compact = determinize(lat)
        assert [h.word_ids for h in hyps[b]] == [h.word_ids for h in plain[b]]  # same n-best
        posteriors = compact.word_posteriors()
        for h in hyps[b]:
            assert h.word_confidences == pytest.approx(
                [posteriors[k].get(w, 0.0) for k, w in enumerate(h.word_ids)]
            )
        words = [h.word_ids for h in plain[b]]
        post = np.array([compact.path_posterior(w) for w in words])
        post /= post.sum()
        risk = [sum(q * edit_distance(w, v) for q, v in zip(post, words, strict=True))
                for w in words]  # fmt: skip
        assert mbr[b][0].word_ids == words[min(range(len(words)), key=lambda i: (risk[i], i))]
    with pytest.raises(OptionsError, match="posteriors"):
        CtcBeamOptions(posteriors="summed")


def test_a_lowered_determinization_beam_is_noted_on_the_hypotheses(monkeypatch):
    import functools

    from wfstdecode.compact_lattice import determinize_pruned
    from wfstdecode.ctc import decode_ctc, search

    g = random_graph(2, num_states=9, num_tokens=5, arcs_per_state=3)
    lp = random_log_probs(2, 1, 7, g.num_tokens, peaky=1.5)
    options = CtcBeamOptions(**{**WIDE, "nbest": 2}, posteriors="determinized")
    (lat,) = ctc_lattices(lp, None, g, options)
    states = determinize(lat).num_states
    monkeypatch.setattr(search, "determinize_pruned",
                        functools.partial(determinize_pruned, max_states=states - 1))  # fmt: skip
    (hyps,) = decode_ctc(lp, None, g, options)
    for h in hyps:
        assert h.notes[-1].startswith("determinized at lattice beam")


def test_determinized_posteriors_past_every_beam_fall_back_to_the_lattice(monkeypatch):
    """Exactly tied paths (a zero-weight graph, uniform frames) stay tied at every lattice
    beam: word determinization passed its limits at the smallest beam too, and decode_ctc
    raised that OptionsError ("prune the lattice with a smaller lattice beam first") for the
    whole batch, after minutes. Now such an utterance is weighed by its state-level lattice,
    with a note (here every determinization is made to fail: 1 state at most)."""
    import functools

    from wfstdecode.compact_lattice import determinize_pruned
    from wfstdecode.ctc import decode_ctc, search

    g = random_graph(2, num_states=9, num_tokens=5, arcs_per_state=3)
    lp = random_log_probs(2, 1, 7, g.num_tokens, peaky=1.5)
    options = CtcBeamOptions(**{**WIDE, "nbest": 3, "mbr_candidates": 3},
                             posteriors="determinized")  # fmt: skip
    plain = decode_ctc(lp, None, g, replace(options, posteriors="lattice"))
    monkeypatch.setattr(search, "determinize_pruned",
                        functools.partial(determinize_pruned, max_states=1))  # fmt: skip
    (hyps,) = decode_ctc(lp, None, g, options)
    for h, want in zip(hyps, plain[0], strict=True):
        assert h.notes[-1] == search.UNDETERMINIZED
        assert h.word_ids == want.word_ids
        assert h.word_confidences == want.word_confidences


def test_a_lattice_past_every_beam_is_named_when_written_determinized(monkeypatch):
    """As above, for the lattices `decode --write-lattices` determinizes: the error names the
    utterance (it named none: which of a corpus's lattices was it?)."""
    import functools

    from wfstdecode import compact_lattice
    from wfstdecode.lattice_io import determinized_on_words

    g = random_graph(2, num_states=9, num_tokens=5, arcs_per_state=3)
    lp = random_log_probs(2, 1, 7, g.num_tokens, peaky=1.5)
    (lat,) = ctc_lattices(lp, None, g, CtcBeamOptions(**{**WIDE, "nbest": 1}))
    tight = functools.partial(compact_lattice.determinize_pruned, max_states=1)
    monkeypatch.setattr(compact_lattice, "determinize_pruned", tight)
    with pytest.raises(OptionsError, match=r"^shard7/utt-3: .*state-level"):
        determinized_on_words({"utt-3": lat}, 8.0, prefix="shard7/")


def _text(s: str) -> bytes:
    return struct.pack("<i", len(s)) + s.encode()


def test_a_final_acoustic_cost_survives_the_expansion_to_a_state_level_lattice():
    """Mutant K3 (`to_lattice` chains a final weight only when it has a string): a final weight
    ``(0.5, 0.75)`` with no string loses its acoustic part (a `Lattice` keeps graph final
    costs only), so the expanded lattice's paths are cheaper than the CompactLattice's."""
    from wfstdecode.compact_lattice import compact_from_fst

    c = compact_from_fst(dict(
        start=0, src=np.array([0], np.int32), dst=np.array([1], np.int32),
        word=np.array([7], np.int32), graph_cost=np.array([1.0]), acoustic_cost=np.array([2.0]),
        string=np.array([3], np.int32), string_start=np.array([0, 1]),
        final_graph=np.array([np.inf, 0.5]), final_acoustic=np.array([np.inf, 0.75]),
        final_string=np.zeros(0, np.int32), final_string_start=np.array([0, 0, 0]),
    ), 0.5)  # fmt: skip
    lat = c.to_lattice()
    assert lat.best_cost == pytest.approx(1.0 + 0.5 + 0.5 * (2.0 + 0.75))
    assert float(lat.acoustic_cost.sum()) == pytest.approx(2.75)


def test_kaldi_lattice_file_layout():
    """Mutant F1 (a non-final state written as ``(inf, 0)``: Kaldi's zero is ``(inf, inf)``;
    Kaldi would take ``(inf, 0)`` for a final weight, and it is not a LatticeWeight member)."""
    from wfstdecode.fstio import write_lattice_bytes

    got = write_lattice_bytes(np.array([np.inf, 0.5], np.float32), np.array([0]), np.array([1]),
                              np.array([3]), np.array([7]), np.array([1.5], np.float32),
                              np.array([2.0], np.float32))  # fmt: skip
    want = (struct.pack("<i", 2125659606) + _text("vector") + _text("lattice4")
            + struct.pack("<iiQqqq", 2, 0, 3, 0, 2, 1)
            + struct.pack("<ffq", np.inf, np.inf, 1) + struct.pack("<iiffi", 3, 7, 1.5, 2.0, 1)
            + struct.pack("<ffq", 0.5, 0.0, 0))  # fmt: skip
    assert got == want


def test_a_lattice_starting_outside_its_states_is_refused():
    """Mutant F4 (the lattice header's start state not checked)."""
    from wfstdecode.fstio import read_lattice_bytes

    for arcs, start in (("lattice4", 2), ("compactlattice44", 5), ("lattice4", -1)):
        data = (struct.pack("<i", 2125659606) + _text("vector") + _text(arcs)
                + struct.pack("<iiQqqq", 2, 0, 3, start, 1, 0))  # fmt: skip
        data += (
            struct.pack("<ffq", 0.0, 0.0, 0)
            if arcs == "lattice4"
            else struct.pack("<ffiq", 0.0, 0.0, 0, 0)
        )
        with pytest.raises(GraphError, match=f"starts at state {start}"):
            read_lattice_bytes(data)


def test_a_half_infinite_final_weight_is_refused_in_either_lattice_kind(tmp_path):
    """``(g, inf)`` is no Kaldi lattice weight (its Member() is false): a CompactLattice read it
    as not final, a Lattice as final with the infinite acoustic part dropped (a finite path).
    Both refuse it now, naming the state; writing one is refused too."""
    from wfstdecode.compact_lattice import compact_from_fst
    from wfstdecode.fstio import FST_MAGIC, read_lattice_bytes
    from wfstdecode.lattice_io import write_kaldi_archive

    half = compact_from_fst(dict(
        start=0, src=np.array([0], np.int32), dst=np.array([1], np.int32),
        word=np.array([7], np.int32), graph_cost=np.array([1.0]), acoustic_cost=np.array([1.0]),
        string=np.zeros(0, np.int32), string_start=np.array([0, 0]),
        final_graph=np.array([np.inf, 0.0]), final_acoustic=np.array([np.inf, np.inf]),
        final_string=np.zeros(0, np.int32), final_string_start=np.array([0, 0, 0]),
    ), 1.0)  # fmt: skip
    with pytest.raises(GraphError, match=r"state 1 has the final weight \(0.0, inf\)"):
        read_lattice_bytes(half.kaldi_bytes())
    with pytest.raises(OptionsError, match=r"state 1 has the final weight \(0.0, inf\)"):
        write_kaldi_archive({"u": half}, tmp_path / "x.ark")
    lattice4 = (struct.pack("<i", FST_MAGIC) + _text("vector") + _text("lattice4")
                + struct.pack("<iiQqqq", 2, 0, 3, 0, 2, 1)
                + struct.pack("<ffq", np.inf, np.inf, 1) + struct.pack("<iiffi", 3, 7, 1.5, 2.0, 1)
                + struct.pack("<ffq", 0.5, np.inf, 0))  # fmt: skip
    with pytest.raises(GraphError, match=r"state 1 has the final weight \(0.5, inf\)"):
        read_lattice_bytes(lattice4)

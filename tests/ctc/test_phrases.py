"""Phrase boosting: the context automaton counts phrase occurrences; decoding with it equals
decoding the composed graph TLG ∘ C (OpenFst) with an unbounded beam; cpu == reference bit for
bit at any beam; streams equal whole decodes; bad phrase lists are refused clearly."""

import itertools
import json
import math
import warnings
from dataclasses import replace

import numpy as np
import pytest

from wfstdecode import DecodeInputError, SymbolTable
from wfstdecode.ctc import CtcBeamOptions, CtcStreamDecoder, decode_ctc
from wfstdecode.ctc.boost import MAX_PHRASES, build_boost_tables, resolve_boosts
from wfstdecode.ctc.bundles import lane_boosts, search_graph
from wfstdecode.ctc.cpu import decode_cpu
from wfstdecode.ctc.phrases import NO_SLOT, PhraseAutomaton
from wfstdecode.ctc.reference import decode_reference
from wfstdecode.ctc.search import prepare_problem
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


def _random_phrases(rng, vocab: int, n: int, max_len: int = 3) -> dict:
    phrases = {}
    while len(phrases) < n:
        k = int(rng.integers(1, max_len + 1))
        phrases[tuple(int(w) for w in rng.integers(1, vocab + 1, size=k))] = float(
            np.float32(rng.uniform(-1.0, 3.0))
        )
    return phrases


@pytest.mark.parametrize("seed", range(6))
def test_automaton_pays_every_occurrence_of_every_phrase(seed):
    rng = np.random.default_rng(seed)
    vocab = 3 + seed % 2
    phrases = _random_phrases(rng, vocab, 2 + seed)
    automaton = PhraseAutomaton(phrases)
    for length in range(6):
        for words in itertools.product(range(1, vocab + 1), repeat=length):
            want = occurrence_bonus(phrases, words)
            assert automaton.path_bonus(words) == pytest.approx(want, abs=1e-4), words
    assert automaton.phi[0] == 0.0
    assert (automaton.phi >= 0).all()


def test_partial_match_earns_word_by_word_and_gives_back():
    a = PhraseAutomaton({(1, 2, 3): 2.0})
    x, first = a.step(0, 1)
    x, second = a.step(x, 2)
    assert (first, second) == (2.0, 2.0)  # "1 2" has earned 4 so far
    y, failed = a.step(x, 4)
    assert (y, failed) == (0, -4.0)  # ... and gives it back when "4" breaks the match
    z, done = a.step(x, 3)
    assert (z, done) == (0, 2.0)  # the whole phrase: 6 in all, kept
    assert a.path_bonus([1, 2]) == 0.0  # an unfinished match at the end gives back too


def test_single_words_keep_one_context_state():
    a = PhraseAutomaton({(5,): 1.5, (7,): -0.5})
    assert a.num_contexts == 1
    assert a.step(0, 5) == (0, np.float32(1.5)) and a.step(0, 6) == (0, 0.0)
    assert PhraseAutomaton({(5, 6): 1.0}).num_contexts == 2


@pytest.mark.parametrize("seed", range(4))
def test_search_rule_equals_the_automaton(seed):
    """`bundles.arc_cost` (Numba, and as the kernels run it) walks the flat tables to the same
    state and bonus as `PhraseAutomaton.step`, for every context state and word."""
    from wfstdecode.ctc.bundles import arc_cost

    rng = np.random.default_rng(seed)
    tables = [_random_phrases(rng, 30, int(rng.integers(1, 40)), 4) for _ in range(3)]
    per = [{k: np.float32(v) for k, v in t.items()} for t in tables]
    bt = build_boost_tables([per[0], None, per[1], per[2], per[1]])
    words = np.arange(32, dtype=np.int32)
    i32 = np.zeros(32, np.int32)
    from wfstdecode.ctc.bundles import LaneBoosts, SearchGraph

    graph = SearchGraph(0, np.zeros(1, np.float32), i32, i32, i32, i32, words,
                        np.ones(32, np.float32), i32, 32, NO_SLOT)  # fmt: skip
    boosts = LaneBoosts(bt.key, bt.gain, bt.enter, bt.offset, bt.mask, bt.fail, bt.phi,
                        bt.node_offset, bt.contexts, bt.worst, bt.bits, bt.bits_offset,
                        bt.bits_len)  # fmt: skip
    assert bt.automata[2] is bt.automata[4]  # one mapping given twice is built once
    for lane, automaton in enumerate(bt.automata):
        contexts = range(automaton.num_nodes) if automaton else [0]
        for x in contexts:
            if automaton and automaton.enter[x] != x:
                continue  # not a state a token can be in
            for w in range(32):
                cost, nxt = arc_cost(graph, boosts, lane, w, x)
                assert arc_cost.py_func(graph, boosts, lane, w, x) == (cost, nxt)
                if automaton is None or w == 0:
                    assert (cost, nxt) == (np.float32(1.0), x)
                    continue
                want_x, bonus = automaton.step(x, w)
                assert (nxt, cost) == (want_x, np.float32(np.float32(1.0) - bonus)), (lane, x, w)
                # expand's pre-pass bound: no arc costs more than its static cost + worst
                assert cost <= np.float32(1.0) + bt.worst[lane]


# ---- decoding ---------------------------------------------------------------------------------

WIDE = CtcBeamOptions(beam=math.inf, max_active=1_000_000)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("seed", range(8))
def test_unbounded_beam_equals_openfst_on_tlg_composed_with_the_phrase_automaton(seed, backend):
    pynini = pytest.importorskip("pynini")
    from wfstdecode.testing.oracles import openfst_shortest_path, pynini_fst

    g = random_graph(seed, num_states=8 + seed, num_tokens=5, num_words=4, arcs_per_state=3,
                     word_prob=0.6)  # fmt: skip
    lp = random_log_probs(seed, 2, 10 + seed % 4, g.num_tokens, peaky=1.5)
    rng = np.random.default_rng(100 + seed)
    phrases = _random_phrases(rng, 4, 3 + seed % 4)
    boosts = {tuple(g.words.symbol(w) for w in k): v for k, v in phrases.items()}
    hyps = decode_ctc(lp, None, g, WIDE, boosts, backend=backend)
    (resolved,) = resolve_boosts(boosts, 1, g.words)
    context = pynini_fst(PhraseAutomaton(resolved).fst_arrays(range(1, g.words.next_id)))
    composed = pynini.compose(pynini_fst(g.to_arrays()).arcsort("olabel"),
                              context.arcsort("ilabel"))  # fmt: skip
    for b in range(len(lp)):
        words, cost = openfst_shortest_path(lp[b], composed, 1.0)
        h = hyps[b][0]
        if words is None:
            assert h.notes
            continue
        assert h.word_ids == words
        assert -h.score == pytest.approx(cost, rel=1e-5, abs=1e-4)


def _phrase_case(seed):
    g = random_graph(
        seed, num_states=8 + seed % 10, num_tokens=4 + seed % 5, num_words=5,
        arcs_per_state=2 + seed % 4, eps_arcs_per_state=0.3 + 0.3 * (seed % 3), word_prob=0.5,
        eps_cycles=seed % 4 == 3,
    )  # fmt: skip
    lp = random_log_probs(seed + 100, 3, 14, g.num_tokens, peaky=1.0 + seed % 3)
    lengths = np.array([14, 9, 0])
    rng = np.random.default_rng(seed)
    per = []
    for _ in range(3):
        phrases = _random_phrases(rng, 5, int(rng.integers(1, 6)))
        per.append({" ".join(f"w{w}" for w in k): v for k, v in phrases.items()})
    return g, lp, lengths, per


OPTIONS = [
    CtcBeamOptions(beam=4.0),
    CtcBeamOptions(beam=10.0, max_active=3),
    CtcBeamOptions(beam=0.5, max_active=8, min_active=4),
    CtcBeamOptions(beam=8.0, nbest=4, word_insertion_penalty=0.3),
]


@pytest.mark.parametrize("opt", range(len(OPTIONS)))
@pytest.mark.parametrize("seed", range(8))
def test_cpu_equals_reference_with_phrases(seed, opt):
    g, lp, lengths, per = _phrase_case(seed)
    ref = decode_ctc(lp, lengths, g, OPTIONS[opt], per, backend="reference")
    got = decode_ctc(lp, lengths, g, OPTIONS[opt], per, backend="cpu")
    assert_hypotheses_equal(ref, got, 1e-5, f"seed {seed}")
    p = prepare_problem(lp, lengths, g, OPTIONS[opt], per)
    for r, c in zip(decode_reference(p), decode_cpu(p), strict=True):
        assert (r.status, len(r.paths)) == (c.status, len(c.paths))
        for (ra, rf, rc), (ca, cf, cc) in zip(r.paths, c.paths, strict=True):
            assert np.array_equal(ra, ca) and np.array_equal(rf, cf)
            assert np.float32(rc) == np.float32(cc)  # bit for bit


@pytest.mark.parametrize("seed", range(4))
def test_scores_count_the_phrases_on_the_path(seed):
    """graph_score with phrases = graph_score of the same path unboosted + the bonus of every
    phrase occurrence in its words (counted, not walked)."""
    from wfstdecode.testing.paths import path_hypothesis

    g, lp, lengths, per = _phrase_case(seed)
    opts = CtcBeamOptions(beam=8.0, nbest=3)
    p = prepare_problem(lp, lengths, g, opts, per)
    plain = prepare_problem(lp, lengths, g, opts, None)
    for b, r in enumerate(decode_cpu(p)):
        for arcs, frames, _ in r.paths:
            final = not r.status
            h = path_hypothesis(p, b, arcs, frames, final)
            h0 = path_hypothesis(plain, b, arcs, frames, final)
            bonus = occurrence_bonus(p.boosts.automata[b].phrases, h.word_ids)
            assert h.graph_score == pytest.approx(h0.graph_score + bonus, abs=1e-4)


@pytest.mark.parametrize("backend", ["reference", *fast_backends()])
@pytest.mark.parametrize("seed", [2, 5])
def test_streams_with_phrases_equal_whole_decodes(backend, seed):
    """Tokens carry context states across chunks (cuda: restored into the lanes' tables)."""
    g, lp, lengths, per = _phrase_case(seed)
    opts = CtcBeamOptions(beam=6.0, nbest=2)
    whole = decode_ctc(lp, lengths, g, opts, per, backend="reference")
    dec = CtcStreamDecoder(g, opts, backend=backend, max_lanes=2)
    rng = np.random.default_rng(0)
    ids = [dec.open(boosts=per[b]) for b in range(len(lengths))]
    pos = [0] * len(ids)
    while any(pos[b] < lengths[b] for b in range(len(ids))):
        chunk = {}
        for b, sid in enumerate(ids):
            if pos[b] < lengths[b] and rng.random() < 0.7:
                step = int(rng.integers(1, 5))
                chunk[sid] = lp[b, pos[b] : min(lengths[b], pos[b] + step)]
                pos[b] = min(lengths[b], pos[b] + step)
        if chunk:
            dec.advance(chunk)
    for b, sid in enumerate(ids):
        assert_hypotheses_equal([whole[b]], [dec.finish(sid)], 0.0, f"stream {b}")


def test_a_phrase_decides_only_as_a_whole():
    """ "cap pat" boosted: where both words are ambiguous the phrase wins (and earns 2 x 1.5);
    where only "cap" is ambiguous and "tap" is clear, "cap" gets nothing (a partial match gives
    its bonus back), so the cheaper "cat" stays."""
    g = lexicon_graph(["cat", "cap", "pat", "tap"], word_cost=[1.0, 1.6, 1.0, 1.6])
    tok = g.tokens
    T = 14
    lp = np.full((2, T, g.num_tokens), -8.0, np.float32)
    blank = tok.id("<blk>")
    # c a {t|p} <blk> {p|t}... spelled frame by frame; ambiguous frames give t and p -0.7 each
    frames = [["c"], ["a"], ["t", "p"], ["<blk>"], ["p", "t"], ["a"], ["t", "p"]]
    clear_tap = [["c"], ["a"], ["t", "p"], ["<blk>"], ["t"], ["a"], ["p"]]
    for b, spelled in enumerate((frames, clear_tap)):
        for t in range(T):
            lp[b, t, blank] = -0.05
        for t, chars in enumerate(spelled):
            lp[b, 2 * t] = -8.0
            for c in chars:
                lp[b, 2 * t, tok.id(c)] = -0.7 if len(chars) > 1 else -0.05
    plain = decode_ctc(lp, None, g, CtcBeamOptions(beam=30.0))
    boosted = decode_ctc(lp, None, g, CtcBeamOptions(beam=30.0), {"cap pat": 1.5})
    assert plain[0][0].words == ("cat", "pat") and boosted[0][0].words == ("cap", "pat")
    assert plain[1][0].words == boosted[1][0].words == ("cat", "tap")
    assert boosted[1][0].score == pytest.approx(plain[1][0].score, abs=1e-5)


# ---- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("boosts", "match"),
    [
        ({"": 1.0}, "empty phrase"),
        ({"   ": 1.0}, "empty phrase"),
        ({(): 1.0}, "empty phrase"),
        ({"w1 w2": math.inf}, r"must be in \[-1000, 1000\]"),
        ({"w1 w2": math.nan}, r"must be in \[-1000, 1000\]"),
        ({"w1 w2": 1.0, ("w1", "w2"): 2.0}, "same phrase"),
        ({("w1", 2.5): 1.0}, "made of words or word ids"),
        ({" ".join(["w1"] * 65): 1.0}, "at most 64"),
    ],
)
def test_bad_phrases_raise(boosts, match):
    g = random_graph(0)
    with pytest.raises(DecodeInputError, match=match):
        resolve_boosts(boosts, 1, g.words)


def test_phrase_with_an_unknown_word_warns_and_is_left_out():
    g = random_graph(0)
    with pytest.warns(UserWarning, match="zebra"):
        (per,) = resolve_boosts({"w1 zebra": 1.0, "w2 w3": 2.0}, 1, g.words)
    assert per == {(2, 3): np.float32(2.0)}


def test_too_many_phrases_is_a_clear_limit():
    g = random_graph(0)
    many = {("w1",) * 3 + (i,): 1.0 for i in range(MAX_PHRASES + 1)}
    with pytest.raises(DecodeInputError, match=f"at most {MAX_PHRASES}"):
        resolve_boosts(many, 1, g.words)


@pytest.mark.parametrize("backend", fast_backends())
@pytest.mark.parametrize(("seed", "opt"), [(1, 0), (3, 3), (6, 1)])
def test_fast_backends_equal_reference_with_phrases_bit_for_bit(seed, opt, backend):
    """cpu and cuda (GPU, or the simulator on these small cases) == reference: the same paths
    and float32 costs, with several context states per graph state."""
    g, lp, lengths, per = _phrase_case(seed)
    p = prepare_problem(lp, lengths, g, OPTIONS[opt], per)
    assert p.boosts.has_phrases
    for r, c in zip(decode_reference(p), raw_backend(backend)(p), strict=True):
        assert (r.status, len(r.paths)) == (c.status, len(c.paths))
        for (ra, rf, rc), (ca, cf, cc) in zip(r.paths, c.paths, strict=True):
            assert np.array_equal(ra, ca) and np.array_equal(rf, cf)
            assert np.float32(rc) == np.float32(cc)


def test_search_bundles_carry_the_context_counts():
    g, lp, lengths, _ = _phrase_case(0)
    p = prepare_problem(lp, lengths, g, CtcBeamOptions(), [{"w1 w2 w3": 1.0}, {"w1": 1.0}, None])
    boosts = lane_boosts(p)
    assert boosts.contexts.tolist() == [3, 1, 1]
    assert search_graph(p).num_emitting == g.num_emitting_arcs


def test_phrases_on_the_command_line(tmp_path, capsys):
    from wfstdecode.cli import main

    g = lexicon_graph(["cat", "cap", "pat", "tap"], word_cost=[1.0, 1.6, 1.0, 1.6])
    g.save(tmp_path / "g.npz")
    seqs = [[g.tokens.id(c) for c in "cappat"]]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=4, confusion_prob=0.0, noise=0.5)
    np.savez(tmp_path / "lp.npz", log_probs=lp, lengths=lengths)
    (tmp_path / "b.txt").write_text("cap  pat\t4\n")
    common = ["decode", str(tmp_path / "g.npz"), str(tmp_path / "lp.npz"), "--backend", "cpu"]
    assert main([*common, "--boost-file", str(tmp_path / "b.txt")]) == 0
    from_file = capsys.readouterr().out
    assert from_file.rstrip().endswith("cap pat")
    assert main([*common, "--boost", "cap pat=4"]) == 0
    assert capsys.readouterr().out == from_file
    assert main([*common, "--boost-file", str(tmp_path / "b.txt"), "--boost", "cap   pat=1"]) == 2
    assert "boosted by --boost and in" in capsys.readouterr().err


def test_a_boost_file_beyond_the_limit_stops_at_the_line(tmp_path):
    from wfstdecode.ctc.boost_files import read_boost_file
    from wfstdecode.errors import InputFileError

    path = tmp_path / "many.txt"
    path.write_text("".join(f"w{i} w{i + 1}\t1.5\n" for i in range(MAX_PHRASES + 1)))
    with pytest.raises(InputFileError, match=rf"many.txt:{MAX_PHRASES + 1}: more than"):
        read_boost_file(path)


def _two_utterances(tmp_path):
    g = lexicon_graph(["cat", "cap", "pat", "tap"], word_cost=[1.0, 1.6, 1.0, 1.6])
    g.save(tmp_path / "g.npz")
    tok = g.tokens
    lp = np.full((2, 7, g.num_tokens), -8.0, np.float32)
    for b in range(2):  # both: "ca{t|p}" then "pat", the first word's last letter ambiguous
        for t, chars in enumerate([["c"], ["a"], ["t", "p"], ["p"], ["a"], ["t"], ["<blk>"]]):
            for c in chars:
                lp[b, t, tok.id(c)] = -0.7 if len(chars) > 1 else -0.05
    np.savez(tmp_path / "lp.npz", log_probs=lp, ids=np.array(["u1", "u2"]))
    return ["decode", str(tmp_path / "g.npz"), str(tmp_path / "lp.npz"), "--backend", "cpu"]


def test_per_utterance_boosts_on_the_command_line(tmp_path, capsys):
    from wfstdecode.cli import main

    common = _two_utterances(tmp_path)
    assert main(common) == 0
    plain = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[2] for line in plain] == ["cat pat", "cat pat"]
    (tmp_path / "u.jsonl").write_text('{"id": "u2", "boosts": {"cap  pat": 1.5}}\n\n')
    assert main([*common, "--utterance-boosts", str(tmp_path / "u.jsonl")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == plain[0] and lines[1].endswith("\tcap pat")  # only u2 is boosted
    # the global boost and u2's own: u2's bonus wins for the phrase in both
    assert main([*common, "--boost", "cap pat=-5", "--utterance-boosts",
                 str(tmp_path / "u.jsonl")]) == 0  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("\tcat pat") and lines[1].endswith("\tcap pat")
    # the same through the library, the shared phrase spaced otherwise than the utterance's
    from wfstdecode import DecodingGraph
    from wfstdecode.ctc import decode_npz

    got = decode_npz(tmp_path / "lp.npz", DecodingGraph.load(tmp_path / "g.npz"),
                     boosts={"cap  pat": -5.0}, utterance_boosts={"u2": {"cap pat": 1.5}},
                     backend="cpu")  # fmt: skip
    assert [h[0].text for h in got.hypotheses] == ["cat pat", "cap pat"]


@pytest.mark.parametrize(
    ("shared", "own"), [(("cap", "pat"), "cap pat"), ("cap  pat", ("cap", "pat"))]
)
def test_per_utterance_boosts_win_over_a_shared_phrase_written_as_a_tuple(tmp_path, shared, own):
    """decode_ctc reads a phrase as a string or a tuple of words: the utterance's own bonus
    wins over the shared one however either writes it (it was refused as "the same phrase")."""
    from wfstdecode import DecodingGraph
    from wfstdecode.ctc import decode_npz

    _two_utterances(tmp_path)
    got = decode_npz(tmp_path / "lp.npz", DecodingGraph.load(tmp_path / "g.npz"),
                     boosts={shared: -5.0}, utterance_boosts={"u2": {own: 1.5}},
                     backend="cpu")  # fmt: skip
    assert [h[0].text for h in got.hypotheses] == ["cat pat", "cap pat"]


@pytest.mark.parametrize(
    ("text", "line", "match"),
    [
        ('{"id": "u1", "boosts": {"cap": 1}}\nnot json\n', 2, "not JSON"),
        ('["u1"]\n', 1, "expected"),
        (
            '{"id": "u1", "boosts": {"cap": 1}}\n{"id": "u1", "boosts": {}}\n',
            2,
            "already on line 1",
        ),
        ('{"id": "u1", "boosts": {"  ": 1}}\n', 1, "an empty phrase"),
        ('{"id": "u1", "boosts": {"cap": "x"}}\n', 1, "must be a number"),
        ('{"id": "u1", "boosts": {"cap": 1e9}}\n', 1, "beyond"),
        ('{"id": "u1", "boosts": {"cap": -1e9}}\n', 1, "beyond"),
        ('{"id": "u1", "boosts": {"cap": true}}\n', 1, "must be a number"),
        ('{"id": "u1", "boosts": {"cap pat": 1, "cap  pat": 2}}\n', 1, "given twice"),
        # (a misspelled key beside the right one was lost silently)
        ('{"id": "u1", "boosts": {}, "Boosts": {"cap": 2}}\n', 1, "unknown key 'Boosts'"),
    ],
)
def test_bad_per_utterance_boosts_name_the_line(tmp_path, capsys, text, line, match):
    from wfstdecode.cli import main

    common = _two_utterances(tmp_path)
    (tmp_path / "u.jsonl").write_text(text)
    assert main([*common, "--utterance-boosts", str(tmp_path / "u.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"u.jsonl:{line}:" in err and match in err


def test_per_utterance_boosts_for_an_utterance_the_file_lacks(tmp_path, capsys):
    from wfstdecode.cli import main

    common = _two_utterances(tmp_path)
    (tmp_path / "u.jsonl").write_text('{"id": "u9", "boosts": {"cap": 1}}\n')
    assert main([*common, "--utterance-boosts", str(tmp_path / "u.jsonl")]) == 2
    assert "has no utterance 'u9'" in capsys.readouterr().err


def test_repeated_utterance_boosts_files_are_all_read(tmp_path, capsys):
    """--utterance-boosts given twice kept the last file alone: u2's list in the first file was
    dropped without a word. Every file is read; an utterance in two files is refused."""
    from wfstdecode.cli import main

    common = _two_utterances(tmp_path)
    (tmp_path / "u2.jsonl").write_text('{"id": "u2", "boosts": {"cap  pat": 1.5}}\n')
    (tmp_path / "u1.jsonl").write_text('{"id": "u1", "boosts": {"cat": 0.5}}\n')
    (tmp_path / "both.jsonl").write_text(
        '{"id": "u2", "boosts": {"cap  pat": 1.5}}\n{"id": "u1", "boosts": {"cat": 0.5}}\n'
    )
    assert main([*common, "--utterance-boosts", str(tmp_path / "both.jsonl")]) == 0
    together = capsys.readouterr().out
    assert together.splitlines()[1].endswith("\tcap pat")
    files = ["--utterance-boosts", str(tmp_path / "u2.jsonl"),
             "--utterance-boosts", str(tmp_path / "u1.jsonl")]  # fmt: skip
    assert main([*common, *files]) == 0
    assert capsys.readouterr().out == together
    again = ["--utterance-boosts", str(tmp_path / "u2.jsonl"),
             "--utterance-boosts", str(tmp_path / "both.jsonl")]  # fmt: skip
    assert main([*common, *again]) == 2
    err = capsys.readouterr().err
    assert "utterance 'u2' is in" in err and "u2.jsonl" in err and "both.jsonl" in err


def _with_boosts_member(tmp_path, boosts_json):
    common = _two_utterances(tmp_path)
    with np.load(tmp_path / "lp.npz") as z:
        arrays = dict(z)
    np.savez(tmp_path / "lp.npz", **arrays, boosts=np.array(boosts_json))
    return common


def test_per_utterance_boosts_travel_in_the_npz(tmp_path, capsys):
    from wfstdecode.cli import main
    from wfstdecode.corpus import CtcCorpusDecoder

    common = _with_boosts_member(tmp_path, '{"u2": {"cap pat": 1.5}}')
    assert main(common) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("\tcat pat") and lines[1].endswith("\tcap pat")
    (tmp_path / "u.jsonl").write_text('{"id": "u1", "boosts": {"cap": 1}}\n')
    assert main([*common, "--utterance-boosts", str(tmp_path / "u.jsonl")]) == 2
    assert "give them there or in the utterance boosts file, not both" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()  # an empty member carries no lists: the file's are used
    empty = _with_boosts_member(tmp_path / "empty", "{}")
    assert main([*empty, "--utterance-boosts", str(tmp_path / "u.jsonl")]) == 0  # (none carried)
    lines = capsys.readouterr().out.splitlines()  # u1 boosted by the file, u2 by nothing
    assert lines[0].endswith("\tcap pat") and lines[1].endswith("\tcat pat")
    # a corpus shard carries its lists to the workers
    decode = CtcCorpusDecoder(str(tmp_path / "g.npz")).load()
    out = decode(tmp_path / "lp.npz", "lp")
    texts = [json.loads(line)["text"] for line in out.text.splitlines()]
    assert texts == ["cat pat", "cap pat"]


@pytest.mark.parametrize(
    ("member", "match"),
    [
        ("not json", "boosts is not JSON"),
        ('["u1"]', "boosts must be a JSON object"),
        ('{"u9": {"cap": 1}}', "boosts name utterance 'u9'"),
        ('{"u1": {"cap": "high"}}', "boosts of 'u1': the bonus of 'cap' must be a number"),
        ('{"u1": {"cap": 1, " cap ": 2}}', "boosts of 'u1': 'cap' is given twice"),
    ],
)
def test_a_bad_boosts_member_names_the_file(tmp_path, member, match):
    from wfstdecode.ctc.npz import load_log_probs_npz
    from wfstdecode.errors import InputFileError

    _with_boosts_member(tmp_path, member)
    with pytest.raises(InputFileError, match=rf"lp.npz: {match}"):
        load_log_probs_npz(tmp_path / "lp.npz")


def _big_list(g, n=80, seed=0):
    rng = np.random.default_rng(seed)
    words = [w for w, i in g.words if i]
    out = {}
    while len(out) < n:
        out[" ".join(rng.choice(words, int(rng.integers(1, 4))))] = float(rng.uniform(0.5, 3))
    return out


def test_a_list_sent_again_is_recalled_not_compiled_again(monkeypatch):
    """`phrase_cache`: the same list content in a later call (a new dict) gets the earlier
    resolution and automaton and the same hypotheses; an edited list, another word table or a
    list below the cache's minimum is resolved afresh; unknown words still warn every time."""
    from wfstdecode.ctc import clear_phrase_cache, phrase_cache

    clear_phrase_cache()
    g, lp, lengths, _ = _phrase_case(2)
    first = _big_list(g)
    (r1,) = resolve_boosts(first, 1, g.words)
    (r2,) = resolve_boosts(dict(first), 1, g.words)
    assert r2 is r1
    a1 = build_boost_tables([r1]).automata[0]
    assert build_boost_tables([r2]).automata[0] is a1
    # the same hypotheses as compiled afresh
    cached = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=6.0), dict(first), backend="cpu")
    clear_phrase_cache()
    fresh = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=6.0), dict(first), backend="cpu")
    assert_hypotheses_equal(fresh, cached)
    (r3,) = resolve_boosts(first, 1, g.words)
    edited = {**first, next(iter(first)): 9.0}
    (r4,) = resolve_boosts(edited, 1, g.words)
    assert r4 is not r3 and r4 != r3
    other = random_graph(5, num_words=5)  # same word names, another table
    (r5,) = resolve_boosts(first, 1, other.words)
    assert r5 is not r3
    small = dict(itertools.islice(first.items(), 10))
    assert resolve_boosts(small, 1, g.words)[0] is not resolve_boosts(small, 1, g.words)[0]
    with_unknown = {**first, "w1 zebra": 1.0}
    for _ in range(2):
        with pytest.warns(UserWarning, match="zebra"):
            resolve_boosts(with_unknown, 1, g.words)
    # the word added to the same table: the list is resolved again, and the word found
    g.words.add("zebra")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (r6,) = resolve_boosts(with_unknown, 1, g.words)
    assert len(r6) == len(with_unknown)
    # at most MAX_KEPT_PHRASES phrases kept: the least recently used list goes first
    clear_phrase_cache()
    monkeypatch.setattr(phrase_cache, "MAX_KEPT_PHRASES", 2 * len(first))
    lists = [_big_list(g, seed=s) for s in range(3)]
    kept = [resolve_boosts(x, 1, g.words)[0] for x in lists]
    assert resolve_boosts(dict(lists[2]), 1, g.words)[0] is kept[2]
    assert resolve_boosts(dict(lists[1]), 1, g.words)[0] is kept[1]
    assert resolve_boosts(dict(lists[0]), 1, g.words)[0] is not kept[0]
    clear_phrase_cache()


def test_a_recalled_list_still_refuses_what_it_would_refuse():
    """Equal is not the same for a cache key: True == 1, so a list of True bonuses must not be
    recalled as the list of 1s (it is refused, as without the cache)."""
    from wfstdecode.ctc import clear_phrase_cache

    clear_phrase_cache()
    g = random_graph(0, num_words=5)
    ones = {k: 1 for k in _big_list(g)}
    resolve_boosts(ones, 1, g.words)
    with pytest.raises(DecodeInputError, match="must be a number"):
        resolve_boosts(dict.fromkeys(ones, True), 1, g.words)
    clear_phrase_cache()


def test_the_cache_lets_a_dropped_graphs_tables_go():
    """A service that reloads its graph: lists resolved against the old one must not keep its
    word table (megabytes) alive; their entries go with it."""
    import gc
    import weakref

    from wfstdecode.ctc import clear_phrase_cache, phrase_cache

    clear_phrase_cache()
    g, lp, lengths, _ = _phrase_case(2)
    tables = []
    for seed in range(3):  # a fresh copy of the graph each time, as DecodingGraph.load gives
        copy = replace(g, words=SymbolTable(list(g.words)))
        decode_ctc(lp, lengths, copy, CtcBeamOptions(beam=6.0), _big_list(copy, seed=seed),
                   backend="cpu")  # fmt: skip
        tables.append(weakref.ref(copy.words))
        del copy
    gc.collect()
    assert [t() for t in tables] == [None, None, None]
    resolve_boosts(_big_list(g), 1, g.words)  # (entries are purged on the next use)
    assert len(phrase_cache._ENTRIES) == 1
    clear_phrase_cache()


def test_a_long_list_of_words_on_a_graph_without_a_word_table_is_refused_clearly():
    """A list long enough for the phrase cache (64+) hit len(None) in its key: TypeError."""
    from dataclasses import replace

    g = replace(random_graph(3), words=None)
    lp = random_log_probs(3, 1, 4, g.num_tokens)
    for n in (63, 64):
        with pytest.raises(DecodeInputError, match="the graph has no word table"):
            decode_ctc(lp, None, g, CtcBeamOptions(), {f"w{i}": 1.0 for i in range(n)})


def test_the_phrase_cache_drops_the_least_recently_used_list_not_the_oldest(monkeypatch):
    """C8 (`resolved_list` without `move_to_end`: FIFO, not LRU). A list recalled since is
    more recent than one kept after it: a third list evicts the one not used since."""
    from wfstdecode.ctc import clear_phrase_cache, phrase_cache

    clear_phrase_cache()
    g = random_graph(2, num_words=5)
    a, b, c = (_big_list(g, seed=s) for s in range(3))
    monkeypatch.setattr(phrase_cache, "MAX_KEPT_PHRASES", len(a) + len(b))
    kept_a = resolve_boosts(a, 1, g.words)[0]
    kept_b = resolve_boosts(b, 1, g.words)[0]
    assert resolve_boosts(dict(a), 1, g.words)[0] is kept_a  # a used again: b is now the LRU
    resolve_boosts(c, 1, g.words)  # over the limit: b goes, a stays
    assert resolve_boosts(dict(a), 1, g.words)[0] is kept_a
    assert resolve_boosts(dict(b), 1, g.words)[0] is not kept_b
    clear_phrase_cache()


def test_a_list_kept_again_under_its_key_is_counted_once():
    """C4 (`keep_resolved` replacing an entry without `_forget`): two threads that miss the
    same list at once both keep it; the second replaces the first, and the phrases held
    (which decide evictions) count it once."""
    from wfstdecode.ctc import clear_phrase_cache, phrase_cache

    clear_phrase_cache()
    g = random_graph(0, num_words=5)
    table = _big_list(g)
    key = phrase_cache.list_key(table, g.words, None)
    (first,) = resolve_boosts(table, 1, g.words)
    phrase_cache.keep_resolved(key, g.words, None, dict(first), [], [])  # the other thread
    assert phrase_cache._KEPT[0] == len(table)
    assert len(phrase_cache._BY_RESOLVED) == len(phrase_cache._ENTRIES) == 1
    clear_phrase_cache()


def test_worst_bounds_every_step_even_when_a_phrase_ends_on_the_slots_first_label():
    """P17 (`forbids` as ``max word > slot_label``). A phrase whose largest label is the slot's
    first one (a boost of "w5 <oov>", the label being a word of the table) leaves a context
    state in which the other slot labels are forbidden: `worst`, the most reading a word may
    add to an arc's cost, must then be infinite."""
    slot = 20
    a = PhraseAutomaton({(5, slot): 1.0, (7,): 0.5}, slot_label=slot)
    states = [x for x in range(a.num_nodes) if a.enter[x] == x]
    assert len(states) > 1
    for x in states:
        for w in range(1, 30):
            _, bonus = a.step(x, w)
            assert -float(bonus) <= float(a.worst), (x, w)


@pytest.mark.parametrize("backend", ["reference", *fast_backends()])
def test_an_exact_tie_on_one_arc_keeps_the_token_from_the_smaller_context_state(backend):
    """Two tokens take one arc into one (graph state, context state) at exactly equal cost:
    ``a`` earned a partial match of "a w" and gives it back at ``b``, ``c`` earned nothing. The
    recombination rule's last key, the source context state, decides (root 0 < "a" 1): every
    backend keeps ``c``. Costs are exact in float32 (0.5 per frame, a bonus of 1)."""
    from wfstdecode.decoding_graph import DecodingGraph
    from wfstdecode.fstio import FstArrays

    tokens = SymbolTable.from_list(["<blk>", "x", "y", "z"])
    words = SymbolTable.from_list(["<eps>", "a", "c", "b", "w"])
    fst = FstArrays(
        0,
        [np.inf, np.inf, 0.0],
        src=[0, 0, 1, 2],
        dst=[1, 1, 2, 2],
        ilabel=[2, 3, 4, 4],
        olabel=[1, 2, 3, 4],
        weight=np.zeros(4),
    )  # (0 -x:a,y:c-> 1 -z:b-> 2, and 2 -z:w-> 2, which no path of 2 frames takes: "w" is a
    # word of the graph, so "a w" is a phrase to boost, not one left out as unknown)
    g = DecodingGraph.from_arrays(fst, tokens, words, {})
    lp = np.full((1, 2, 4), -30.0, np.float32)
    lp[0, 0, 1] = lp[0, 0, 2] = lp[0, 1, 3] = -0.5
    plain = decode_ctc(lp, None, g, CtcBeamOptions(), None, backend=backend)[0][0]
    assert plain.words == ("a", "b")  # (no context: the smaller arc)
    tied = decode_ctc(lp, None, g, CtcBeamOptions(), {"a w": 1.0}, backend=backend)[0][0]
    assert tied.words == ("c", "b") and tied.score == plain.score == -1.0


@pytest.mark.parametrize("seed", range(4))
def test_the_same_phrases_in_any_order_build_the_same_automaton(seed):
    """Node numbers are the search's context states, which break exact ties: they depended on
    the order the phrases were listed in, so two dicts of the same content could decode
    differently. Now they are numbered from the trie alone (and the goto table laid out so)."""
    rng = np.random.default_rng(seed)
    phrases = _random_phrases(rng, vocab=6, n=25, max_len=4)
    items = list(phrases.items())
    a = PhraseAutomaton(phrases)
    for order in (items[::-1], [items[i] for i in rng.permutation(len(items))]):
        b = PhraseAutomaton(dict(order))
        for name in ("key", "child", "fail", "enter", "phi", "gain", "word_bits"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.parametrize("backend", ["reference", *fast_backends()])
def test_an_exact_tie_decodes_the_same_whatever_the_order_of_the_phrases(backend):
    """Tokens after "a" and after "c" reach one (graph state, root) at exactly equal cost, each
    giving back a partial match ("a w", "c w", the same bonus): the smaller context state
    wins. Listing "c w" first gave "c" the smaller one, so ``{"a w": 1, "c w": 1}`` and
    ``{"c w": 1, "a w": 1}`` decoded to different words."""
    from wfstdecode.decoding_graph import DecodingGraph
    from wfstdecode.fstio import FstArrays

    tokens = SymbolTable.from_list(["<blk>", "x", "y", "z"])
    words = SymbolTable.from_list(["<eps>", "a", "c", "b", "w"])
    fst = FstArrays(0, [np.inf, np.inf, 0.0], src=[0, 0, 1, 2], dst=[1, 1, 2, 2],
                    ilabel=[2, 3, 4, 4], olabel=[1, 2, 3, 4], weight=np.zeros(4))  # fmt: skip
    g = DecodingGraph.from_arrays(fst, tokens, words, {})
    lp = np.full((1, 2, 4), -30.0, np.float32)
    lp[0, 0, 1] = lp[0, 0, 2] = lp[0, 1, 3] = -0.5
    got = [decode_ctc(lp, None, g, CtcBeamOptions(nbest=2), boosts, backend=backend)[0]
           for boosts in ({"a w": 1.0, "c w": 1.0}, {"c w": 1.0, "a w": 1.0})]  # fmt: skip
    assert got[0] == got[1]
    assert got[0][0].score == -1.0


def test_penalised_words_leave_the_cpu_early_bound_an_upper_bound():
    """The cpu search's pre-pass bound (``min_active == 1``, more than 8 tokens alive) adds the
    most a phrase can add to an arc's cost (`PhraseAutomaton.worst`): with penalised words the
    frame's best may be a penalised arc, and a bound from static costs alone would drop
    candidates the frame's cutoff keeps. Tight beams, most of 24 words penalised: cpu ==
    reference."""
    words = [a + b for a in "abcdef" for b in "ghij"]
    g = lexicon_graph(words)
    for seed in range(40):
        rng = np.random.default_rng(seed)
        lp = random_log_probs(seed, 2, 12, g.num_tokens, peaky=1.0)
        boosts = {w: -float(rng.uniform(2, 6)) for w in words if rng.random() < 0.7}
        opts = CtcBeamOptions(beam=float(rng.uniform(1.0, 4.0)))
        ref = decode_ctc(lp, None, g, opts, [boosts, boosts], backend="reference")
        got = decode_ctc(lp, None, g, opts, [boosts, boosts], backend="cpu")
        assert_hypotheses_equal(ref, got, 1e-5, f"seed {seed}")

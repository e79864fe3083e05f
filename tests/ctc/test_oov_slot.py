"""Out-of-vocabulary words through the oov slot (``build-tlg --oov-slot``): the slot is closed
unless an utterance boosts words the lexicon lacks, and then open for exactly their spellings;
decoding equals OpenFst's shortest path through TLG ∘ C with an unbounded beam; cpu == cuda ==
reference bit for bit; spelled words come out as words with their tokens' times."""

import math
import warnings

import numpy as np
import pytest

from wfstdecode import DecodeInputError, GraphError, OptionsError
from wfstdecode.ctc import CtcBeamOptions, decode_ctc
from wfstdecode.ctc.boost import resolve_boosts
from wfstdecode.ctc.lattice import NO_CONFIDENCES
from wfstdecode.ctc.oov import OovSpeller
from wfstdecode.ctc.phrases import PhraseAutomaton
from wfstdecode.graph import build_tlg
from wfstdecode.graph.lexicon import spell_lexicon
from wfstdecode.graph.oov_slot import OovSlot
from wfstdecode.symbols import SymbolTable
from wfstdecode.testing import (
    assert_hypotheses_equal,
    fast_backends,
    simulate_ctc,
)
from wfstdecode.testing.lm import random_arpa, random_words

pytest.importorskip("pynini")

LETTERS = "abcde"
TOKENS = SymbolTable.from_list(["<blk>", "|", *LETTERS])
WIDE = CtcBeamOptions(beam=math.inf, max_active=1_000_000)


def _arpa(tmp_path, words, seed, unk=True):
    path = tmp_path / f"lm{seed}.arpa"
    path.write_text(random_arpa(words, order=2, seed=seed, unk=unk))
    return path


def _slot_graph(tmp_path, seed, topology="compact", unk=True, **kw):
    words = random_words(5, LETTERS, seed, max_len=3)
    lexicon, _ = spell_lexicon(words, TOKENS, separator="|")
    arpa = _arpa(tmp_path, words, seed, unk)
    slot = {"spelling": "chars"}
    build = build_tlg(TOKENS, lexicon, arpa, topology, separator="|", oov_slot=slot, **kw)
    return build.graph, words


def _oov_words(rng, known, n):
    out = set()
    while len(out) < n:
        w = "".join(rng.choice(list(LETTERS), size=int(rng.integers(1, 5))))
        if w not in known:
            out.add(w)
    return sorted(out)


def _random_boosts(rng, words, oovs):
    boosts = {}
    for w in oovs:
        boosts[w] = float(np.float32(rng.uniform(-1.0, 4.0)))
    if rng.random() < 0.5:
        boosts[f"{words[0]} {oovs[0]}"] = float(np.float32(rng.uniform(0.0, 2.0)))
    if rng.random() < 0.5:
        boosts[words[1]] = 1.5
    return boosts


# ---- the graph ----------------------------------------------------------------------------


def test_the_slot_labels_end_the_word_table_and_no_token_carries_oov(tmp_path):
    g, _ = _slot_graph(tmp_path, 0)
    slot = OovSlot.of(g)
    assert g.words.symbol(slot.open) == "<oov>" and g.words.symbol(slot.close) == "</oov>"
    assert sorted(slot.spell) == [TOKENS.id(c) for c in LETTERS]  # not blank, not separator
    assert max(slot.spell.values()) == g.words.next_id - 1
    assert not (g.olabel[: g.num_emitting_arcs] == slot.open).any()
    assert (g.olabel == slot.open).any() and (g.olabel == slot.close).any()


def test_the_slot_probability_comes_from_unk_or_is_given(tmp_path):
    words = random_words(5, LETTERS, 1, max_len=3)
    lexicon, _ = spell_lexicon(words, TOKENS, separator="|")
    no_unk = _arpa(tmp_path, words, 1, unk=False)
    with pytest.raises(GraphError, match="no <unk>.*--oov-logprob"):
        build_tlg(TOKENS, lexicon, no_unk, separator="|", oov_slot={"spelling": "chars"})
    with_unk = _arpa(tmp_path, words, 2, unk=True)
    with pytest.raises(GraphError, match="has <unk>"):
        build_tlg(TOKENS, lexicon, with_unk, separator="|", oov_slot={"spelling": "chars"},
                  oov_logprob=-3.0)  # fmt: skip
    with pytest.raises(GraphError, match="keep_unk and oov_slot"):
        build_tlg(TOKENS, lexicon, with_unk, separator="|", oov_slot={"spelling": "chars"},
                  keep_unk=True)  # fmt: skip
    with pytest.raises(GraphError, match="needs oov_slot"):
        build_tlg(TOKENS, lexicon, with_unk, separator="|", oov_logprob=-3.0)
    # the given probability is the slot's: a path through it costs 3 x ln 10 more at -6 than at -3
    oov = next(w for w in ("ebbed", "decade", "accede") if w not in words)
    seq = [TOKENS.id(c) for c in f"{words[0]}|{oov}"]
    lp, lengths = simulate_ctc([seq], TOKENS.next_id, seed=1)
    found = []
    for logprob in (-3.0, -6.0):
        g = build_tlg(TOKENS, lexicon, no_unk, separator="|", oov_slot={"spelling": "chars"},
                      oov_logprob=logprob).graph  # fmt: skip
        h = decode_ctc(lp, lengths, g, WIDE, {oov: 20.0})[0][0]
        assert h.words[-1] == oov
        found.append(h)
    assert found[0].words == found[1].words and found[0].tokens == found[1].tokens
    assert found[0].graph_score - found[1].graph_score == pytest.approx(3 * math.log(10), abs=1e-4)


# ---- decoding equals the composed graph -------------------------------------------------------


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("seed", range(6))
def test_unbounded_beam_equals_openfst_on_tlg_composed_with_the_context(tmp_path, seed, backend):
    import pynini

    from wfstdecode.testing.oracles import openfst_shortest_path, pynini_fst

    g, words = _slot_graph(tmp_path, seed, ("compact", "normal")[seed % 2])
    rng = np.random.default_rng(seed)
    oovs = _oov_words(rng, set(words), 1 + seed % 3)
    boosts = _random_boosts(rng, words, oovs) if seed % 3 else None  # also a closed slot
    # emissions that spell an oov word now and then, so that the slot is worth taking
    spoken = [rng.choice(words + oovs, size=3).tolist() for _ in range(2)]
    seqs = [[TOKENS.id(c) for c in "|".join(s)] for s in spoken]
    lp, lengths = simulate_ctc(seqs, TOKENS.next_id, seed=seed, noise=1.5, confusion_prob=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hyps = decode_ctc(lp, lengths, g, WIDE, boosts, backend=backend)
    speller = OovSpeller(g)
    (resolved,) = resolve_boosts(boosts, 1, g.words, speller)
    automaton = PhraseAutomaton(resolved or {}, OovSlot.of(g).open)
    context = pynini_fst(automaton.fst_arrays(range(1, g.words.next_id)))
    composed = pynini.compose(pynini_fst(g.to_arrays()).arcsort("olabel"),
                              context.arcsort("ilabel"))  # fmt: skip
    for b in range(len(lp)):
        labels, cost = openfst_shortest_path(lp[b, : lengths[b]], composed, 1.0)
        h = hyps[b][0]
        ids, spelled, _ = speller.collapse(list(labels))
        assert h.word_ids == tuple(ids)
        assert h.words == tuple(s[0] if s else g.words.symbol(w)
                                for w, s in zip(ids, spelled, strict=True))  # fmt: skip
        assert -h.score == pytest.approx(cost, rel=1e-5, abs=1e-4)


# ---- backends agree -----------------------------------------------------------------------

OPTIONS = [
    CtcBeamOptions(beam=6.0),
    CtcBeamOptions(beam=10.0, max_active=4),
    CtcBeamOptions(beam=2.0, max_active=10, min_active=3),
    CtcBeamOptions(beam=8.0, nbest=3, word_insertion_penalty=0.5),
]


def _backend_case(tmp_path, seed, words_per_utterance=3):
    g, words = _slot_graph(tmp_path, seed, ("compact", "normal")[seed % 2])
    rng = np.random.default_rng(seed + 10)
    oovs = _oov_words(rng, set(words), 3)
    spoken = [[oovs[k], *rng.choice(words + oovs, size=words_per_utterance - 1).tolist()]
              for k in range(3)]  # fmt: skip
    seqs = [[TOKENS.id(c) for c in "|".join(s)] for s in spoken]
    lp, lengths = simulate_ctc(seqs, TOKENS.next_id, seed=seed, noise=2.0, confusion_prob=0.3)
    lengths[2] = lengths[2] // 2  # one cut short, perhaps inside a spelling
    per = [_random_boosts(rng, words, oovs), None, _random_boosts(rng, words, oovs[:1])]
    return g, lp, lengths, per


# cpu: every option set on every seed; cuda (the simulator takes ~15 s a case): one option set
# on each topology (compact, normal), nbest among them
CASES = [("cpu", seed, opt) for seed in range(4) for opt in range(len(OPTIONS))] + [
    pytest.param(*(p.values if hasattr(p, "values") else (p,)), seed, opt, marks=getattr(
        p, "marks", ())) for p in fast_backends()[1:] for seed, opt in ((0, 1), (1, 3))
]  # fmt: skip


@pytest.mark.parametrize("backend, seed, opt", CASES)
def test_fast_backends_equal_reference_through_the_slot(tmp_path, backend, seed, opt):
    g, lp, lengths, per = _backend_case(tmp_path, seed, 3 if backend == "cpu" else 2)
    ref = decode_ctc(lp, lengths, g, OPTIONS[opt], per, backend="reference")
    if backend != "cpu":  # the two simulated cases do go through the slot
        assert any(OovSlot.of(g).open in h[0].word_ids for h in ref)
    got = decode_ctc(lp, lengths, g, OPTIONS[opt], per, backend=backend)
    assert_hypotheses_equal(ref, got, score_tol=0.0, what=backend)


# ---- what users see -----------------------------------------------------------------------


def _spoken(g, text, seed=3):
    seq = [TOKENS.id(c) for c in "|".join(text.split())]
    return simulate_ctc([seq], TOKENS.next_id, seed=seed)


def test_a_boosted_oov_word_comes_back_as_a_word_with_its_tokens_times(tmp_path):
    g, words = _slot_graph(tmp_path, 4)
    oov = next(w for w in ("ebbed", "decade", "accede") if w not in words)
    text = f"{words[0]} {oov} {words[1]}"
    lp, lengths = _spoken(g, text)
    closed = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=16))[0][0]
    assert oov not in closed.words
    h = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=16), {oov: 3.0})[0][0]
    assert h.words == tuple(text.split())
    slot = OovSlot.of(g)
    assert h.word_ids[1] == slot.open
    # its times are those of its first and last token (the letters between the separators)
    seps = [i for i, t in enumerate(h.tokens) if t == TOKENS.id("|")]
    first, last = seps[0] + 1, seps[1] - 1
    assert h.word_timestamps[1][0] == h.timestamps[first]
    assert h.word_timestamps[1][1] >= h.timestamps[last]
    assert h.word_timestamps[1][1] < h.timestamps[seps[1]]
    # the bonus counts once per word, however many letters the word has
    zero = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=16), {oov: 0.0})[0][0]
    assert zero.words == h.words
    assert h.score - zero.score == pytest.approx(3.0, abs=1e-4)


def test_lattices_through_the_slot_say_they_give_no_confidences(tmp_path):
    """A spelled word is several lattice labels: no word confidences — said in each
    hypothesis' notes (they were silently missing, and the CTM lost its column); MBR and
    determinized posteriors, which cannot be given either, are refused."""
    g, words = _slot_graph(tmp_path, 4)
    oov = next(w for w in ("ebbed", "decade", "accede") if w not in words)
    lp, lengths = _spoken(g, f"{words[0]} {oov} {words[1]}")
    hyps = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=16, lattice_beam=6.0, nbest=3),
                      {oov: 3.0})[0]  # fmt: skip
    assert oov in hyps[0].words
    assert all(not h.word_confidences and NO_CONFIDENCES in h.notes for h in hyps)
    for options in (dict(posteriors="determinized"), dict(mbr_candidates=3)):
        with pytest.raises(OptionsError, match="without an oov slot"):
            decode_ctc(lp, lengths, g, CtcBeamOptions(beam=16, lattice_beam=6.0, **options))
    # without a lattice the posteriors' kind changes nothing: not refused
    plain = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=16, posteriors="determinized"))[0]
    assert plain == decode_ctc(lp, lengths, g, CtcBeamOptions(beam=16))[0]


def test_a_capitalised_known_word_is_spelled_as_a_new_word_and_said_so(tmp_path):
    """`transcribe --boost Young=10` turned the graph's "young" into a new word "Young", with no
    word of why: a boost spelled through the slot whose lower case is a word now warns."""
    g, words = _slot_graph(tmp_path, 4)
    lp, lengths = _spoken(g, f"{words[0]} {words[1]}")
    cap = words[1].capitalize()
    spelled = {cap: " ".join(words[1])}  # (the letters are lower-case tokens)
    with pytest.warns(UserWarning, match=rf"'{cap}' is not in the vocabulary but '{words[1]}' is"):
        decode_ctc(lp, lengths, g, CtcBeamOptions(beam=8), {cap: 2.0}, oov_lexicon=spelled)
    # no spelling at all: left out, the case named
    with pytest.warns(UserWarning, match=rf"{cap} \('{words[1]}' is a word: words are case-s"):
        decode_ctc(lp, lengths, g, CtcBeamOptions(beam=8), {cap: 2.0})


def test_an_oov_word_that_cannot_be_spelled_warns_and_is_left_out(tmp_path):
    g, words = _slot_graph(tmp_path, 5)
    lp, lengths = _spoken(g, " ".join(words[:2]))
    with pytest.warns(UserWarning, match="xyz"):
        decode_ctc(lp, lengths, g, CtcBeamOptions(beam=8), {"xyz": 2.0})
    with pytest.warns(UserWarning, match="1000000"):  # a word id the graph lacks, as without a slot
        decode_ctc(lp, lengths, g, CtcBeamOptions(beam=8), {10**6: 2.0})
    with pytest.raises(DecodeInputError, match=r"boosts\[1\] must be a mapping"):
        decode_ctc(np.repeat(lp, 2, 0), np.repeat(lengths, 2), g, CtcBeamOptions(beam=8),
                   [None, 5])  # fmt: skip


def test_pronunciations_given_at_decode_time_spell_the_word(tmp_path):
    g, words = _slot_graph(tmp_path, 6)
    oov = next(w for w in ("ebbed", "decade", "accede") if w not in words)
    lp, lengths = _spoken(g, f"{words[0]} {oov}")
    # a word spelled otherwise than its letters: its pronunciation says how
    h = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=16), {"Zed": 3.0},
                   oov_lexicon={"Zed": " ".join(oov)})[0][0]  # fmt: skip
    assert h.words == (words[0], "Zed")
    with pytest.raises(Exception, match="oov slot"):
        other = _slot_graph(tmp_path, 7)[0]
        other.metadata.pop("oov_slot")
        decode_ctc(lp, lengths, other, CtcBeamOptions(beam=16), oov_lexicon={"Zed": "a"})


def test_build_tlg_and_decode_on_the_command_line(tmp_path, capsys):
    from wfstdecode.cli import main

    words = ["cab", "dab", "bead", "ace"]
    (tmp_path / "tokens.txt").write_text("".join(f"{s} {i}\n" for s, i in TOKENS))
    _arpa(tmp_path, words, 0, unk=False).rename(tmp_path / "lm.arpa")
    build = ["build-tlg", "--tokens", str(tmp_path / "tokens.txt"), "--arpa",
             str(tmp_path / "lm.arpa"), "--chars", "--separator", "|"]  # fmt: skip
    assert main([*build, "--out", str(tmp_path / "g"), "--oov-slot"]) == 2
    assert "--oov-logprob" in capsys.readouterr().err  # the LM has no <unk>
    assert main([*build, "--out", str(tmp_path / "g"), "--oov-logprob", "-4"]) == 2
    assert "needs --oov-slot" in capsys.readouterr().err
    assert main([*build, "--out", str(tmp_path / "g"), "--lexicon-probs"]) == 2
    assert "--lexicon-probs reads probabilities in a --lexicon file" in capsys.readouterr().err
    assert not (tmp_path / "g").exists()  # nothing half-written
    assert main([*build, "--out", str(tmp_path / "g"), "--oov-slot", "--oov-logprob", "-4"]) == 0
    capsys.readouterr()
    seq = [TOKENS.id(c) for c in "cab|ebbed|dab"]
    lp, lengths = simulate_ctc([seq], TOKENS.next_id, seed=2)
    np.savez(tmp_path / "lp.npz", log_probs=lp, lengths=lengths)
    common = ["decode", str(tmp_path / "g"), str(tmp_path / "lp.npz"), "--backend", "cpu"]
    assert main(common) == 0
    assert "ebbed" not in capsys.readouterr().out
    assert main([*common, "--boost", "ebbed=3", "--json"]) == 0
    import json

    record = json.loads(capsys.readouterr().out)
    assert [w["word"] for w in record["words"]] == ["cab", "ebbed", "dab"]
    (tmp_path / "oov.txt").write_text("Ebbe e b b e d\n")
    assert main([*common, "--boost", "Ebbe=3", "--oov-lexicon", str(tmp_path / "oov.txt")]) == 0
    assert capsys.readouterr().out.rstrip().endswith("cab Ebbe dab")
    (tmp_path / "bad.txt").write_text("Ebbe e b\nZed z e d\n")
    assert main([*common, "--boost", "Zed=3", "--oov-lexicon", str(tmp_path / "bad.txt")]) == 2
    err = capsys.readouterr().err
    assert "bad.txt:2" in err and "'z'" in err


def test_a_pronunciation_lexicon_graph_spells_only_what_it_is_given(tmp_path):
    """A graph spelled from a pronunciation lexicon, no separator (phones): an oov word needs a
    pronunciation at decode time, and comes back timed by it."""
    from wfstdecode.graph.lexicon import LexiconEntry

    phones = SymbolTable.from_list(["<blk>", "AH", "B", "K", "D", "IY", "S"])
    lexicon = [LexiconEntry("cub", ("K", "AH", "B")), LexiconEntry("bead", ("B", "IY", "D")),
               LexiconEntry("seed", ("S", "IY", "D"))]  # fmt: skip
    arpa = _arpa(tmp_path, ["cub", "bead", "seed"], 3, unk=True)
    g = build_tlg(phones, lexicon, arpa, "compact", oov_slot={"spelling": "lexicon"}).graph
    spoken = ["K", "AH", "B", "D", "IY", "S", "B", "IY", "D"]  # cub "deese" bead
    lp, lengths = simulate_ctc([[phones.id(p) for p in spoken]], phones.next_id, seed=1)
    with pytest.warns(UserWarning, match=r"give theirs in oov_lexicon.*: deese"):
        decode_ctc(lp, lengths, g, CtcBeamOptions(beam=16), {"deese": 3.0})
    h = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=16), {"deese": 3.0},
                   oov_lexicon={"deese": "D IY S"})[0][0]  # fmt: skip
    assert h.words == ("cub", "deese", "bead")
    # homophones share the spelling: the first listed names it; the same word twice is refused
    with pytest.warns(UserWarning, match="'dease' is spelled as 'deese' is; only the one"):
        both = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=16), {"deese": 3.0, "dease": 3.0},
                          oov_lexicon={"deese": "D IY S", "dease": "D IY S"})[0][0]  # fmt: skip
    assert both.words == h.words
    # the documented forms of a word's pronunciations: a string, a tuple, a list of either
    for prons in ("D IY S", ("D", "IY", "S"), ["D IY S"], [("D", "IY", "S"), "B IY D"]):
        got = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=16), {"deese": 3.0},
                         oov_lexicon={"deese": prons})[0][0]  # fmt: skip
        assert got.words == h.words, prons
    for bad, says in (
        (["deese"], "must be a mapping"),
        ({"deese": 5}, "must be a string"),
        ({"deese": None}, "must be a string"),
        ({"deese": [b"D IY S"]}, "token"),
        ({"deese": "D IY Z"}, "'Z', which the graph's oov slot does not spell"),
    ):
        with pytest.raises(DecodeInputError, match=says):
            decode_ctc(lp, lengths, g, CtcBeamOptions(beam=16), {"deese": 3.0}, oov_lexicon=bad)
    # two utterances, two words spelled alike: each names the spelling by its own boosted word
    two = decode_ctc(np.repeat(lp, 2, 0), np.repeat(lengths, 2), g, CtcBeamOptions(beam=16),
                     [{"deese": 3.0}, {"dease": 3.0}],
                     oov_lexicon={"deese": "D IY S", "dease": "D IY S"})  # fmt: skip
    assert [u[0].words[1] for u in two] == ["deese", "dease"]
    with pytest.raises(Exception, match="same phrase"):
        decode_ctc(lp, lengths, g, CtcBeamOptions(beam=16), {"deese": 3.0, " deese ": 1.0},
                   oov_lexicon={"deese": "D IY S"})  # fmt: skip
    assert h.word_timestamps[1] == (h.timestamps[3], h.word_timestamps[1][1])
    assert h.timestamps[5] <= h.word_timestamps[1][1] < h.timestamps[6]


@pytest.mark.parametrize("backend", ["reference", *fast_backends()])
def test_a_stream_through_the_slot_equals_the_whole_decode(tmp_path, backend):
    from wfstdecode.ctc import CtcStreamDecoder

    g, lp, lengths, per = _backend_case(tmp_path, 1)
    opts = CtcBeamOptions(beam=8.0)
    whole = decode_ctc(lp[:1, : lengths[0]], None, g, opts, per[:1], backend="reference")
    dec = CtcStreamDecoder(g, opts, backend=backend)
    sid = dec.open(per[0])
    for start in range(0, int(lengths[0]), 5):
        dec.advance({sid: lp[0, start : min(start + 5, int(lengths[0]))]})
    assert_hypotheses_equal(whole, [dec.finish(sid)], score_tol=0.0, what="stream")


@pytest.mark.parametrize("seed", range(4))
def test_the_search_rule_forbids_what_the_automaton_forbids(seed):
    """`bundles.arc_cost` (compiled, and as the kernels run it) against `PhraseAutomaton.step`
    on a label space whose top part is a slot: labels 20 (open), 21 (close), 22-31 (spelling)."""
    from wfstdecode.ctc.boost import build_boost_tables
    from wfstdecode.ctc.bundles import LaneBoosts, SearchGraph, arc_cost

    rng = np.random.default_rng(seed)
    open_, close = 20, 21

    def spelled():
        return (open_, *rng.integers(22, 32, size=int(rng.integers(1, 4))).tolist(), close)

    tables = []
    for _ in range(2):
        t = {}
        for _ in range(int(rng.integers(1, 6))):
            words = rng.integers(1, 20, size=int(rng.integers(0, 3))).tolist()
            phrase = tuple(words) + spelled() if rng.random() < 0.7 else tuple(words) or (1,)
            t[phrase] = np.float32(rng.uniform(-1, 3))
        tables.append(t)
    bt = build_boost_tables([tables[0], None, tables[1]], open_)
    i32 = np.zeros(32, np.int32)
    graph = SearchGraph(0, np.zeros(1, np.float32), i32, i32, i32, i32,
                        np.arange(32, dtype=np.int32), np.ones(32, np.float32), i32, 32,
                        open_)  # fmt: skip
    boosts = LaneBoosts(bt.key, bt.gain, bt.enter, bt.offset, bt.mask, bt.fail, bt.phi,
                        bt.node_offset, bt.contexts, bt.worst, bt.bits, bt.bits_offset,
                        bt.bits_len)  # fmt: skip
    for lane, automaton in enumerate(bt.automata):
        contexts = range(automaton.num_nodes) if automaton else [0]
        for x in contexts:
            if automaton and automaton.enter[x] != x:
                continue
            for w in range(1, 32):
                cost, nxt = arc_cost(graph, boosts, lane, w, x)
                assert arc_cost.py_func(graph, boosts, lane, w, x) == (cost, nxt)
                if automaton is None:  # no table: the slot is closed
                    assert cost == (np.float32(1.0) if w < open_ else np.inf)
                    continue
                want_x, bonus = automaton.step(x, w)
                if bonus == -np.inf:
                    assert cost == np.inf and w >= open_
                else:
                    assert (nxt, cost) == (want_x, np.float32(np.float32(1.0) - bonus))
        if automaton is not None:
            assert automaton.forbids == any(max(p) >= open_ for p in automaton.phrases)
            assert bt.worst[lane] == (np.inf if automaton.forbids else automaton.worst)


def test_partial_results_count_a_spelled_word_as_one_stable_word(tmp_path):
    from wfstdecode.ctc import CtcStreamDecoder

    g, words = _slot_graph(tmp_path, 4)
    oov = next(w for w in ("ebbed", "decade", "accede") if w not in words)
    lp, lengths = _spoken(g, f"{words[0]} {oov} {words[1]} {words[0]}")
    dec = CtcStreamDecoder(g, CtcBeamOptions(beam=16), backend="cpu")
    sid = dec.open({oov: 3.0})
    stable_seen = 0
    for start in range(0, int(lengths[0]), 4):
        dec.advance({sid: lp[0, start : min(start + 4, int(lengths[0]))]})
        h = dec.partial(sid)
        assert stable_seen <= h.stable_words <= len(h.words)
        stable_seen = h.stable_words
    final = dec.finish(sid)[0]
    assert final.words == (words[0], oov, words[1], words[0])
    assert h.words[: h.stable_words] == final.words[: h.stable_words]


def test_a_sentencepiece_graph_spells_an_oov_word_with_its_pieces(tmp_path):
    spm = pytest.importorskip("sentencepiece")
    from wfstdecode.graph.lexicon import sentencepiece_lexicon
    from wfstdecode.testing.lm import tiny_sentencepiece_model

    path, pieces, text = tiny_sentencepiece_model(tmp_path)
    model = spm.SentencePieceProcessor(model_file=path)
    tokens = SymbolTable.from_list(["<blk>", *pieces])
    vocabulary = sorted(set(text.split()))
    oov = next(w for w in vocabulary if len(w) > 6 and len(model.encode(w)) > 2)
    words = [w for w in vocabulary if w != oov][:40]
    lexicon, _ = sentencepiece_lexicon(words, tmp_path / "bpe.model", tokens)
    (tmp_path / "lm.arpa").write_text(random_arpa(words, order=2, seed=3))
    slot = {"spelling": "spm", "spm": str(tmp_path / "bpe.model")}
    g = build_tlg(tokens, lexicon, tmp_path / "lm.arpa", "compact", oov_slot=slot,
                  oov_logprob=-4.0).graph  # fmt: skip
    spoken = [words[0], oov, words[1]]
    seq = [tokens.id(p) for w in spoken for p in (model.id_to_piece(i) for i in model.encode(w))]
    lp, lengths = simulate_ctc([seq], tokens.next_id, seed=5)
    assert oov not in decode_ctc(lp, lengths, g, CtcBeamOptions(beam=16))[0][0].words
    h = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=16), {oov: 4.0})[0][0]
    assert h.words == tuple(spoken)


def test_a_graph_whose_slot_does_not_hold_together_is_refused(tmp_path):
    g, _ = _slot_graph(tmp_path, 2)
    g.save(tmp_path / "g.npz")
    from wfstdecode import DecodingGraph

    for meta, match in (({"spelling": "morse"}, "spelling must be one of"),
                        ("chars", "must be an object")):  # fmt: skip
        bad = DecodingGraph.load(tmp_path / "g.npz")
        bad.metadata["oov_slot"] = meta
        with pytest.raises(GraphError, match=match):
            OovSlot.of(bad)
    bad = DecodingGraph.load(tmp_path / "g.npz")
    bad.metadata["separator"] = None  # the spelling labels would then include "|"
    with pytest.raises(GraphError, match="does not end with"):
        OovSlot.of(bad)
    lp, lengths = _spoken(g, "a")
    with pytest.raises(GraphError, match="does not end with"):
        decode_ctc(lp, lengths, bad, CtcBeamOptions(beam=8))


def test_decode_corpus_spells_oov_words_with_the_given_pronunciations(tmp_path, capsys):
    """decode-corpus on local workers: --oov-lexicon reaches the workers and is part of the
    run's config (a changed lexicon does not reuse the outputs)."""
    import json

    from wfstdecode.cli import main

    g, words = _slot_graph(tmp_path, 6)
    g.save(tmp_path / "g.npz")
    oov = next(w for w in ("ebbed", "decade", "accede") if w not in words)
    (tmp_path / "shards").mkdir()
    lp, lengths = _spoken(g, f"{words[0]} {oov}")
    np.savez(tmp_path / "shards" / "s.npz", log_probs=lp, lengths=lengths)
    (tmp_path / "oov.txt").write_text(f"Zed {' '.join(oov)}\n")
    args = ["decode-corpus", str(tmp_path / "shards"), "--graph", str(tmp_path / "g.npz"),
            "--out", str(tmp_path / "out"), "--executor", "local", "--workers", "1", "--quiet",
            "--boost", "Zed=3", "--oov-lexicon", str(tmp_path / "oov.txt")]  # fmt: skip
    assert main(args) == 0
    record = json.loads((tmp_path / "out" / "s.jsonl").read_text().splitlines()[0])
    assert record["text"] == f"{words[0]} Zed"
    (tmp_path / "oov.txt").write_text(f"Zed {' '.join(oov[:-1])}\n")
    capsys.readouterr()
    assert main(args) != 0  # another lexicon, another config: not this run's output directory
    assert "differing: oov_lexicon" in capsys.readouterr().err


def test_a_list_through_the_slot_is_recalled_by_the_next_call(tmp_path):
    """`phrase_cache` on a graph with an oov slot: every call makes its own `OovSpeller`, so the
    cache keys on what the spellings depend on (its recipe), not on the speller; a list sent
    again is recalled (it was resolved afresh at every call, and the cache grew by one entry a
    call); another oov lexicon is another key."""
    from wfstdecode.ctc import clear_phrase_cache, phrase_cache

    g, words = _slot_graph(tmp_path, 4)
    oovs = _oov_words(np.random.default_rng(0), set(words), 80)
    hotwords = {w: 1.5 for w in oovs} | {f"{words[0]} {words[1]}": 2.0}
    clear_phrase_cache()
    first = resolve_boosts(hotwords, 1, g.words, OovSpeller(g))[0]
    assert resolve_boosts(dict(hotwords), 1, g.words, OovSpeller(g))[0] is first
    assert len(phrase_cache._ENTRIES) == 1
    lexicon = {oovs[0]: " ".join(oovs[1])}  # spelled as the next one: homophones
    for _ in range(2):  # recalled the second time, and said again
        with pytest.warns(UserWarning, match=rf"boosts\[0\]: '{oovs[1]}' is spelled as"):
            other = resolve_boosts(hotwords, 1, g.words, OovSpeller(g, lexicon))[0]
    assert other is not first and other != first
    lp, lengths = _spoken(g, f"{words[0]} {oovs[0]}")
    recalled = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=8.0), hotwords)
    clear_phrase_cache()
    fresh = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=8.0), hotwords)
    assert_hypotheses_equal(fresh, recalled)
    clear_phrase_cache()


@pytest.fixture(scope="module")
def slot_graph(tmp_path_factory):
    """`_slot_graph`'s graph of seed 4, built once for the tests that only read it."""
    return _slot_graph(tmp_path_factory.mktemp("slot"), 4)


def test_a_tuple_of_a_word_id_and_an_oov_word_is_spelled_as_the_words_are(slot_graph):
    """A boost key may name words by id: one mixed with an oov word was left out with a "nor
    spelled" warning, though the same phrase by words is spelled and boosted."""
    g, words = slot_graph
    by_words = resolve_boosts({(words[0], "ebbed"): 1.0}, 1, g.words, OovSpeller(g))[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        by_id = resolve_boosts({(g.words.id(words[0]), "ebbed"): 1.0}, 1, g.words,
                               OovSpeller(g))[0]  # fmt: skip
    assert by_id == by_words and by_id is not None
    for unknown in (0, -1, g.words.next_id + 5, True):  # (epsilon, not ids, or no such word)
        assert OovSpeller(g).phrase_labels([unknown, "ebbed"], g.words) is None


def test_a_phrase_with_more_than_max_spellings_is_refused(slot_graph):
    """O1 (the combinations' check as ``> MAX_SPELLINGS + 1``: never true after the islice, so a
    phrase of 32 spellings was silently cut to 17). 2**4 spellings are fine, 2**5 refused."""
    from wfstdecode.ctc.oov import MAX_SPELLINGS, OovSpeller

    g, _ = slot_graph
    names = ["Xa", "Xb", "Xc", "Xd", "Xe"]
    lexicon = {n: ["a b", "c d"] for n in names}  # two pronunciations each
    speller = OovSpeller(g, lexicon)
    assert len(speller.phrase_labels(names[:4], g.words)) == 16 == MAX_SPELLINGS
    with pytest.raises(DecodeInputError, match="more than 16 spellings"):
        speller.phrase_labels(names, g.words)
    with pytest.raises(DecodeInputError, match="more than 16 spellings"):
        resolve_boosts({" ".join(names): 1.0}, 1, g.words, OovSpeller(g, lexicon))


def test_a_word_with_more_than_max_spellings_pronunciations_is_refused():
    """O2 (`checked_lexicon`'s limit as ``> MAX_SPELLINGS + 1``): 16 pronunciations are
    accepted, 17 refused."""
    from wfstdecode.ctc.oov import MAX_SPELLINGS, checked_lexicon

    prons = [f"a{'b' * k}" for k in range(MAX_SPELLINGS + 1)]
    assert len(checked_lexicon({"w": prons[:MAX_SPELLINGS]})["w"]) == MAX_SPELLINGS
    with pytest.raises(DecodeInputError, match="more than 16 pronunciations"):
        checked_lexicon({"w": prons})


def test_an_oov_lexicon_file_names_the_line_of_one_pronunciation_too_many(tmp_path):
    from wfstdecode.ctc.oov import MAX_SPELLINGS, read_oov_lexicon
    from wfstdecode.errors import InputFileError
    from wfstdecode.symbols import SymbolTable

    path = tmp_path / "oov.txt"
    path.write_text("".join(f"w a{' b' * k}\n" for k in range(MAX_SPELLINGS + 1)))
    tokens = SymbolTable.from_list(["<blk>", "a", "b"])
    with pytest.raises(InputFileError, match=rf"oov.txt:{MAX_SPELLINGS + 1}: 'w' has more than"):
        read_oov_lexicon(path, tokens)
    path.write_text("".join(f"w a{' b' * k}\n" for k in range(MAX_SPELLINGS)))
    assert len(read_oov_lexicon(path, tokens)["w"]) == MAX_SPELLINGS


def test_the_epsilon_symbol_is_not_a_word_of_a_phrase_spelled_through_the_slot(slot_graph):
    """O3 (`phrase_labels` taking any id the table gives, ``if wid is not None``): "<eps>" is
    id 0 of the word table, never a word: a phrase holding it is left out, with a warning, as
    on a graph without a slot — not boosted as the label 0."""
    from wfstdecode.ctc.oov import OovSpeller

    g, words = slot_graph
    speller = OovSpeller(g)
    assert speller.phrase_labels(["<eps>"], g.words) is None
    assert speller.phrase_labels(["<eps>", words[0]], g.words) is None
    with pytest.warns(UserWarning, match="<eps>"):
        (resolved,) = resolve_boosts({"<eps>": 1.0, f"<eps> {words[0]}": 2.0}, 1, g.words,
                                     OovSpeller(g))  # fmt: skip
    assert resolved is None


def test_a_pronunciation_given_twice_spells_the_word_once(slot_graph):
    """O6 (`spellings` without ``ids not in out``): an oov lexicon that lists a word's
    pronunciation twice (one as a string, one as a tuple; or a word on two lines of a lexicon
    file) boosts the one spelling, rather than refusing the word as 'the same phrase' twice."""
    from wfstdecode.ctc.oov import OovSpeller

    g, _ = slot_graph
    lexicon = {"Xa": ["a b", ("a", "b")]}
    assert OovSpeller(g, lexicon).spellings("Xa") == [(TOKENS.id("a"), TOKENS.id("b"))]
    (resolved,) = resolve_boosts({"Xa": 1.0}, 1, g.words, OovSpeller(g, lexicon))
    assert len(resolved) == 1


@pytest.mark.parametrize("word", ["new york", "tab\there", " lead", ""])
def test_an_oov_lexicon_word_with_whitespace_is_refused(word):
    """O10 (`checked_lexicon` without the whitespace check): a boost key is split at
    whitespace, so an entry "new york" could never spell anything; it is refused by name
    rather than silently unused."""
    from wfstdecode.ctc.oov import checked_lexicon

    with pytest.raises(DecodeInputError, match="is not a word"):
        checked_lexicon({word: "a b"})


def test_the_slot_log10_probability_may_be_zero_but_not_above_or_not_finite(tmp_path):
    """S3 (``unk_logprob < 0``): --oov-logprob 0 (probability 1) is a valid log10 probability,
    as the error message says (<= 0); above 0, inf and NaN are refused."""
    from wfstdecode import GraphError
    from wfstdecode.graph.grammar import read_arpa
    from wfstdecode.graph.oov_slot import OPEN, with_slot_word
    from wfstdecode.testing.lm import random_arpa

    (tmp_path / "lm.arpa").write_text(random_arpa(["ab", "cd"], order=2, seed=0, unk=False))
    model = read_arpa(tmp_path / "lm.arpa")
    assert with_slot_word(model, 0.0).ngrams[0][(OPEN,)] == (0.0, 0.0)
    assert with_slot_word(model, -4.0).ngrams[0][(OPEN,)] == (-4.0, 0.0)
    for bad in (0.5, math.inf, -math.inf, math.nan):
        with pytest.raises(GraphError, match="finite log10 probability <= 0"):
            with_slot_word(model, bad)


def test_a_path_cannot_end_inside_a_spelling(slot_graph):
    """S5 (`insert_spelling_loops` making the loop's states final): the slot is open for the
    boosted spellings, whole; audio that stops part way through one ("ebb" of "ebbed") must
    not come back as a word the caller never boosted ("ebb", a spelling cut short)."""
    from wfstdecode.ctc import CtcBeamOptions, decode_ctc
    from wfstdecode.testing import simulate_ctc

    g, words = slot_graph
    wide = CtcBeamOptions(beam=math.inf, max_active=1_000_000)
    for text in (f"{words[0]} ebb", "ebbe"):
        seq = [TOKENS.id(c) for c in "|".join(text.split())]
        lp, lengths = simulate_ctc([seq], TOKENS.next_id, seed=3)
        h = decode_ctc(lp, lengths, g, wide, {"ebbed": 5.0})[0][0]
        assert set(h.words) <= {*words, "ebbed"}, (text, h.words)


def test_decode_oov_lexicon_on_a_graph_without_a_slot_blames_the_graph(tmp_path, capsys):
    """decode --oov-lexicon on a graph built without --oov-slot is refused naming the graph
    and the option, before the log-probs are read (not as an error of the log-probs file)."""
    from wfstdecode.cli import main

    (tmp_path / "tokens.txt").write_text("".join(f"{s} {i}\n" for s, i in TOKENS))
    _arpa(tmp_path, ["cab", "dab"], 0, unk=False).rename(tmp_path / "lm.arpa")
    assert main(["build-tlg", "--tokens", str(tmp_path / "tokens.txt"), "--arpa",
                 str(tmp_path / "lm.arpa"), "--chars", "--separator", "|", "--out",
                 str(tmp_path / "g")]) == 0  # fmt: skip
    (tmp_path / "oov.txt").write_text("ebbed e b b e d\n")
    capsys.readouterr()
    # the log-probs file does not exist: the refusal comes before it is opened
    assert main(["decode", str(tmp_path / "g"), str(tmp_path / "missing.npz"), "--boost",
                 "ebbed=3", "--oov-lexicon", str(tmp_path / "oov.txt")]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "--oov-lexicon" in err and "no oov slot" in err and str(tmp_path / "g") in err
    assert "missing.npz" not in err


def test_decode_rescore_lm_on_a_slot_graph_is_refused_before_the_lms_are_read(tmp_path, capsys):
    """The refusal (a spelled word is no n-gram word) came from the search, after the LMs and
    the log-probs were read (minutes for a large ARPA): now at once, naming the graph. The
    LMs here do not exist: what is said is the slot, not them."""
    from wfstdecode.cli import main

    g, _ = _slot_graph(tmp_path, 2)
    g.save(tmp_path / "TLG.npz")
    missing = str(tmp_path / "missing.arpa")
    assert main(["decode", str(tmp_path / "TLG.npz"), str(tmp_path / "missing.npz"),
                 "--lattice-beam", "6", "--rescore-lm", missing, "--first-pass-lm",
                 missing]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "oov slot" in err and "TLG.npz" in err and "missing" not in err


def test_a_spelled_word_on_a_graph_without_separator_or_lexicon_starts_at_its_first_token(
    tmp_path,
):
    """A graph read from OpenFst (no separator, no pronunciations: word times from the labels'
    arcs) times a spelled word by its own tokens: its ``<oov>`` arc, taken before any of them
    (right after the last word's token), once gave it that arc's frame as its start, inside the
    word before it."""
    from wfstdecode import DecodingGraph
    from wfstdecode.graph.lexicon import LexiconEntry

    arpa = tmp_path / "lm.arpa"
    arpa.write_text("\\data\\\nngram 1=4\n\n\\1-grams:\n-1.0 <s>\n-0.5 </s>\n-0.3 ab\n"
                    "-1.0 <unk>\n\n\\end\\\n")  # fmt: skip
    tokens = SymbolTable.from_list(["<blk>", "A", "B", "C"])
    for topology in ("normal", "compact", "minimal"):
        built = build_tlg(tokens, [LexiconEntry("ab", ("A", "B"))], arpa, topology,
                          oov_slot={"spelling": "lexicon"}).graph  # fmt: skip
        built.to_openfst(tmp_path / "TLG.fst")
        g = DecodingGraph.from_openfst(tmp_path / "TLG.fst", built.tokens, built.words,
                                       topology=topology)  # fmt: skip
        frames = ["A", "<blk>", "B", "<blk>", "<blk>", "<blk>", "C", "<blk>", "A", "<blk>"]
        lp = np.full((1, len(frames), g.num_tokens), -20.0, np.float32)
        lp[0, np.arange(len(frames)), [tokens.id(c) for c in frames]] = 0.0
        for graph in (built, g):
            h = decode_ctc(lp, None, graph, CtcBeamOptions(beam=30.0), {"ca": 5.0},
                           oov_lexicon={"ca": "C A"})[0][0]  # fmt: skip
            assert h.words == ("ab", "ca")
            assert h.word_timestamps == ((0, 2), (6, 8)), (topology, graph is g)


def test_a_spelling_cut_short_at_its_oov_label_is_no_word(slot_graph):
    """A path that ends right after its ``<oov>`` label (a partial result: the boost's bonus
    is anticipated there, so that token may rank first) has no spelled token yet: that run is
    no word. It came back as a word "" with the pronunciation ``()``, which matched at the end
    of the path and gave a span past the last token: `CtcStreamDecoder.partial` raised
    IndexError."""
    g, words = slot_graph
    speller = OovSpeller(g)
    slot = OovSlot.of(g)
    known = g.words.id(words[0])
    ids, spelled, spans = speller.collapse([known, slot.open])
    assert (ids, spelled, spans) == ([known], [None], [(0, 0)])
    # a run with its tokens but no </oov> yet is still a word, spelled as far as it went
    a = slot.spell[TOKENS.id("a")]
    ids, spelled, _ = speller.collapse([known, slot.open, a])
    assert ids == [known, slot.open] and spelled[1] == ("a", (TOKENS.id("a"),))


def test_a_partial_result_ending_at_the_oov_label_does_not_raise(tmp_path):
    """The stream case of the test above (a graph and boosts where a fuzz run found it): the
    best token before any frame is the one past ``<oov>``, with the bonus of "eeea" ahead."""
    from wfstdecode.ctc import CtcStreamDecoder

    g, _ = _slot_graph(tmp_path, 13, "normal")
    opts = CtcBeamOptions(beam=8.0, word_insertion_penalty=-0.5)
    dec = CtcStreamDecoder(g, opts, backend="cpu")
    sid = dec.open({"eeea": 3.5})
    h = dec.partial(sid)
    assert h.words == () and h.stable_words == 0
    whole = decode_ctc(np.zeros((1, 0, TOKENS.next_id), np.float32), None, g, opts,
                       {"eeea": 3.5})  # fmt: skip
    assert dec.finish(sid) == whole[0]


@pytest.mark.parametrize("lattice_beam", [None, math.inf])
@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_nbest_gives_a_word_with_two_pronunciations_once(tmp_path, backend, lattice_beam):
    """An oov word with two pronunciations is two label sequences through the slot, but one
    word: n-best (the search's end tokens, or the lattice's) gave the same word sequence
    twice, though it holds distinct word sequences; with a lattice the next one takes its
    place."""
    g, words = _slot_graph(tmp_path, 2)
    oov = next(w for w in ("ebbed", "decade", "accede") if w not in words)
    lp, lengths = _spoken(g, f"{words[0]} {oov}")
    opts = CtcBeamOptions(beam=16, nbest=6, lattice_beam=lattice_beam)
    prons = {"Zed": [" ".join(oov), " ".join(oov[:-1])]}
    hyps = decode_ctc(lp, lengths, g, opts, {"Zed": 4.0}, backend=backend,
                      oov_lexicon=prons)[0]  # fmt: skip
    assert hyps[0].words == (words[0], "Zed")
    assert len({h.words for h in hyps}) == len(hyps), [h.words for h in hyps]
    if lattice_beam is not None:  # as many as with one pronunciation, where the lattice has them
        one = decode_ctc(lp, lengths, g, opts, {"Zed": 4.0}, backend=backend,
                         oov_lexicon={"Zed": " ".join(oov)})[0]  # fmt: skip
        assert len(hyps) >= len(one)


@pytest.mark.parametrize("seed", range(3))
def test_a_boosted_oov_word_survives_a_narrow_beam_while_it_pays_the_slot(tmp_path, seed):
    """No spelling fails out of the slot, so a spelled word's match anticipates its whole
    bonus from ``<oov>`` on: entering an unlikely slot (log10 -5: 11.5 nats) with bonus 8
    the word used to earn 8/8 a letter and was pruned up to beam 10; now it survives beam 6,
    with the result of an unbounded beam (the path's total is the same either way)."""
    g, words = _slot_graph(tmp_path, seed, unk=False, oov_logprob=-5)
    oov = next(w for w in ("decade", "accede", "ebbed") if w not in words)
    lp, lengths = _spoken(g, f"{words[0]} {oov} {words[1]}")
    narrow = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=6.0), {oov: 8.0})[0][0]
    unbounded = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=math.inf), {oov: 8.0})[0][0]
    assert narrow.words == unbounded.words == (words[0], oov, words[1])
    assert narrow.score == unbounded.score


@pytest.mark.parametrize("seed", [0, 2, 3])
def test_a_phrase_ending_in_a_boosted_oov_word_does_not_lower_its_anticipation(tmp_path, seed):
    """Boosting "w0 oov" as well as "oov" used to lose the oov word at a beam that finds it
    with "oov" alone: from "w0 <oov>" on, the spelling anticipated only the longer phrase's
    whole bonus (1.0), not the word's own (8.0), whose match goes on along the failure link,
    so the path paid the slot's cost all but unboosted up to its ``</oov>``."""
    g, words = _slot_graph(tmp_path, seed, unk=False, oov_logprob=-5)
    oov = next(w for w in ("decade", "accede", "ebbed") if w not in words)
    lp, lengths = _spoken(g, f"{words[0]} {oov} {words[1]}")
    boosts = {oov: 8.0, f"{words[0]} {oov}": 0.5}
    narrow = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=6.0), boosts)[0][0]
    unbounded = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=math.inf), boosts)[0][0]
    assert narrow.words == unbounded.words == (words[0], oov, words[1])
    assert narrow.score == unbounded.score
    # the automaton: inside the spelling, at least what the word alone anticipates there
    speller = OovSpeller(g)
    (resolved,) = resolve_boosts(boosts, 1, g.words, speller)
    both = PhraseAutomaton(resolved, OovSlot.of(g).open)
    alone = PhraseAutomaton({k: v for k, v in resolved.items() if len(k) == len(oov) + 2},
                            OovSlot.of(g).open)  # fmt: skip
    (labels,) = (k for k in resolved if len(k) == len(oov) + 2)
    x, y = both.step(0, g.words.id(words[0]))[0], 0
    for w in labels[:-1]:
        (x, _), (y, _) = both.step(x, w), alone.step(y, w)
        assert both.phi[x] >= alone.phi[y]

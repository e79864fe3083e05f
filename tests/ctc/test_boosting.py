"""Per-utterance word boosting (Fig. 5): ambiguous boosted words win; absent boosted words at
moderate values barely move WER; unknown words warn."""

import numpy as np
import pytest

from wfstdecode.ctc import CtcBeamOptions, decode_ctc
from wfstdecode.testing import lexicon_graph, simulate_ctc, word_error_rate

BACKENDS = ["reference", "cpu"]
SPOKEN = ["cat", "dog", "hat", "pod"]
CONFUSABLE = ["cap", "cop", "hot", "pot", "dot", "top"]
UNRELATED = ["jump", "king", "bus", "wax"]
WORDS = SPOKEN + CONFUSABLE + UNRELATED


@pytest.fixture(scope="module")
def graph():
    return lexicon_graph(WORDS, word_cost=2.0)


def _ambiguous_cat(graph):
    tok = graph.tokens
    V = graph.num_tokens
    lp = np.full((1, 9, V), -12.0, np.float32)
    frames = ["<blk>", "c", "c", "<blk>", "a", "<blk>", None, None, "<blk>"]
    for t, c in enumerate(frames):
        if c is None:  # last letter: "p" slightly more likely than "t"
            lp[0, t, tok.id("p")] = np.log(0.52)
            lp[0, t, tok.id("t")] = np.log(0.47)
        else:
            lp[0, t, tok.id(c)] = 0.0
    return lp


@pytest.mark.parametrize("backend", BACKENDS)
def test_boosted_ambiguous_word_wins(graph, backend):
    lp = _ambiguous_cat(graph)
    opts = CtcBeamOptions(beam=10.0)
    (plain,) = decode_ctc(lp, None, graph, opts, backend=backend)[0]
    assert plain.words == ("cap",)
    (boosted,) = decode_ctc(lp, None, graph, opts, {"cat": 1.0}, backend=backend)[0]
    assert boosted.words == ("cat",)
    assert boosted.word_timestamps == ((1, 7),)
    # the bonus is part of the graph score
    assert boosted.graph_score == pytest.approx(-2.0 + 1.0)
    # boosting per utterance: the other utterance is unaffected
    both = decode_ctc(np.concatenate([lp, lp]), None, graph, opts, [{"cat": 1.0}, None],
                      backend=backend)  # fmt: skip
    assert [h[0].words for h in both] == [("cat",), ("cap",)]
    # a negative bonus (penalty) works the other way
    (pen,) = decode_ctc(lp, None, graph, opts, {"cap": -0.5}, backend=backend)[0]
    assert pen.words == ("cat",)


def test_boost_of_unknown_word_warns_listing_it(graph):
    lp = _ambiguous_cat(graph)
    with pytest.warns(UserWarning, match="kubernetes, zebra"):
        hyps = decode_ctc(lp, None, graph, boosts={"zebra": 3.0, "kubernetes": 2.0, "cat": 1.0})
    assert hyps[0][0].words == ("cat",)


def _corpus(graph, n=40, seed=0):
    rng = np.random.default_rng(seed)
    refs = [list(rng.choice(SPOKEN, size=int(rng.integers(1, 4)))) for _ in range(n)]
    tok = graph.tokens
    seqs = [[tok.id(c) for c in "".join(r)] for r in refs]
    confusions = {tok.id("t"): [tok.id("p")], tok.id("p"): [tok.id("t")],
                  tok.id("c"): [tok.id("h")], tok.id("o"): [tok.id("a")]}  # fmt: skip
    lp, lengths = simulate_ctc(seqs, graph.num_tokens, seed=seed, confusion_prob=0.25,
                               confusions=confusions, noise=1.0, peak=6.0)  # fmt: skip
    return refs, lp, lengths


def test_boosting_absent_words_barely_moves_wer_and_present_words_help(graph):
    refs, lp, lengths = _corpus(graph)
    opts = CtcBeamOptions(beam=12.0)
    absent = {w: 3.0 for w in UNRELATED}  # words never spoken ("inaccurate" boosting)
    present = {w: 3.0 for w in SPOKEN}  # "accurate" boosting

    def wer(boosts):
        hyps = decode_ctc(lp, lengths, graph, opts, boosts, backend="cpu")
        return word_error_rate(refs, [list(h[0].words) for h in hyps])

    base = wer(None)
    assert base > 0.05, "the corpus should have errors for boosting to fix"
    assert abs(wer(absent) - base) <= 0.05
    assert wer(present) < base

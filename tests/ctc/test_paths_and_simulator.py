"""Token collapse, timestamps and word spans; the emission simulator."""

import numpy as np
import pytest

from wfstdecode.ctc import CtcBeamOptions, decode_ctc
from wfstdecode.testing import lexicon_graph, simulate_ctc, word_error_rate

BACKENDS = ["reference", "cpu"]


def _frames(graph, labels):
    tok = graph.tokens
    lp = np.full((1, len(labels), graph.num_tokens), -15.0, np.float32)
    for t, c in enumerate(labels):
        lp[0, t, tok.id(c)] = 0.0
    return lp


@pytest.mark.parametrize("backend", BACKENDS)
def test_tokens_timestamps_and_word_spans(backend):
    g = lexicon_graph(["see", "sea", "a"])
    tok = g.tokens
    labels = ["<blk>", "s", "s", "e", "<blk>", "e", "e", "<blk>", "a", "<blk>", "<blk>"]
    (h,) = decode_ctc(_frames(g, labels), None, g, CtcBeamOptions(beam=20.0), backend=backend)[0]
    assert h.words == ("see", "a")
    assert h.tokens == tuple(tok.id(c) for c in "seea")
    assert h.timestamps == (1, 3, 5, 8)
    assert h.word_timestamps == ((1, 6), (8, 8))
    assert h.score == pytest.approx(h.acoustic_score + h.graph_score)


@pytest.mark.parametrize("backend", BACKENDS)
def test_repeat_without_blank_is_one_token(backend):
    g = lexicon_graph(["se", "see"])
    labels = ["s", "e", "e", "e", "<blk>"]
    (h,) = decode_ctc(_frames(g, labels), None, g, CtcBeamOptions(beam=20.0), backend=backend)[0]
    assert h.words == ("se",)
    assert len(h.tokens) == 2 and h.timestamps == (0, 1)


def test_simulator_is_seeded_and_peaky():
    seqs = [[1, 2, 2, 3], [4], []]
    a, la = simulate_ctc(seqs, 6, seed=7, confusion_prob=0.2, deletion_prob=0.1)
    b, lb = simulate_ctc(seqs, 6, seed=7, confusion_prob=0.2, deletion_prob=0.1)
    assert np.array_equal(a, b) and np.array_equal(la, lb)
    assert a.dtype == np.float32 and a.shape == (3, la.max(), 6)
    assert np.allclose(np.exp(a).sum(-1), 1.0, atol=1e-4)
    clean, lengths = simulate_ctc(seqs, 6, seed=1)
    greedy = clean[0, : lengths[0]].argmax(-1)
    collapsed = [int(x) for i, x in enumerate(greedy) if x and (i == 0 or greedy[i - 1] != x)]
    assert collapsed == [1, 2, 2, 3]  # a blank separates the repeated 2s
    assert lengths[2] >= 1 and (clean[2, : lengths[2]].argmax(-1) == 0).all()


def test_clean_simulation_decodes_to_the_reference():
    words = ["tap", "pat", "apt", "at", "pa"]
    g = lexicon_graph(words, word_cost=1.0)
    rng = np.random.default_rng(0)
    refs = [list(rng.choice(words, size=3)) for _ in range(10)]
    seqs = [[g.tokens.id(c) for c in "".join(r)] for r in refs]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=2, noise=0.5)
    hyps = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=12.0))
    # word boundaries are ambiguous for spellings alone ("at"+"pa" vs "a"...), tokens are not
    assert [list(h[0].tokens) for h in hyps] == seqs
    assert word_error_rate(refs, [list(h[0].words) for h in hyps]) < 0.5

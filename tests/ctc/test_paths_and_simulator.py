"""Token collapse, timestamps and word spans; the emission simulator."""

import numpy as np
import pytest

from wfstdecode.ctc import CtcBeamOptions, decode_ctc
from wfstdecode.testing import (
    lexicon_graph,
    random_graph,
    random_log_probs,
    simulate_ctc,
    word_error_rate,
)

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


@pytest.mark.parametrize("backend", BACKENDS)
def test_nbest_distinct_word_sequences_best_first(backend):
    # n-best comes from the surviving end tokens (one per state), so it needs several final
    # states: a lexicon loop with a single final root state yields one hypothesis.
    g = random_graph(11, num_states=20, final_prob=0.6)
    lp = random_log_probs(3, 2, 12, g.num_tokens)
    hyps = decode_ctc(lp, None, g, CtcBeamOptions(beam=12.0, nbest=5), backend=backend)
    best = decode_ctc(lp, None, g, CtcBeamOptions(beam=12.0), backend=backend)
    for h, b in zip(hyps, best, strict=True):
        assert 2 <= len(h) <= 5
        assert len({x.words for x in h}) == len(h)
        scores = [x.score for x in h]
        assert scores == sorted(scores, reverse=True)
        assert h[0] == b[0]


@pytest.mark.parametrize("seed", range(6))
def test_batched_hypothesis_building_equals_the_one_path_version(seed):
    from wfstdecode.ctc._paths import NOTE_NO_FINAL, to_hypotheses
    from wfstdecode.ctc.cpu import decode_cpu
    from wfstdecode.ctc.search import prepare_problem
    from wfstdecode.testing.paths import path_hypothesis

    if seed % 2:
        g = random_graph(seed, num_states=15, eps_arcs_per_state=1.0, final_prob=0.2)
        lp = random_log_probs(seed, 4, 10, g.num_tokens)
        lengths = np.array([10, 0, 3, 7])
        boosts = [{"w1": 1.0}, None, {"w2": 2.0, "w3": -1.0}, None]
    else:
        g = lexicon_graph(["see", "sea", "a", "sas"], word_cost=[1.0, 1.5, 0.5, 2.0])
        seqs = [[g.tokens.id(c) for c in w] for w in ("seea", "sas", "aseasee", "")]
        lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=seed, confusion_prob=0.3)
        boosts = [None, {"sas": 1.0}, None, {"a": 3.0}]
    p = prepare_problem(lp, lengths, g, CtcBeamOptions(beam=8.0, nbest=3), boosts)
    raw = decode_cpu(p)
    fast = to_hypotheses(p, raw)
    for b, r in enumerate(raw):
        final = not r.status & 1
        notes = () if final else (NOTE_NO_FINAL,)
        slow = [path_hypothesis(p, b, a, f, final, notes) for a, f, _ in r.paths]
        assert len(slow) == len(fast[b])
        for x, y in zip(slow, fast[b], strict=True):
            for field in ("tokens", "timestamps", "words", "word_ids", "word_timestamps", "notes"):
                assert getattr(x, field) == getattr(y, field), field
            for field in ("score", "acoustic_score", "graph_score"):
                assert getattr(x, field) == pytest.approx(getattr(y, field), abs=1e-9)

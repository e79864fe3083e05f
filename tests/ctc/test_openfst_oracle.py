"""With an unbounded beam the best path is OpenFst's shortest path of E ∘ G, where E is the
emission acceptor (one state per frame, an arc per token with cost -acoustic_scale * log_prob)."""

import math

import numpy as np
import pytest

from wfstdecode.ctc import CtcBeamOptions, decode_ctc
from wfstdecode.testing import lexicon_graph, random_graph, random_log_probs, simulate_ctc
from wfstdecode.testing.oracles import openfst_shortest_path, pynini_fst

pynini = pytest.importorskip("pynini")


def _shortest(lp, graph, scale):
    return openfst_shortest_path(lp, pynini_fst(graph.to_arrays()), scale)


WIDE = CtcBeamOptions(beam=math.inf, max_active=1_000_000)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("seed", range(10))
def test_unbounded_beam_equals_openfst_shortest_path_random(seed, backend):
    g = random_graph(seed, num_states=10 + seed, num_tokens=5, arcs_per_state=3)
    lp = random_log_probs(seed, 2, 9 + seed % 4, g.num_tokens, peaky=2.0)
    hyps = decode_ctc(lp, None, g, WIDE, backend=backend)
    for b in range(len(lp)):
        words, cost = _shortest(lp[b], g, 1.0)
        h = hyps[b][0]
        if words is None:
            assert h.notes, "OpenFst finds no path; the decoder must say it fell back"
            continue
        assert h.word_ids == words
        assert -h.score == pytest.approx(cost, rel=1e-5, abs=1e-4)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_unbounded_beam_equals_openfst_lexicon_graph(backend):
    words = ["cat", "cap", "act", "tact", "pat", "tapa"]
    g = lexicon_graph(words, word_cost=[1.0, 1.2, 2.0, 2.5, 1.1, 2.4])
    tok = g.tokens
    seqs = [[tok.id(c) for c in "".join(ws)] for ws in (["cat", "pat"], ["tapa", "act"])]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=1, confusion_prob=0.4, noise=2.0)
    scale = 0.8
    hyps = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=math.inf, acoustic_scale=scale),
                      backend=backend)  # fmt: skip
    for b in range(len(lp)):
        words_fst, cost = _shortest(lp[b, : lengths[b]], g, scale)
        assert hyps[b][0].word_ids == words_fst
        assert -hyps[b][0].score == pytest.approx(cost, rel=1e-5, abs=1e-4)


@pytest.fixture(scope="module")
def turtle_tlg():
    """TLG of turtle.arpa (a real trigram in ../shared/data), words spelled with characters."""
    from wfstdecode.graph import LexiconEntry, build_tlg, read_arpa
    from wfstdecode.symbols import SymbolTable
    from wfstdecode.testing.data import shared_file

    arpa = shared_file("turtle.arpa")
    tokens = SymbolTable.from_list(["<blk>", "'", *"abcdefghijklmnopqrstuvwxyz"])
    words = [w for w in read_arpa(arpa).vocabulary if w not in ("<s>", "</s>")]
    lexicon = [LexiconEntry(w, tuple(w)) for w in words]
    return {
        topo: build_tlg(tokens, lexicon, str(arpa), topology=topo).graph
        for topo in ("normal", "compact")
    }, words


@pytest.mark.parametrize("topology", ["normal", "compact"])
def test_unbounded_beam_equals_openfst_on_a_real_lm_tlg(turtle_tlg, topology):
    graphs, words = turtle_tlg
    g = graphs[topology]
    rng = np.random.default_rng(7)
    refs = [list(rng.choice(words, size=3)) for _ in range(4)]
    seqs = [[g.tokens.id(c) for c in "".join(r)] for r in refs]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=3, confusion_prob=0.2, noise=1.5)
    hyps = decode_ctc(lp, lengths, g, WIDE, backend="cpu")
    for b in range(len(lp)):
        words_fst, cost = _shortest(lp[b, : lengths[b]], g, 1.0)
        assert hyps[b][0].word_ids == words_fst
        assert -hyps[b][0].score == pytest.approx(cost, rel=1e-5, abs=1e-4)
    # and the reference backend agrees with the CPU backend on this TLG at a normal beam
    opts = CtcBeamOptions(beam=10.0, max_active=300)
    ref = decode_ctc(lp[:2], lengths[:2], g, opts, backend="reference")
    assert ref == decode_ctc(lp[:2], lengths[:2], g, opts, backend="cpu")

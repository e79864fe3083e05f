"""Against an independent implementation: kaldi-decoder's FasterDecoder on the same graph and
emissions (same beam, max_active, min_active, acoustic scale) gives the same best word sequence
for >= 99% of utterances. Also `decode_npz` on the shipped data."""

from pathlib import Path

import numpy as np
import pytest

from wfstdecode.ctc import CtcBeamOptions, decode_ctc, decode_npz
from wfstdecode.testing import lexicon_graph, simulate_ctc

kaldi_decoder = pytest.importorskip("kaldi_decoder")
kaldifst = pytest.importorskip("kaldifst")
from wfstdecode.testing.oracles import KaldiFasterDecoder  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "wfstdecode" / "data"


def kaldi_best_words(graph, log_probs, lengths, opts):
    dec = KaldiFasterDecoder(graph, opts.beam, opts.max_active, opts.min_active)
    out = []
    for b in range(len(log_probs)):
        path = dec.best_path(log_probs[b, : lengths[b]], opts.acoustic_scale)
        out.append(path[0] if path else None)
    return out


def _agreement(graph, lp, lengths, opts):
    ours = [h[0].word_ids for h in decode_ctc(lp, lengths, graph, opts, backend="cpu")]
    theirs = kaldi_best_words(graph, lp, lengths, opts)
    return sum(a == b for a, b in zip(ours, theirs, strict=True)) / len(lp)


def test_same_words_as_kaldi_faster_decoder_lexicon_graph():
    rng = np.random.default_rng(0)
    letters = list("abcdefghij")
    words = sorted({"".join(rng.choice(letters, size=int(rng.integers(2, 6)))) for _ in range(300)})
    g = lexicon_graph(words, word_cost=list(rng.uniform(2.0, 8.0, len(words))))
    refs = [list(rng.choice(words, size=6)) for _ in range(40)]
    seqs = [[g.tokens.id(c) for c in "".join(r)] for r in refs]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=1, confusion_prob=0.2, noise=1.5)
    for opts in (CtcBeamOptions(beam=10.0, max_active=1000), CtcBeamOptions(beam=14.0)):
        assert _agreement(g, lp, lengths, opts) >= 0.99


@pytest.fixture(scope="module")
def shipped_tlg():
    graph_mod = pytest.importorskip("wfstdecode.graph")
    from wfstdecode.symbols import SymbolTable

    if not (DATA / "lm.arpa.gz").is_file():
        pytest.skip("the shipped LM is missing")
    tokens = SymbolTable.read(DATA / "tokens.txt")
    lexicon = graph_mod.read_lexicon(DATA / "lexicon.txt", tokens)
    return graph_mod.build_tlg(
        tokens, lexicon, str(DATA / "lm.arpa.gz"), topology="compact", separator="|"
    ).graph


@pytest.mark.parametrize(
    "opts",
    [
        CtcBeamOptions(beam=8.0, max_active=5000),
        CtcBeamOptions(beam=12.0, max_active=500, acoustic_scale=1.5),
    ],
)
def test_same_words_as_kaldi_faster_decoder_shipped_tlg(shipped_tlg, opts):
    with np.load(DATA / "ocr_emissions.npz") as z:
        lp, lengths = z["log_probs"], z["lengths"]
    assert _agreement(shipped_tlg, lp, lengths, opts) >= 0.99


def test_decode_npz_on_shipped_data(shipped_tlg):
    res = decode_npz(DATA / "ocr_emissions.npz", shipped_tlg, CtcBeamOptions(beam=10.0))
    assert len(res.texts) == len(res.ids) == len(res.references) == 60
    assert res.wer is not None and res.greedy_wer is not None
    assert res.wer < res.greedy_wer  # the LM helps on these degraded lines

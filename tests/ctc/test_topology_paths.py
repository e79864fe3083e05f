"""Tokens and greedy baselines on graphs whose topology the code must not assume:

1. A ``minimal``-topology TLG read back with `DecodingGraph.from_openfst` (no metadata): a
   one-token word's self-loop was taken for a CTC repeat (the fix for graphs built here keys on
   ``metadata["topology"]``, which an OpenFst file lacks), so ``a b b`` lost its second ``b``.
   A CTC repeat never writes a word (T's repeat loop outputs epsilon), so a self-loop with an
   output label is a new token whatever the topology.
2. `decode_npz`'s greedy baseline ignored the graph: it merged repeats on a ``minimal`` graph
   (whose model emits every token for one frame) and did not know a separator other than ``|``.
"""

import numpy as np
import pytest

from wfstdecode import DecodingGraph, SymbolTable
from wfstdecode.ctc import CtcBeamOptions, decode_ctc, decode_npz
from wfstdecode.graph import build_tlg
from wfstdecode.graph.lexicon import LexiconEntry

ARPA = """\\data\\
ngram 1=4

\\1-grams:
-1.0 <s>
-0.5 </s>
-0.3 ab
-0.3 b

\\end\\
"""


def _frames(tokens, labels, width):
    lp = np.full((1, len(labels), width), -15.0, np.float32)
    for t, c in enumerate(labels):
        lp[0, t, tokens.id(c)] = 0.0
    return lp


TOKENS = SymbolTable.from_list(["<blk>", "a", "b"])
LEXICON = [LexiconEntry("ab", ("a", "b")), LexiconEntry("b", ("b",))]
A_B_B = ["a", "b", "b", "<blk>"]  # one token per frame: the only parse is "ab b"


def _minimal_graph(tmp_path, via_openfst: bool) -> DecodingGraph:
    """The minimal TLG of ``LEXICON``, as built, or written to OpenFst and read back (then it
    has no metadata: nothing says "minimal")."""
    (tmp_path / "lm.arpa").write_text(ARPA)
    built = build_tlg(TOKENS, LEXICON, str(tmp_path / "lm.arpa"), "minimal").graph
    if not via_openfst:
        return built
    built.to_openfst(tmp_path / "TLG.fst")
    return DecodingGraph.from_openfst(tmp_path / "TLG.fst", built.tokens, built.words)


@pytest.mark.parametrize("via_openfst", [False, True], ids=["built", "from-openfst"])
@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_a_minimal_graph_counts_every_token_frame(tmp_path, backend, via_openfst):
    """The minimal topology emits a token on every non-blank frame (``b b`` is two tokens); in
    its TLG a one-token word returning to its state is a self-loop, once taken for a CTC repeat:
    the second ``b`` vanished and ``ab`` started a frame late."""
    g = _minimal_graph(tmp_path, via_openfst)
    lp = _frames(TOKENS, A_B_B, g.num_tokens)
    (h,) = decode_ctc(lp, None, g, CtcBeamOptions(beam=20.0), backend=backend)[0]
    assert h.words == ("ab", "b")
    assert h.tokens == (TOKENS.id("a"), TOKENS.id("b"), TOKENS.id("b"))
    assert h.timestamps == (0, 1, 2)
    assert h.word_timestamps == ((0, 1), (2, 2))


def test_paths_oracle_agrees_on_a_minimal_graph_from_openfst(tmp_path):
    from wfstdecode.ctc.cpu import decode_cpu
    from wfstdecode.ctc.search import prepare_problem
    from wfstdecode.testing.paths import path_hypothesis

    g = _minimal_graph(tmp_path, via_openfst=True)
    p = prepare_problem(_frames(TOKENS, A_B_B, g.num_tokens), None, g,
                        CtcBeamOptions(beam=20.0), None)  # fmt: skip
    ((arcs, frames, _),) = decode_cpu(p)[0].paths
    assert path_hypothesis(p, 0, arcs, frames).tokens == (1, 2, 2)


def _npz(path, tokens, labels):
    lp = _frames(tokens, labels, len(tokens))
    np.savez(path, log_probs=lp, lengths=np.array([len(labels)]), ids=np.array(["u"]),
             tokens=np.array([s for s, _ in tokens]), texts=np.array(["placeholder"]))  # fmt: skip
    return path


def test_greedy_baseline_of_a_minimal_graph_keeps_every_token_frame(tmp_path):
    g = _minimal_graph(tmp_path, via_openfst=False)
    path = _npz(tmp_path / "e.npz", TOKENS, A_B_B)
    result = decode_npz(path, g, CtcBeamOptions(beam=20.0), backend="cpu")
    assert result.texts == ["ab b"]
    assert result.greedy_texts == ["abb"]  # every frame a token: a b b (was "ab")


def test_greedy_baseline_reads_the_graphs_separator(tmp_path):
    tokens = SymbolTable.from_list(["<blk>", "a", "b", "<wb>"])
    (tmp_path / "lm.arpa").write_text(ARPA)
    g = build_tlg(tokens, LEXICON, str(tmp_path / "lm.arpa"), separator="<wb>").graph
    path = _npz(tmp_path / "e.npz", tokens, ["a", "b", "<blk>", "<wb>", "b", "<blk>"])
    result = decode_npz(path, g, CtcBeamOptions(beam=20.0), backend="cpu")
    assert result.texts == ["ab b"]
    assert result.greedy_texts == ["ab b"]  # was "a b <wb> b"

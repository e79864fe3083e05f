"""The ``minimal`` CTC topology emits a token on every non-blank frame ("for models trained to
emit each token for exactly one frame": ``b b`` is two tokens). In its TLG a word that returns
to the state it left (a one-token word after a unigram loop) is a self-loop, and
`ctc._paths` took a self-loop reading the previous frame's label for a CTC repeat: the second
``b`` vanished from ``tokens``/``timestamps`` and the word times fell back to the output arcs
(``ab`` starting a frame late)."""

import numpy as np
import pytest

from wfstdecode import SymbolTable
from wfstdecode.ctc import CtcBeamOptions, decode_ctc
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


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_minimal_topology_counts_every_token_frame(tmp_path, backend):
    tokens = SymbolTable.from_list(["<blk>", "a", "b"])
    lexicon = [LexiconEntry("ab", ("a", "b")), LexiconEntry("b", ("b",))]
    (tmp_path / "lm.arpa").write_text(ARPA)
    g = build_tlg(tokens, lexicon, str(tmp_path / "lm.arpa"), "minimal").graph
    labels = ["a", "b", "b", "<blk>"]  # a b b: one token per frame, the only parse is "ab b"
    lp = np.full((1, len(labels), g.num_tokens), -15.0, np.float32)
    for t, c in enumerate(labels):
        lp[0, t, tokens.id(c)] = 0.0
    (h,) = decode_ctc(lp, None, g, CtcBeamOptions(beam=20.0), backend=backend)[0]
    assert h.words == ("ab", "b")
    assert h.tokens == (tokens.id("a"), tokens.id("b"), tokens.id("b"))
    assert h.timestamps == (0, 1, 2)
    assert h.word_timestamps == ((0, 1), (2, 2))

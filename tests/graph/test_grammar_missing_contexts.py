"""G keeps the probabilities of an ARPA whose pruning left gaps several orders deep, checked
against an independent backoff scorer (KenLM need not be installed)."""

import math

import pytest

from wfstdecode.graph import build_grammar, read_arpa
from wfstdecode.graph.grammar import LN10
from wfstdecode.symbols import SymbolTable
from wfstdecode.testing.lm import BackoffScorer

# "a b c a" is listed; its context "a b c" is not, nor is that one's context "a b"
_TWO_DEEP_GAP = """\\data\\
ngram 1=5
ngram 2=1
ngram 3=1
ngram 4=1

\\1-grams:
-1.0\t<s>\t-0.3
-0.7\t</s>
-0.8\ta\t-0.2
-0.9\tb\t-0.4
-1.1\tc\t-0.1

\\2-grams:
-0.5\t<s> a\t-0.25

\\3-grams:
-0.3\tb c a

\\4-grams:
-0.1\ta b c a
\\end\\
"""


def _ngrams(text):
    """{words: (log10 prob, log10 backoff)}, read without wfstdecode."""
    out, order = {}, 0
    for line in text.splitlines():
        line = line.strip()
        if line.endswith("-grams:"):
            order = int(line[1 : line.index("-")])
        elif line and order and not line.startswith("\\"):
            f = line.split()
            out[tuple(f[1 : order + 1])] = (
                float(f[0]),
                float(f[order + 1]) if len(f) > order + 1 else 0.0,
            )
    return out


def _cost(ngrams, order, sentence):
    """-ln P(<s> sentence </s>) by the backoff rule."""
    total, history = 0.0, ("<s>",)
    for w in [*sentence, "</s>"]:
        h = history[-(order - 1) :]
        while (*h, w) not in ngrams:
            total += ngrams.get(h, (0.0, 0.0))[1]
            h = h[1:]
        total += ngrams[(*h, w)][0]
        history = (*history, w)
    return -total * LN10


@pytest.mark.parametrize(
    "sentence", [["a", "b", "c", "a"], ["b", "c", "a"], ["a", "b", "c", "a"] * 2]
)
def test_an_n_gram_whose_context_and_its_context_are_missing_keeps_its_probability(
    tmp_path, sentence
):
    path = tmp_path / "lm.arpa"
    path.write_text(_TWO_DEEP_GAP)
    model = read_arpa(path)
    words = SymbolTable.from_list(["<eps>", "a", "b", "c", "#0", "<s>", "</s>"])
    scorer = BackoffScorer(build_grammar(model, words), words.id("#0"))
    expected = _cost(_ngrams(_TWO_DEEP_GAP), 4, sentence)
    assert math.isclose(scorer.cost([words.id(w) for w in sentence]), expected, abs_tol=1e-4)

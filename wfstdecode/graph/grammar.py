"""Grammar G from an ARPA n-gram model (plain text or gzip).

G follows Kaldi's arpa2fst construction: one state per history that has continuations; a word
arc from history ``h`` on ``w`` costs ``-ln P(w | h)`` and leads to the longest suffix of ``h w``
that is itself a history (adding the backoff weights of the n-grams skipped on the way, which is
exact because those have no continuations); ``</s>`` becomes the final cost of ``h``; a backoff
arc ``#0:<eps>`` from ``h`` to its longest proper suffix history costs ``-ln bo(h)``. The start
state is history ``<s>``. Read with failure (phi) semantics — take the word arc if present, else
back off — the cost of a sentence is exactly its ARPA log-probability.
"""

from __future__ import annotations

import gzip
import logging
import math
import os
import re
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputFileError
from ..fstio import FstArrays
from ..symbols import BACKOFF_DISAMBIG, SymbolTable

log = logging.getLogger(__name__)
LN10 = math.log(10.0)
BOS, EOS, UNK = "<s>", "</s>", "<unk>"
_COUNT_LINE = re.compile(r"^ngram\s+(\d+)\s*=\s*(\d+)$")
_SECTION = re.compile(r"^\\(\d+)-grams:$")


@dataclass
class ArpaModel:
    """N-grams by order: ``ngrams[n - 1][(w1, …, wn)] = (log10 prob, log10 backoff)``."""

    ngrams: list[dict[tuple[str, ...], tuple[float, float]]]
    path: str = ""
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def order(self) -> int:
        return len(self.ngrams)

    @property
    def vocabulary(self) -> list[str]:
        return [k[0] for k in self.ngrams[0]]

    def counts(self) -> list[int]:
        return [len(d) for d in self.ngrams]


def _open_text(path: str | os.PathLike):
    path = str(path)
    try:
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        if gz:
            return gzip.open(path, "rt", encoding="utf-8")
        return open(path, encoding="utf-8")
    except OSError as exc:
        raise InputFileError(path, None, f"cannot read: {exc}") from exc


def read_arpa(path: str | os.PathLike, vocabulary: set[str] | None = None) -> ArpaModel:
    """Parse an ARPA file. N-grams with words outside ``vocabulary`` (if given) are dropped and
    counted in ``ArpaModel.dropped``; malformed input raises `InputFileError` with the line."""
    declared: dict[int, int] = {}
    ngrams: list[dict] = []
    seen: list[int] = []
    section = None  # "data", an order n >= 1, or "end"
    dropped_words: dict[str, int] = {}
    line_no = 0
    try:
        with _open_text(path) as f:
            for line_no, raw in enumerate(f, 1):
                line = raw.strip()
                if not line:
                    continue
                if section is None:
                    if line == "\\data\\":
                        section = "data"
                    continue  # text before \data\ is a comment
                if line == "\\end\\":
                    section = "end"
                    break
                m = _SECTION.match(line)
                if m:
                    order = int(m.group(1))
                    if order != len(ngrams) + 1 or order not in declared:
                        raise InputFileError(path, line_no, f"unexpected section {line!r}")
                    ngrams.append({})
                    seen.append(0)
                    section = order
                    continue
                if section == "data":
                    m = _COUNT_LINE.match(line)
                    if not m:
                        raise InputFileError(
                            path, line_no, f"expected 'ngram N=count'; got {line!r}"
                        )
                    declared[int(m.group(1))] = int(m.group(2))
                    continue
                _add_ngram(path, line_no, line, section, ngrams, seen, vocabulary, dropped_words)
    except UnicodeDecodeError as exc:
        raise InputFileError(path, line_no + 1, f"not UTF-8 text: {exc}") from None
    except (OSError, EOFError) as exc:
        raise InputFileError(path, line_no, f"read error: {exc}") from None
    if section is None:
        raise InputFileError(path, None, "no \\data\\ section: not an ARPA file")
    if section != "end":
        raise InputFileError(path, line_no, "missing \\end\\ (file truncated?)")
    if sorted(declared) != list(range(1, len(declared) + 1)) or len(ngrams) != len(declared):
        raise InputFileError(path, None, f"\\data\\ declares orders {sorted(declared)} but "
                             f"{len(ngrams)} n-gram sections are present")  # fmt: skip
    for n, count in enumerate(seen, 1):
        if count != declared[n]:
            raise InputFileError(path, None, f"\\data\\ declares ngram {n}={declared[n]} but "
                                 f"the file holds {count} {n}-grams")  # fmt: skip
    if (BOS,) not in ngrams[0]:
        raise InputFileError(path, None, "the model has no <s> unigram")
    return ArpaModel(ngrams, str(path), dropped_words)


def read_arpa_vocabulary(path: str | os.PathLike) -> list[str]:
    """The words of an ARPA file's unigram section, in file order (reads no further)."""
    return [word for word, _ in read_arpa_unigrams(path)]


def read_arpa_unigrams(path: str | os.PathLike) -> list[tuple[str, float]]:
    """``(word, log10 probability)`` of an ARPA file's unigram section, in file order (reads no
    further)."""
    unigrams, in_unigrams = [], False
    with _open_text(path) as f:
        for line_no, raw in enumerate(f, 1):
            line = raw.strip()
            if line == "\\1-grams:":
                in_unigrams = True
            elif in_unigrams and line.startswith("\\"):
                return unigrams
            elif in_unigrams and line:
                fields = line.split()
                if len(fields) not in (2, 3):
                    raise InputFileError(
                        path, line_no, f"a 1-gram line needs 2 or 3 fields; got {line!r}"
                    )
                try:
                    unigrams.append((fields[1], float(fields[0])))
                except ValueError:
                    raise InputFileError(
                        path, line_no, f"not a log10 probability: {fields[0]!r}"
                    ) from None
    raise InputFileError(path, None, "no complete \\1-grams: section: not an ARPA file")


def _add_ngram(path, line_no, line, order, ngrams, seen, vocabulary, dropped_words) -> None:
    fields = line.split()
    if len(fields) not in (order + 1, order + 2):
        raise InputFileError(path, line_no, f"a {order}-gram line needs {order + 1} or "
                             f"{order + 2} fields; got {line!r}")  # fmt: skip
    try:
        logprob = float(fields[0])
        backoff = float(fields[order + 1]) if len(fields) == order + 2 else 0.0
    except ValueError:
        raise InputFileError(path, line_no, f"bad number in {line!r}") from None
    if not (math.isfinite(logprob) and math.isfinite(backoff)) or logprob > 0:
        raise InputFileError(path, line_no, f"log10 probability must be finite and <= 0: {line!r}")
    seen[order - 1] += 1
    words = tuple(fields[1 : order + 1])
    if vocabulary is not None:
        oov = [w for w in words if w not in vocabulary and w not in (BOS, EOS)]
        if oov:
            for w in set(oov):  # counts the n-grams each word removed
                dropped_words[w] = dropped_words.get(w, 0) + 1
            return
    ngrams[order - 1][words] = (logprob, backoff)


def build_grammar(model: ArpaModel, words: SymbolTable) -> FstArrays:
    """Build G over word ids of ``words`` (which must hold every word of the model, ``#0``,
    ``<s>`` and ``</s>``). Input ``#0`` on backoff arcs, output epsilon; other arcs are w:w."""
    order = model.order
    histories: set[tuple[str, ...]] = {()}
    for n in range(2, order + 1):
        histories.update(k[:-1] for k in model.ngrams[n - 1])
    histories = {h for h in histories if EOS not in h and BOS not in h[1:]}
    state_of = {h: i for i, h in enumerate(sorted(histories, key=lambda h: (len(h), h)))}
    backoff = {}
    for d in model.ngrams:
        for k, (_, bo) in d.items():
            if bo:
                backoff[k] = bo

    def landing(context: tuple[str, ...]) -> tuple[int, float]:
        """State for ``context``: its longest history suffix, plus backoff costs skipped."""
        context = context[-(order - 1) :] if order > 1 else ()
        cost = 0.0
        while context not in state_of:
            cost += -backoff.get(context, 0.0) * LN10
            context = context[1:]
        return state_of[context], cost

    final = np.full(len(state_of), np.inf, np.float32)
    src, dst, lab, weight = [], [], [], []
    skipped = 0
    for d in model.ngrams:
        for key, (logprob, _) in d.items():
            h, w = key[:-1], key[-1]
            if h not in state_of or w == BOS:
                skipped += w != BOS  # an n-gram whose history is not a context (e.g. after </s>)
                continue
            cost = -logprob * LN10
            if w == EOS:
                final[state_of[h]] = cost
                continue
            target, extra = landing(key)
            src.append(state_of[h])
            dst.append(target)
            lab.append(words.id(w))
            weight.append(cost + extra)
    n_word_arcs = len(src)
    backoff_label = words.id(BACKOFF_DISAMBIG)
    for h, s in state_of.items():
        if h:
            target, extra = landing(h[1:])
            src.append(s)
            dst.append(target)
            lab.append(backoff_label)
            weight.append(-backoff.get(h, 0.0) * LN10 + extra)
    if skipped:
        log.warning("G: skipped %d n-grams whose history cannot occur", skipped)
    olabel = np.array(lab, np.int32)
    olabel[n_word_arcs:] = 0
    start = state_of.get((BOS,), state_of[()])
    return FstArrays(start, final, src, dst, lab, olabel, weight)

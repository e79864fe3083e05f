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

import logging
import math
import os
import re
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from ..errors import InputFileError
from ..fstio import FstArrays
from ..symbols import BACKOFF_DISAMBIG, EPSILON, SymbolTable, is_disambig
from ..textfiles import is_float, quoted, text_lines

log = logging.getLogger(__name__)
LN10 = math.log(10.0)
BOS, EOS, UNK = "<s>", "</s>", "<unk>"
# Digit counts are bounded: int() refuses more than 4,300 digits, and no model needs more.
_COUNT_LINE = re.compile(r"ngram\s+([0-9]{1,9})\s*=\s*([0-9]{1,15})", re.ASCII)
_SECTION = re.compile(r"\\([0-9]+)-grams:", re.ASCII)
# ARPA fields are separated by spaces and tabs only (KenLM's, SRILM's, Kaldi's readers): a
# no-break or ideographic space is part of a word, as str.split would not have it
_FIELDS = re.compile(r"[ \t]+")
_BLANKS = " \t\r\n"


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

    def restricted(self, vocabulary: set[str]) -> ArpaModel:
        """The model without the n-grams that have a word outside ``vocabulary`` (``<s>`` and
        ``</s>`` always in), counted in ``dropped`` as `read_arpa` does (it is left as it is)."""
        dropped = dict(self.dropped)
        kept: list[dict[tuple[str, ...], tuple[float, float]]] = []
        for level in self.ngrams:
            kept.append({})
            for words, value in level.items():
                oov = {w for w in words if w not in vocabulary and w not in (BOS, EOS)}
                for w in oov:
                    dropped[w] = dropped.get(w, 0) + 1
                if not oov:
                    kept[-1][words] = value
        return ArpaModel(kept, self.path, dropped)


def read_arpa(path: str | os.PathLike, vocabulary: set[str] | None = None) -> ArpaModel:
    """Parse an ARPA file (plain or gzip, UTF-8). N-grams with words outside ``vocabulary`` (if
    given) are dropped and counted in ``ArpaModel.dropped``; malformed input raises
    `InputFileError` naming the line."""
    declared: dict[int, tuple[int, int]] = {}  # order -> (count, line of "ngram order=count")
    ngrams: list[dict[tuple[str, ...], tuple[float, float]]] = []
    seen: list[int] = []  # lines per section, dropped n-grams included, to check the counts
    section = None  # "data", an order n >= 1, or "end"
    data_line = 0
    dropped_words: dict[str, int] = {}
    duplicates, first_duplicate = 0, 0
    top_backoffs, first_top_backoff = 0, 0
    line_no = 0
    end_line = 0
    for line_no, raw in text_lines(path, "ARPA file"):
        line = raw.strip(_BLANKS)
        if not line:
            continue
        if section == "end":  # a second model joined on (`cat a.arpa b.arpa`), or damage
            raise InputFileError(path, line_no, f"text after \\end\\ (line {end_line}): "
                                 f"{quoted(line[:60])}")  # fmt: skip
        if section is None:
            if line == "\\data\\":
                section, data_line = "data", line_no
            continue  # text before \data\ is a comment
        if line == "\\end\\":
            section, end_line = "end", line_no
            continue
        m = _SECTION.fullmatch(line)
        if m:
            order = int(m.group(1)) if len(m.group(1)) <= 9 else 0  # 0: unexpected anyway
            if order != len(ngrams) + 1 or order not in declared:
                expected = (
                    f"\\{len(ngrams) + 1}-grams:" if len(ngrams) + 1 in declared else "\\end\\"
                )
                raise InputFileError(
                    path, line_no, f"unexpected section {quoted(line)}: expected {expected}"
                )
            ngrams.append({})
            seen.append(0)
            section = order
            continue
        if section == "data":
            m = _COUNT_LINE.fullmatch(line)
            if not m:
                raise InputFileError(path, line_no, f"expected 'ngram N=count'; got {quoted(line)}")
            order = int(m.group(1))
            if order in declared:
                raise InputFileError(path, line_no, f"second count for {order}-grams")
            declared[order] = (int(m.group(2)), line_no)
            continue
        words, value = _parse_ngram(path, line_no, line, section)
        seen[-1] += 1
        if value[1] and section == len(declared):  # nothing backs off from the longest
            top_backoffs, first_top_backoff = top_backoffs + 1, first_top_backoff or line_no
        if vocabulary is not None:
            oov = {w for w in words if w not in vocabulary and w not in (BOS, EOS)}
            if oov:
                for w in oov:  # counts the n-grams each word removed
                    dropped_words[w] = dropped_words.get(w, 0) + 1
                continue
        # A repeated n-gram: no ARPA writer emits one, so the file was edited or merged by hand.
        # With other values the model is undefined (Kaldi's arpa2fst keeps both as parallel arcs,
        # so the cheaper wins; other readers keep the last): refuse it. An identical repeat changes
        # nothing: keep one, and warn once with the count and the first line.
        level = ngrams[-1]
        size = len(level)
        if level.setdefault(words, value) != value:
            raise InputFileError(
                path,
                line_no,
                f"{section}-gram {quoted(' '.join(words))} appears again with other values "
                f"(log10 prob, backoff) {value}; the first had {level[words]}",
            )
        if len(level) == size:
            duplicates += 1
            first_duplicate = first_duplicate or line_no
    if section is None:
        reason = "the file is empty" if line_no == 0 else "no \\data\\ section"
        raise InputFileError(path, None, f"{reason}: not an ARPA file")
    if section != "end":
        raise InputFileError(path, line_no, "missing \\end\\ (file truncated?)")
    if not declared:
        raise InputFileError(path, data_line, "the \\data\\ section declares no n-gram counts")
    if len(ngrams) != len(declared):
        raise InputFileError(
            path, line_no, f"\\data\\ declares orders {sorted(declared)} but the file has no "
            f"\\{len(ngrams) + 1}-grams: section",
        )  # fmt: skip
    repeats = (
        f"{duplicates} n-gram line(s) repeat an earlier identical line (the first is line "
        f"{first_duplicate})" if duplicates else ""
    )  # fmt: skip
    for n, count in enumerate(seen, 1):
        declared_count, declared_on = declared[n]
        if count != declared_count:
            raise InputFileError(
                path, None, f"line {declared_on} declares ngram {n}={declared_count} but the "
                f"\\{n}-grams: section holds {count}" + (f"; {repeats}" if repeats else ""),
            )  # fmt: skip
    if repeats:
        log.warning("%s: %s; each n-gram is kept once", path, repeats)
    if top_backoffs:  # KenLM refuses such a file; the weights have no meaning, so: said, ignored
        log.warning("%s: %d highest-order n-grams carry a backoff weight (the first on line "
                    "%d); nothing backs off from them, so they are ignored", path, top_backoffs,
                    first_top_backoff)  # fmt: skip
    for word in (BOS, EOS):
        if (word,) not in ngrams[0]:
            raise InputFileError(path, None, f"the model has no {word} unigram")
    _check_words_listed(path, ngrams)
    added = _add_missing_contexts(ngrams)
    if added:
        log.warning("%s: %d contexts of listed n-grams are not listed themselves; added with "
                    "their backed-off probabilities, as KenLM does", path, added)  # fmt: skip
    return ArpaModel(ngrams, str(path), dropped_words)


def _add_missing_contexts(ngrams: list[dict]) -> int:
    """Add each missing context of a listed n-gram (``a b`` of ``a b c``, as pruning leaves
    them) with its backed-off log10 probability and no backoff weight, as KenLM does: the
    model's probabilities stay the same, and G gets the state that the n-gram's arcs leave from
    and an arc into it. Longest first, so that a context added is itself checked (``a b`` of an
    added ``a b c``: without it the state ``a b c`` would be unreachable, and ``a b c d`` never
    used). Returns how many were added."""
    added = 0
    for n in range(len(ngrams) - 1, 1, -1):  # contexts of the (n + 1)-grams are n-grams
        listed, longer = ngrams[n - 1], ngrams[n]
        for key in longer:
            context = key[:-1]
            if context not in listed:
                logprob = _backed_off(ngrams, context[:-1], context[-1])
                if logprob is not None:
                    listed[context] = (logprob, 0.0)
                    added += 1
    return added


def _backed_off(ngrams: list[dict], history: tuple[str, ...], word: str) -> float | None:
    """log10 P(``word`` | ``history``) by the model's backoff rule; None for a word that is
    not a unigram."""
    total = 0.0
    while True:
        entry = ngrams[len(history)].get((*history, word))
        if entry is not None:
            return total + entry[0]
        if not history:
            return None
        context = ngrams[len(history) - 1].get(history)
        total += context[1] if context is not None else 0.0
        history = history[1:]


def _check_words_listed(path, ngrams) -> None:
    """Every word of an n-gram is a unigram, as KenLM requires (what would it back off to?).
    One C-level pass a section; the line is looked up only for a file that fails."""
    listed = {w for (w,) in ngrams[0]}
    for order, level in enumerate(ngrams[1:], 2):
        if not listed.issuperset(chain.from_iterable(level)):
            words = next(k for k in level if not listed.issuperset(k))
            word = next(w for w in words if w not in listed)
            raise InputFileError(path, _line_of(path, order, words), f"{order}-gram "
                                 f"{quoted(' '.join(words))} has the word {quoted(word)}, "
                                 "which no 1-gram lists")  # fmt: skip


def _line_of(path, order: int, words: tuple[str, ...]) -> int | None:
    """The line of ``words``' n-gram in the file."""
    header, inside = f"\\{order}-grams:", False
    for line_no, raw in text_lines(path, "ARPA file"):
        line = raw.strip(_BLANKS)
        if line == header:
            inside = True
        elif inside and line.startswith("\\"):
            return None
        elif inside and line and _parse_ngram(path, line_no, line, order)[0] == words:
            return line_no
    return None


def read_arpa_vocabulary(path: str | os.PathLike) -> list[str]:
    """The words of an ARPA file's unigram section, in file order (reads no further)."""
    return [word for word, _ in read_arpa_unigrams(path)]


def read_arpa_unigrams(path: str | os.PathLike) -> list[tuple[str, float]]:
    """``(word, log10 probability)`` of an ARPA file's unigram section, in file order (reads no
    further)."""
    unigrams, in_unigrams = [], False
    for line_no, raw in text_lines(path, "ARPA file"):
        line = raw.strip(_BLANKS)
        if line == "\\1-grams:":
            in_unigrams = True
        elif in_unigrams and line.startswith("\\"):
            return unigrams
        elif in_unigrams and line:
            (word,), (logprob, _) = _parse_ngram(path, line_no, line, 1)
            unigrams.append((word, logprob))
    raise InputFileError(path, None, "no complete \\1-grams: section: not an ARPA file")


def _parse_ngram(
    path, line_no: int, line: str, order: int
) -> tuple[tuple[str, ...], tuple[float, float]]:
    """``(words, (log10 prob, log10 backoff))`` of an n-gram line; the backoff defaults to 0."""
    # (str.split is faster and splits an ASCII line the same, but for control characters no
    # model has in a word; beyond ASCII it would split at no-break spaces too)
    fields = line.split() if line.isascii() else _FIELDS.split(line)
    if len(fields) not in (order + 1, order + 2):
        raise InputFileError(path, line_no, f"a {order}-gram line needs {order + 1} or "
                             f"{order + 2} fields; got {quoted(line)}")  # fmt: skip
    numbers = (fields[0], fields[order + 1]) if len(fields) == order + 2 else (fields[0],)
    bad = next((x for x in numbers if not is_float(x)), None)
    if bad is not None:
        raise InputFileError(path, line_no, f"bad number {quoted(bad)} in {quoted(line)}")
    logprob = float(fields[0])
    backoff = float(fields[order + 1]) if len(fields) == order + 2 else 0.0
    if not math.isfinite(logprob) or logprob > 0:
        raise InputFileError(
            path, line_no, f"log10 probability must be finite and <= 0: {quoted(line)}"
        )
    if not math.isfinite(backoff):
        raise InputFileError(path, line_no, f"log10 backoff weight must be finite: {quoted(line)}")
    words = tuple(fields[1 : order + 1])
    if order == 1 and (words[0] == EPSILON or is_disambig(words[0])):
        raise InputFileError(path, line_no, f"{quoted(words[0])} is reserved (the epsilon or a "
                             "disambiguation symbol) and cannot be an LM word")  # fmt: skip
    return words, (logprob, backoff)


def build_grammar(model: ArpaModel, words: SymbolTable) -> FstArrays:
    """Build G over word ids of ``words`` (which must hold every word of the model, ``#0``,
    ``<s>`` and ``</s>``). Input ``#0`` on backoff arcs, output epsilon; other arcs are w:w."""
    order = model.order
    histories: set[tuple[str, ...]] = {()}
    for n in range(2, order + 1):
        histories.update(k[:-1] for k in model.ngrams[n - 1])
    histories = {h for h in histories if EOS not in h and BOS not in h[1:]}
    if order > 1:  # the start, whatever follows <s>: its backoff weight is charged from it
        histories.add((BOS,))
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
    skipped = inner_bos = 0
    for d in model.ngrams:
        for key, (logprob, _) in d.items():
            h, w = key[:-1], key[-1]
            if h not in state_of or w == BOS:
                skipped += w != BOS  # an n-gram whose history is not a context (e.g. after </s>)
                inner_bos += w == BOS and bool(h)  # (the unigram <s> is every ARPA's; no word)
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
    if inner_bos:
        log.warning("G: skipped %d n-grams that predict <s> after a word: <s> only starts a "
                    "sentence", inner_bos)  # fmt: skip
    olabel = np.array(lab, np.int32)
    olabel[n_word_arcs:] = 0
    start = state_of[(BOS,)] if order > 1 else state_of[()]
    return FstArrays(start, final, src, dst, lab, olabel, weight)

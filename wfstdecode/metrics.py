"""Error rates of transcripts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit


def edit_distance(ref: Sequence, hyp: Sequence) -> int:
    """Levenshtein distance between two sequences (substitutions, insertions, deletions) of any
    hashable items: numbered, then compared by a compiled loop (MBR compares every pair of its
    candidates, and a long utterance has thousands of words)."""
    number: dict = {}
    a = np.array([number.setdefault(x, len(number)) for x in ref], np.int64)
    b = np.array([number.setdefault(x, len(number)) for x in hyp], np.int64)
    return int(_levenshtein(a, b))


@njit(nogil=True, cache=True)
def _levenshtein(ref, hyp):
    prev = np.arange(hyp.shape[0] + 1)
    cur = np.empty_like(prev)
    for i in range(ref.shape[0]):
        cur[0] = i + 1
        for j in range(hyp.shape[0]):
            cur[j + 1] = min(prev[j + 1] + 1, cur[j] + 1, prev[j] + (ref[i] != hyp[j]))
        prev, cur = cur, prev
    return prev[hyp.shape[0]]


def alignment(ref: Sequence, hyp: Sequence) -> list[tuple]:
    """One minimum-edit alignment of ``hyp`` to ``ref``: ``(ref item, hyp item)`` pairs, ``None``
    on the side an insertion or deletion lacks. Of equal-cost alignments, the backtrace takes a
    match or substitution first, then a deletion."""
    n, m = len(ref), len(hyp)
    d = [list(range(m + 1))] + [[i] + [0] * m for i in range(1, n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]))  # fmt: skip
    pairs, i, j = [], n, m
    while i or j:
        if i and j and d[i][j] == d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]):
            pairs.append((ref[i - 1], hyp[j - 1]))
            i, j = i - 1, j - 1
        elif i and d[i][j] == d[i - 1][j] + 1:
            pairs.append((ref[i - 1], None))
            i -= 1
        else:
            pairs.append((None, hyp[j - 1]))
            j -= 1
    return pairs[::-1]


def word_error_rate(refs: Sequence[Sequence[str]], hyps: Sequence[Sequence[str]]) -> float:
    """Corpus WER: total edit distance over total reference words (over 1 when there are none:
    callers that report a rate check for reference words first). Each reference and hypothesis
    is a sequence of words; a string is refused (it would be scored character by character)."""
    if any(isinstance(x, str) for x in (*refs, *hyps)):
        raise TypeError("word_error_rate takes word lists (e.g. text.split()), not strings")
    errors = sum(edit_distance(r, h) for r, h in zip(refs, hyps, strict=True))
    return errors / max(1, sum(len(r) for r in refs))


@dataclass(frozen=True)
class ErrorCounts:
    """Word errors of a set of hypotheses against their references, as Kaldi's compute-wer
    counts them (one minimum-edit alignment per utterance)."""

    words: int  # reference words
    insertions: int
    deletions: int
    substitutions: int

    @property
    def errors(self) -> int:
        return self.insertions + self.deletions + self.substitutions

    @property
    def wer(self) -> float:
        """Errors over reference words (over 1 when there are none)."""
        return self.errors / max(1, self.words)

    def kaldi(self) -> str:
        """compute-wer's line: ``%WER 12.50 [ 5 / 40, 1 ins, 2 del, 2 sub ]``."""
        counts = f"{self.insertions} ins, {self.deletions} del, {self.substitutions} sub"
        return f"%WER {100 * self.wer:.2f} [ {self.errors} / {self.words}, {counts} ]"


def error_counts(refs: Sequence[Sequence[str]], hyps: Sequence[Sequence[str]]) -> ErrorCounts:
    """`ErrorCounts` of word lists (`word_error_rate`'s; its rate is theirs): insertions,
    deletions and substitutions of one minimum-edit alignment per pair, taken as `alignment`
    takes it (a match or substitution first, then a deletion), compiled."""
    if any(isinstance(x, str) for x in (*refs, *hyps)):
        raise TypeError("error_counts takes word lists (e.g. text.split()), not strings")
    totals = np.zeros(3, np.int64)
    for ref, hyp in zip(refs, hyps, strict=True):
        number: dict = {}
        a = np.array([number.setdefault(x, len(number)) for x in ref], np.int64)
        b = np.array([number.setdefault(x, len(number)) for x in hyp], np.int64)
        totals += _edit_counts(a, b)
    ins, dels, subs = totals.tolist()
    return ErrorCounts(sum(len(r) for r in refs), ins, dels, subs)


@njit(nogil=True, cache=True)
def _edit_counts(ref, hyp):
    """``[insertions, deletions, substitutions]`` of `alignment`'s backtrace."""
    n, m = ref.shape[0], hyp.shape[0]
    d = np.empty((n + 1, m + 1), np.int64)
    for j in range(m + 1):
        d[0, j] = j
    for i in range(1, n + 1):
        d[i, 0] = i
        for j in range(1, m + 1):
            d[i, j] = min(d[i - 1, j] + 1, d[i, j - 1] + 1,
                          d[i - 1, j - 1] + (ref[i - 1] != hyp[j - 1]))  # fmt: skip
    out = np.zeros(3, np.int64)
    i, j = n, m
    while i or j:
        if i and j and d[i, j] == d[i - 1, j - 1] + (ref[i - 1] != hyp[j - 1]):
            out[2] += ref[i - 1] != hyp[j - 1]
            i, j = i - 1, j - 1
        elif i and d[i, j] == d[i - 1, j] + 1:
            out[1] += 1
            i -= 1
        else:
            out[0] += 1
            j -= 1
    return out

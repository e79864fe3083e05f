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
        """compute-wer's line: ``%WER 12.50 [ 5 / 40, 1 ins, 2 del, 2 sub ]``, its rate rounded
        as compute-wer rounds it: a float32 percentage (BaseFloat), so 1074 errors of 1541
        words print 69.69, where the rate in double (69.6950…) would print 69.70."""
        f32 = np.float32
        percent = float(f32(100.0 * float(f32(self.errors)) / float(f32(max(1, self.words)))))
        counts = f"{self.insertions} ins, {self.deletions} del, {self.substitutions} sub"
        return f"%WER {percent:.2f} [ {self.errors} / {self.words}, {counts} ]"


def error_counts(refs: Sequence[Sequence[str]], hyps: Sequence[Sequence[str]]) -> ErrorCounts:
    """`ErrorCounts` of word lists (`word_error_rate`'s; its rate is theirs): insertions,
    deletions and substitutions of one minimum-edit alignment per pair, split as Kaldi's
    compute-wer splits them (`_edit_counts`; not always `alignment`'s split), compiled."""
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
    """``[insertions, deletions, substitutions]`` as Kaldi's ``LevenshteinEditDistance`` (what
    compute-wer prints) counts them: a forward pass over the hypothesis that carries each
    cell's counts, taking a match or substitution only when strictly cheaper than both
    others, then a deletion when strictly cheaper than an insertion. Of equal-cost splits it
    may take another than `alignment`'s backtrace (ref ``a b b a``, hyp ``a c b b``: 1 ins
    1 del, not 2 sub). Two rows of (cost, ins, del, sub): memory linear in the reference."""
    n, m = ref.shape[0], hyp.shape[0]
    prev = np.zeros((n + 1, 4), np.int64)  # per reference prefix: cost, ins, del, sub
    cur = np.zeros((n + 1, 4), np.int64)
    for i in range(n + 1):
        prev[i, 0] = prev[i, 2] = i
    for j in range(m):
        cur[0, :] = prev[0, :]
        cur[0, 0] += 1
        cur[0, 1] += 1
        for i in range(1, n + 1):
            differ = ref[i - 1] != hyp[j]
            ins, dels, sub = prev[i, 0] + 1, cur[i - 1, 0] + 1, prev[i - 1, 0] + differ
            if sub < ins and sub < dels:
                cur[i, :] = prev[i - 1, :]
                cur[i, 0] = sub
                cur[i, 3] += differ
            elif dels < ins:
                cur[i, :] = cur[i - 1, :]
                cur[i, 0] = dels
                cur[i, 2] += 1
            else:
                cur[i, :] = prev[i, :]
                cur[i, 0] = ins
                cur[i, 1] += 1
        prev, cur = cur, prev
    return prev[n, 1:].copy()

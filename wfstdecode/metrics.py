"""Error rates of transcripts."""

from __future__ import annotations

from collections.abc import Sequence

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

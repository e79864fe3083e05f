"""Error rates of transcripts."""

from __future__ import annotations

from collections.abc import Sequence


def edit_distance(ref: Sequence, hyp: Sequence) -> int:
    """Levenshtein distance between two sequences (substitutions, insertions, deletions)."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i]
        for j, h in enumerate(hyp, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h)))
        prev = cur
    return prev[-1]


def word_error_rate(refs: Sequence[Sequence[str]], hyps: Sequence[Sequence[str]]) -> float:
    """Corpus WER: total edit distance over total reference words."""
    errors = sum(edit_distance(r, h) for r, h in zip(refs, hyps, strict=True))
    return errors / max(1, sum(len(r) for r in refs))

"""Small random language models and lexicons for graph-building tests.

The ARPA files are structurally valid (prefix-closed n-gram sets, backoff weights on every
history) but their probabilities are random: enough to test that G encodes whatever an ARPA file
says, not a trained model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..fstio import FstArrays


def random_arpa(
    words: Sequence[str], order: int = 3, seed: int = 0, density: float = 0.5,
    unk: bool = False,
) -> str:  # fmt: skip
    """ARPA text over ``words`` (plus ``<s>``, ``</s>``), each higher-order n-gram kept with
    probability ``density`` when its prefix and suffix are present."""
    rng = np.random.default_rng(seed)
    vocab = ["<s>", "</s>", *words, *(["<unk>"] if unk else [])]
    grams: list[list[tuple[str, ...]]] = [[(w,) for w in vocab]]
    for _ in range(2, order + 1):
        prev = set(grams[-1])
        cand = [
            (*h, w)
            for h in grams[-1]
            if h[-1] != "</s>"
            for w in vocab
            if w != "<s>" and (*h[1:], w) in prev
        ]
        keep = rng.random(len(cand)) < density
        grams.append([g for g, k in zip(cand, keep, strict=True) if k and "<s>" not in g[1:]])
    histories = {g[:-1] for level in grams[1:] for g in level}
    lines = ["\\data\\", *(f"ngram {n}={len(level)}" for n, level in enumerate(grams, 1)), ""]
    for n, level in enumerate(grams, 1):
        lines.append(f"\\{n}-grams:")
        for g in level:
            logprob = -99.0 if g == ("<s>",) else round(float(rng.uniform(-3.0, -0.05)), 4)
            fields = [f"{logprob}", " ".join(g)]
            if g in histories or (n < order and rng.random() < 0.3):
                fields.append(f"{round(float(rng.uniform(-1.5, 0.3)), 4)}")
            lines.append("\t".join(fields))
        lines.append("")
    lines.append("\\end\\")
    return "\n".join(lines) + "\n"


def random_words(
    num_words: int, letters: str = "abcd", seed: int = 0, max_len: int = 4
) -> list[str]:
    """Distinct random words over ``letters`` (prefixes of each other happen on purpose)."""
    rng = np.random.default_rng(seed)
    out: list[str] = []
    while len(out) < num_words:
        w = "".join(rng.choice(list(letters), size=int(rng.integers(1, max_len + 1))))
        if w not in out:
            out.append(w)
    return out


class BackoffScorer:
    """Scores sentences through G read with failure semantics: take the word's arc if the state
    has one, else the backoff arc (``backoff_label`` on input); the final cost ends it."""

    def __init__(self, g: FstArrays, backoff_label: int):
        self.g, self.backoff_label = g, backoff_label
        self.arcs: dict[tuple[int, int], tuple[int, float]] = {
            (s, i): (d, w)
            for s, d, i, w in zip(
                g.src.tolist(), g.dst.tolist(), g.ilabel.tolist(), g.weight.tolist(), strict=True
            )
        }

    def cost(self, word_ids: Sequence[int]) -> float:
        """Total cost of ``<s> words </s>``; +inf if some word cannot be read."""
        state, total = self.g.start, 0.0
        for word in [*word_ids, None]:
            while True:
                if word is None and math.isfinite(self.g.final[state]):
                    return total + float(self.g.final[state])
                if word is not None and (state, word) in self.arcs:
                    state, w = self.arcs[(state, word)]
                    total += w
                    break
                if (state, self.backoff_label) not in self.arcs:
                    return math.inf
                state, w = self.arcs[(state, self.backoff_label)]
                total += w
        raise AssertionError("unreachable")

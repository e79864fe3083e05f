"""Language models for tests and benchmarks: small random ARPA models and lexicons for
graph-building tests, and smaller real models cut from a big real one.

The random ARPA files are structurally valid (prefix-closed n-gram sets, backoff weights on every
history) but their probabilities are random: enough to test that G encodes whatever an ARPA file
says, not a trained model. `restrict_arpa` cuts a real model (e.g. ../shared/data/en-us.arpa.gz)
down to a vocabulary and n-gram budget whose TLG builds in seconds; `arpa_text` writes any
`ArpaModel` back as ARPA text; `sample_sentences` draws sentences by following a model's n-grams.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence

import numpy as np

from ..fstio import FstArrays
from ..graph.grammar import BOS, EOS, ArpaModel, read_arpa, read_arpa_unigrams


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


def unigram_logprobs(path: str | os.PathLike) -> dict[str, float]:
    """Word -> log10 probability from an ARPA file's 1-gram section (reads no further)."""
    return dict(read_arpa_unigrams(path))


def restrict_arpa(
    arpa: str | os.PathLike | ArpaModel,
    num_words: int,
    max_ngrams: Sequence[int | None] = (),
    alphabet: Iterable[str] | None = None,
) -> ArpaModel:
    """A smaller backoff LM cut from a real one, still a well-formed ARPA model.

    Vocabulary: ``<s>``, ``</s>`` and the ``num_words`` most probable unigrams (ties by word),
    only words whose characters are all in ``alphabet`` when it is given (e.g. the character
    tokens of a CTC model). Only n-grams whose words are all in that vocabulary are kept, and of
    order ``n >= 2`` at most ``max_ngrams[n - 2]`` (None or a missing entry: no limit): those of
    highest chain probability ``P(w1) P(w2|w1) … P(wn|w1…wn-1)`` (``P(<s>)`` is taken as
    ``P(</s>)``, one of each per sentence) among the n-grams whose prefix and suffix
    (n-1)-grams are kept, so the set stays prefix- and suffix-closed. Log-probabilities and
    backoff weights are copied unchanged: the model is not renormalised (a history's
    probabilities no longer sum exactly to one), which a decoding graph does not need.

    ``arpa`` is a path (read twice: the unigrams, then only the n-grams over the vocabulary) or
    a parsed `ArpaModel`.
    """
    allowed = None if alphabet is None else set(alphabet)
    if isinstance(arpa, ArpaModel):
        unigrams = {k[0]: lp for k, (lp, _) in arpa.ngrams[0].items()}
    else:
        unigrams = unigram_logprobs(arpa)
    candidates = sorted(
        (w for w in unigrams
         if w not in (BOS, EOS) and (allowed is None or set(w) <= allowed)),
        key=lambda w: (-unigrams[w], w),
    )  # fmt: skip
    vocab = {BOS, EOS, *candidates[:num_words]}
    if isinstance(arpa, ArpaModel):
        source = [
            {k: v for k, v in level.items() if all(w in vocab for w in k)} for level in arpa.ngrams
        ]
        path = arpa.path
    else:
        source, path = read_arpa(arpa, vocabulary=vocab).ngrams, str(arpa)
    start_logprob = unigrams.get(EOS, 0.0)
    chain = {k: (start_logprob if k == (BOS,) else lp) for k, (lp, _) in source[0].items()}
    kept = [dict(source[0])]
    for n in range(2, len(source) + 1):
        limit = max_ngrams[n - 2] if n - 2 < len(max_ngrams) else None
        lower = kept[-1]
        grams = [k for k in source[n - 1] if k[:-1] in lower and k[1:] in lower]
        scores = np.array([chain[k[:-1]] + source[n - 1][k][0] for k in grams])
        if limit is not None and len(grams) > limit:
            # Highest first; ties keep file order, so the cut is deterministic.
            order = np.sort(np.argsort(-scores, kind="stable")[:limit])
            grams, scores = [grams[i] for i in order], scores[order]
        kept.append({k: source[n - 1][k] for k in grams})
        chain.update(zip(grams, scores.tolist(), strict=True))
    return ArpaModel(kept, path)


def arpa_text(model: ArpaModel) -> str:
    """ARPA text of ``model``: header counts, n-grams sorted, a backoff weight on every n-gram
    that is a history of a higher-order one or whose backoff is not 0 (log10)."""
    histories = {k[:-1] for level in model.ngrams[1:] for k in level}
    lines = ["\\data\\", *(f"ngram {n}={c}" for n, c in enumerate(model.counts(), 1))]
    for n, level in enumerate(model.ngrams, 1):
        lines += ["", f"\\{n}-grams:"]
        for k in sorted(level):
            logprob, backoff = level[k]
            line = f"{logprob!r}\t{' '.join(k)}"
            if n < model.order and (backoff or k in histories):
                line += f"\t{backoff!r}"
            lines.append(line)
    lines += ["", "\\end\\"]
    return "\n".join(lines) + "\n"


def sample_sentences(
    model: ArpaModel, count: int, seed=0, min_words: int = 3, max_words: int = 12
) -> list[list[str]]:
    """Seeded sentences drawn by following ``model``'s own n-grams: from history ``<s>``, the
    next word is drawn from the explicit continuations of the longest history that has some,
    in proportion to their probabilities (``</s>`` only after ``min_words`` words; a sentence
    stops at ``</s>`` or ``max_words``). So every word is in the vocabulary and the sentences
    mostly follow the model's higher-order n-grams."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    follow: dict[tuple[str, ...], tuple[list[str], np.ndarray]] = {}
    grouped: dict[tuple[str, ...], list[tuple[str, float]]] = {}
    for level in model.ngrams[1:]:
        for k, (lp, _) in level.items():
            if k[-1] != BOS:
                grouped.setdefault(k[:-1], []).append((k[-1], lp))
    grouped[()] = [(k[0], lp) for k, (lp, _) in model.ngrams[0].items() if k[0] != BOS]
    for h, items in grouped.items():
        items.sort()
        follow[h] = ([w for w, _ in items], np.array([lp for _, lp in items]))
    out = []
    for _ in range(count):
        sent: list[str] = []
        hist: tuple[str, ...] = (BOS,)
        while len(sent) < max_words:
            while hist not in follow or (
                len(sent) < min_words and all(w == EOS for w in follow[hist][0])
            ):
                hist = hist[1:]
            words, logprobs = follow[hist]
            p = np.power(10.0, logprobs)
            if len(sent) < min_words:
                p = np.where(np.array(words) == EOS, 0.0, p)
            w = words[int(rng.choice(len(words), p=p / p.sum()))]
            if w == EOS:
                break
            sent.append(w)
            hist = (*hist, w)[-(model.order - 1) :] if model.order > 1 else ()
        out.append(sent)
    return out


def tiny_sentencepiece_model(folder: str | os.PathLike) -> tuple[str, list[str], str]:
    """``(model path, its 120 pieces in id order, the text)``: a BPE model trained by
    sentencepiece (which must be installed) on the shipped test sentences, written in
    ``folder`` as ``bpe.model``."""
    from importlib.resources import files

    import sentencepiece as spm

    text = (files("wfstdecode") / "data" / "test_sentences.txt").read_text()
    folder = os.fspath(folder)
    with open(os.path.join(folder, "text.txt"), "w") as f:
        f.write(text * 3)
    spm.SentencePieceTrainer.train(input=os.path.join(folder, "text.txt"), vocab_size=120,
                                   model_prefix=os.path.join(folder, "bpe"), model_type="bpe",
                                   minloglevel=2)  # fmt: skip
    path = os.path.join(folder, "bpe.model")
    model = spm.SentencePieceProcessor(model_file=path)
    return path, [model.id_to_piece(i) for i in range(model.get_piece_size())], text

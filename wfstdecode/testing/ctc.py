"""CTC test material: random graphs, a hand-built CTC lexicon graph, a seeded emission simulator
(peaky CTC-like posteriors with confusions and deletions) and assert helpers."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..decoding_graph import DecodingGraph
from ..fstio import FstArrays
from ..symbols import BLANK, EPSILON, SymbolTable


def _rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def random_graph(
    seed=0, num_states: int = 12, num_tokens: int = 6, num_words: int = 5,
    arcs_per_state: int = 4, eps_arcs_per_state: float = 0.5, word_prob: float = 0.3,
    final_prob: float = 0.3, negative_weights: bool = True, eps_cycles: bool = False,
) -> DecodingGraph:  # fmt: skip
    """A random decoding graph. Every state has a blank self-loop and ``arcs_per_state`` random
    emitting arcs; epsilon-input arcs only lead to higher-numbered states (no epsilon cycles);
    weights are random (some negative when ``negative_weights``); the last state is final."""
    rng = _rng(seed)
    src, dst, il, ol, w = [], [], [], [], []
    lo = -0.5 if negative_weights else 0.0
    for s in range(num_states):
        src.append(s), dst.append(s), il.append(1), ol.append(0), w.append(rng.uniform(0, 0.5))
        for _ in range(arcs_per_state):
            src.append(s)
            dst.append(int(rng.integers(num_states)))
            il.append(int(rng.integers(1, num_tokens + 1)))
            ol.append(int(rng.integers(1, num_words + 1)) if rng.random() < word_prob else 0)
            w.append(rng.uniform(lo, 2.0))
        n_eps = rng.poisson(eps_arcs_per_state) if s + 1 < num_states or eps_cycles else 0
        for _ in range(n_eps):
            src.append(s)
            dst.append(int(rng.integers(0 if eps_cycles else s + 1, num_states)))
            il.append(0)
            ol.append(int(rng.integers(1, num_words + 1)) if rng.random() < word_prob else 0)
            w.append(rng.uniform(0.1, 2.0) if eps_cycles else rng.uniform(lo, 2.0))
    final = np.where(rng.random(num_states) < final_prob, rng.uniform(0, 1, num_states), np.inf)
    final[-1] = 0.5
    tokens = SymbolTable.from_list([BLANK, *(f"t{i}" for i in range(1, num_tokens))])
    words = SymbolTable.from_list([EPSILON, *(f"w{i}" for i in range(1, num_words + 1))])
    fst = FstArrays(0, final, np.array(src), np.array(dst), np.array(il), np.array(ol), np.array(w))
    return DecodingGraph.from_arrays(fst, tokens, words, {"source": "random_graph"})


def spell(word: str) -> list[str]:
    """Character spelling used by `lexicon_graph` (one token per character)."""
    return list(word)


def lexicon_graph(
    words: Sequence[str],
    word_cost: float | Sequence[float] = 0.0,
    tokens: Sequence[str] | None = None,
) -> DecodingGraph:
    """A CTC lexicon-loop graph ("TL" with the normal CTC topology): any sequence of ``words``,
    each spelled by `spell` (characters), ``word_cost`` per word (a unigram grammar).

    Root state 0 (final, blank self-loop) -> first character (outputs the word) -> ... Each
    character state has a self-loop on its character (a repeat) and a blank arc to a blank state;
    a doubled letter needs a blank in between. After the last character an epsilon arc returns to
    the root. Tokens default to ``<blk>`` plus the sorted characters.

    Unlike a real T ∘ L, the same character ending one word and beginning the next needs no
    blank between them (the return to the root is an epsilon): frames ``c c`` read as the two
    words ``c c`` as well as the one ``c``. Tests that compare backends or oracles on this graph
    are unaffected; a test of CTC's collapsing rule needs a graph from `build_tlg`.
    """
    chars = sorted({c for w in words for c in spell(w)})
    tok_list = list(tokens) if tokens is not None else [BLANK, *chars]
    tok = SymbolTable.from_list(tok_list)
    wtab = SymbolTable.from_list([EPSILON, *words])
    costs = [word_cost] * len(words) if isinstance(word_cost, (int, float)) else list(word_cost)
    src, dst, il, ol, w = [], [], [], [], []

    def arc(s, d, i, o, c=0.0):
        src.append(s), dst.append(d), il.append(i), ol.append(o), w.append(c)

    arc(0, 0, tok.id(BLANK) + 1, 0)
    n = 1
    for wi, word in enumerate(words, 1):
        letters = [tok.id(c) + 1 for c in spell(word)]
        prev_char = prev_blank = None
        for k, lab in enumerate(letters):
            cs, bs = n, n + 1
            n += 2
            if k == 0:
                arc(0, cs, lab, wi, costs[wi - 1])
            else:
                if letters[k - 1] != lab:
                    arc(prev_char, cs, lab, 0)
                arc(prev_blank, cs, lab, 0)
            arc(cs, cs, lab, 0)  # repeat
            arc(cs, bs, tok.id(BLANK) + 1, 0)
            arc(bs, bs, tok.id(BLANK) + 1, 0)
            prev_char, prev_blank = cs, bs
        arc(prev_char, 0, 0, 0)
        arc(prev_blank, 0, 0, 0)
    final = np.full(n, np.inf, np.float32)
    final[0] = 0.0
    fst = FstArrays(0, final, np.array(src), np.array(dst), np.array(il), np.array(ol), np.array(w))
    return DecodingGraph.from_arrays(fst, tok, wtab, {"source": "lexicon_graph"})


def random_log_probs(seed, batch: int, frames: int, vocab: int, peaky: float = 2.0) -> np.ndarray:
    """(B, T, V) float32 log-softmax of Gaussian logits scaled by ``peaky``."""
    rng = _rng(seed)
    logits = rng.normal(size=(batch, frames, vocab)) * peaky
    return _log_softmax(logits).astype(np.float32)


def _log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def simulate_ctc(
    token_seqs: Sequence[Sequence[int]],
    vocab: int,
    seed=0,
    *,
    blank: int = 0,
    frames_per_token: tuple[int, int] = (1, 2),
    blanks_between: tuple[int, int] = (1, 3),
    peak: float = 8.0,
    noise: float = 1.0,
    confusion_prob: float = 0.0,
    deletion_prob: float = 0.0,
    confusions: dict[int, Sequence[int]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded peaky CTC-like log-posteriors for the given token sequences.

    Each token takes ``frames_per_token`` frames (inclusive range) of a peak of height ``peak``
    (in logits) on its column, separated by ``blanks_between`` blank frames (a blank is forced
    between equal neighbours). With ``confusion_prob`` a token's peak goes to a confusable token
    (``confusions[token]`` or a random one) with the true token a close second; with
    ``deletion_prob`` the token is replaced by blank frames. Gaussian ``noise`` is added to every
    logit. Returns ``(log_probs float32 (B, T, V), lengths int64 (B,))``.
    """
    rng = _rng(seed)
    lo_f, hi_f = frames_per_token
    lo_b, hi_b = blanks_between
    utts = []
    for seq in token_seqs:
        frames: list[tuple[int, int | None]] = []  # (main column, second column)
        frames += [(blank, None)] * int(rng.integers(lo_b, hi_b + 1))
        prev = None
        for t in seq:
            if deletion_prob and rng.random() < deletion_prob:
                frames += [(blank, None)] * int(rng.integers(lo_f, hi_f + 1))
                continue
            shown, second = t, None
            if confusion_prob and rng.random() < confusion_prob:
                pool = (confusions or {}).get(t)
                if pool:
                    shown = int(rng.choice(list(pool)))
                else:
                    shown = int(rng.integers(vocab))
                    while shown in (t, blank):
                        shown = int(rng.integers(vocab))
                second = t
            nb = int(rng.integers(lo_b, hi_b + 1))
            if prev == shown and nb == 0:
                nb = 1
            frames += [(blank, None)] * nb
            frames += [(shown, second)] * int(rng.integers(lo_f, hi_f + 1))
            prev = shown
        frames += [(blank, None)] * int(rng.integers(lo_b, hi_b + 1))
        utts.append(frames)
    T = max((len(f) for f in utts), default=0)
    lp = np.zeros((len(utts), T, vocab), np.float32)
    lengths = np.array([len(f) for f in utts], np.int64)
    for b, frames in enumerate(utts):
        logits = rng.normal(size=(max(T, 1), vocab)) * noise
        for t, (main, second) in enumerate(frames):
            logits[t, main] += peak
            if second is not None:
                logits[t, second] += peak - 1.0
        lp[b] = _log_softmax(logits)[:T]
    return lp, lengths


def assert_hypotheses_equal(a, b, score_tol: float = 1e-4, what: str = "") -> None:
    """Two results of `decode_ctc` (lists of lists of `Hypothesis`) have the same paths (tokens,
    timestamps, words, word timestamps) and scores within ``score_tol`` (relative to max(1,|s|))."""
    assert len(a) == len(b), f"{what}: {len(a)} vs {len(b)} utterances"
    for i, (ha, hb) in enumerate(zip(a, b, strict=True)):
        assert len(ha) == len(hb), f"{what}: utterance {i}: {len(ha)} vs {len(hb)} hypotheses"
        for j, (x, y) in enumerate(zip(ha, hb, strict=True)):
            where = f"{what}: utterance {i} hypothesis {j}"
            for field in ("tokens", "timestamps", "words", "word_ids", "word_timestamps", "notes"):
                assert getattr(x, field) == getattr(y, field), (
                    f"{where}: {field} differ: {getattr(x, field)} vs {getattr(y, field)}"
                )
            if math.isinf(x.score) or math.isinf(y.score):
                assert x.score == y.score, f"{where}: score {x.score} vs {y.score}"
            else:
                tol = score_tol * max(1.0, abs(x.score))
                assert abs(x.score - y.score) <= tol, f"{where}: score {x.score} vs {y.score}"


def fast_backends() -> list:
    """The CTC backends to check against the reference, as pytest parameters: "cpu", and "cuda"
    (on a GPU or under Numba's CUDA simulator), skipped with the reason when it cannot run."""
    import pytest

    from ..backends import available_ctc_backends

    cuda_ok = "cuda" in available_ctc_backends()
    skip = pytest.mark.skipif(not cuda_ok, reason="no CUDA GPU, and NUMBA_ENABLE_CUDASIM is off")
    return ["cpu", pytest.param("cuda", marks=skip)]


def raw_backend(name: str):
    """The raw decode function (SearchProblem -> a `RawResult` per utterance, as a list or a
    `PathBatch`) of a backend name."""
    from ..backends import ctc_backend

    return ctc_backend(name)

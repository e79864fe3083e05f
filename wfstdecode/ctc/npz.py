"""Decode log-probabilities stored in an ``.npz`` file — the library side of ``wfstdecode decode``.

File format (``np.load`` without pickle): ``log_probs`` float (B, T, V); optional ``lengths`` int
(B,) (default: all T); optional ``tokens`` (V,) token strings, checked against the graph's token
table so that columns cannot be silently misaligned; optional ``texts`` (B,) reference
transcripts (then WER is computed); optional ``ids`` (B,) utterance names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..decoding_graph import DecodingGraph
from ..errors import DecodeInputError, InputFileError
from ..metrics import word_error_rate
from ..results import Hypothesis
from ..symbols import SymbolTable
from .options import CtcBeamOptions
from .search import blank_id, decode_ctc

WORD_SEPARATOR = "|"


@dataclass(frozen=True)
class NpzDecodeResult:
    """ids, hypotheses (per utterance, best first), graph transcripts, greedy CTC transcripts,
    references (or None) and the corpus WERs (None without references)."""

    ids: list[str]
    hypotheses: list[list[Hypothesis]]
    texts: list[str]
    greedy_texts: list[str]
    references: list[str] | None
    wer: float | None
    greedy_wer: float | None


def load_log_probs_npz(path: str | os.PathLike) -> dict:
    """Read an emissions ``.npz`` (see the module docstring); raises `InputFileError`."""
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise InputFileError(path, None, f"cannot read log-probs: {exc}") from exc
    if "log_probs" not in data:
        raise InputFileError(path, None, f"no 'log_probs' array (has {', '.join(data) or 'none'})")
    lp = data["log_probs"]
    if lp.ndim != 3:
        raise InputFileError(path, None, f"log_probs must be (B, T, V); got shape {lp.shape}")
    B = lp.shape[0]
    out = {"log_probs": lp, "lengths": data.get("lengths")}
    for key in ("texts", "ids", "tokens"):
        value = data.get(key)
        if value is not None:
            value = [str(x) for x in value.tolist()]
            if key != "tokens" and len(value) != B:
                raise InputFileError(path, None, f"'{key}' has {len(value)} entries for B={B}")
        out[key] = value
    if out["ids"] is None:
        out["ids"] = [f"utt{b:04d}" for b in range(B)]
    return out


def greedy_ctc_texts(log_probs, lengths, tokens: SymbolTable, blank: int = 0) -> list[str]:
    """Best-path CTC transcripts: argmax per frame, merge repeats, drop blanks; tokens are joined
    and ``|`` becomes a space (character models); otherwise tokens are joined by spaces."""
    arg = np.asarray(log_probs).argmax(-1)
    chars = all(len(s) == 1 or s == WORD_SEPARATOR for s, i in tokens if i != blank)
    texts = []
    for b, L in enumerate(np.asarray(lengths)):
        seq = arg[b, : int(L)]
        keep = (seq != blank) & np.concatenate(([True], seq[1:] != seq[:-1]))
        syms = [tokens.symbol(int(i)) for i in seq[keep]]
        if chars:
            texts.append(" ".join("".join(syms).replace(WORD_SEPARATOR, " ").split()))
        else:
            texts.append(" ".join(syms))
    return texts


def decode_npz(
    path: str | os.PathLike,
    graph: DecodingGraph,
    options: CtcBeamOptions | None = None,
    boosts=None,
    backend: str = "auto",
    num_threads: int | None = None,
) -> NpzDecodeResult:
    """Decode every utterance of an emissions ``.npz`` against ``graph`` with `decode_ctc`.

    Inputs: the file (format in the module docstring), a `DecodingGraph` whose token table matches
    the file's ``tokens`` (when present), options, boosts (one mapping ``word -> bonus`` for all
    utterances, or one per utterance), backend and CPU threads.
    Output: `NpzDecodeResult` with graph and greedy transcripts, and their WER when the file has
    reference ``texts``.
    """
    data = load_log_probs_npz(path)
    lp = data["log_probs"]
    if data["tokens"] is not None and graph.tokens is not None:
        graph_tokens = [graph.tokens.symbol(i) if _has(graph.tokens, i) else None
                        for i in range(graph.num_tokens)]  # fmt: skip
        if data["tokens"] != graph_tokens:
            diff = next(
                (
                    i
                    for i, (a, b) in enumerate(zip(data["tokens"], graph_tokens, strict=False))
                    if a != b
                ),
                min(len(data["tokens"]), len(graph_tokens)),
            )
            raise DecodeInputError(
                f"{path}: the file's tokens differ from the graph's token table at column {diff} "
                f"({len(data['tokens'])} vs {len(graph_tokens)} tokens)"
            )
    lengths = data["lengths"]
    if lengths is None:
        lengths = np.full(lp.shape[0], lp.shape[1], np.int64)
    hyps = decode_ctc(lp, lengths, graph, options, boosts, backend, num_threads=num_threads)
    texts = [h[0].text for h in hyps]
    greedy = (
        greedy_ctc_texts(lp, lengths, graph.tokens, blank_id(graph))
        if graph.tokens is not None
        else [""] * len(hyps)
    )
    refs = data["texts"]
    wer = greedy_wer = None
    if refs is not None:
        ref_words = [r.split() for r in refs]
        wer = word_error_rate(ref_words, [t.split() for t in texts])
        greedy_wer = word_error_rate(ref_words, [t.split() for t in greedy])
    return NpzDecodeResult(data["ids"], hyps, texts, greedy, refs, wer, greedy_wer)


def _has(table: SymbolTable, idx: int) -> bool:
    try:
        table.symbol(idx)
    except Exception:
        return False
    return True

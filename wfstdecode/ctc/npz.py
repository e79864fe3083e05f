"""Decode log-probabilities stored in an ``.npz`` file or a Kaldi matrix table (``.ark``,
``.scp``: `wfstdecode.kaldi_matrices`, keys as utterance ids) — the library side of ``wfstdecode
decode``.

File format (``np.load`` without pickle): ``log_probs`` float (B, T, V); optional ``lengths`` int
(B,) (default: all T); optional ``tokens`` (V,) token strings, checked against the graph's token
table so that columns cannot be silently misaligned; optional ``texts`` (B,) reference
transcripts (then WER is computed); optional ``ids`` (B,) utterance names; optional ``boosts``,
one string (a 0-d or (1,) array) holding the JSON object ``{utterance id: {phrase: bonus}}``:
per-utterance boost lists that travel with the emissions (`decode_npz`, ``decode``,
``decode-corpus``).
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ..decoding_graph import DecodingGraph
from ..errors import DecodeInputError, InputFileError
from ..interrupts import interrupts_raised
from ..metrics import word_error_rate
from ..results import Hypothesis
from ..safe_io import NpzArchive
from ..symbols import SymbolTable
from ._paths import merges_repeats
from .options import CtcBeamOptions
from .search import (
    blank_id,
    check_lattices_kept,
    decode_ctc,
    lattice_decode,
    prepare_problem,
    prepared,
)

WORD_SEPARATOR = "|"


@dataclass(frozen=True)
class NpzDecodeResult:
    """ids, hypotheses (per utterance, best first), graph transcripts, greedy CTC transcripts
    (empty when the graph has no token table), references (or None), the corpus WERs (None
    without references; the greedy one also None when the greedy transcripts are not words: no
    token table, or tokens that are neither characters nor word pieces, e.g. phones) and the
    frames of each utterance."""

    ids: list[str]
    hypotheses: list[list[Hypothesis]]
    texts: list[str]
    greedy_texts: list[str]
    references: list[str] | None
    wer: float | None
    greedy_wer: float | None
    lengths: list[int]
    lattices: list | None = None  # per utterance a `Lattice` (None: died) when asked for


def load_log_probs_npz(path: str | os.PathLike) -> dict:
    """Read an emissions ``.npz`` (see the module docstring); raises `InputFileError`.

    Only the arrays above are read, each checked against ``log_probs``'s shape and the file's
    size before it is decompressed (see `wfstdecode.safe_io`); pickled arrays are refused."""

    def fail(message: str) -> InputFileError:
        return InputFileError(path, None, message)

    with NpzArchive(path, ("log_probs", "lengths", *_TEXT_ARRAYS, "boosts"), fail) as z:
        if "log_probs" not in z.names:
            raise fail(f"no 'log_probs' array (has {', '.join(z.others) or 'none'})")
        lp = z.read("log_probs", "f", ndim=3)
        B, T, V = lp.shape
        if V == 0:
            raise fail(f"log_probs has shape {lp.shape}: no token columns")
        out = {"log_probs": lp, "lengths": z.read_lengths(B, T) if "lengths" in z.names else None}
        out["ids"] = z.read_ids(B)
        for key, size in (("texts", B), ("tokens", V)):
            out[key] = z.read_texts(key, size)
        out["boosts"] = _read_boosts(z, fail) if "boosts" in z.names else None
        z.say_misspelled()
    if out["ids"] is None:
        out["ids"] = [f"utt{b:04d}" for b in range(B)]
    if out["boosts"] is not None:
        missing = sorted(set(out["boosts"]) - set(out["ids"]))
        if missing:
            raise fail(f"boosts name utterance {missing[0]!r}, which the file does not have")
    return out


def load_emissions(path: str | os.PathLike) -> dict:
    """`load_log_probs_npz`'s dict from an ``.npz``, or from a Kaldi table of (frames, tokens)
    matrices (``ark:``/``scp:`` or a ``.ark``/``.scp`` file): padded, its keys as ids, no texts,
    tokens or boosts. Raises `InputFileError`. A table is padded whole, to its longest
    utterance (B x T_max x V floats: one long utterance among short ones costs many times the
    table); `decode_npz` pads a large one batch by batch instead."""
    data = _emissions(path)
    if "matrices" in data:
        matrices = data.pop("matrices")
        data["log_probs"], data["lengths"] = _padded(matrices, data.pop("width"))
    return data


def _emissions(path) -> dict:
    """`load_emissions`'s dict, but a Kaldi table's matrices left as they are (``matrices``,
    ``width``; no ``log_probs``): `decode_npz` pads them batch by batch (`_batches`)."""
    from ..kaldi_matrices import read_kaldi_matrices
    from ..kaldi_tables import is_kaldi_table

    if not is_kaldi_table(path):
        return load_log_probs_npz(path)
    matrices = read_kaldi_matrices(path)
    if not matrices:
        raise InputFileError(path, None, "holds no matrices")
    # (Kaldi writes an empty matrix as 0 x 0, kaldiio as 0 x V: a width where one is given)
    spoken = [(key, m) for key, m in matrices.items() if m.shape[1]]
    width = spoken[0][1].shape[1] if spoken else 0
    for key, m in spoken:
        if m.shape[1] != width:
            raise InputFileError(path, None, f"entry {key!r} has {m.shape[1]} columns; entry "
                                             f"{spoken[0][0]!r} has {width}: every matrix holds "
                                             "one column per token")  # fmt: skip
    if width == 0:
        raise InputFileError(path, None, "its matrices have no token columns")
    return {"matrices": list(matrices.values()), "width": width, "ids": list(matrices),
            "texts": None, "tokens": None, "boosts": None}  # fmt: skip


def _padded(matrices: list, width: int) -> tuple[np.ndarray, np.ndarray]:
    """``(log_probs (B, T_max, width), lengths)`` of these (frames, width) matrices."""
    lengths = np.array([len(m) for m in matrices], np.int64)
    log_probs = np.zeros((len(matrices), int(lengths.max(initial=0)), width), np.float32)
    for b, m in enumerate(matrices):
        if len(m):  # (an empty one is 0 x 0)
            log_probs[b, : len(m)] = m
    return log_probs, lengths


# A Kaldi table is decoded in batches of utterances of similar lengths, each padded to its own
# longest, at most this many floats each (or one utterance): padding the whole table to its
# longest utterance took B x T_max x V floats, many times the table (one 30 s utterance among
# short ones).
_BATCH_FLOATS = 1 << 26  # 256 MB


def _batches(data: dict, batch_floats: int | None = None):
    """``(utterance indices, log_probs, lengths)`` of each batch to decode: an ``.npz``'s
    arrays whole (padded as stored); a Kaldi table's matrices whole when padded they fit in
    ``batch_floats`` (None: `_BATCH_FLOATS`, read at each call), else by increasing length."""
    if batch_floats is None:
        batch_floats = _BATCH_FLOATS
    if "matrices" not in data:
        lp = data["log_probs"]
        lengths = data["lengths"]
        if lengths is None:
            lengths = np.full(lp.shape[0], lp.shape[1], np.int64)
        yield np.arange(lp.shape[0]), lp, lengths
        return
    matrices, width = data["matrices"], data["width"]
    if _whole(data, batch_floats):
        yield (np.arange(len(matrices)), *_padded(matrices, width))
        return
    sizes = np.array([len(m) for m in matrices], np.int64)
    order = np.argsort(sizes, kind="stable")
    lo = 0
    while lo < len(order):
        hi = lo + 1  # (sorted: the last one is the batch's longest)
        while hi < len(order) and (hi + 1 - lo) * int(sizes[order[hi]]) * width <= batch_floats:
            hi += 1
        yield (order[lo:hi], *_padded([matrices[i] for i in order[lo:hi]], width))
        lo = hi


def _whole(data: dict, batch_floats: int | None = None) -> bool:
    """Whether `_batches` decodes the file as one batch."""
    if "matrices" not in data:
        return True
    longest = max(len(m) for m in data["matrices"])
    return len(data["matrices"]) * longest * data["width"] <= (batch_floats or _BATCH_FLOATS)


def _check_values(path, ids: list, matrices: list, graph, options) -> None:
    """Before a table is decoded in batches: each utterance holding a value that is not
    finite checked alone (by the search's own checks). The search checks a batch when it comes
    to it: a NaN in a late batch was reported after the earlier ones were decoded (minutes,
    with lattices), and of several bad utterances the shortest, not the first."""
    for b, m in enumerate(matrices):
        if len(m) and not np.isfinite(m).all():
            with _said_of_file(path, ids, np.array([b]), False):
                prepare_problem(m[None], [len(m)], graph, options or CtcBeamOptions(), None)


def read_reference_texts(path: str | os.PathLike) -> dict[str, str]:
    """A Kaldi ``text`` file: ``UTTID word word ...`` per line -> ``{id: "word word ..."}``."""
    from ..textfiles import kaldi_fields, text_lines

    out: dict[str, str] = {}
    for line_no, line in text_lines(path, "reference text"):
        fields = kaldi_fields(line)
        if not fields:
            continue
        if fields[0] in out:
            raise InputFileError(path, line_no, f"utterance {fields[0]!r} appears twice")
        out[fields[0]] = " ".join(fields[1].split()) if len(fields) > 1 else ""
    return out


def _read_boosts(z, fail) -> dict[str, dict[str, float]]:
    """The ``boosts`` member: ``{id: {phrase: bonus}}`` (phrases as boost files have them)."""
    from ..safe_io import json_loads, utf8_text
    from .boost_files import checked_phrases

    raw = z.read("boosts", "US", max_bytes=64 << 20)
    if raw.size != 1:
        raise fail(f"boosts must be one JSON string; got an array of shape {raw.shape}")
    text = raw.reshape(-1)[0]
    text = utf8_text(text, "boosts", fail) if isinstance(text, bytes) else str(text)
    try:
        table = json_loads(text)
    except (ValueError, RecursionError) as exc:
        raise fail(f"boosts is not JSON ({exc})") from None
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise fail('boosts must be a JSON object {"utterance id": {"phrase": bonus, ...}}')
    out = {}
    for utt, phrases in table.items():
        try:
            out[utt] = checked_phrases(phrases)
        except ValueError as exc:
            raise fail(f"boosts of {utt!r}: {exc}") from None
    return out


_TEXT_ARRAYS = ("texts", "ids", "tokens")  # (B,), (B,), (V,)


def ctc_collapse(ids, blank: int = 0, merge_repeats: bool = True) -> np.ndarray:
    """Per-frame token ids as CTC reads them: repeats merged (unless not ``merge_repeats``: the
    ``minimal`` topology), then blanks dropped."""
    ids = np.asarray(ids)
    keep = ids != blank
    if merge_repeats:
        keep &= np.concatenate(([True], ids[1:] != ids[:-1]))
    return ids[keep]


def greedy_ctc_texts(
    log_probs,
    lengths,
    tokens: SymbolTable,
    blank: int = 0,
    separator: str | None = None,
    merge_repeats: bool = True,
) -> list[str]:
    """Best-path CTC transcripts: argmax per frame, merge repeats (``merge_repeats``), drop
    blanks; SentencePiece pieces (a token starts with "\u2581") are joined into words;
    characters (every token one character or the word separator, special symbols such as
    ``<unk>`` aside) are joined and the separator (``separator``, else ``|``) becomes a space;
    otherwise tokens are joined by spaces. ``lengths`` None: every utterance is all T frames
    (as `decode_ctc` takes it)."""
    sep = WORD_SEPARATOR if separator is None else separator
    arg = np.asarray(log_probs).argmax(-1)
    if lengths is None:
        lengths = np.full(arg.shape[0], arg.shape[1])
    pieces, chars = _token_kind(tokens, blank, sep)
    texts = []
    for b, L in enumerate(np.asarray(lengths)):
        ids = ctc_collapse(arg[b, : int(L)], blank, merge_repeats)
        syms = [tokens.symbol(int(i)) for i in ids]
        if pieces:  # SentencePiece: "\u2581" starts a word
            texts.append(" ".join("".join(syms).replace("\u2581", " ").split()))
        elif chars:
            texts.append(" ".join("".join(" " if s == sep else s for s in syms).split()))
        else:
            texts.append(" ".join(syms))
    return texts


def _token_kind(tokens: SymbolTable, blank: int, sep: str) -> tuple[bool, bool]:
    """``(word pieces, characters)``: which kind of tokens `greedy_ctc_texts` reads, from the
    model's own (special symbols such as <unk> or <sos/eos>, which character and piece tables
    alike may hold, say nothing); neither: phones or other units, no words."""
    own = [s for s, i in tokens if i != blank and not _special(s)]
    pieces = any(s.startswith("\u2581") for s in own)  # (a character model's too: "\u2581")
    return pieces, not pieces and all(len(s) == 1 or s == sep for s in own)


def greedy_spells_words(graph: DecodingGraph) -> bool:
    """Whether `greedy_ctc_texts` gives words for ``graph``'s tokens (characters or word
    pieces), so that their WER means something: not for phones."""
    if graph.tokens is None:
        return False
    sep = graph.metadata.get("separator") or WORD_SEPARATOR
    return any(_token_kind(graph.tokens, blank_id(graph), sep))


def _special(symbol: str) -> bool:
    """A special symbol of a token table (``<unk>``, ``<sos/eos>``), not a piece of text."""
    return len(symbol) > 2 and symbol[0] == "<" and symbol[-1] == ">"


def decode_npz(
    path: str | os.PathLike,
    graph: DecodingGraph,
    options: CtcBeamOptions | None = None,
    boosts=None,
    backend: str = "auto",
    num_threads: int | None = None,
    tuning=None,
    utterance_boosts=None,
    oov_lexicon=None,
    lattices: bool = False,
    rescore=None,
    references=None,
    check_ids=None,
) -> NpzDecodeResult:
    """Decode every utterance of an emissions ``.npz`` (or a Kaldi matrix table:
    `load_emissions`) against ``graph`` with `decode_ctc`.

    Inputs: the file (format in the module docstring), a `DecodingGraph` whose token table matches
    the file's ``tokens`` (when present), options, boosts (one mapping ``phrase -> bonus`` for
    all utterances, or one per utterance), backend, speed-only tuning (`decode_ctc`), and
    ``utterance_boosts``: ``{utterance id: {phrase: bonus}}`` added to ``boosts`` (a mapping)
    for those utterances, their own bonus winning for a phrase in both; an id the file does not
    have raises `DecodeInputError`. The file's own ``boosts`` member is used the same way; it and
    ``utterance_boosts`` together raise (one place for an utterance's list). ``oov_lexicon``:
    pronunciations of boosted words the graph lacks (`decode_ctc`). ``lattices``: also keep each
    utterance's lattice (``options.lattice_beam`` must be set; `ctc_lattices`); ``rescore``:
    an `LmRescoring` for the lattices (`decode_ctc`). ``references``: ``{id: transcript}``
    (`read_reference_texts`) in place of the file's ``texts``; every utterance needs one.
    ``check_ids``: called with the utterance ids once the file is read, before any decoding
    (the CLI refuses there ids a lattice archive cannot hold).
    Output: `NpzDecodeResult` with graph and greedy transcripts, and their WER when there are
    reference texts.
    A Kaldi table too large to pad whole (`_BATCH_FLOATS`) is decoded in batches of similar
    lengths, results unchanged: bad values are found before any batch is decoded (an error of
    a later batch's boosts comes after the earlier batches), and errors and warnings name an
    utterance by its index in the file.
    """
    data = _emissions(path)
    ids = data["ids"]
    if check_ids is not None:
        check_ids(ids)
    if references is not None:
        missing = [u for u in ids if u not in references]
        if missing:
            raise DecodeInputError(f"the reference texts have no utterance {missing[0]!r} of "
                                   f"{path} ({len(missing)} of {len(ids)} missing)")  # fmt: skip
        data["texts"] = [references[u] for u in ids]
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
    if utterance_boosts and data["boosts"]:  # (an empty member carries none)
        raise DecodeInputError(f"{path} carries per-utterance boosts (its 'boosts' member); give "
                               "them there or in the utterance boosts file, not both")  # fmt: skip
    utterance_boosts = utterance_boosts or data["boosts"]
    if utterance_boosts:
        boosts = _per_utterance(path, ids, boosts, utterance_boosts)
    if lattices:
        check_lattices_kept(options or CtcBeamOptions(), "decode_npz(lattices=True)")
    B = len(ids)
    per_utterance = None  # boosts as one list per utterance, sliced for each batch
    if isinstance(boosts, Sequence) and not isinstance(boosts, (str, bytes)):
        if len(boosts) != B:
            raise DecodeInputError(f"boosts must have one entry per utterance of {path} ({B}); "
                                   f"got {len(boosts)}")  # fmt: skip
        per_utterance = list(boosts)
    hyps, greedy, lats = [None] * B, [""] * B, [None] * B if lattices else None
    frames, warned = [0] * B, False
    if not _whole(data):
        _check_values(path, ids, data["matrices"], graph, options)
    for batch, lp, lengths in _batches(data):
        if not warned and _probabilities(lp, lengths):
            warned = True
            warnings.warn(f"{path}: log_probs holds probabilities (every frame's values are >= "
                          "0 and sum to 1), not their logarithms: give log-probabilities "
                          "(np.log, log_softmax); decoded as given, the graph outweighs them",
                          stacklevel=2)  # fmt: skip
        own = boosts if per_utterance is None else [per_utterance[i] for i in batch]
        with _said_of_file(path, ids, batch, per_utterance is not None), interrupts_raised():
            if lattices:  # (a Ctrl-C as such, as `decode_ctc` raises it: `interrupts`)
                # (the batch's own tuning: ``tuning`` and ``num_threads`` stay as given, else
                # the next batch got both and raised)
                problem, name, tuned = prepared(lp, lengths, graph, options, own, backend,
                                                tuning, num_threads, oov_lexicon,
                                                rescore)  # fmt: skip
                got, got_lats = lattice_decode(problem, name, tuned, rescore) if len(lp) else (
                    [], [])  # fmt: skip
                for i, lat in zip(batch, got_lats, strict=True):
                    lats[i] = lat
            else:
                got = decode_ctc(lp, lengths, graph, options, own, backend, tuning=tuning,
                                 num_threads=num_threads, oov_lexicon=oov_lexicon,
                                 rescore=rescore)  # fmt: skip
        texts = (
            greedy_ctc_texts(lp, lengths, graph.tokens, blank_id(graph),
                             graph.metadata.get("separator"), merges_repeats(graph))
            if graph.tokens is not None
            else [""] * len(batch)
        )  # fmt: skip
        for i, h, text, n in zip(batch, got, texts, lengths.tolist(), strict=True):
            hyps[i], greedy[i], frames[i] = h, text, int(n)
    texts = [h[0].text for h in hyps]
    refs = data["texts"]
    wer = greedy_wer = None
    ref_words = [r.split() for r in refs] if refs is not None else []
    if any(ref_words):  # (no reference word at all: no rate to give)
        wer = word_error_rate(ref_words, [t.split() for t in texts])
        if greedy_spells_words(graph):  # (no token table, or phones: no words to score)
            greedy_wer = word_error_rate(ref_words, [t.split() for t in greedy])
    return NpzDecodeResult(ids, hyps, texts, greedy, refs, wer, greedy_wer, frames, lats)


@contextmanager
def _said_of_file(path, ids: list, batch: np.ndarray, boosts_per_utterance: bool):
    """Decoding the utterances ``batch`` of ``path``: a `DecodeInputError` (e.g. a width the
    graph cannot read) names the file and the utterance at fault by its id (a table's entries
    are found by name); where the batch is not the whole file in order, an utterance's index in
    its errors (``log_probs[b, ...]``, ``lengths[b]``, and ``boosts[b]`` where the boosts are
    one list per utterance: one mapping for all is ``boosts[0]`` in every batch) and in the
    boosts' warnings (`boost.utterance_numbers`) becomes its index in the file."""
    from .boost import utterance_numbers

    whole = bool(np.array_equal(batch, np.arange(len(ids))))

    def in_file(text: str) -> str:
        if whole:
            return text
        names = "log_probs|lengths|boosts" if boosts_per_utterance else "log_probs|lengths"
        return re.sub(rf"\b({names})\[(\d+)",
                      lambda m: f"{m[1]}[{batch[int(m[2])]}" if int(m[2]) < len(batch) else m[0],
                      text)  # fmt: skip

    numbered = utterance_numbers.set(None if whole or not boosts_per_utterance else batch)
    try:
        yield
    except DecodeInputError as exc:
        if exc.utterance is None:
            raise DecodeInputError(f"{path}: {in_file(str(exc))}") from None
        at = int(batch[exc.utterance])
        raise DecodeInputError(f"{path}: utterance {ids[at]!r}: {in_file(str(exc))}", at) from None
    finally:
        utterance_numbers.reset(numbered)


def _probabilities(lp: np.ndarray, lengths) -> bool:
    """Whether the frames within ``lengths`` look like a softmax's output, not a log-softmax's:
    every value >= 0 and every frame summing to 1 (log-probabilities are <= 0)."""
    frames = np.arange(lp.shape[1]) < np.asarray(lengths)[:, None]
    if not frames.any():
        return False
    b, t = np.argwhere(frames)[0]
    if not lp[b, t].min() >= 0:  # (log-probabilities: known from one frame, no copy made)
        return False
    spoken = lp[frames]
    with np.errstate(invalid="ignore", over="ignore"):
        return bool(spoken.min() >= 0 and np.allclose(spoken.sum(-1, dtype=np.float64), 1.0,
                                                      atol=1e-3))  # fmt: skip


def _per_utterance(path, ids, boosts, utterance_boosts) -> list:
    if boosts is not None and not isinstance(boosts, Mapping):
        raise DecodeInputError("utterance_boosts add to one boosts mapping for the whole file; "
                               "got a list")  # fmt: skip
    missing = sorted(set(utterance_boosts) - set(ids))
    if missing:
        raise DecodeInputError(f"{path} has no utterance {missing[0]!r} ({len(missing)} boosted "
                               "utterance(s) not in the file)")  # fmt: skip
    shared = dict(boosts or {})
    spaced = {_spaced(k): k for k in shared}  # a phrase however it is spaced or written

    def merged(own: dict) -> dict:  # the utterance's bonus wins for a phrase in both
        out = dict(shared)
        for key, bonus in own.items():
            out.pop(spaced.get(_spaced(key)), None)
            out[key] = bonus
        return out

    return [merged(utterance_boosts[u]) if u in utterance_boosts else shared or None
            for u in ids]  # fmt: skip


def _spaced(key):
    """A boost key as its words: ``"new  york"`` and ``("new", "york")`` are one phrase, as
    `decode_ctc` reads them."""
    from .boost import words_of

    return words_of(key)


def _has(table: SymbolTable, idx: int) -> bool:
    try:
        table.symbol(idx)
    except Exception:
        return False
    return True

"""Lexicon L: word -> token sequence, with disambiguation symbols so that L∘G determinizes.

L reads token labels and writes word ids; the word label sits on the first arc of each
pronunciation, so output labels are as far left as the lexicon allows.
"""

from __future__ import annotations

import itertools
import math
import os
import warnings
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError, InputFileError
from ..fstio import FstArrays
from ..symbols import BACKOFF_DISAMBIG, EPSILON, NOT_TOKENS, SymbolTable, is_disambig
from ..textfiles import quoted, strict_float, text_lines
from .oov_slot import OPEN


@dataclass(frozen=True)
class LexiconEntry:
    word: str
    tokens: tuple[str, ...]
    prob: float = 1.0
    # Where `read_lexicon` found the entry, so that checks made later can name the line.
    source: str | None = field(default=None, compare=False, repr=False)
    line_no: int | None = field(default=None, compare=False, repr=False)


_ASCII_SPACE = " \t\r\n\v\f"


def read_lexicon(
    path: str | os.PathLike, tokens: SymbolTable, with_probs: bool = False
) -> list[LexiconEntry]:
    """Read ``word tok1 tok2 …`` lines (``word prob tok1 …`` with ``with_probs``), UTF-8, plain
    or gzip.

    Every token must be in ``tokens``; errors name the file, line and offending value. A line
    that repeats an earlier one (word, tokens and probability) adds nothing: it is read once.
    """
    entries = []
    seen = set()  # (word, tokens, prob) read so far
    for line_no, line in text_lines(path, "lexicon"):
        fields = line.split()
        odd = None if line.isascii() else next((c for c in line if c.isspace()
                                                and c not in _ASCII_SPACE), None)  # fmt: skip
        if odd is not None:  # (the ARPA reader and Kaldi keep it inside a word: not a split)
            raise InputFileError(path, line_no, f"U+{ord(odd):04X} (a space other than ' ' and "
                                 "tab) in a word or token, which a symbol table cannot hold: "
                                 f"{quoted(line)}")  # fmt: skip
        if not fields:
            continue
        word, rest = fields[0], fields[1:]
        prob = 1.0
        if with_probs:
            try:
                prob = strict_float(rest[0]) if rest else math.nan  # (not 1_0e-1 as 1.0)
            except ValueError:
                prob = math.nan
            if not 0.0 < prob <= 1.0:
                raise InputFileError(
                    path,
                    line_no,
                    f"pronunciation probability must be in (0, 1]; got {quoted(line)}",
                )
            rest = rest[1:]
        if not rest:
            raise InputFileError(path, line_no, f"word {quoted(word)} has no tokens")
        if is_disambig(word) or word in (EPSILON, "<s>", "</s>"):
            raise InputFileError(
                path, line_no, f"{quoted(word)} is reserved and cannot be a lexicon word"
            )
        entry = LexiconEntry(word, tuple(rest), prob, str(path), line_no)
        check_pronunciations((entry,))
        missing = [t for t in rest if t not in tokens]
        if missing:
            raise InputFileError(
                path,
                line_no,
                f"tokens [{', '.join(quoted(t, 40) for t in missing[:10])}"
                f"{', …' if len(missing) > 10 else ''}] of word {quoted(word)} are not in the "
                "token table" + _probability_hint(rest[0], with_probs, missing),
            )
        if (word, entry.tokens, prob) in seen:
            continue  # a second copy would only add a parallel path to L
        seen.add((word, entry.tokens, prob))
        entries.append(entry)
    if not entries:
        raise InputFileError(path, None, "lexicon is empty")
    return entries


def _probability_hint(first: str, with_probs: bool, missing: list[str]) -> str:
    """A hint when the missing token is a number in first place: a pronunciation probability
    (Kaldi's lexiconp.txt) read as a token."""
    if with_probs or first not in missing:
        return ""
    try:
        float(first)
    except ValueError:
        return ""
    return " (a pronunciation probability? read it with --lexicon-probs / with_probs=True)"


def check_pronunciations(entries: Iterable[LexiconEntry], separator: str | None = None) -> None:
    """Refuse a pronunciation holding the blank, epsilon, a disambiguation symbol or the word
    ``separator``: each would make L accept token sequences the model cannot mean. The error
    names the entry's file and line when `read_lexicon` made it."""
    for entry in entries:
        problem = _pronunciation_problem(entry.word, entry.tokens, separator)
        if problem is None:
            continue
        if entry.source is not None:
            raise InputFileError(entry.source, entry.line_no, problem)
        raise GraphError(problem)


def _pronunciation_problem(word: str, tokens: Iterable[str], separator: str | None) -> str | None:
    """Why ``tokens`` cannot spell ``word`` (see `check_pronunciations`), or None."""
    for t in tokens:
        if t in NOT_TOKENS:
            return f"the pronunciation of {quoted(word)} holds {t!r}, which spells nothing"
        if is_disambig(t):
            return (
                f"the pronunciation of {quoted(word)} holds the disambiguation symbol {t!r}; "
                "wfstdecode adds those itself (give lexicon.txt, not lexicon_disambig.txt)"
            )
        if t == separator:
            return (
                f"the pronunciation of {quoted(word)} holds the word separator {t!r}, which "
                "only goes between words"
            )
    return None


def add_disambig_symbols(prons: Iterable[tuple[str, ...]]) -> tuple[list[tuple[str, ...]], int]:
    """Append ``#1``, ``#2``, … to pronunciations that are homophones or prefixes of others.

    Returns the disambiguated pronunciations (same order) and the number of token-level
    disambiguation symbols needed including ``#0`` (the backoff symbol), as Kaldi does.
    """
    prons = [tuple(p) for p in prons]
    counts = Counter(prons)
    # a proper prefix of another pronunciation is followed by one in sorted order (whatever
    # lies between them starts with it too): linear in the lexicon, not in its squared lengths
    ordered = sorted(counts)
    prefixes = {p for p, q in itertools.pairwise(ordered) if len(q) > len(p) and q[: len(p)] == p}
    next_index: dict[tuple[str, ...], int] = {}
    max_index = 0
    out = []
    for p in prons:
        if counts[p] > 1 or p in prefixes:
            index = next_index.get(p, 0) + 1
            next_index[p] = index
            max_index = max(max_index, index)
            p = (*p, f"#{index}")
        out.append(p)
    return out, max_index + 1


def build_lexicon_fst(
    entries: list[LexiconEntry], tokens: SymbolTable, words: SymbolTable,
    separator: str | None = None, oov_slot: bool = False,
) -> tuple[FstArrays, int]:  # fmt: skip
    """Build L with disambiguation symbols; returns (L, number of token disambiguation symbols).

    State 0 is the word-start state. With a ``separator`` token (e.g. ``|`` for a character model),
    words end in state 1 and must be separated by one or more separators; separators are also
    allowed before the first and after the last word. Without one, words follow each other
    directly. The backoff symbol ``#0`` loops (token ``#0`` in, word ``#0`` out) on the states
    between words, where G may back off. ``oov_slot`` adds the class word ``<oov>``, read as the
    next disambiguation symbol ``#oov``; the one after is ``#oovend`` (`oov_slot.py`).
    """
    if not entries:
        raise GraphError("lexicon is empty")
    check_pronunciations(entries, separator)
    num_tokens = tokens.next_id
    prons, num_disambig = add_disambig_symbols(e.tokens for e in entries)

    def label(symbol: str) -> int:
        if is_disambig(symbol):
            return num_tokens + 1 + int(symbol[1:])
        return tokens.id(symbol) + 1

    word_end = 0 if separator is None else 1
    src, dst, ilabel, olabel, weight = [], [], [], [], []
    next_state = word_end + 1
    for entry, pron in zip(entries, prons, strict=True):
        state = 0
        for i, symbol in enumerate(pron):
            last = i == len(pron) - 1
            target = word_end if last else next_state
            if not last:
                next_state += 1
            src.append(state)
            dst.append(target)
            ilabel.append(label(symbol))
            olabel.append(words.id(entry.word) if i == 0 else 0)
            weight.append(-math.log(entry.prob) if i == 0 else 0.0)
            state = target
    backoff_in, backoff_out = num_tokens + 1, words.id(BACKOFF_DISAMBIG)
    between_words = [0] if separator is None else [0, 1]
    for s in between_words:
        src.append(s), dst.append(s), ilabel.append(backoff_in), olabel.append(backoff_out)
        weight.append(0.0)
    if separator is not None:
        sep = tokens.id(separator) + 1
        for s in (0, 1):  # leading / repeated separators, and the one that ends a word
            src.append(s), dst.append(0), ilabel.append(sep), olabel.append(0), weight.append(0.0)
    if oov_slot:  # <oov> read as #oov (then #oovend, in the spelling loop added to LG)
        src.append(0), dst.append(word_end), ilabel.append(num_tokens + 1 + num_disambig)
        olabel.append(words.id(OPEN)), weight.append(0.0)
        num_disambig += 2
    final = np.full(next_state, np.inf, np.float32)
    final[between_words] = 0.0
    return FstArrays(0, final, src, dst, ilabel, olabel, weight), num_disambig


def spell_lexicon(
    words: Iterable[str], tokens: SymbolTable, separator: str | None = None
) -> tuple[list[LexiconEntry], list[str]]:
    """Lexicon of a character model: each word spelled as its characters.

    Returns (entries, words skipped because a character is not a token or is the ``separator``).
    """
    entries, skipped = [], []
    for word in words:
        spelling = tuple(word)
        if all(c in tokens for c in spelling) and not _pronunciation_problem(
            word, spelling, separator
        ):
            entries.append(LexiconEntry(word, spelling))
        else:
            skipped.append(word)
    return entries, skipped


def load_sentencepiece(model_path: str | os.PathLike):
    """A sentencepiece model (``SentencePieceProcessor``), or `InputFileError` naming the file."""
    try:
        import sentencepiece
    except ImportError as exc:  # pragma: no cover - a dependency
        raise ImportError("--spm needs sentencepiece: pip install sentencepiece") from exc
    sp = sentencepiece.SentencePieceProcessor()
    try:
        sp.load(str(model_path))
    except (OSError, RuntimeError) as exc:
        raise InputFileError(model_path, None, f"cannot load sentencepiece model: {exc}") from None
    return sp


def sentencepiece_lexicon(
    words: Iterable[str], model_path: str | os.PathLike, tokens: SymbolTable,
    separator: str | None = None,
) -> tuple[list[LexiconEntry], list[str]]:  # fmt: skip
    """Lexicon of a BPE / unigram-piece model: each word split by the sentencepiece model.

    Returns (entries, words skipped because a piece is ``<unk>``, not in ``tokens``, or cannot be
    in a pronunciation: see `check_pronunciations`; or because the word cannot be a symbol of the
    word table: an ARPA word may hold a no-break or other non-ASCII space, which sentencepiece
    splits at as at a space).
    """
    sp = load_sentencepiece(model_path)
    problem = piece_numbering_problem(sp, tokens)
    if problem:
        warnings.warn(f"{os.fspath(model_path)}: {problem}", UserWarning, stacklevel=2)
    unk = sp.unk_id()
    entries, skipped = [], []
    for word in words:
        ids = sp.encode(word)
        pieces = [sp.id_to_piece(i) for i in ids]
        if (
            ids
            and word.split() == [word]  # (as `SymbolTable.add` requires)
            and unk not in ids
            and all(p in tokens for p in pieces)
            and not _pronunciation_problem(word, pieces, separator)
        ):
            entries.append(LexiconEntry(word, tuple(pieces)))
        else:
            skipped.append(word)
    return entries, skipped


def piece_numbering_problem(sp, tokens: SymbolTable) -> str | None:
    """What looks wrong between a sentencepiece model and the token table (whose ids are the CTC
    model's columns), or None: pieces the table lacks (words with them are left out), or pieces
    numbered otherwise than in the model beyond one shift for all (a blank put first, as ESPnet's
    token lists do) — a table made for another model, whose graph would decode garbage."""
    missing, shifts = [], {}
    for i in range(sp.get_piece_size()):
        if sp.is_control(i) or sp.is_unknown(i):  # <s>, </s>, <unk>: tables often drop them
            continue
        piece = sp.id_to_piece(i)
        j = tokens.get(piece)
        if j is None:
            missing.append(piece)
        else:
            shifts.setdefault(j - i, (piece, i, j))
    problems = []
    if missing:
        shown = ", ".join(missing[:5]) + (" …" if len(missing) > 5 else "")
        are = "is" if len(missing) == 1 else "are"
        problems.append(f"{len(missing)} of its pieces {are} not in the token table ({shown})")
    if len(shifts) > 1:
        examples = "; ".join(f"{p!r} is {i} in the model, {j} in the table"
                             for p, i, j in list(shifts.values())[:2])  # fmt: skip
        problems.append(f"the token table numbers its pieces otherwise ({examples}): is it "
                        "the table of this model?")  # fmt: skip
    return "; ".join(problems) or None

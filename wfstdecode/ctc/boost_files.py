"""Boost lists read from files: ``--boost-file`` (``phrase<TAB>bonus`` per line), the CLI's
per-utterance JSON lines and a shard's boosts (`npz`), each phrase checked as `boost` would
check it, with the file and line named on failure."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..errors import InputFileError
from ..safe_io import json_loads
from ..textfiles import quoted, strict_float, text_lines
from .boost import MAX_PHRASES, as_float
from .options import MAX_COST_TERM

# One utterance's list is one line, and may hold MAX_PHRASES phrases: far past the text reader's
# usual line limit (40,000 two-word names were refused as "not a valid utterance boosts file");
# bounded as an emissions file's 'boosts' member is (`npz._read_boosts`).
MAX_UTTERANCE_BOOSTS_CHARS = 64 << 20


def checked_phrase(phrase, bonus) -> tuple[str, float]:
    """A phrase from a file (spaces normalised) and its bonus; `ValueError` with the reason for
    an empty phrase, a bonus that is not a number, or one not finite or beyond ``MAX_COST_TERM``
    (the readers name the file and line)."""
    phrase = " ".join(phrase.split()) if isinstance(phrase, str) else ""
    if not phrase:
        raise ValueError("an empty phrase")
    if isinstance(bonus, bool) or not isinstance(bonus, (int, float)):
        raise ValueError(f"the bonus of {phrase!r} must be a number; got {bonus!r}")
    bonus = as_float(bonus)
    if not math.isfinite(bonus) or abs(bonus) > MAX_COST_TERM:
        raise ValueError(f"bonus {bonus} of {phrase!r} is not finite or beyond "
                         f"±{MAX_COST_TERM:g}")  # fmt: skip
    return phrase, bonus


def checked_phrases(phrases: Mapping) -> dict[str, float]:
    """One utterance's ``{phrase: bonus}`` from a file, each as `checked_phrase` returns it;
    `ValueError` with the reason for a bad phrase, a phrase given twice (once spaces are
    normalised) or more than ``MAX_PHRASES``."""
    if len(phrases) > MAX_PHRASES:
        raise ValueError(f"more than {MAX_PHRASES} phrases")
    out: dict[str, float] = {}
    for phrase, bonus in phrases.items():
        phrase, bonus = checked_phrase(phrase, bonus)
        if phrase in out:
            raise ValueError(f"{phrase!r} is given twice")
        out[phrase] = bonus
    return out


def read_utterance_boosts(path) -> dict[str, dict[str, float]]:
    """Per-utterance boosts: a JSON object per line, ``{"id": UTTERANCE, "boosts": {PHRASE:
    BONUS, ...}}`` (blank lines skipped), as ``{id: {phrase: bonus}}``. A line that is not such
    an object, a key other than those two, an id given twice, an empty phrase, a phrase twice
    in one line, a bad bonus or more than ``MAX_PHRASES`` phrases on a line raise
    `InputFileError` naming the line."""
    out: dict[str, dict[str, float]] = {}
    where: dict[str, int] = {}
    for line_no, line in text_lines(path, "utterance boosts file", MAX_UTTERANCE_BOOSTS_CHARS):
        if not line.strip():
            continue
        try:
            record = json_loads(line)
        except (ValueError, RecursionError) as exc:
            raise InputFileError(path, line_no, f"not JSON ({exc})") from None
        if (
            not isinstance(record, dict)
            or not isinstance(record.get("id"), str)
            or not isinstance(record.get("boosts"), dict)
        ):
            raise InputFileError(path, line_no, 'expected {"id": "...", "boosts": {"phrase": '
                                 "bonus, ...}}")  # fmt: skip
        if others := sorted(set(record) - {"id", "boosts"}):  # ("Boosts" misspelled: lost)
            raise InputFileError(path, line_no, f"unknown key {others[0]!r}: a line holds "
                                 '"id" and "boosts" only')  # fmt: skip
        utt = record["id"]
        if utt in out:
            raise InputFileError(path, line_no, f"utterance {utt!r} is already on line "
                                 f"{where[utt]}")  # fmt: skip
        try:
            out[utt] = checked_phrases(record["boosts"])
        except ValueError as exc:
            raise InputFileError(path, line_no, str(exc)) from None
        where[utt] = line_no
    return out


def read_boost_file(path) -> dict[str, float]:
    """``phrase<TAB>bonus`` per line (a word or words separated by spaces; blank lines and ``#``
    comments skipped) as ``{phrase: bonus}``, the phrase's words joined by single spaces. A
    malformed line, a repeated phrase, a non-finite bonus or one beyond ``MAX_COST_TERM`` raises
    `InputFileError` naming the line."""
    out: dict[str, float] = {}
    where: dict[str, int] = {}
    for line_no, line in text_lines(path, "boost file"):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        phrase, tab, value = line.rpartition("\t")
        if "\t" in phrase.strip():  # a third column ("cat<TAB>2<TAB>1" read as 'cat 2': 1)
            raise InputFileError(path, line_no, "expected PHRASE<TAB>BONUS, one tab (spaces "
                                 f"between a phrase's words); got {quoted(line)}")  # fmt: skip
        phrase = " ".join(phrase.split())
        try:
            bonus = strict_float(value) if tab and phrase else math.nan
        except ValueError:
            bonus = math.nan
        if not tab or not phrase or not math.isfinite(bonus):
            raise InputFileError(path, line_no, f"expected PHRASE<TAB>BONUS (a finite number); "
                                 f"got {line[:80]!r}")  # fmt: skip
        try:
            phrase, bonus = checked_phrase(phrase, bonus)
        except ValueError as exc:
            raise InputFileError(path, line_no, str(exc)) from None
        if phrase in out:
            raise InputFileError(path, line_no, f"{phrase!r} is already on line {where[phrase]}")
        if len(out) == MAX_PHRASES:
            raise InputFileError(path, line_no, f"more than {MAX_PHRASES} phrases")
        out[phrase], where[phrase] = bonus, line_no
    return out

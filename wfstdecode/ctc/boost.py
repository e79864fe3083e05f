"""Per-utterance word boosting (gpu-wfst-beam-search-ctc.txt §3.2, Fig. 5).

A boost table maps word id -> bonus (a positive bonus makes the word more likely). In the search,
every arc with a non-epsilon output label ``w`` costs ``arc_cost - bonus[w]``: decoding with TLG∘B
for the one-state boosting acceptor B, without composing.

All utterances' tables live in one set of flat arrays — open addressing with linear probing, the
same structure the GPU backend keeps on the device:

* ``keys``  int32 [total]: word id, or -1 for an empty slot;
* ``values`` float32 [total]: the bonus;
* ``offset`` int64 [B]: where utterance b's table starts; ``mask`` int64 [B]: its capacity - 1
  (capacities are powers of two, at least twice the number of words), or -1 for no table.

The slot of word ``w`` is ``(w * 2654435761) mod 2**32 & mask`` (Knuth's multiplicative hash), then
the next slots in turn; `bundles.arc_cost` looks a word up there, in every backend.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import DecodeInputError
from .options import MAX_COST_TERM

EMPTY = -1
HASH_MULT = 2654435761


@dataclass(frozen=True)
class BoostTables:
    """Flat open-addressing hash tables, one per utterance (see the module docstring)."""

    keys: np.ndarray
    values: np.ndarray
    offset: np.ndarray
    mask: np.ndarray
    dicts: tuple  # per utterance: {word_id: float32 bonus} or None (what the tables hold)

    @property
    def any(self) -> bool:
        return bool((self.mask >= 0).any())


def _insert(keys, values, base, mask, word, bonus):
    h = ((word * HASH_MULT) & 0xFFFFFFFF) & mask
    while keys[base + h] != EMPTY:
        h = (h + 1) & mask
    keys[base + h] = word
    values[base + h] = bonus


def resolve_boosts(boosts, batch_size: int, words) -> list[dict[int, np.float32] | None]:
    """Normalise the ``boosts`` argument of `decode_ctc` to one ``{word_id: bonus}`` (or None) per
    utterance.

    ``boosts`` is None, one mapping applied to every utterance, or a sequence of ``batch_size``
    mappings / None. Keys are words (str, looked up in ``words``) or word ids (int); values are
    bonuses of at most ``MAX_COST_TERM`` (1000) in magnitude. Words that are not in the graph's
    word table are left out with one ``UserWarning`` listing them (they can never be output, so
    boosting them cannot act).
    """
    if boosts is None:
        return [None] * batch_size
    if isinstance(boosts, Mapping):
        per_utt = [boosts] * batch_size
    elif isinstance(boosts, Sequence) and not isinstance(boosts, (str, bytes)):
        if len(boosts) != batch_size:
            raise DecodeInputError(
                f"boosts must have one entry per utterance ({batch_size}); got {len(boosts)}"
            )
        per_utt = list(boosts)
    else:
        raise DecodeInputError(
            f"boosts must be None, a mapping word -> bonus, or a list of them; got {type(boosts)}"
        )
    max_id = words.next_id - 1 if words is not None else None
    unknown: list[str] = []
    out: list[dict[int, np.float32] | None] = []
    for b, table in enumerate(per_utt):
        if table is None or len(table) == 0:
            out.append(None)
            continue
        if not isinstance(table, Mapping):
            raise DecodeInputError(
                f"boosts[{b}] must be a mapping word -> bonus; got {type(table)}"
            )
        resolved: dict[int, np.float32] = {}
        for word, bonus in table.items():
            if isinstance(bonus, bool) or not isinstance(
                bonus, (int, float, np.floating, np.integer)
            ):
                raise DecodeInputError(f"boosts[{b}][{word!r}] must be a number; got {bonus!r}")
            if not -MAX_COST_TERM <= bonus <= MAX_COST_TERM:  # also rejects NaN and inf
                raise DecodeInputError(
                    f"boosts[{b}][{word!r}] must be in [-{MAX_COST_TERM:g}, {MAX_COST_TERM:g}]; "
                    f"got {bonus}"
                )
            if isinstance(word, (int, np.integer)) and not isinstance(word, bool):
                wid = int(word)
                if (
                    wid <= 0
                    or (max_id is not None and wid > max_id)
                    or (words is not None and _symbol_or_none(words, wid) is None)
                ):
                    unknown.append(str(wid))
                    continue
            elif isinstance(word, str):
                wid = words.get(word) if words is not None else None
                if wid is None:
                    if words is None:
                        raise DecodeInputError(
                            f"boosts[{b}] names word {word!r}, but the graph has no word table; "
                            "pass word ids instead"
                        )
                    unknown.append(word)
                    continue
                if wid == 0:
                    unknown.append(word)  # epsilon is never an output word
                    continue
            else:
                raise DecodeInputError(
                    f"boosts[{b}]: a key must be a word or a word id; got {word!r}"
                )
            resolved[wid] = np.float32(bonus)
        out.append(resolved or None)
    if unknown:
        listed = sorted(set(unknown))
        warnings.warn(
            f"boosted words not in the graph's vocabulary are ignored: {', '.join(listed)}",
            UserWarning,
            stacklevel=3,
        )
    return out


def _symbol_or_none(words, wid):
    try:
        return words.symbol(wid)
    except Exception:
        return None


def build_boost_tables(per_utt: list[dict[int, np.float32] | None]) -> BoostTables:
    """Lay out resolved per-utterance boosts (`resolve_boosts`) as flat hash tables."""
    offsets = np.zeros(len(per_utt), np.int64)
    masks = np.full(len(per_utt), -1, np.int64)
    total = 0
    for b, table in enumerate(per_utt):
        offsets[b] = total
        if table:
            cap = 1 << max(1, (2 * len(table) - 1).bit_length())
            masks[b] = cap - 1
            total += cap
    keys = np.full(max(total, 1), EMPTY, np.int32)
    values = np.zeros(max(total, 1), np.float32)
    for b, table in enumerate(per_utt):
        if table:
            for word, bonus in table.items():
                _insert(keys, values, int(offsets[b]), int(masks[b]), int(word), bonus)
    return BoostTables(keys, values, offsets, masks, tuple(per_utt))


def read_boost_file(path) -> dict[str, float]:
    """``word<TAB>bonus`` per line (blank lines and ``#`` comments skipped) as ``{word: bonus}``.
    A malformed line, a repeated word, a non-finite bonus or one beyond ``MAX_COST_TERM`` raises
    `InputFileError` naming the line; so does a phrase of several words, which word boosting
    cannot express (each word would be boosted wherever it occurs)."""
    import math

    from ..errors import InputFileError
    from ..textfiles import text_lines

    out: dict[str, float] = {}
    where: dict[str, int] = {}
    for line_no, line in text_lines(path, "boost file"):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        phrase, tab, value = line.rpartition("\t")
        phrase = phrase.strip()
        try:
            bonus = float(value) if tab and phrase else math.nan
        except ValueError:
            bonus = math.nan
        if not tab or not phrase or not math.isfinite(bonus):
            raise InputFileError(path, line_no, f"expected WORD<TAB>BONUS (a finite number); got "
                                 f"{line[:80]!r}")  # fmt: skip
        if len(phrase.split()) > 1:
            raise InputFileError(path, line_no, f"{phrase!r} has several words: only single "
                                 "words can be boosted (no phrases yet)")  # fmt: skip
        if abs(bonus) > MAX_COST_TERM:
            raise InputFileError(path, line_no, f"bonus {bonus} is beyond ±{MAX_COST_TERM:g}")
        if phrase in out:
            raise InputFileError(path, line_no, f"{phrase!r} is already on line {where[phrase]}")
        out[phrase], where[phrase] = bonus, line_no
    return out

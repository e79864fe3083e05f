"""Lattices scored against reference transcripts over a grid of LM weights and word insertion
penalties: what Kaldi's ``local/score.sh`` does after every decode (for each LMWT and WIP,
``lattice-scale --inv-acoustic-scale=LMWT | lattice-add-penalty --word-ins-penalty=WIP |
lattice-best-path``, then ``compute-wer``), here in one pass over the lattices.

A path's cost at a setting is ``graph + WIP * words + acoustic / LMWT``: the lattices keep
their acoustic costs unscaled (`wfstdecode.lattice.Lattice`), so LMWT is the inverse of the
acoustic scale a decode would use (a CTC decode's default scale 1 is LMWT 1).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .ctc.options import ACOUSTIC_SCALE_RANGE, MAX_COST_TERM
from .errors import OptionsError
from .lattice import Lattice
from .metrics import ErrorCounts, error_counts


@dataclass(frozen=True)
class ScoredSetting:
    """The best paths of every lattice at one LM weight and word insertion penalty: their
    words per utterance and their errors against the references."""

    lm_weight: float
    word_penalty: float
    counts: ErrorCounts
    hypotheses: dict[str, list[str]]
    pathless: tuple[str, ...] = ()  # lattices without a complete path (scored as no words)


def score_lattices(
    lattices: Mapping[str, Lattice],
    words,
    references: Mapping[str, str],
    lm_weights: Sequence[float],
    word_penalties: Sequence[float] = (0.0,),
) -> list[ScoredSetting]:
    """Every (LM weight, word penalty) pair, penalties outer: each lattice's best path at that
    setting (module docstring) scored against ``references`` (``{id: "word word ..."}``, one
    for every lattice; `read_reference_texts`). ``words``: the lattices' word table."""
    from .graph.oov_slot import is_slot_label

    weights, penalties = checked_lm_weights(lm_weights), checked_word_penalties(word_penalties)
    missing = [key for key in lattices if key not in references]
    if missing:
        raise OptionsError(f"no reference for lattice {missing[0]!r} ({len(missing)} of "
                           f"{len(lattices)} missing)")  # fmt: skip
    for key, lat in lattices.items():
        if not isinstance(lat, Lattice):
            raise OptionsError(f"lattice {key!r} must be a Lattice; got {type(lat).__name__}")
        # (up front, of every word: the best paths of some settings only would meet it later)
        if unknown := [w for w in np.unique(lat.olabel).tolist() if w and not words.has_id(w)]:
            raise OptionsError(f"lattice {key!r} has the word id {unknown[0]}, which is not in "
                               f"the word table ({len(words)} symbols): is it the lattices' "
                               "graph's words.txt?")  # fmt: skip
        if slots := [w for w in np.unique(lat.olabel).tolist() if w and
                     is_slot_label(words.symbol(w))]:  # fmt: skip
            raise OptionsError(f"lattice {key!r} holds the oov slot's label "
                               f"{words.symbol(slots[0])!r}: a spelled word is several labels, "
                               "not a word to score (score lattices of a graph without an oov "
                               "slot)")  # fmt: skip
    refs = {key: references[key].split() for key in lattices}
    out = []
    for penalty in penalties:
        penalized = {key: lat.with_word_penalty(penalty) for key, lat in lattices.items()}
        for weight in weights:
            hyps, pathless = {}, []
            for key, lat in penalized.items():
                found = replace(lat, acoustic_scale=1.0 / weight, _cache={}).best_path()
                if found is None:
                    pathless.append(key)
                labels = lat.olabel[found[0]].tolist() if found is not None else []
                hyps[key] = [words.symbol(w) for w in labels if w]
            counts = error_counts([refs[k] for k in hyps], list(hyps.values()))
            out.append(ScoredSetting(weight, penalty, counts, hyps, tuple(pathless)))
    return out


def best_setting(settings: Sequence[ScoredSetting]) -> ScoredSetting:
    """The setting of fewest errors (the first of them in ``settings``' order)."""
    return min(settings, key=lambda s: s.counts.errors)


def checked_lm_weights(values: Sequence[float]) -> list[float]:
    """LM weights as floats, refused (`OptionsError`) unless each is in the inverse of
    `ACOUSTIC_SCALE_RANGE` (the acoustic scale a path then ranks by) and there is one."""
    lo, hi = ACOUSTIC_SCALE_RANGE
    return _checked_all(values, "lm weight", 1.0 / hi, 1.0 / lo)


def checked_word_penalties(values: Sequence[float]) -> list[float]:
    """Word penalties as floats, refused unless each is within +-`MAX_COST_TERM`."""
    return _checked_all(values, "word penalty", -MAX_COST_TERM, MAX_COST_TERM)


def _checked_all(values, what: str, lo: float, hi: float) -> list[float]:
    out = [_checked(x, what, lo, hi) for x in values]
    if not out:
        raise OptionsError(f"give at least one {what}")
    return out


def _checked(value, what: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise OptionsError(f"{what} must be a number; got {value!r}")
    if not lo <= float(value) <= hi:  # (NaN too)
        raise OptionsError(f"{what} must be in [{lo:g}, {hi:g}]; got {value}")
    return float(value)

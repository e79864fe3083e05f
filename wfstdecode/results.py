"""`Hypothesis`: the one result type that every decoder and backend returns."""

from __future__ import annotations

import dataclasses
import math
import numbers
import operator
from collections.abc import Mapping, Set
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Hypothesis:
    """One decoded hypothesis of one utterance.

    Scores are log scores: higher is better (the negated OpenFst cost).

    tokens:          emitted token ids (CTC: one per emitted non-blank token, repeats merged as
                     the topology merges them; transducers: one per emitted label).
    timestamps:      frame index of each token, aligned with ``tokens``.
    score:           total log score, ``acoustic_score + graph_score`` where both are known.
    words, word_ids: the output words of a word-level graph (empty for token-level decoders).
    word_timestamps: ``(start_frame, end_frame)`` of each word, inclusive, aligned with ``words``:
                     CTC graphs with a word separator give the first frame of the word's first
                     token and the last frame of its last token (`wfstdecode.ctc._paths`).
    durations:       TDT durations of each token (empty for RNN-T and CTC).
    acoustic_score:  log score from the model (acoustic scale applied), or None.
    graph_score:     log score from the graph, word boosts and penalties, or None.
    notes:           what the decoder had to change or could not do, in words.
    stable_words:    streaming partial results: the first ``stable_words`` words can no longer
                     change (0 for final results, where every word is final).
    word_confidences: per word, its posterior in the decoder's lattice (CTC with a lattice
                     beam: `wfstdecode.lattice.Lattice.word_posteriors`), or empty.
    """

    tokens: tuple[int, ...]
    timestamps: tuple[int, ...]
    score: float
    words: tuple[str, ...] = ()
    word_ids: tuple[int, ...] = ()
    word_timestamps: tuple[tuple[int, int], ...] = ()
    durations: tuple[int, ...] = ()
    acoustic_score: float | None = None
    graph_score: float | None = None
    notes: tuple[str, ...] = field(default=())
    stable_words: int = 0
    word_confidences: tuple[float, ...] = ()

    def __post_init__(self):
        """What ``Hypothesis(...)`` is given is checked (decoders that make thousands use
        `made_from`): per-token and per-word fields aligned, spans in order, every field of its
        documented type (NumPy numbers become Python ones and arrays or lists tuples, so that
        hypotheses hash and `record` is JSON-ready; a float where an integer belongs is refused)."""
        for name, (convert, meaning) in _FIELD_TYPES.items():
            value = getattr(self, name)
            try:
                plain = convert(value)
            except (TypeError, ValueError, OverflowError):
                raise ValueError(f"Hypothesis.{name} must be {meaning}; got {value!r}") from None
            if plain is not value:
                object.__setattr__(self, name, plain)
        if len(self.timestamps) != len(self.tokens) or (
            self.durations and len(self.durations) != len(self.tokens)
        ):
            raise ValueError(f"Hypothesis: {len(self.tokens)} tokens but {len(self.timestamps)} "
                             f"timestamps and {len(self.durations)} durations")  # fmt: skip
        for name in ("word_ids", "word_timestamps", "word_confidences"):
            if getattr(self, name) and len(getattr(self, name)) != len(self.words):
                raise ValueError(f"Hypothesis: {len(self.words)} words but "
                                 f"{len(getattr(self, name))} {name}")  # fmt: skip
        if any(start > end for start, end in self.word_timestamps):
            raise ValueError(f"Hypothesis.word_timestamps must be (start, end) with start <= "
                             f"end; got {self.word_timestamps!r}")  # fmt: skip

    @property
    def text(self) -> str:
        """The words joined by single spaces."""
        return " ".join(self.words)

    def word_entries(self, frame_shift: float | None = None) -> list[dict]:
        """``[{"word", "start_frame", "end_frame"}]`` per word, plus ``start`` / ``end`` in
        seconds (the end of the last frame) given the seconds per frame, and ``confidence``
        where the decoder gives word confidences."""
        entries = []
        spans = self.word_timestamps or [None] * len(self.words)  # (a decoder without times)
        for i, (word, span) in enumerate(zip(self.words, spans, strict=True)):
            entry: dict = {"word": word}
            if span is not None:
                start, end = span
                entry.update(start_frame=start, end_frame=end)
            if span is not None and frame_shift is not None:
                entry["start"] = round(start * frame_shift, 3)
                entry["end"] = round((end + 1) * frame_shift, 3)
            if self.word_confidences:
                entry["confidence"] = finite_or_none(round(self.word_confidences[i], 4))
            entries.append(entry)
        return entries

    def record(
        self, frame_shift: float | None = None, tokens: bool = False, durations: bool = False
    ) -> dict:
        """A JSON-ready dict: ``text``, ``words`` (`word_entries`), ``score`` (null when no path
        survived: see ``notes``), the acoustic and graph scores where the decoder keeps them
        apart, with ``tokens`` the tokens, their frames and TDT durations (with ``durations``
        even when there are none: a TDT model's empty hypothesis), and ``notes``."""
        out = {"text": self.text, "words": self.word_entries(frame_shift),
               "score": finite_or_none(self.score)}  # fmt: skip
        if self.acoustic_score is not None or self.graph_score is not None:
            out["acoustic_score"] = finite_or_none(self.acoustic_score)
            out["graph_score"] = finite_or_none(self.graph_score)
        if tokens:
            out["tokens"] = list(self.tokens)
            out["timestamps"] = list(self.timestamps)
            if self.durations or durations:
                out["durations"] = list(self.durations)
        out["notes"] = list(self.notes)
        return out


def _number(x) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError
    return x if type(x) is float or type(x) is int else float(x)


def _maybe_number(x) -> float | None:
    return None if x is None else _number(x)


def _integer(x) -> int:
    if type(x) is int:
        return x
    if isinstance(x, (bool, np.bool_)):
        raise TypeError  # (True is 1 to operator.index)
    return operator.index(x)  # (a NumPy integer, not 3.0)


def _sequence(x) -> tuple:
    if isinstance(x, (str, bytes, Set, Mapping)) or not hasattr(x, "__iter__"):
        raise TypeError  # (a string is one word, not letters; a set or dict has no order)
    return x if type(x) is tuple else tuple(x)


def _integers(x) -> tuple[int, ...]:
    seq = _sequence(x)
    if all(type(i) is int for i in seq):
        return seq
    return tuple(map(_integer, seq))


def _strings(x) -> tuple[str, ...]:
    seq = _sequence(x)
    if not all(isinstance(w, str) for w in seq):
        raise TypeError
    return seq if all(type(w) is str for w in seq) else tuple(map(str, seq))


def _numbers(x) -> tuple[float, ...]:
    seq = _sequence(x)
    return seq if all(type(c) is float for c in seq) else tuple(map(_number, seq))


def _spans(x) -> tuple[tuple[int, int], ...]:
    seq = _sequence(x)
    if all(type(s) is tuple and len(s) == 2 and type(s[0]) is type(s[1]) is int for s in seq):
        return seq
    spans = tuple(_integers(s) for s in seq)
    if any(len(s) != 2 for s in spans):
        raise ValueError
    return spans


_FIELD_TYPES = {  # field: (conversion, what it must be)
    "tokens": (_integers, "integers"),
    "timestamps": (_integers, "integers"),
    "score": (_number, "a number"),
    "words": (_strings, "strings"),
    "word_ids": (_integers, "integers"),
    "word_timestamps": (_spans, "(start, end) pairs of integers"),
    "durations": (_integers, "integers"),
    "acoustic_score": (_maybe_number, "a number or None"),
    "graph_score": (_maybe_number, "a number or None"),
    "notes": (_strings, "strings"),
    "stable_words": (_integer, "an integer"),
    "word_confidences": (_numbers, "numbers"),
}


def made_from(fields: dict) -> Hypothesis:
    """``Hypothesis(**fields)`` without running ``__init__``, for decoders that make thousands:
    a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` and takes
    keywords (~3 us a hypothesis, against ~0.4 us here). ``fields`` holds ``tokens``,
    ``timestamps`` and ``score`` and any others (the rest take their defaults), already of the
    types the fields document: nothing is converted or checked, unlike ``__init__``."""
    hyp = object.__new__(Hypothesis)
    hyp.__dict__.update(_DEFAULTS)
    hyp.__dict__.update(fields)
    return hyp


def changed(hyp: Hypothesis, **fields) -> Hypothesis:
    """``dataclasses.replace(hyp, **fields)`` by `made_from` (~1 us against ~19 us): for the
    decoders' own changes to hypotheses they made, of the types the fields document."""
    return made_from({**hyp.__dict__, **fields})


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Hypothesis)
             if f.default is not dataclasses.MISSING}  # fmt: skip


MAX_FRAME_SHIFT = 10.0  # seconds per frame: well above any model's, and times stay finite
MIN_FRAME_SHIFT = 0.001  # times are written to the millisecond: a shorter frame would vanish


def frame_shift_problem(shift) -> str | None:
    """Why ``shift`` is no frame shift (seconds per frame), or None: a number in [0.001, 10]
    (a CTM line of a one-frame word under a millisecond would say it lasts 0.000 s)."""
    if (isinstance(shift, bool) or not isinstance(shift, numbers.Real)
            or not MIN_FRAME_SHIFT <= shift <= MAX_FRAME_SHIFT):  # also NaN  # fmt: skip
        return (
            f"must be in [{MIN_FRAME_SHIFT:g}, {MAX_FRAME_SHIFT:g}] seconds (times are "
            f"written to the millisecond); got {shift!r}"
        )
    return None


def finite_or_none(x: float | None) -> float | None:
    """JSON has no infinities: a score that is not finite is written as null; -0.0 (a score of
    -1e-5 rounded) as 0.0, as the text outputs print it."""
    return x + 0.0 if x is not None and math.isfinite(x) else None

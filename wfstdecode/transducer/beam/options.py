"""`BeamOptions`: every knob of transducer beam search that changes results, validated once."""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Literal

from ...errors import OptionsError
from ..options import DEFAULT_WINDOW, counted, durations_or_none

__all__ = ["BEAM_ALGORITHMS", "BeamOptions"]

BEAM_ALGORITHMS = ("standard", "tokenwise", "maes", "alsd", "wind")
# Searches whose hypothesis score sums over the alignments of its tokens (prefix merging), and
# those whose score is one alignment's (identical hypotheses keep the better alignment).
SUMMING = ("standard", "tokenwise", "maes")
# Searches that decode TDT models (``durations``).
TDT_ALGORITHMS = ("standard", "maes", "alsd")
DEFAULT_SEGMENT = 3


@dataclass(frozen=True)
class BeamOptions:
    """Options of `beam_decode`.

    algorithm — two families share every other option:

      Frame-synchronous, scores sum over alignments (identical token sequences are merged by
      log-sum-exp as they reach the end of a frame, "prefix merging"):
      "standard"  breadth-first search (Graves 2012 as run in Keren's paper, ref. [7]): per frame,
                  up to ``max_symbols_per_frame`` rounds; each round moves every hypothesis
                  past the frame with its blank (the ``beam_size`` best finished ones are kept)
                  and extends them by the ``beam_size`` best labels over all of them that beat
                  the worst kept finished score. The last round takes blanks only.
      "tokenwise" Keren's token-wise search: the same over segments of ``segment_size`` frames
                  whose joint calls are batched; a label's emission frame becomes a distribution
                  over the segment (Eq. 3-7). ``segment_size=1`` is "standard". At most
                  ``max_symbols_per_frame * segment_size`` labels per segment.
      "maes"      modified adaptive expansion search (Kim et al. 2021): "standard" with at most
                  ``maes_steps`` labels per frame, ``beam_size + expansion_beta`` label
                  expansions per round, and only labels whose score is within
                  ``expansion_gamma`` of the hypothesis' best expansion (blank included).

      One alignment per hypothesis, its score that alignment's log-probability (identical
      hypotheses keep the better alignment: Viterbi recombination); hypotheses that reach the
      last frame join a final set of ``beam_size`` (Saon et al.'s F), and a hypothesis below
      its worst member is dropped:
      "alsd"      alignment-length synchronous search (Saon et al. 2020): every step extends
                  each beam hypothesis by one blank or one label (TDT: one token with one
                  duration), so the beam compares hypotheses of equal frames + labels.
      "wind"      WIND beam search (Algorithm 3): hypotheses wait by the frame they read next;
                  each step extends the ``beam_size`` best at the earliest frame by their
                  ``beam_size`` best moves in a window of ``window`` frames — a label at any
                  frame of the window after blanks before it, or blanks over the whole window.
                  A hypothesis at the earliest frame goes on only while fewer than
                  ``beam_size`` waiting at later frames beat it (Graves' rule: labels emitted
                  at a frame bring hypotheses back to it). ``window=1`` is its
                  frame-synchronous (non-windowed) form. RNN-T only.

    beam_size:   hypotheses kept per utterance.
    nbest:       hypotheses returned per utterance, best first (<= beam_size).
    length_norm: rank the final hypotheses by score / number of tokens (NeMo's score_norm,
                 Graves' final choice); the search itself compares raw log-probabilities.
    max_symbols_per_frame: labels one hypothesis may emit at one frame (a blank must follow);
                 "maes" emits at most the smaller of this and ``maes_steps``.
    durations:   TDT duration values (a token moves its duration on, a blank at least one
                 frame); supported by "alsd" and by "standard" and "maes", which then sum over
                 alignments per (token sequence, frame reached): a hypothesis holds its mass
                 landing on each of the next frames, and a label's timestamp is its frame, its
                 duration the most probable one.
    window:      "wind" only; frames scored per step (default 8).
    segment_size: "tokenwise" only; frames per segment (default 3).
    max_tokens:  "alsd" / "wind" only: no hypothesis grows longer (ALSD's u_max); None: no bound.
    maes_steps, expansion_beta, expansion_gamma: "maes" only (defaults 2, 2, 2.3 as NeMo's).
    """

    algorithm: Literal["standard", "tokenwise", "maes", "alsd", "wind"] = "alsd"
    beam_size: int = 4
    nbest: int = 1
    length_norm: bool = True
    max_symbols_per_frame: int = 10
    durations: tuple[int, ...] | None = None
    window: int | None = None
    segment_size: int | None = None
    max_tokens: int | None = None
    maes_steps: int | None = None
    expansion_beta: int | None = None
    expansion_gamma: float | None = None

    def __post_init__(self):
        if self.algorithm not in BEAM_ALGORITHMS:
            raise OptionsError(
                f"algorithm must be one of {BEAM_ALGORITHMS}; got {self.algorithm!r}"
            )
        counted(self, "beam_size", 1)
        counted(self, "nbest", 1)
        if self.nbest > self.beam_size:
            raise OptionsError(
                f"nbest={self.nbest} exceeds beam_size={self.beam_size}: a beam holds only "
                "beam_size hypotheses"
            )
        if not isinstance(self.length_norm, bool):
            raise OptionsError(f"length_norm must be True or False; got {self.length_norm!r}")
        counted(self, "max_symbols_per_frame", 1)
        object.__setattr__(self, "durations", durations_or_none(self.durations))
        own = {
            "window": ("wind",),
            "segment_size": ("tokenwise",),
            "max_tokens": ("alsd", "wind"),
            "maes_steps": ("maes",),
            "expansion_beta": ("maes",),
            "expansion_gamma": ("maes",),
            "durations": TDT_ALGORITHMS,
        }
        for name, algorithms in own.items():
            if getattr(self, name) is not None and self.algorithm not in algorithms:
                raise OptionsError(
                    f"{name}={getattr(self, name)!r} is only used by algorithm "
                    f"{' or '.join(map(repr, algorithms))}; got algorithm={self.algorithm!r}"
                )
        for name in ("window", "segment_size", "maes_steps"):
            if getattr(self, name) is not None:
                counted(self, name, 1)
        if self.max_tokens is not None:
            counted(self, "max_tokens", 0)
        if self.expansion_beta is not None:
            counted(self, "expansion_beta", 0)
        gamma = self.expansion_gamma
        if gamma is not None and (
            isinstance(gamma, bool)
            or not isinstance(gamma, numbers.Real)  # (NumPy's floats and ints too)
            or math.isnan(gamma)
            or gamma < 0
        ):
            raise OptionsError(
                f"expansion_gamma must be a number >= 0 (inf allowed); got {gamma!r}"
            )
        if gamma is not None:
            object.__setattr__(self, "expansion_gamma", float(gamma))

    def for_model(self, durations) -> BeamOptions:
        """These options for a model with TDT ``durations`` (None or (): RNN-T)."""
        durations = durations_or_none(durations)
        if durations is not None and self.algorithm not in TDT_ALGORITHMS:
            raise OptionsError(
                f"beam algorithm {self.algorithm!r} does not decode TDT models (durations "
                f"{tuple(durations)}); use one of {', '.join(TDT_ALGORITHMS)}"
            )
        return dataclasses.replace(self, durations=durations)

    @property
    def sums_alignments(self) -> bool:
        """Whether a hypothesis' score sums over its alignments (else: one alignment's)."""
        return self.algorithm in SUMMING

    @property
    def effective_window(self) -> int:
        if self.algorithm != "wind":
            return 1
        return DEFAULT_WINDOW if self.window is None else self.window

    @property
    def effective_segment(self) -> int:
        if self.algorithm != "tokenwise":
            return 1
        return DEFAULT_SEGMENT if self.segment_size is None else self.segment_size

    def segment_for(self, frames: int) -> int:
        """The segment size a search of ``frames`` frames runs with: `effective_segment`, at
        most the frames there are (one segment either way; the buffers a segment needs are
        not made for frames that do not exist)."""
        return min(self.effective_segment, max(frames, 1))

    def landing_width(self, frames: int) -> int:
        """Frames ahead of its frame that the summing searches hold a token's landing mass for:
        the longest duration (at least 1, a blank's), at most ``frames`` (the T of the frames
        searched, at least 1): mass landing ``frames`` or more ahead of any frame is past the
        end, finished alike (a duration of 2**31 needs no buffer of 2**31 frames)."""
        return max(min(max(self.durations or (1,)), frames), 1)

    @property
    def rounds(self) -> int:
        """Label rounds per segment of the frame-synchronous searches (labels per segment)."""
        if self.algorithm == "maes":  # (max_symbols_per_frame binds it too, as documented)
            steps = 2 if self.maes_steps is None else self.maes_steps
            return min(steps, self.max_symbols_per_frame)
        return self.max_symbols_per_frame * self.effective_segment

    @property
    def expansions(self) -> int:
        """Label expansions kept per round of the frame-synchronous searches."""
        beta = self.expansion_beta if self.algorithm == "maes" else 0
        return self.beam_size + (2 if beta is None else beta)

    @property
    def gamma(self) -> float:
        if self.algorithm != "maes":
            return math.inf
        return 2.3 if self.expansion_gamma is None else float(self.expansion_gamma)

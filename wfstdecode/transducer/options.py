"""`GreedyOptions`: every knob of transducer greedy decoding, validated once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..errors import OptionsError

__all__ = [
    "ALGORITHMS",
    "CUDA_GRAPH_MODES",
    "DEFAULT_WINDOW",
    "MAX_COUNT",
    "GreedyOptions",
    "check_durations",
    "counted",
    "durations_or_none",
]

ALGORITHMS = ("frame_looping", "label_looping", "wind")
CUDA_GRAPH_MODES = ("off", "loop_bodies", "full", "auto")
DEFAULT_WINDOW = 8
# Bound of max_symbols_per_frame and durations: far beyond use, and frame counters (int64) plus
# a duration, or frames x max_symbols_per_frame label slots, cannot overflow.
MAX_COUNT = 2**31 - 1


@dataclass(frozen=True)
class GreedyOptions:
    """Options of `greedy_decode`.

    algorithm:  "frame_looping" — the batched baseline (label-looping paper, Algorithm 2): every
                utterance waits at frame t until the whole batch has emitted blank there;
                "label_looping" — Algorithm 3: each utterance advances its own frame index, the
                predictor runs once per emitted label for the whole batch;
                "wind" — label-looping whose blank search scores a window of frames at once
                (WIND), for any batch size. All three give the same tokens and timestamps.
    window:     frames per WIND search step; only for "wind" (None there means 8). A decode cuts
                it to the batch's frame count T (frames past T are padding) and reports the
                window used in ``Hypothesis.notes``; a step scores B x window joint rows.
    durations:  TDT duration values (e.g. (0, 1, 2, 3, 4)); None for RNN-T. The joint then
                returns ``vocab + len(durations)`` logits: tokens first, durations last.
                Supported by "label_looping" only (batched frame-looping TDT is not exact; WIND
                assumes blanks advance one frame).
    max_symbols_per_frame: labels emitted at one frame before the frame is left regardless
                (at most `MAX_COUNT`). The graph modes preallocate room for T times this many
                labels per utterance; "off" grows its buffers as labels come.
    cuda_graphs: "off"; "loop_bodies" — each loop body is a captured CUDA graph, the loops run
                in Python; "full" — the whole decode is one CUDA graph with conditional while
                nodes (needs cuda-python / cuda-bindings and a driver for CUDA >= 12.6);
                "auto" — the best of these the input's device supports (reported in
                ``Hypothesis.notes``). An explicit mode the machine cannot run raises
                `BackendUnavailableError`.
    """

    algorithm: Literal["frame_looping", "label_looping", "wind"] = "label_looping"
    window: int | None = None
    durations: tuple[int, ...] | None = None
    max_symbols_per_frame: int = 10
    cuda_graphs: Literal["off", "loop_bodies", "full", "auto"] = "off"

    def __post_init__(self):
        if self.algorithm not in ALGORITHMS:
            raise OptionsError(f"algorithm must be one of {ALGORITHMS}; got {self.algorithm!r}")
        if self.cuda_graphs not in CUDA_GRAPH_MODES:
            raise OptionsError(
                f"cuda_graphs must be one of {CUDA_GRAPH_MODES}; got {self.cuda_graphs!r}"
            )
        counted(self, "max_symbols_per_frame", 1)
        if self.window is not None:
            if self.algorithm != "wind":
                raise OptionsError(
                    f"window={self.window!r} is only used by algorithm='wind'; "
                    f"got algorithm={self.algorithm!r}"
                )
            counted(self, "window", 1)
        object.__setattr__(self, "durations", durations_or_none(self.durations))
        if self.durations is not None:
            self._check_durations()

    def _check_durations(self):
        if self.algorithm != "label_looping":
            raise OptionsError(
                f"durations (TDT) need algorithm='label_looping'; got algorithm={self.algorithm!r}"
            )

    @property
    def effective_window(self) -> int:
        """Frames per blank-search step: 1 except for WIND."""
        if self.algorithm != "wind":
            return 1
        return DEFAULT_WINDOW if self.window is None else self.window

    def window_for(self, frames: int) -> int:
        """The window a decode of ``frames`` frames uses: a longer one would score only padding
        (``window=10**6`` would allocate gigabytes per step)."""
        return min(self.effective_window, max(frames, 1))


def as_count(value, low: int = 0):
    """``value`` as a Python int when it is an integer (NumPy's too, as read from an array; not
    a bool) in [``low``, `MAX_COUNT`], else None."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        return None
    return int(value) if low <= value <= MAX_COUNT else None


def counted(options, name: str, low: int) -> None:
    """Set field ``name`` of the frozen ``options`` to its value as a Python int (`as_count`),
    or raise `OptionsError` naming it."""
    value = getattr(options, name)
    count = as_count(value, low)
    if count is None:
        raise OptionsError(f"{name} must be an int in [{low}, {MAX_COUNT}]; got {value!r}")
    object.__setattr__(options, name, count)


def durations_or_none(durations) -> tuple[int, ...] | None:
    """`check_durations`, or None (RNN-T) for None or no durations at all (an RNN-T model's
    ``durations`` is ``()``: ``durations=model.durations`` fits either kind)."""
    if durations is None or (isinstance(durations, tuple | list) and not durations):
        return None
    if isinstance(durations, np.ndarray) and durations.ndim == 1 and not durations.size:
        return None
    return check_durations(durations)


def check_durations(durations) -> tuple[int, ...]:
    """TDT durations as a tuple of Python ints, or `OptionsError` naming what is wrong."""
    try:
        given = tuple(durations)
    except TypeError:
        raise OptionsError(f"durations must be a sequence of ints; got {durations!r}") from None
    durs = tuple(as_count(d) for d in given)
    if not durs or None in durs:
        raise OptionsError(f"durations must be non-negative ints <= {MAX_COUNT}; got {given!r}")
    if len(set(durs)) != len(durs):
        raise OptionsError(f"durations must be distinct; got {durs!r}")
    if max(durs) == 0:
        raise OptionsError(f"durations need a positive value to advance in time; got {durs!r}")
    return durs

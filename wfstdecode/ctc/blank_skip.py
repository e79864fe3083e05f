"""Blank-frame skipping (``CtcBeamOptions.blank_skip_threshold``): which frames the search
leaves out (`blank_skips`, one compiled pass), the batch without them (`skip_blank_frames`, what
`search.prepare_problem` gives every backend) and the map back to the input's frames
(`SkippedFrames`). Streams (`stream.CtcStreamDecoder`) decide chunk by chunk with the same
rule."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from ._problem import _frame_rows, _row_max


class SkippedFrames(NamedTuple):
    """The frames `skip_blank_frames` left out of a batch's search."""

    frame_map: np.ndarray  # int64 (B, T kept): the input frame of each frame kept
    blank_score: np.ndarray  # float64 (B,): acoustic scale x the skipped frames' blank log-probs

    def utterance(self, b: int) -> SkippedFrames:
        return SkippedFrames(self.frame_map[b : b + 1], self.blank_score[b : b + 1])


def skip_blank_frames(
    lp: np.ndarray, lengths: np.ndarray, blank: int, threshold: float, acoustic_scale: float
) -> tuple[np.ndarray, np.ndarray, SkippedFrames]:
    """``lp`` (B, T, V) float32 without the frames within ``lengths`` that `blank_skips` skips
    (`CtcBeamOptions.blank_skip_threshold`): ``(kept frames (B, T kept, V), their lengths,
    SkippedFrames)``. One compiled pass over the frames, then one gather."""
    B, T = lp.shape[:2]
    rows, per_utterance, per_frame = _frame_rows(lp)
    frame_map = np.zeros((B, T), np.int64)
    kept = np.zeros(B, np.int64)
    blank_sum = np.zeros(B, np.float64)
    _kept_frames(rows, np.int64(per_utterance), np.int64(per_frame), lengths, np.int64(blank),
                 math.log(threshold), frame_map, kept, blank_sum)  # fmt: skip
    frame_map = frame_map[:, : int(kept.max(initial=0))]
    kept_lp = lp[np.arange(B)[:, None], frame_map]  # (padding: frame 0, beyond the lengths)
    return kept_lp, kept, SkippedFrames(frame_map, blank_sum * float(acoustic_scale))


def blank_skips(window: np.ndarray, blank: int, threshold: float, left: int, final: bool,
                blank_sum: np.ndarray) -> tuple[np.ndarray, int, int]:  # fmt: skip
    """Which frames of ``window`` (n, V) float32, one utterance's frames in order, the search
    skips: those whose ``blank`` column is above ``log(threshold)`` and that hold no NaN or
    +inf (an input error stays, to be reported) — but for a run of them whose kept neighbours
    on both sides have one and the same best column (the first largest), not the blank: left
    out, the run would put two frames of one token side by side, which a topology may read as
    one token (``a <blk> a`` as ``a a``). ``left``: the best column of the last frame kept
    before the window (-1: none); ``final``: no frame follows. Returns ``(the frames kept, in
    order; how many frames are decided; left after them)``: without ``final`` a run at the
    window's end waits for the next frame kept (a stream's next chunk). ``blank_sum``
    (float64 [1]) gets the skipped frames' blank values added, in order, in place."""
    n = len(window)
    keep, kept = np.empty(n, np.int8), np.empty(n, np.int64)
    n_kept, decided, left = _window_skips(window, np.int64(0), np.int64(1), np.int64(n),
                                          np.int64(blank), math.log(threshold), np.int64(left),
                                          final, keep, kept, blank_sum, np.int64(0))  # fmt: skip
    return kept[:n_kept], int(decided), int(left)


@njit(inline="always", nogil=True, cache=True)
def _best_column(row):
    """The first column holding the row's largest value (its length where a NaN hides it)."""
    largest = _row_max(row)
    for v in range(row.shape[0]):
        if row[v] == largest:
            return v
    return row.shape[0]


@njit(inline="always", nogil=True, cache=True)
def _is_best_column(row, c):
    """Whether ``c`` is `_best_column` of ``row`` (one pass of vector compares, no maximum)."""
    if not 0 <= c < row.shape[0]:
        return False
    x = row[c]
    beaten = x != x  # (NaN)
    for v in range(c):
        beaten |= row[v] >= x
    for v in range(c + 1, row.shape[0]):
        beaten |= row[v] > x
    return not beaten


_SKIP, _KEEP, _WAIT = 0, 1, 2  # a frame's decision in `_window_skips`


@njit(nogil=True, cache=True)
def _window_skips(rows, first, step, n, blank, log_threshold, left, final, keep, kept,
                  blank_sum, b):  # fmt: skip
    """`blank_skips` on frames ``first + t * step`` of ``rows`` (t < n), into ``keep`` (scratch)
    and ``kept``; adds to ``blank_sum[b]``. Returns ``(kept, decided, left)``. A kept frame's
    best column is found only next to a run of skippable frames."""
    waiting = -1  # the first frame of the run of skippable frames that waits for a kept one
    for t in range(n):
        row = rows[first + t * step]
        x = row[blank]
        skippable = np.float64(x) > log_threshold and x < np.inf
        if skippable:
            for v in range(row.shape[0]):  # (NaN or +inf: an error to report, kept)
                skippable &= row[v] < np.inf
        if skippable:
            if waiting < 0:
                waiting = t
                if t > 0:  # (else `left` is the last kept frame's, before the window)
                    left = _best_column(rows[first + (t - 1) * step])
            keep[t] = _WAIT
            continue
        keep[t] = _KEEP
        if waiting >= 0:  # a kept frame ends the run: kept if it would join two of a token
            joins = left != blank and _is_best_column(row, left)
            fate = _KEEP if joins else _SKIP
            for u in range(waiting, t):
                keep[u] = fate
            waiting = -1
    decided = n
    if waiting >= 0:
        if final:  # (no frame after the run)
            for u in range(waiting, n):
                keep[u] = _SKIP
        else:
            decided = waiting  # (`left` is the run's)
    elif n > 0 and not final:
        left = _best_column(rows[first + (n - 1) * step])  # (for the next window's first run)
    n_kept = 0
    for t in range(decided):
        if keep[t] == _KEEP:
            kept[n_kept] = t
            n_kept += 1
        else:
            blank_sum[b] += rows[first + t * step][blank]
    return n_kept, decided, left


@njit(nogil=True, cache=True)
def _kept_frames(rows, per_utterance, per_frame, lengths, blank, log_threshold, frame_map, kept,
                 blank_sum):  # fmt: skip
    keep = np.empty(frame_map.shape[1], np.int8)
    for b in range(frame_map.shape[0]):
        n = min(lengths[b], frame_map.shape[1])
        kept[b] = _window_skips(rows, b * per_utterance, per_frame, n, blank, log_threshold, -1,
                                True, keep, frame_map[b], blank_sum, b)[0]  # fmt: skip

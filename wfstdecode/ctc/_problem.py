"""What every backend receives (`SearchProblem`) and returns (a `RawResult` per utterance, or
the same as one `PathBatch`): the backend-neutral inputs and outputs of the CTC WFST beam
search. Built only by `search.py`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ..decoding_graph import DecodingGraph
from .boost import BoostTables
from .options import LOG_PROB_FLOOR, CtcBeamOptions
from .phrases import NO_SLOT
from .tuning import claim_parallel, numba_threads, parallel_region


@dataclass(frozen=True)
class SearchProblem:
    """Inputs of one batched search, already validated and converted.

    ac:        float32 (B, T, V) search costs, `search_costs` of the log-probs; None when the
               log-probs stay on the GPU (cuda backend only, which computes the same costs there).
    log_probs: float32 (B, T, V) host log-probs as given (for the scores of the final paths), or
               None when they stay on the GPU.
    device_lp: the caller's (B, T, V) log-probs as a Numba device view when they stay on the
               GPU, else None; ``device_frame_max`` then holds their (B, T) per-frame maxima.
    neg_scale: float32 ``-acoustic_scale``.
    lengths:   int64 (B,) frames per utterance.
    arc_cost:  float32 (A,) static cost of each arc: ``weight`` (+ ``blank_penalty`` on blank
               arcs) (+ ``word_insertion_penalty`` on arcs with an output word), in that order,
               in float32.
    beam:      float32.
    oov:       the `oov.OovSpeller` of a graph with an oov slot (None without one).
    skipped:   with ``options.blank_skip_threshold``, the frames left out (`SkippedFrames`):
               ``ac``, ``log_probs`` and ``lengths`` are then those of the frames kept, and
               everything up to the hypotheses counts frames among them.
    """

    ac: np.ndarray | None
    lengths: np.ndarray
    graph: DecodingGraph
    arc_cost: np.ndarray
    boosts: BoostTables
    options: CtcBeamOptions
    blank_ilabel: int
    log_probs: np.ndarray | None = None
    device_lp: object = None
    device_frame_max: object = None
    oov: object = None
    skipped: object = None  # (a `blank_skip.SkippedFrames`)

    @property
    def neg_scale(self) -> np.float32:
        return np.float32(-self.options.acoustic_scale)

    def acoustic_costs(self, b, t, k) -> np.ndarray:
        """float64 ``-acoustic_scale * log_prob`` at ``(b[i], t[i], k[i])`` from the raw float32
        log-probs (not the search's per-frame relative costs), wherever they live; float64, so
        that no finite input overflows."""
        if self.log_probs is not None:
            lp = self.log_probs[b, t, k]
        else:
            from .cuda.inputs import gather_log_probs

            lp = gather_log_probs(self.device_lp, b, t, k)
        return lp.astype(np.float64) * -float(self.options.acoustic_scale)

    def utterance(self, b: int) -> SearchProblem:
        """Utterance ``b`` alone, as a batch of one (host log-probs only)."""
        one = slice(b, b + 1)
        skipped = None if self.skipped is None else self.skipped.utterance(b)
        return replace(self, ac=self.ac[one], log_probs=self.log_probs[one],
                       lengths=self.lengths[one], boosts=self.boosts.lane(b),
                       skipped=skipped)  # fmt: skip

    def input_frame(self, b: int, t: int) -> int:
        """Frame ``t`` of utterance ``b``'s search as the caller numbers the input."""
        return self.input_frames(b)(t)

    def input_frames(self, b: int):
        """Utterance ``b``'s frame numbering, frame searched -> frame of the input (they differ
        where blank frames were skipped); a frame before the first kept one (-1, or 0 of an
        utterance with none kept) stays as it is."""
        if self.skipped is None:
            return int
        kept = self.skipped.frame_map[b, : self.lengths[b]].tolist()
        return lambda t: kept[t] if 0 <= t < len(kept) else t

    @property
    def slot_label(self) -> int:
        """The graph's first oov slot label (`phrases.NO_SLOT` without a slot)."""
        return self.oov.slot.open if self.oov is not None else NO_SLOT

    @property
    def batch_size(self) -> int:
        return len(self.lengths)

    @property
    def beam(self) -> np.float32:
        return np.float32(self.options.beam)


# what `costs_and_first_bad` reports of a frame within the lengths: nothing wrong, a NaN or +inf,
# every column -inf
FINE, NAN_OR_POS_INF, ALL_NEG_INF = 0, 1, 2


def search_costs(log_probs: np.ndarray, acoustic_scale: float, lengths=None) -> np.ndarray:
    """float32 (B, T, V) acoustic costs the search adds: per frame, each log-prob relative to the
    frame's best, raised to ``LOG_PROB_FLOOR``, times ``-acoustic_scale``; -inf stays +inf.

    Every path consumes one log-prob per frame, so subtracting the frame's best ranks paths as
    the raw values do, while no magnitude of input (one frame of -1e10, say) can make float32
    costs too coarse for the beam. The cuda kernels compute the same float32 operations
    (``cuda.steps.acoustic_cost``) on GPU-resident log-probs. Frames at or past an utterance's
    length (``lengths``; None: every frame is within) may hold anything in the input; they are
    not read and their costs are 0 (no path reads them).
    """
    return costs_and_first_bad(log_probs, acoustic_scale, lengths)[0]


def costs_and_first_bad(log_probs, acoustic_scale: float, lengths=None, threads: int | None = 1):
    """`search_costs` and, from the same pass, ``(b, t, kind)`` of the first frame within the
    lengths holding a NaN or +inf (kind `NAN_OR_POS_INF`), else of the first whose every column
    is -inf (`ALL_NEG_INF`), else kind `FINE`. ``threads``: utterances spread over that many
    (None: Numba's default), as the search that follows will."""
    lp = np.asarray(log_probs, np.float32)
    B, T, V = lp.shape
    lens = np.full(B, T, np.int64) if lengths is None else np.asarray(lengths, np.int64)
    out = np.empty((B, T, V), np.float32)  # (frames past a length: zeroed where computed)
    odd, dead = np.full(B, -1, np.int64), np.full(B, -1, np.int64)
    rows, per_utterance, per_frame = _frame_rows(lp)
    args = (rows, np.int64(per_utterance), np.int64(per_frame), lens, np.float32(-acoustic_scale),
            np.float32(LOG_PROB_FLOOR), out, odd, dead)  # fmt: skip
    if threads == 1 or B < 2 or not claim_parallel():
        _costs_in_turn(*args)
    else:
        with numba_threads(threads), parallel_region() as parallel:
            (_costs_in_parallel if parallel else _costs_in_turn)(*args)
    for frames, kind in ((odd, NAN_OR_POS_INF), (dead, ALL_NEG_INF)):
        first = np.flatnonzero(frames >= 0)
        if len(first):
            return out, (int(first[0]), int(frames[first[0]]), kind)
    return out, (0, 0, FINE)


def _frame_rows(lp: np.ndarray) -> tuple[np.ndarray, int, int]:
    """``lp`` (B, T, V) as one C-contiguous array of frames, utterance ``b``'s frame ``t`` in
    row ``b * per_utterance + t * per_frame``, and those two steps: a view wherever the frames
    are rows of one buffer — a C array, a slice of one's time or batch axis (a batch trimmed to
    its longest utterance), a time-major (T, B, V) array transposed, a broadcast — else a copy.
    Compiled loops over C-contiguous rows are vectorized; over a view of unknown layout they are
    not (speech, 191 columns, 60 utterances: a time slice 2.2 against 0.9 ms; time-major, copied
    first, 3.1 against 1.0 ms). Only the frames are read, never the rows between them."""
    B, T, V = lp.shape
    size = lp.itemsize
    row = V * size
    s0 = lp.strides[0] if B > 1 else 0  # (a length-1 axis's stride is arbitrary)
    s1 = lp.strides[1] if T > 1 else 0
    inner = V == 1 or lp.strides[2] == size
    if B and T and V and inner and s0 >= 0 and s1 >= 0 and s0 % row == 0 and s1 % row == 0:
        per_utterance, per_frame = s0 // row, s1 // row
        last = (B - 1) * per_utterance + (T - 1) * per_frame  # the last frame's row
        return (np.lib.stride_tricks.as_strided(lp, (last + 1, V), (row, size)), per_utterance,
                per_frame)  # fmt: skip
    return np.ascontiguousarray(lp).reshape(B * T, V), T, 1


@njit(nogil=True, cache=True)
def _costs_in_turn(rows, per_utterance, per_frame, lens, neg_scale, floor, out, odd, dead):
    for b in range(out.shape[0]):
        odd[b], dead[b] = _utterance_costs(rows, b * per_utterance, per_frame, lens[b],
                                           neg_scale, floor, out[b])  # fmt: skip


@njit(nogil=True, cache=True, parallel=True)
def _costs_in_parallel(rows, per_utterance, per_frame, lens, neg_scale, floor, out, odd, dead):
    for b in prange(out.shape[0]):
        odd[b], dead[b] = _utterance_costs(rows, b * per_utterance, per_frame, lens[b],
                                           neg_scale, floor, out[b])  # fmt: skip


@njit(inline="always", nogil=True, cache=True)
def _larger(x, y):
    return x if x > y else y


@njit(nogil=True, cache=True)
def _row_max(row):
    """The largest of a row with no NaN (+inf counts): eight running maxima, not one, as a
    float reduction is not reordered for vector registers (Numba allows no fast-math here), and
    one chain waits on each comparison (60 speech utterances, 191 phone columns: the maximum
    and the checks of every frame 1.32 -> 0.55 ms).
    The same value as one chain, without NaN, but for a zero's sign where +0 and -0 tie for
    the largest (a review helper's fuzz: a cost of -0 for +0, equal in every comparison)."""
    V = row.shape[0]
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = np.float32(-np.inf)
    v = 0
    while v + 8 <= V:
        m0, m1 = _larger(row[v], m0), _larger(row[v + 1], m1)
        m2, m3 = _larger(row[v + 2], m2), _larger(row[v + 3], m3)
        m4, m5 = _larger(row[v + 4], m4), _larger(row[v + 5], m5)
        m6, m7 = _larger(row[v + 6], m6), _larger(row[v + 7], m7)
        v += 8
    for u in range(v, V):
        m0 = _larger(row[u], m0)
    return _larger(_larger(_larger(m0, m1), _larger(m2, m3)),
                   _larger(_larger(m4, m5), _larger(m6, m7)))  # fmt: skip


@njit(nogil=True, cache=True)
def _utterance_costs(rows, first, step, length, neg_scale, floor, out):
    """One utterance's frames (frame ``t`` in row ``first + t * step`` of ``rows``,
    `_frame_rows`) within ``length`` into ``out`` (its frames past the length: 0),
    float32 operation for float32 operation as NumPy's ``d = lp - lp.max(axis=1);
    np.maximum(d, floor); d[lp == -inf] = -inf; d *= neg_scale`` (a NaN maximum stays NaN, as
    ``np.max`` and ``np.maximum`` propagate it). Returns the first frame with a NaN or +inf and
    the first whose every column is -inf (-1: none). A frame whose values are finite or -inf,
    not all -inf (every frame of a sane input), takes loops without branches, which LLVM
    vectorizes (2.2x faster on the speech set); the others the exact rule."""
    T, V = out.shape
    first_odd, first_dead = -1, -1
    for t in range(min(length, T)):
        row, costs = rows[first + t * step], out[t]
        odd = False  # a NaN or +inf
        alive = False  # a value above -inf
        for v in range(V):
            x = row[v]
            odd |= not x < np.inf
            alive |= x > -np.inf
        if not odd and alive:
            best = _row_max(row)
            for v in range(V):
                x = row[v]
                d = x - best
                d = d if d > floor else floor
                costs[v] = (np.float32(-np.inf) if x == -np.inf else d) * neg_scale
            continue
        if odd and first_odd < 0:
            first_odd = t
        elif not alive and first_dead < 0:
            first_dead = t
        best = row[0] if V > 0 else np.float32(0.0)
        for v in range(1, V):
            x = row[v]
            if best != best:
                break
            if x != x or x > best:
                best = x
        for v in range(V):
            x = row[v]
            if x == -np.inf:
                d = np.float32(-np.inf)
            else:
                d = x - best
                if d < floor:
                    d = floor
            costs[v] = d * neg_scale
    for t in range(max(length, 0), T):
        out[t, :] = np.float32(0.0)
    return first_odd, first_dead


@dataclass(frozen=True)
class RawResult:
    """Backend output for one utterance.

    paths:      best first, up to ``nbest``: ``(arcs, frames, cost)`` with ``arcs`` int32 arc
                indices along the path, ``frames`` int32 the log-prob frame each arc belongs to
                (an emitting arc consumed that frame; an epsilon arc follows it in the same frame;
                -1 for epsilon arcs before the first frame), ``cost`` the float32 search cost
                (final cost included when the path ends in a final state) less the per-frame
                offsets every path of the utterance shares (reference.py steps 2 and 5): only
                differences between an utterance's paths mean anything.
    status:     `status.RESULT_BITS`: NO_FINAL, DIED.
    died_frame: the frame at which the search died (status DIED), else -1.
    notes:      what the backend had to change (e.g. a beam tightened on overflow), for every
                hypothesis of the utterance.
    """

    paths: list
    status: int = 0
    died_frame: int = -1
    notes: tuple = ()


@dataclass(frozen=True)
class PathBatch:
    """A batch's `RawResult`s in flat arrays, as `PathRows` gathers them and `to_hypotheses`
    reads them (no object per utterance or path in between). Path ``k`` — utterances in order,
    each one's paths best first — belongs to utterance ``utterance[k]``, has arcs
    ``arcs[offsets[k]:offsets[k + 1]]`` (``frames`` alike) and cost ``costs[k]``; ``status``,
    ``died_frame`` and ``notes`` are per utterance, as in `RawResult`. A sequence of
    `RawResult` (views of the arrays), so it stands wherever a backend's list of them does."""

    arcs: np.ndarray  # int32 [arcs of every path]
    frames: np.ndarray  # int32, alike
    offsets: np.ndarray  # int64 [P + 1]
    utterance: np.ndarray  # int64 [P], ascending
    costs: np.ndarray  # float32 [P]
    status: np.ndarray  # int64 [B]
    died_frame: np.ndarray  # int64 [B]
    notes: tuple  # [B] tuples

    @classmethod
    def of(cls, results) -> PathBatch:
        """``results`` (a sequence of `RawResult`, one per utterance) as a batch; a batch is
        returned as it is."""
        if isinstance(results, PathBatch):
            return results
        paths = [(b, *path) for b, r in enumerate(results) for path in r.paths]
        lens = [len(arcs) for _, arcs, _, _ in paths]
        return cls(
            _joined([arcs for _, arcs, _, _ in paths], np.int32),
            _joined([frames for _, _, frames, _ in paths], np.int32),
            np.concatenate(([0], np.cumsum(lens, dtype=np.int64))),
            np.array([b for b, *_ in paths], np.int64),
            np.array([cost for *_, cost in paths], np.float32),
            np.array([r.status for r in results], np.int64),
            np.array([r.died_frame for r in results], np.int64),
            tuple(r.notes for r in results),
        )  # fmt: skip

    @classmethod
    def merged(cls, parts: list, batch_size: int) -> PathBatch:
        """One batch of ``batch_size`` utterances from ``parts``, ``(utterances, batch)`` pairs
        whose batch holds those utterances in its order (a backend's retries, each of some)."""
        if not parts:
            return cls.of([])
        if len(parts) == 1 and np.array_equal(parts[0][0], np.arange(batch_size)):
            return parts[0][1]
        status = np.zeros(batch_size, np.int64)
        died = np.full(batch_size, -1, np.int64)
        notes: list = [()] * batch_size
        for ids, b in parts:
            status[ids], died[ids] = b.status, b.died_frame
            for i, note in zip(ids.tolist(), b.notes, strict=True):
                notes[i] = note
        utterance = np.concatenate([ids[b.utterance] for ids, b in parts]).astype(np.int64)
        lens = np.concatenate([np.diff(b.offsets) for _, b in parts])
        joined = cls(
            np.concatenate([b.arcs for _, b in parts]),
            np.concatenate([b.frames for _, b in parts]),
            np.concatenate(([0], np.cumsum(lens))),
            utterance,
            np.concatenate([b.costs for _, b in parts]),
            status,
            died,
            tuple(notes),
        )  # fmt: skip
        return joined.only(np.argsort(utterance, kind="stable"))

    def only(self, paths: np.ndarray) -> PathBatch:
        """The batch with just ``paths`` (indices, in the order given, which must keep the
        utterances ascending)."""
        lens = np.diff(self.offsets)[paths]
        offsets = np.concatenate(([0], np.cumsum(lens)))
        gather = np.repeat(self.offsets[paths] - offsets[:-1], lens) + np.arange(offsets[-1])
        return replace(self, arcs=self.arcs[gather], frames=self.frames[gather], offsets=offsets,
                       utterance=self.utterance[paths], costs=self.costs[paths])  # fmt: skip

    def __len__(self) -> int:
        return len(self.status)

    def __getitem__(self, b: int) -> RawResult:
        if not -len(self) <= b < len(self):
            raise IndexError(f"utterance {b} of a batch of {len(self)}")
        b %= len(self)
        lo, hi = np.searchsorted(self.utterance, [b, b + 1]).tolist()
        o, costs = self.offsets[lo : hi + 1].tolist(), self.costs[lo:hi].tolist()
        paths = [(self.arcs[a:z], self.frames[a:z], c)
                 for a, z, c in zip(o[:-1], o[1:], costs, strict=True)]  # fmt: skip
        return RawResult(paths, int(self.status[b]), int(self.died_frame[b]), self.notes[b])

    def __iter__(self):
        return (self[b] for b in range(len(self)))


def _joined(arrays: list, dtype) -> np.ndarray:
    return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.zeros(0, dtype)


class FrameSurvivors(NamedTuple):
    """Each token frame's survivors, flat, as a search keeps them for a lattice (a backend's
    ``advance_keeping``; the cpu search appends to one inside its frame loop): graph states and
    context states (int32), frame ``f``'s ending at ``ends[f]`` (int64), one end per frame kept
    (fewer than asked when the search stopped)."""

    state: np.ndarray
    ctx: np.ndarray
    ends: np.ndarray

    @property
    def num_frames(self) -> int:
        return len(self.ends)

    @classmethod
    def joined(cls, parts: list) -> FrameSurvivors:
        """``parts`` kept one after another (a stream's chunks) as one."""
        if not parts:
            return cls.of_frames([])
        starts = np.cumsum([0] + [len(part.state) for part in parts[:-1]])
        ends = [part.ends + start for part, start in zip(parts, starts, strict=True)]
        return cls(np.concatenate([part.state for part in parts]),
                   np.concatenate([part.ctx for part in parts]),
                   np.concatenate(ends).astype(np.int64, copy=False))  # fmt: skip

    @classmethod
    def of_frames(cls, frames: list) -> FrameSurvivors:
        """From a list of ``(states, context states)`` per frame."""
        if not frames:
            return cls(np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int64))
        return cls(np.concatenate([s for s, _ in frames]).astype(np.int32, copy=False),
                   np.concatenate([x for _, x in frames]).astype(np.int32, copy=False),
                   np.cumsum([len(s) for s, _ in frames], dtype=np.int64))  # fmt: skip

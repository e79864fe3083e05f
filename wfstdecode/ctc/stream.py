"""Streaming CTC WFST decoding: `CtcStreamDecoder` keeps one search per stream and advances any
subset of the open streams by chunks of any size, batched, with partial results and endpointing.

It runs the offline search itself, frame by frame (the backends' ``begin`` / ``advance`` /
``end``), so a stream's final result equals `decode_ctc` on the whole input: same words,
timestamps and score, bit for bit. Per stream the decoder keeps the search state (memory that
follows the active tokens: see `CpuTuning.collect_records_at`) and the log-probs received so far
(for the float64 path scores, as `decode_ctc` computes them; 4 bytes per frame and token).

Streams and lanes, as Kaldi's cudadecoder has channels and lanes: any number of streams may be
open; one `advance` runs at most ``max_lanes`` of them at a time (the rest wait for the next
group of the same call): on the cpu backend's threads, or on cuda as the lanes of one batched
search, each lane loaded with its stream's last survivors (`cuda/streams.py`).

Partial results: the best path so far, ranked on cost alone (no final costs), with
``Hypothesis.stable_words``: its first words lie on the prefix every surviving token shares, so
no later chunk can change them (their end frames may still grow), unless the search dies (every
token pruned or of infinite cost): then there is no path at all, as `decode_ctc` says.

Lattices (``CtcBeamOptions.lattice_beam``): each stream also keeps every frame's surviving tokens
(8 bytes each), and `finish` builds the utterance's lattice from them as `decode_ctc` does, so
its n-best, MBR ranking, word confidences and LM rescoring (``rescore``) are `decode_ctc`'s, bit
for bit. Partial results stay the best path alone.

Blank skipping (``CtcBeamOptions.blank_skip_threshold``): the frames `decode_ctc` skips in the
whole input are skipped as they arrive (`blank_skips`; skippable frames at a chunk's end wait
for the next frame kept, or `finish`, to be searched or skipped), so the final result is still
`decode_ctc`'s; times, endpoint rules and `frames` count the input's frames.

Endpointing (`EndpointRules`, off by default) in the style of Kaldi's and sherpa-onnx's rules:
an endpoint is detected when a rule's trailing silence (frames since the best path's last
non-blank token, or since the start) and utterance length are reached, and, for rules that ask
for it, the best path has a token at all (a stream whose search died has no path: all of it
counts as silence, so its length rule still fires). `advance` returns the streams that reached
one.

Threads: any thread may call the decoder, and calls on different streams run at once (each
search releases the GIL). A stream takes one call at a time: a call on a stream another thread's
call is using waits for it (a display thread polling `partial` while another thread advances).
"""

from __future__ import annotations

import numbers
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from ..backends import CTC_BACKENDS, ctc_stream_backend, resolve_ctc_backend
from ..decoding_graph import DecodingGraph
from ..errors import DecodeInputError, OptionsError
from ..interrupts import signals_deferred
from ..results import Hypothesis, changed, frame_shift_problem
from ._paths import _batch_hypotheses, in_input_frames, to_hypotheses
from ._problem import (
    FINE,
    FrameSurvivors,
    PathBatch,
    RawResult,
    SearchProblem,
    costs_and_first_bad,
)
from .blank_skip import SkippedFrames, blank_skips
from .lattice import build_lattice
from .options import CtcBeamOptions
from .search import (
    beyond_float32,
    blank_id,
    check_lattice_options,
    host_floats,
    largest_label,
    lattice_results,
    prepare_problem,
)
from .status import NO_FINAL
from .tuning import tuning_for


@dataclass(frozen=True)
class EndpointRule:
    """Fires when the trailing silence lasts ``min_trailing_silence`` seconds, the utterance
    ``min_utterance_length`` seconds, and (if ``must_contain_speech``) a token was decoded."""

    must_contain_speech: bool
    min_trailing_silence: float
    min_utterance_length: float = 0.0


@dataclass(frozen=True)
class EndpointRules:
    """frame_shift: seconds per log-prob frame (e.g. 0.04 for a 4x-subsampled 10 ms model).
    rules: checked in order, the first that fires names the endpoint (``"rule1"`` ...);
    the defaults are sherpa-onnx's: 2.4 s of silence with or without speech, 1.2 s after speech,
    or 20 s of utterance."""

    frame_shift: float
    rules: tuple[EndpointRule, ...] = (
        EndpointRule(False, 2.4),
        EndpointRule(True, 1.2),
        EndpointRule(False, 0.0, 20.0),
    )

    def __post_init__(self):
        if problem := frame_shift_problem(self.frame_shift):
            raise OptionsError(f"EndpointRules.frame_shift {problem}")
        if not isinstance(self.rules, tuple):
            raise OptionsError(f"EndpointRules.rules must be a tuple of EndpointRule; got "
                               f"{type(self.rules).__name__}")  # fmt: skip

        def seconds(x) -> bool:  # a length: a number >= 0 (inf: never), not NaN
            return not isinstance(x, bool) and isinstance(x, numbers.Real) and x >= 0

        for i, r in enumerate(self.rules):
            if not (isinstance(r, EndpointRule) and seconds(r.min_trailing_silence)
                    and seconds(r.min_utterance_length)):  # fmt: skip
                raise OptionsError(f"EndpointRules.rules[{i}] must be an EndpointRule with "
                                   f"lengths >= 0 seconds; got {r!r}")  # fmt: skip

    def detect(self, frames: int, trailing_silence: int, has_speech: bool) -> str | None:
        for i, r in enumerate(self.rules):
            if (
                (has_speech or not r.must_contain_speech)
                and self._lasts(trailing_silence, r.min_trailing_silence)
                and self._lasts(frames, r.min_utterance_length)
            ):
                return f"rule{i + 1}"
        return None

    def _lasts(self, frames: int, seconds: float) -> bool:
        """``frames`` last ``seconds``, within rounding (30 frames of 0.03 s are 0.9 s, though
        ``30 * 0.03`` is 0.8999999999999999; a float32 frame shift is off by up to 6e-8 of
        itself: 10 frames of ``np.float32(0.01)`` are 0.0999999977 s). The tolerance, 1e-6 of
        the length, is below a frame for lengths under a million frames."""
        return frames * float(self.frame_shift) >= seconds * (1 - 1e-6)


class _Stream:
    __slots__ = ("blank_sum", "busy", "endpoint", "finished", "first", "frame_map", "frames",
                 "kept", "left", "log_probs", "owner", "problem", "received", "scanned",
                 "spoken_until", "state", "unclaimed", "waiting")  # fmt: skip

    def __init__(self, problem: SearchProblem, state, first=None):
        self.problem, self.state = problem, state
        self.log_probs = np.empty((0, problem.ac.shape[2]), np.float32)  # grows by doubling
        self.frames = 0  # frames searched (all received but the blank frames skipped)
        self.received = 0
        # with blank skipping (`blank_skips`, chunk by chunk): the input frame of each frame
        # searched, the sum of the skipped frames' blank log-probs, the best column of the last
        # frame kept, and the frames received whose fate waits for the next frame kept
        self.frame_map = np.empty(0, np.int64)
        self.blank_sum = np.zeros(1, np.float64)
        self.left = -1
        self.waiting = np.empty((0, problem.ac.shape[2]), np.float32)
        self.finished = False
        self.endpoint: str | None = None
        # endpoint checks: the stable arcs of the best path already read, and the frame after
        # the last token among them (0: none), so that a check reads the arcs since
        self.scanned, self.spoken_until = 0, 0
        # with lattices: token frame 0's survivors, then each chunk's `FrameSurvivors`
        self.first = first
        self.kept: list[FrameSurvivors] = []
        self.unclaimed: list[Hypothesis] | None = None  # a finish a Ctrl-C cut off: the next's
        # held by the call using the stream: its search state and arrays change in place, in
        # compiled code without the GIL (two threads on one stream corrupted the heap)
        self.busy = threading.Lock()
        self.owner: int | None = None  # the thread holding `busy` (a re-entry would wait forever)

    def append(self, chunk: np.ndarray, received: int, inputs=None) -> None:
        """Frames searched, ``chunk``, of ``received`` frames received; ``inputs``: their input
        frames (with blank skipping; else the frames received, all of them)."""
        if inputs is not None:
            self.frame_map = np.concatenate([self.frame_map, inputs])
        self.received += received
        end = self.frames + len(chunk)
        if end > len(self.log_probs) or chunk.shape[1] != self.log_probs.shape[1]:
            # (the columns change only before the first frame: `_advance_held`)
            grown = np.empty((max(end, 64, 2 * len(self.log_probs)), chunk.shape[1]), np.float32)
            if self.frames:
                grown[: self.frames] = self.log_probs[: self.frames]
            self.log_probs = grown
        self.log_probs[self.frames : end] = chunk
        self.frames = end

    def scoring_problem(self) -> SearchProblem:
        """The stream so far as `decode_ctc` would see it: for the paths' float64 scores (and,
        with blank skipping, the frames skipped)."""
        skipped = None
        if self.problem.skipped is not None:  # (`skip_blank_frames`' product)
            scale = float(self.problem.options.acoustic_scale)
            skipped = SkippedFrames(self.frame_map[None], self.blank_sum * scale)
        return replace(self.problem, log_probs=self.log_probs[None, : self.frames],
                       lengths=np.array([self.frames], np.int64), skipped=skipped)  # fmt: skip

    def input_frame(self, t: int) -> int:
        """Frame ``t`` searched as the stream's input numbers it."""
        return int(self.frame_map[t]) if self.problem.skipped is not None else t


class CtcStreamDecoder:
    """Many streams over one graph, decoded chunk by chunk (see the module docstring).

    graph:     a `DecodingGraph`; options: `CtcBeamOptions` (as `decode_ctc`).
    backend:   ``"cpu"`` (default), ``"cuda"`` (the streams of an `advance` group are the
               lanes of one batched GPU search: `cuda/streams.py`), ``"reference"`` or
               ``"auto"`` (cpu: chunks arrive on the host).
    max_lanes: streams one `advance` runs at once (the rest wait for the next group).
    tuning:    `CpuTuning` for the cpu backend (threads; record collection), `CudaTuning` for
               cuda.
    endpoint:  `EndpointRules`, or None for no endpointing.
    rescore:   `wfstdecode.rescore.LmRescoring` for each finished stream's lattice (needs
               ``options.lattice_beam``), as `decode_ctc`'s ``rescore``.
    """

    def __init__(self, graph: DecodingGraph, options: CtcBeamOptions | None = None,
                 backend: str = "cpu", *, max_lanes: int = 64, tuning=None,
                 endpoint: EndpointRules | None = None, rescore=None):  # fmt: skip
        options = CtcBeamOptions() if options is None else options
        if not isinstance(options, CtcBeamOptions):
            raise OptionsError(f"options must be a CtcBeamOptions; got {type(options).__name__}")
        if not isinstance(graph, DecodingGraph):
            raise DecodeInputError(f"graph must be a DecodingGraph; got {type(graph).__name__}")
        if isinstance(max_lanes, bool) or not isinstance(max_lanes, int) or max_lanes < 1:
            raise OptionsError(f"max_lanes must be an int >= 1; got {max_lanes!r}")
        check_lattice_options(options, graph, rescore)
        if endpoint is not None and not isinstance(endpoint, EndpointRules):
            raise OptionsError(f"endpoint must be EndpointRules or None; got {endpoint!r}")
        if backend not in ("auto", *CTC_BACKENDS):
            raise OptionsError(f"backend must be 'auto', 'reference', 'cpu' or 'cuda'; got "
                               f"{backend!r}")  # fmt: skip
        name = resolve_ctc_backend(backend)  # chunks arrive on the host: "auto" is cpu
        self.graph, self.options, self.max_lanes, self.endpoint_rules = (
            graph, options, max_lanes, endpoint
        )  # fmt: skip
        self.rescore = rescore
        self._lattices = options.lattice_beam is not None
        # the chunks' columns: the token table's, else (as decode_ctc) any number from the
        # columns the graph reads, fixed by the first chunk (one model feeds every stream)
        self.width = graph.num_tokens if graph.tokens is not None else None
        self._reads = largest_label(graph, "ilabel")
        self._blank = blank_id(graph)
        self._search = ctc_stream_backend(name)(tuning_for(name, tuning, None))
        self._streams: dict[int, _Stream] = {}
        self._next_id, self._id_lock = 0, threading.Lock()

    def __reduce__(self):
        raise TypeError("a CtcStreamDecoder holds live searches: it cannot be pickled or "
                        "copied; make one in each process that streams")  # fmt: skip

    def __copy__(self):  # (a shallow copy would share the streams with the original)
        self.__reduce__()

    # ----- streams ----------------------------------------------------------------------------
    # The public calls run with signals deferred (`interrupts`: a Ctrl-C inside Numba's boxing
    # of a search state crashed the process): a Ctrl-C comes out once the call is done.
    def open(self, boosts: Mapping | None = None, oov_lexicon: Mapping | None = None) -> int:
        """A new stream; ``boosts`` (phrase -> bonus per word, as `decode_ctc`, words the graph
        lacks spelled through its oov slot, by ``oov_lexicon`` where given) hold for its whole
        life."""
        # (a Ctrl-C that cuts the call off closes the stream it made: its id never got out)
        return signals_deferred(self._open, boosts, oov_lexicon, dropped=self._streams.pop)

    def _open(self, boosts, oov_lexicon) -> int:
        empty = np.zeros((1, 0, self.width or self._reads), np.float32)
        try:
            problem = prepare_problem(empty, None, self.graph, self.options,
                                      None if boosts is None else [boosts],
                                      oov_lexicon=oov_lexicon)  # fmt: skip
        except DecodeInputError as exc:  # (the stream's one mapping, not a batch's first)
            raise DecodeInputError(str(exc).replace("boosts[0]", "boosts")) from None
        with self._id_lock:  # threads opening streams get distinct ids
            sid, self._next_id = self._next_id, self._next_id + 1
        state = self._search.begin(problem)
        first = self._search.survivors(state) if self._lattices else None
        self._streams[sid] = _Stream(problem, state, first)
        return sid

    def advance(self, chunks: Mapping[int, object]) -> dict[int, str]:
        """Feed each stream its next chunk of log-probs ((frames, V), any number of frames);
        returns ``{stream: rule}`` for the streams that reached an endpoint in this call. Every
        chunk is checked before any stream moves: a bad one raises and changes nothing."""
        return signals_deferred(self._advance, chunks)

    def _advance(self, chunks) -> dict[int, str]:
        if not isinstance(chunks, Mapping):
            raise DecodeInputError(f"advance takes a mapping stream -> chunk; got "
                                   f"{type(chunks).__name__}")  # fmt: skip
        sids = list(chunks)
        return self._using(sids, self._live, self._advance_held, chunks, sids)

    def _advance_held(self, streams, chunks, sids) -> dict[int, str]:
        started = width = self.width  # (another thread may fix it while this call checks)
        checked = []
        for sid in sids:  # (a first chunk fixes the width for the rest of the call)
            checked.append(self._checked_shape(sid, chunks[sid], width))
            width = checked[-1][1].shape[1]
        lps = [lp for _, lp in checked]
        costs = self._chunk_costs(sids, lps, [given for given, _ in checked],
                                  [s.received for s in streams])  # fmt: skip
        received, skips = [len(lp) for lp in lps], [None] * len(lps)
        if self.options.blank_skip_threshold is not None:  # (the chunks are checked: no NaN)
            for i, (stream, lp) in enumerate(zip(streams, lps, strict=True)):
                skips[i] = self._skips(stream, lp, final=False)
                lps[i], costs[i] = skips[i][0], skips[i][1]
        if started is None and sids:  # the first call whose chunks all passed fixes it
            with self._id_lock:  # (threads feeding other streams may be here at once)
                if self.width is None:
                    self.width = width
            if width != self.width:
                raise DecodeInputError(f"stream {sids[0]}: a chunk must be (frames, "
                                       f"{self.width}); got shape {lps[0].shape}")  # fmt: skip
        jobs = list(zip(sids, streams, lps, costs, received, skips, strict=True))
        reached: dict[int, str] = {}
        for i in range(0, len(jobs), self.max_lanes):
            group = jobs[i : i + self.max_lanes]
            work = [(s.problem, s.state, ac) for _, s, _, ac, *_ in group]
            if self._lattices:
                done = self._search.advance_keeping(work)
                for (_, stream, *_), (_, survivors) in zip(group, done, strict=True):
                    stream.kept.append(survivors)
                states = [state for state, _ in done]
            else:
                states = self._search.advance(work)
            for (sid, stream, lp, _, n, skip), state in zip(group, states, strict=True):
                stream.state = state
                stream.append(lp, n, None if skip is None else skip[2])
                if skip is not None:
                    stream.blank_sum, stream.left, stream.waiting = skip[3:]
                if self.endpoint_rules is not None and stream.endpoint is None:
                    stream.endpoint = self._endpoint(stream)
                    if stream.endpoint is not None:
                        reached[sid] = stream.endpoint
        return reached

    def partial(self, stream: int) -> Hypothesis:
        """The best path so far (cost alone, no final cost), ``stable_words`` marked."""
        return signals_deferred(self._partial, stream)

    def _partial(self, stream) -> Hypothesis:
        return self._using([stream], self._get, self._partial_held)

    def _partial_held(self, held: list[_Stream]) -> Hypothesis:
        (s,) = held
        s.state, arcs, frames, n_stable = self._search.partial(s.problem, s.state)
        p = s.scoring_problem()
        if arcs is None:  # the search died: what finish would say
            died = to_hypotheses(p, [self._search.end(s.problem, s.state)])
            return in_input_frames(p, died)[0][0]
        unfinished = PathBatch.of([RawResult([(arcs, frames, 0.0)], NO_FINAL)])
        hyp = _batch_hypotheses(p, unfinished)[0]  # (no note: not the end)
        hyp = in_input_frames(p, [[hyp]])[0][0]
        labels = self.graph.olabel[arcs]
        stable = int(np.count_nonzero(labels[:n_stable]))
        if s.problem.oov is not None:  # a spelled word is stable once its </oov> is
            labels = labels[labels != 0].tolist()
            _, spelled, spans = s.problem.oov.collapse(labels)
            close = s.problem.oov.slot.close
            stable = sum(1 for w, (_, last) in zip(spelled, spans, strict=True)
                         if last < stable and (w is None or labels[last] == close))  # fmt: skip
        return changed(hyp, stable_words=stable)

    def endpoint(self, stream: int) -> str | None:
        """The endpoint rule the stream reached, or None."""
        return self._get(stream).endpoint

    def finish(self, stream: int) -> list[Hypothesis]:
        """The stream's final result, exactly `decode_ctc`'s on everything it received (with a
        lattice beam: from its lattice, rescored if the decoder rescores); no more chunks may
        follow (close it, or keep it to read `partial`)."""
        return signals_deferred(self._finish, stream, dropped=self._unclaimed(stream))

    def _finish(self, stream) -> list[Hypothesis]:
        return self._using([stream], self._get, self._finish_held, stream)

    def _finish_held(self, held: list[_Stream], stream) -> list[Hypothesis]:
        (s,) = held
        if s.unclaimed is not None:  # the last finish's, cut off by a Ctrl-C
            hyps, s.unclaimed = s.unclaimed, None
            return hyps
        s = self._live(stream)
        if len(s.waiting):  # no frame follows: the waiting frames are decided, the kept searched
            rows, costs, inputs, *rest = self._skips(s, s.waiting[:0], final=True)
            if len(rows):
                work = [(s.problem, s.state, costs)]
                if self._lattices:
                    ((s.state, survivors),) = self._search.advance_keeping(work)
                    s.kept.append(survivors)
                else:
                    (s.state,) = self._search.advance(work)
            s.append(rows, 0, inputs)
            s.blank_sum, s.left, s.waiting = rest
        p, raw = s.scoring_problem(), self._search.end(s.problem, s.state)
        if not self._lattices:
            hyps = in_input_frames(p, to_hypotheses(p, [raw]))[0]
        else:
            kept, lattice = FrameSurvivors.joined(s.kept), None
            if raw.paths and s.first is not None and kept.num_frames == s.frames:  # else died
                lattice = build_lattice(p, s.first, kept, raw).pruned(self.options.lattice_beam)
            hyps = in_input_frames(p, lattice_results(p, [raw], [lattice], self.rescore)[0])[0]
            s.kept = []  # read once: the stream takes no more chunks
        s.finished = True  # (not before: a finish that raised may be called again)
        return hyps

    def _unclaimed(self, sid):
        """What to do with a finish's result that a Ctrl-C kept from the caller: keep it for
        the next finish (the one call a finished stream answers)."""

        def keep(hyps):
            s = self._streams.get(int(sid))
            if s is not None:
                s.unclaimed = hyps

        return keep

    def close(self, stream: int) -> None:
        """Forget the stream (finished or not), once a call another thread makes on it ends."""
        signals_deferred(self._close, stream)

    def _close(self, stream) -> None:
        self._using([stream], self._get, lambda _: self._streams.pop(int(stream)))

    @property
    def streams(self) -> list[int]:
        """The open streams (finished ones included until closed)."""
        return list(self._streams)

    def frames(self, stream: int) -> int:
        """Log-prob frames the stream has received."""
        return self._get(stream).received

    def _using(self, sids: list, get, fn, *args):
        """``fn(streams, *args)`` with the streams ``sids`` name (``get``: `_get` or `_live`)
        held: a call another thread makes on one of them ends first. Taken in the order of
        their ids (so no two calls wait for each other for good) within the deferred signals (a
        Ctrl-C cannot leave one taken), and looked up again once held (a stream the other call
        finished or closed raises as it would have). A call back into a stream from this
        thread's own call on it (a chunk's ``__array__``, say) raises instead of waiting forever."""
        held = {id(s): (int(sid), s) for sid in sids for s in [get(sid)]}
        held = sorted(held.values(), key=lambda pair: pair[0])
        me, taken = threading.get_ident(), 0
        try:
            for sid, s in held:
                if s.owner == me:  # (only this thread sets its own ident: no race)
                    raise DecodeInputError(
                        f"stream {sid} is in use by a call this thread is making (a chunk or "
                        f"callback that calls the decoder back?): call it once that returns"
                    )
                s.busy.acquire()
                s.owner = me
                taken += 1
            return fn([get(sid) for sid in sids], *args)
        finally:
            for _, s in held[:taken]:
                s.owner = None
                s.busy.release()

    # ----- checks -----------------------------------------------------------------------------
    def _get(self, sid) -> _Stream:
        is_id = isinstance(sid, numbers.Integral) and not isinstance(sid, bool)  # NumPy ints too
        stream = self._streams.get(int(sid)) if is_id else None
        if stream is None:
            state = "closed" if is_id and 0 <= sid < self._next_id else "unknown"
            raise DecodeInputError(f"stream {sid!r} is {state}")
        return stream

    def _live(self, sid) -> _Stream:
        stream = self._get(sid)
        if stream.finished:
            raise DecodeInputError(f"stream {sid} is finished: open a new stream")
        return stream

    def _checked_shape(self, sid: int, chunk, width: int | None) -> tuple[np.ndarray, np.ndarray]:
        """``(the chunk as given, its float32 copy)``, its shape checked against ``width``
        (None: any number of columns the graph can read)."""
        try:
            given = host_floats(chunk)  # the same conversion as decode_ctc
        except DecodeInputError as exc:
            raise DecodeInputError(f"stream {sid}: {str(exc).replace('log_probs', 'a chunk')}"
                                   ) from None  # fmt: skip
        with np.errstate(over="ignore"):
            lp = given.astype(np.float32, copy=False)
        columns = lp.shape[1] if lp.ndim == 2 else None
        if columns is None or (columns != width if width is not None else columns < self._reads):
            width = width if width is not None else f">= {self._reads}"
            raise DecodeInputError(f"stream {sid}: a chunk must be (frames, {width}); got "
                                   f"shape {tuple(lp.shape)}")  # fmt: skip
        return given, lp

    def _chunk_costs(self, sids: list, lps: list, givens: list, starts: list) -> list[np.ndarray]:
        """Each chunk's search costs, from one pass over the chunks end to end (a frame's costs
        depend on that frame alone); a chunk with a NaN, +inf or a frame of only -inf raises
        naming its stream and frame (the first such chunk; in it, a NaN before a dead frame;
        ``starts``: each stream's frames before its chunk)."""
        if not lps:
            return []
        frames = np.concatenate(lps) if len(lps) > 1 else lps[0]
        costs, (_, _, kind) = costs_and_first_bad(frames[None], self.options.acoustic_scale)
        if kind != FINE:
            for sid, lp, given, start in zip(sids, lps, givens, starts, strict=True):
                _check_values(sid, lp, given, start)
        return np.split(costs[0], np.cumsum([len(lp) for lp in lps[:-1]]))

    def _skips(self, s: _Stream, chunk: np.ndarray, final: bool) -> tuple:
        """Blank skipping on stream ``s``'s waiting frames and then ``chunk`` (`blank_skips`):
        ``(frames to search, their search costs, their input frames, and the stream's blank
        sum, left and waiting frames after them)``."""
        window = np.concatenate([s.waiting, chunk]) if len(s.waiting) else chunk
        window = np.ascontiguousarray(window, np.float32)
        blank_sum = s.blank_sum.copy()  # (the stream's once the search has moved)
        kept, decided, left = blank_skips(window, self._blank, self.options.blank_skip_threshold,
                                          s.left, final, blank_sum)  # fmt: skip
        rows = window[kept]
        costs = costs_and_first_bad(rows[None], self.options.acoustic_scale)[0][0]
        start = s.received - len(s.waiting)  # (the window's first input frame)
        return rows, costs, start + kept, blank_sum, left, window[decided:]

    def _endpoint(self, s: _Stream) -> str | None:
        s.state, arcs, frames, stable = self._search.partial(s.problem, s.state, s.scanned)
        if arcs is None:  # the search stopped: no path (finish says so), no token to come, so
            # the rules see an utterance of silence (its length rule still ends the stream)
            return self.endpoint_rules.detect(s.received, s.received, False)
        g, blank = self.graph, s.problem.blank_ilabel
        token = np.flatnonzero((arcs < g.num_emitting_arcs) & (g.ilabel[arcs] != blank))
        now_stable = token[token < stable - s.scanned]
        if len(now_stable):
            s.spoken_until = s.input_frame(int(frames[now_stable[-1]])) + 1
        s.scanned = stable
        spoken_until = s.input_frame(int(frames[token[-1]])) + 1 if len(token) else s.spoken_until
        return self.endpoint_rules.detect(s.received, s.received - spoken_until, spoken_until > 0)


def _check_values(sid: int, lp: np.ndarray, given: np.ndarray, start: int) -> None:
    """Raise naming the first frame of stream ``sid``'s chunk ``lp`` (float32; ``given``: as
    given) with a NaN or +inf, else the first whose every column is -inf: its row in the chunk
    and, the chunk following ``start`` frames, its frame in the stream."""
    bad = np.isnan(lp).any(axis=1) | (lp == np.inf).any(axis=1)
    dead = (lp == -np.inf).all(axis=1)  # (vacuously for no columns, as decode_ctc says)
    for what, rows in (("NaN or +inf", bad), ("-inf in every column", dead)):
        if rows.any():
            t = int(np.flatnonzero(rows)[0])
            beyond = beyond_float32(given[t], lp[t], np.inf if rows is bad else -np.inf)
            at = f"(frame {start + t} of the stream)"
            if beyond:
                raise DecodeInputError(f"stream {sid}: chunk[{t}, {beyond} {at}")
            raise DecodeInputError(f"stream {sid}: chunk frame {t} {at} contains {what}")

"""The cuda backend, host side: device buffers, the kernel sequence of `kernels` run in
chunks of frames, each chunk's backpointer records copied to pinned host memory on a second
stream, traceback on the host with the CPU backend's `finish_paths`.

Chunks. The frame index lives on the device, so a chunk (up to ``frames_per_chunk`` frame steps)
is the same sequence of launches every time: it is captured once as a CUDA graph (CuPy stream
capture) and replayed, one launch per chunk instead of four per frame. Two record buffers
alternate between chunks (double buffering): chunk ``c``'s records are copied out while chunk
``c + 1`` runs, and the host waits only for chunk ``c``'s frame counts, written by the device into
mapped host memory. A buffer holds at least one worst-case frame; a chunk stops early rather than
overfill it, so no record is ever lost.

Memory is sized from the options (`memory`) and checked against what is free;
an utterance whose frame needs more than its table holds keeps going with a tightened beam and
says so in its notes.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from ...errors import BackendUnavailableError, DeviceMemoryError, OptionsError
from .._problem import RawResult, SearchProblem
from ..tuning import CudaTuning
from .finish import finish
from .memory import cuda_memory_bytes, int32_records_fit, record_capacity, table_size
from .records import PinnedDoubleBuffer

log = logging.getLogger(__name__)

_GRAPHS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_KEPT: list = []  # (CUDA context, PinnedDoubleBuffer) not in use, for the next call
_KEPT_LOCK = threading.Lock()


def decode_cuda(problem: SearchProblem, tuning: CudaTuning | None = None) -> list[RawResult]:
    """The batched search on the GPU; `CudaTuning` (chunking, double buffering, block size,
    profiling) changes its speed, never its results."""
    from numba import cuda

    tuning = tuning or CudaTuning()
    frames_per_chunk, double_buffer = tuning.frames_per_chunk, tuning.double_buffer
    prune_threads, profile = tuning.prune_threads, tuning.profile
    g, opts = problem.graph, problem.options
    _check_prune_threads(prune_threads)
    B = problem.batch_size
    T = int(problem.lengths.max(initial=0))
    H = table_size(g.num_states, opts)
    cap = record_capacity(B, H)
    if not int32_records_fit(B, H):
        raise DeviceMemoryError(
            f"a batch of {B} utterances with token tables of {H} slots needs {2 * cap} record "
            "slots, beyond int32 indexing: lower the batch size or CtcBeamOptions.max_candidates"
        )
    needed = cuda_memory_bytes(g, opts, B)
    frames = B * (problem.ac if problem.ac is not None else problem.device_lp).shape[1]
    uploads = 4 * frames + (0 if problem.ac is None else problem.ac.nbytes)  # maxima, costs
    _check_free_memory(needed + uploads, B, H)
    graphs = _use_graphs(opts.cuda_graphs, profile, T, frames_per_chunk)
    log.info(
        "cuda search: %d utterances, table of %d slots each, %.1f MB of device memory, "
        "CUDA graphs %s", B, H, needed / 2**20, "on" if graphs else "off",
    )  # fmt: skip

    capture_stream, stream = _capture_streams() if graphs else (None, cuda.stream())
    d = _Buffers(problem, H, cap, frames_per_chunk, stream)
    threads = prune_threads or prune_block_size(B)
    run = _FrameSequence(problem, d, _device_graph(g, problem.arc_cost), frames_per_chunk, threads,
                         profile)  # fmt: skip
    copier = _RecordCopier(d, cap, _take_record_buffer(timed=profile is not None))
    try:
        _run_chunks(run, copier, stream, capture_stream, graphs, T, frames_per_chunk,
                    double_buffer)  # fmt: skip
        if profile is not None:
            ran = sum(1 for _, starts, _, _ in copier.chunks if len(starts))
            stages = {**run.stage_ms(), "copy": copier.pinned.copy_ms(), "chunks": ran}
            for key, value in stages.items():
                profile[key] = profile.get(key, 0) + value  # summed over calls
    finally:
        _keep_record_buffer(copier.pinned)
    return finish(problem, d, H, copier.chunks, T)


def _run_chunks(run, copier, stream, capture_stream, graphs, T, frames_per_chunk, double_buffer):
    """The host loop: chunks are launched while frames may remain (a step of a chunk runs at
    most one frame), the first plain and the rest as one captured CUDA graph when ``graphs``;
    each is collected once the next one is queued behind it (double buffering) or at once."""
    chunk_graph = None
    launched: list[int] = []  # frame steps of each chunk launched
    frames_run = 0
    while frames_run < T + 1:
        c = len(launched)
        remaining = T + 1 - frames_run - sum(launched[copier.collected :])
        if remaining > 0:
            if c >= 2 and double_buffer:
                copier.pinned.stream_wait_copied(c % 2, stream)  # chunk c - 2's records left
            elif c >= 1 and not double_buffer:
                copier.pinned.stream_wait_copied((c - 1) % 2, stream)  # waits for every copy
            if chunk_graph is not None:
                chunk_graph.launch(capture_stream)
                launched.append(frames_per_chunk)
            else:
                steps = frames_per_chunk if graphs else min(frames_per_chunk, remaining)
                run.launch_chunk(stream, steps)
                launched.append(steps)
                if graphs:  # kernels compiled and loaded by now: capture the next chunks' launches
                    chunk_graph = _capture(run.launch_chunk, capture_stream, stream)
            copier.pinned.record_produced(c % 2, stream)
        in_flight = len(launched) - copier.collected
        if remaining <= 0 or in_flight > (1 if double_buffer else 0):
            frames_run += copier.collect(copier.collected)
    stream.synchronize()
    copier.drain()


def prune_block_size(batch_size: int) -> int:
    """Threads of each lane's closure/prune block (one block per utterance does a frame's
    epsilon closure and pruning), from the compiled kernel's registers and shared memory and
    the current GPU (`resident_block_size`); 256, which always fits, before the kernel's first
    launch or where Numba cannot say."""
    from numba import cuda

    from . import kernels as K

    if K.SIM:
        return 8
    kernel = K.closure_prune_kernel
    try:
        regs, shared = kernel.get_regs_per_thread(), kernel.get_shared_mem_per_block()
        if not regs:  # not compiled yet: {signature: value} is empty
            return 256
        dev = cuda.get_current_device()
        sm = SmLimits(
            count=_device_attribute(dev, "MULTIPROCESSOR_COUNT"),
            registers=_device_attribute(dev, "MAX_REGISTERS_PER_MULTIPROCESSOR"),
            threads=_device_attribute(
                dev, "MAX_THREADS_PER_MULTIPROCESSOR", "MAX_THREADS_PER_MULTI_PROCESSOR"
            ),
            shared=_device_attribute(dev, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        )
        limit = min(kernel.get_max_threads_per_block().values())
    except Exception as exc:  # a Numba without these queries
        log.debug("closure/prune block size left at 256: %s", exc)
        return 256
    return min(resident_block_size(batch_size, max(regs.values()), max(shared.values()), sm), limit)


def _device_attribute(dev, *names: str) -> int:
    """A device attribute under the first name this Numba knows (numba-cuda takes the CUDA
    driver's names; Numba's own cuda package had a few of its own spellings)."""
    for name in names:
        try:
            return int(getattr(dev, name))
        except AttributeError:
            continue
    raise AttributeError(f"the CUDA device has none of the attributes {names}")


def _check_prune_threads(prune_threads: int | None) -> None:
    if prune_threads is None:
        return
    from . import kernels as K

    limits = {} if K.SIM else K.closure_prune_kernel.get_max_threads_per_block()
    limit = min(limits.values(), default=1024)
    if not 1 <= prune_threads <= limit:
        raise OptionsError(
            f"prune_threads must be in 1..{limit} (the closure/prune kernel's limit); "
            f"got {prune_threads}"
        )


def registers_per_warp(registers_per_thread: int) -> int:
    """Registers a warp takes: its threads' registers, allocated in units of 256."""
    return -(-registers_per_thread * 32 // 256) * 256


@dataclass(frozen=True)
class SmLimits:
    """A GPU's streaming multiprocessors: how many, and the registers, threads and shared
    memory bytes each one holds."""

    count: int
    registers: int
    threads: int
    shared: int


def resident_block_size(batch_size: int, registers: int, shared: int, sm: SmLimits) -> int:
    """The largest block (1024, 512 or 256 threads) with which every utterance's block is
    resident at once: small batches get more threads per utterance instead of idle SMs. CUDA
    reserves 1 KB of shared memory per block."""
    per_warp = registers_per_warp(registers)
    for threads in (1024, 512):
        by_registers = sm.registers // (per_warp * threads // 32)
        by_shared = sm.shared // (shared + 1024)
        per_sm = min(by_registers, sm.threads // threads, by_shared)
        if batch_size <= sm.count * per_sm:
            return threads
    return 256


def _use_graphs(mode: str, profile, T: int, frames_per_chunk: int) -> bool:
    """Whether to capture chunks as CUDA graphs: ``"on"`` raises where impossible; ``"auto"``
    captures when CuPy can and the utterance spans more than two chunks."""
    if mode == "off":
        return False
    reason = _graphs_unavailable()
    if profile is not None:
        reason = reason or "profiling times each stage with events between single launches"
    if mode == "on":
        if reason:
            raise BackendUnavailableError(f"CtcBeamOptions.cuda_graphs='on' but {reason}")
        return True
    return not reason and 2 * frames_per_chunk < T + 1


def _graphs_unavailable() -> str:
    from . import kernels as K

    if K.SIM:
        return "the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) cannot capture graphs"
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed (pip install 'wfstdecode[cuda]')"
    if not hasattr(cupy.cuda.Stream, "begin_capture"):
        return f"CuPy {cupy.__version__} has no stream capture"
    return ""


def _capture_streams():
    """A CuPy stream to capture on, and the same stream as Numba launches see it."""
    import cupy
    from numba import cuda

    capture_stream = cupy.cuda.Stream(non_blocking=True)
    return capture_stream, cuda.external_stream(capture_stream.ptr)


def _capture(launch_chunk, capture_stream, stream):
    """One chunk's launches recorded as a CUDA graph (Numba launches on CuPy's stream). Numba's
    deferred frees wait: a cuMemFree during capture would invalidate it."""
    from numba import cuda

    with cuda.defer_cleanup():
        capture_stream.begin_capture()
        try:
            launch_chunk(stream)
        except BaseException:
            with contextlib.suppress(Exception):  # the launch error is the one to report
                capture_stream.end_capture()
            raise
        chunk_graph = capture_stream.end_capture()
    if hasattr(chunk_graph, "upload"):  # instantiate on the device now, not at first launch
        chunk_graph.upload(capture_stream)
    return chunk_graph


def _check_free_memory(needed: int, B: int, H: int) -> None:
    from numba import cuda

    try:
        free, _total = cuda.current_context().get_memory_info()
    except Exception:  # pragma: no cover - a driver that cannot say
        return
    if needed > free:
        raise DeviceMemoryError(
            f"the search needs {needed / 2**20:.0f} MB of GPU memory ({B} utterances, token tables "
            f"of {H} slots) but {free / 2**20:.0f} MB are free: lower the batch size, "
            "CtcBeamOptions.max_active or CtcBeamOptions.max_candidates"
        )


class _Buffers:
    """Every per-search device array (flat; lane ``b``'s region starts at ``b * H``)."""

    def __init__(self, p: SearchProblem, H: int, cap: int, frames_per_chunk: int, stream):
        from numba import cuda

        from . import kernels as K

        B = p.batch_size

        def full(n, value, dtype):  # small: from the host
            return cuda.to_device(np.full(n, value, dtype), stream=stream)

        def filled(n, value, dtype):  # large: allocated and filled on the device
            arr = cuda.device_array(n, dtype, stream=stream)
            blocks = 1 if K.SIM else min(4096, (n + 255) // 256)
            K.fill_kernel[blocks, 8 if K.SIM else 256, stream](arr, dtype(value))
            return arr

        def scratch(n, dtype):  # written before it is read
            return cuda.device_array(n, dtype, stream=stream)

        if p.device_lp is not None:
            self.lp, self.neg_scale = p.device_lp, p.neg_scale
            self.frame_max = p.device_frame_max
        else:  # search costs from the host: kept as they are (see K.acoustic_cost)
            self.lp, self.neg_scale = cuda.to_device(p.ac, stream=stream), np.float32(1.0)
            self.frame_max = cuda.to_device(np.zeros(p.ac.shape[:2], np.float32), stream=stream)
        self.lengths = cuda.to_device(p.lengths.astype(np.int32), stream=stream)
        self.done = full(B, 0, np.int32)
        self.bkeys = cuda.to_device(p.boosts.keys, stream=stream)
        self.bvals = cuda.to_device(p.boosts.values, stream=stream)
        self.boff = cuda.to_device(p.boosts.offset, stream=stream)
        self.bmask = cuda.to_device(p.boosts.mask, stream=stream)
        # two recombination tables (frames alternate), their candidate lists
        self.h_state = filled(2 * B * H, K.EMPTY, np.int32)
        self.h_key = filled(2 * B * H, K.NO_KEY, np.uint64)
        self.h_prev = filled(2 * B * H, -1, np.int32)
        self.h_mark = filled(2 * B * H, 0, np.int32)
        self.c_slot = scratch(2 * B * H, np.int32)
        self.n_cand = full(2 * B, 0, np.int32)
        self.queue = scratch(2 * B * H, np.int32)
        # the surviving tokens of the last frame and their emitting out-degree prefix sums
        self.act_state = scratch(B * H, np.int32)
        self.act_cost = scratch(B * H, np.float32)
        self.act_store = scratch(B * H, np.int32)
        self.act_n = full(B, 0, np.int32)
        self.e_scan = scratch(B * (H + 1), np.int32)
        # per lane: pruning state and what happened
        self.best_bits = full(B, K.NO_BEST, np.uint32)
        self.lane_beam = full(B, p.beam, np.float32)
        self.min_beam = full(B, p.beam, np.float32)
        self.overflow = full(B, 0, np.int32)
        self.overflow_frames = full(B, 0, np.int32)
        self.first_overflow = full(B, -1, np.int32)
        self.status = full(B, 0, np.int32)
        self.died = full(B, -1, np.int32)
        # frame control (frame -1 "ran", buffer 1 was last: the first chunk starts frame 0 in
        # buffer 0), the two record buffers, and each chunk's frame starts in mapped host memory
        self.ctl = cuda.to_device(np.array([-1, 1, 1, 0], np.int32), stream=stream)  # K.CTL_*
        self.rec_used = full(2, 0, np.int32)
        self.rec_arc = scratch(2 * cap, np.int32)
        self.rec_prev = scratch(2 * cap, np.int32)
        self.info = cuda.mapped_array((2, frames_per_chunk + 3), np.int32)
        self.info[:] = 0


class _FrameSequence:
    """The launches of one chunk: `begin_chunk`, then per frame step `begin_frame`, the expand
    kernel (twice when ``min_active == 1``: best cost, then candidates) and `closure_prune`."""

    def __init__(
        self, p: SearchProblem, d: _Buffers, dg: dict, frames_per_chunk: int, prune_threads: int,
        profile,
    ):  # fmt: skip
        from numba import cuda

        from . import kernels as K

        opts = p.options
        B = p.batch_size
        self.K, self.d, self.frames_per_chunk = K, d, frames_per_chunk
        self.threads = 8 if K.SIM else 256
        self.prune_threads = prune_threads
        self.expand_grid = (1 if K.SIM else max(1, min(128, 8 * opts.max_active // 256)), B)
        self.B = B
        self.last_frame = np.int32(p.lengths.max(initial=0))
        self.need = np.int32(B * (d.h_state.shape[0] // (2 * B)))  # one worst-case frame
        self.capacity = np.int32(d.rec_arc.shape[0] // 2)
        H = np.int32(d.h_state.shape[0] // (2 * B))
        early = np.int32(opts.min_active <= 1)
        self.early = bool(early)
        boost = (d.bkeys, d.bvals, d.boff, d.bmask)
        lanes = (d.lengths, d.done)
        self.expand_args = (
            d.ctl, d.lp, d.frame_max, d.neg_scale, *lanes, d.act_state, d.act_cost, d.act_n,
            d.e_scan, dg["e_off"], dg["next_state"], dg["ilabel"], dg["arc_cost"], dg["olabel"],
            *boost,
            d.best_bits, d.lane_beam, early, d.h_state, d.h_key, d.c_slot, d.n_cand, d.overflow, H,
        )  # fmt: skip
        self.prune_args = (
            d.ctl, *lanes, np.int32(p.graph.start), dg["e_off"], dg["ne_off"], dg["next_state"],
            dg["arc_cost"], dg["olabel"], dg["arc_src"], np.int32(p.graph.num_emitting_arcs),
            *boost, p.beam, np.int32(opts.max_active), np.int32(opts.min_active), d.lane_beam,
            d.h_state, d.h_key, d.h_prev, d.h_mark, d.c_slot, d.n_cand, d.queue, d.act_state,
            d.act_cost, d.act_store, d.act_n, d.e_scan, d.best_bits, d.overflow, d.status,
            d.died, d.overflow_frames, d.first_overflow, d.min_beam, d.rec_used, d.rec_arc,
            d.rec_prev, self.capacity, H,
        )  # fmt: skip
        self.profile = profile
        self.events: list = []
        self._event = cuda.event

    def launch_chunk(self, stream, steps: int | None = None) -> None:
        K, d = self.K, self.d
        K.begin_chunk_kernel[1, 1, stream](d.ctl, d.rec_used, d.info)
        for _ in range(self.frames_per_chunk if steps is None else steps):
            self.launch_frame(stream)
        K.end_chunk_kernel[1, 1, stream](d.ctl, d.rec_used, d.info)

    def launch_frame(self, stream) -> None:
        K, d = self.K, self.d
        K.begin_frame_kernel[1, 1, stream](
            d.ctl, d.rec_used, d.info, self.last_frame, self.capacity, self.need
        )
        marks = [self._mark(stream)]
        if self.early:
            K.expand_kernel[self.expand_grid, self.threads, stream](np.int32(0), *self.expand_args)
        K.expand_kernel[self.expand_grid, self.threads, stream](np.int32(1), *self.expand_args)
        marks.append(self._mark(stream))
        K.closure_prune_kernel[self.B, self.prune_threads, stream](*self.prune_args)
        marks.append(self._mark(stream))
        if self.profile is not None:
            self.events.append(marks)

    def _mark(self, stream):
        if self.profile is None:
            return None
        event = self._event()
        event.record(stream)
        return event

    def stage_ms(self) -> dict:
        expand = sum(a.elapsed_time(b) for a, b, _ in self.events)
        prune = sum(b.elapsed_time(c) for _, b, c in self.events)
        return {"expand": expand, "prune": prune, "frame_steps": len(self.events)}


class _RecordCopier:
    """Chunk ``c``'s records go to slot ``c % 2`` of a `PinnedDoubleBuffer` once its kernels are
    done; the host moves them out before that slot takes chunk ``c + 2``."""

    def __init__(self, d: _Buffers, cap: int, pinned: PinnedDoubleBuffer):
        from . import kernels as K

        self.d, self.cap, self.sim, self.pinned = d, cap, K.SIM, pinned
        self.pending: list = [None, None]  # (chunk, first frame, frame starts) in each slot
        self.chunks: list = []  # per chunk: (first frame, frame starts, arcs, prevs)
        self.collected = 0

    def collect(self, c: int) -> int:
        """Start copying chunk ``c``'s records (chunks in order); the frames it ran."""
        from . import kernels as K

        i = c % 2
        self.pinned.host_wait_produced(i)
        info = self.d.info.copy_to_host()[i] if self.sim else np.array(self.d.info)[i]
        n, first, used = int(info[K.INFO_FRAMES]), int(info[K.INFO_FIRST]), int(info[-1])
        starts = info[K.INFO_STARTS : K.INFO_STARTS + n].astype(np.int64)
        self._move_out(i)
        lo = i * self.cap
        self.pinned.put(i, (self.d.rec_arc[lo : lo + used], self.d.rec_prev[lo : lo + used]))
        self.pending[i] = (c, first, starts)
        self.collected += 1
        return n

    def _move_out(self, i: int) -> None:
        if self.pending[i] is None:
            return
        c, first, starts = self.pending[i]
        assert c == len(self.chunks), "chunks arrive in order"
        arcs, prevs = self.pinned.take(i)
        self.chunks.append((first, starts, arcs, prevs))
        self.pending[i] = None

    def drain(self) -> None:
        for _, i in sorted((p[0], i) for i, p in enumerate(self.pending) if p is not None):
            self._move_out(i)


def _take_record_buffer(timed: bool) -> PinnedDoubleBuffer:
    """A pinned record buffer of the current CUDA context, kept from an earlier call when one
    is free (its pinned memory, once grown to a batch's largest chunk, is not allocated
    again), else a new one. `_keep_record_buffer` gives it back."""
    context = _current_context()
    with _KEPT_LOCK:
        i = next((i for i, (c, _) in enumerate(_KEPT) if c is context), None)
        buffer = _KEPT.pop(i)[1] if i is not None else None
    if buffer is None:
        buffer = PinnedDoubleBuffer((np.int32, np.int32))
    buffer.reset(timed)
    return buffer


def _keep_record_buffer(buffer: PinnedDoubleBuffer) -> None:
    with _KEPT_LOCK:
        _KEPT.append((_current_context(), buffer))


def release_kept_buffers() -> None:
    """Drop the kept pinned record buffers (those not in use); their memory is freed."""
    with _KEPT_LOCK:
        _KEPT.clear()


def _current_context():
    # Numba hands out one object per primary context (a new one after cuda.close()); the
    # simulator makes a new one per call, for its one device.
    from numba import cuda

    from . import kernels as K

    return None if K.SIM else cuda.current_context()


def _device_graph(g, arc_cost: np.ndarray) -> dict:
    """The graph's arrays on the device, cached per graph (and per arc-cost array)."""
    from numba import cuda

    cached = _GRAPHS.get(g)
    if cached is None:
        arc_src = np.concatenate((
            np.repeat(np.arange(g.num_states, dtype=np.int32), np.diff(g.e_offsets)),
            np.repeat(np.arange(g.num_states, dtype=np.int32), np.diff(g.ne_offsets)),
        ))  # fmt: skip
        cached = {
            "e_off": cuda.to_device(g.e_offsets),
            "ne_off": cuda.to_device(g.ne_offsets),
            "next_state": cuda.to_device(g.next_state),
            "ilabel": cuda.to_device(g.ilabel),
            "olabel": cuda.to_device(g.olabel),
            "arc_src": cuda.to_device(arc_src),
            "costs": {},
        }
        _GRAPHS[g] = cached
        fresh = True
    else:
        fresh = False
    costs = cached["costs"]
    if id(arc_cost) not in costs:
        if len(costs) > 4:
            costs.clear()
        costs[id(arc_cost)] = (arc_cost, cuda.to_device(arc_cost))  # keeps the id valid
        fresh = True
    if fresh:  # a pageable upload may still be in flight; the capture stream does not wait for it
        cuda.synchronize()
    return {**cached, "arc_cost": costs[id(arc_cost)][1]}

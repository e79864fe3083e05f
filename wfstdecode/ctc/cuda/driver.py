"""The cuda backend, host side: the kernel sequence of `kernels` run in chunks of frames over
the device buffers of `buffers`, each chunk's backpointer records copied to pinned host memory on
a second stream (`records`); `decode.py` traces back on the host (`finish`).

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
from dataclasses import dataclass

import numpy as np

from ...errors import BackendUnavailableError, DeviceMemoryError, OptionsError
from .. import bundles
from .._problem import SearchProblem
from ..tuning import CudaTuning
from .buffers import SearchBuffers, allocate, device_graph
from .launch import Launch, note_ran, ran_before
from .layout import grid_rows
from .memory import int32_records_fit, record_capacity, search_bytes, table_size
from .records import RecordCopier, keep_record_buffer, take_record_buffer

log = logging.getLogger(__name__)


def run_search(problem: SearchProblem, tuning: CudaTuning | None = None, restore=None,
               keep_survivors: bool = False):  # fmt: skip
    """Every frame of ``problem`` on the GPU in one call: ``(device buffers, record copier,
    frames)``; the copier's ``joined`` records go to `finish` or the streams' bookkeeping
    (`streams.py`), its ``kept`` survivors of every frame (``keep_survivors``) to lattices.
    ``restore(buffers, stream)``, when given, puts streams' last survivors back before the
    first frame.
    `CudaTuning` (chunking, double buffering, block size, profiling) changes the speed, never
    the results."""
    from numba import cuda

    tuning = tuning or CudaTuning()
    frames_per_chunk, double_buffer = tuning.frames_per_chunk, tuning.double_buffer
    prune_threads, profile = tuning.prune_threads, tuning.profile
    g, opts = problem.graph, problem.options
    _check_prune_threads(prune_threads)
    B = problem.batch_size
    T = int(problem.lengths.max(initial=0))
    contexts = int(problem.boosts.contexts.max(initial=1))
    H = table_size(g.num_states, opts, contexts)
    cap = record_capacity(B, H)
    if not int32_records_fit(B, H):
        raise DeviceMemoryError(
            f"a batch of {B} utterances with token tables of {H} slots needs {2 * cap} record "
            "slots, beyond int32 indexing: lower the batch size or CtcBeamOptions.max_candidates"
        )
    needed = search_bytes(g, opts, B, 0, contexts, keep_survivors)
    frames = B * (problem.ac if problem.ac is not None else problem.device_lp).shape[1]
    uploads = 4 * frames + (0 if problem.ac is None else problem.ac.nbytes)  # maxima, costs
    _check_free_memory(needed + uploads, B, H)
    graphs = _use_graphs(opts.cuda_graphs, profile, T, frames_per_chunk)
    log.info(
        "cuda search: %d utterances, table of %d slots each, %.1f MB of device memory, "
        "CUDA graphs %s", B, H, needed / 2**20, "on" if graphs else "off",
    )  # fmt: skip

    capture_stream, stream = _capture_streams() if graphs else (None, cuda.stream())
    d = allocate(problem, H, cap, frames_per_chunk, stream, keep_survivors)
    if restore is not None:
        restore(d, stream)
    threads = prune_threads or prune_block_size(B)
    run = FrameSequence(problem, d, device_graph(problem), frames_per_chunk, threads, profile)
    pinned = take_record_buffer(timed=profile is not None, fields=5 if keep_survivors else 2)
    copier = RecordCopier(d, pinned, g.num_emitting_arcs, T)
    try:
        _run_chunks(run, copier, stream, capture_stream, graphs, T, frames_per_chunk,
                    double_buffer)  # fmt: skip
        if profile is not None:
            stages = {**run.stage_ms(), "copy": copier.pinned.copy_ms(), "chunks": copier.ran}
            for key, value in stages.items():
                profile[key] = profile.get(key, 0) + value  # summed over calls
    finally:
        keep_record_buffer(copier.pinned)
    return d, copier, T


def _run_chunks(run, copier, stream, capture_stream, graphs, T, frames_per_chunk, double_buffer):
    """The host loop: chunks are launched while frames may remain (a step of a chunk runs at
    most one frame), as one captured CUDA graph when ``graphs`` (the first chunk plain when its
    kernels never ran in this context: a capture must not compile or load them); each is
    collected once the next one is queued behind it (double buffering) or at once."""
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
            if graphs and chunk_graph is None and run.kernels_loaded():
                chunk_graph = _capture(run.launch_chunk, capture_stream, stream)
            if chunk_graph is not None:
                chunk_graph.launch(capture_stream)
                launched.append(frames_per_chunk)
            else:
                steps = frames_per_chunk if graphs else min(frames_per_chunk, remaining)
                run.launch_chunk(stream, steps)
                launched.append(steps)
                note_ran(run.context, run.signature)
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
    from .target import SIM

    if SIM:
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
    from .target import SIM

    limits = {} if SIM else K.closure_prune_kernel.get_max_threads_per_block()
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
    from .target import SIM

    if SIM:
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
    stream = cuda.external_stream(capture_stream.ptr)
    # The search's arrays are made on `stream` and outlive this call (finish, the streams'
    # bookkeeping); CuPy destroys its stream once unreferenced, which left them on a dead handle
    # (their copies failed with CUDA_ERROR_INVALID_CONTEXT or crashed, seen on an H100).
    stream.owner = capture_stream
    return capture_stream, stream


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


class FrameSequence:
    """The launches of one chunk: `begin_chunk`, then per frame step `begin_frame`, the expand
    kernel (best cost when ``min_active == 1``, candidates, source context states when a lane
    boosts phrases) and `closure_prune`."""

    def __init__(
        self, p: SearchProblem, d: SearchBuffers, graph: bundles.SearchGraph,
        frames_per_chunk: int, prune_threads: int, profile,
    ):  # fmt: skip
        from numba import cuda

        from . import kernels as K
        from .target import SIM

        B = p.batch_size
        self.K, self.d, self.frames_per_chunk = K, d, frames_per_chunk
        self.threads = 8 if SIM else 256
        self.prune_threads = prune_threads
        self.expand_grid = (1 if SIM else max(1, min(128, 8 * p.options.max_active // 256)),
                            grid_rows(B))  # fmt: skip
        self.B = B
        self.last_frame = np.int32(p.lengths.max(initial=0))
        self.need = np.int32(B * d.tables.size)  # records of one worst-case frame
        self.early = p.options.min_active <= 1  # expand phase 0 finds the best cost first
        self.phrases = p.boosts.has_phrases  # expand phase 2 settles the source context states
        limits = bundles.limits(p, index=np.int32)
        self.expand_args = (
            d.control, d.acoustics, graph, d.boosts, limits, d.lanes, d.survivors, d.tables,
        )  # fmt: skip
        self.prune_args = (
            d.control, graph, d.boosts, limits, d.lanes, d.tables, d.survivors, d.records,
        )  # fmt: skip
        self.profile = profile
        self.events: list = []
        self._event = cuda.event
        self.context = None if SIM else cuda.current_context()
        self.begin_chunk, self.end_chunk = Launch(K.begin_chunk_kernel), Launch(K.end_chunk_kernel)
        self.begin_frame, self.expand = Launch(K.begin_frame_kernel), Launch(K.expand_kernel)
        self.closure_prune = Launch(K.closure_prune_kernel)
        chunk_args = (d.control, d.records)
        self.signature = (
            self.begin_chunk.signature(*chunk_args),
            self.begin_frame.signature(*chunk_args, self.last_frame, self.need),
            self.expand.signature(np.int32(0), *self.expand_args),
            self.closure_prune.signature(*self.prune_args),
        )

    def kernels_loaded(self) -> bool:
        """Whether this search's kernels already ran in this context, so that a chunk can be
        captured without running one plainly first."""
        return all(self.signature) and ran_before(self.context, self.signature)

    def launch_chunk(self, stream, steps: int | None = None) -> None:
        d = self.d
        self.begin_chunk((1,), (1,), stream, d.control, d.records)
        for _ in range(self.frames_per_chunk if steps is None else steps):
            self.launch_frame(stream)
        self.end_chunk((1,), (1,), stream, d.control, d.records)

    def launch_frame(self, stream) -> None:
        d, grid, threads = self.d, self.expand_grid, self.threads
        self.begin_frame((1,), (1,), stream, d.control, d.records, self.last_frame, self.need)
        marks = [self._mark(stream)]
        if self.early:
            self.expand(grid, threads, stream, np.int32(0), *self.expand_args)
        self.expand(grid, threads, stream, np.int32(1), *self.expand_args)
        if self.phrases:
            self.expand(grid, threads, stream, np.int32(2), *self.expand_args)
        marks.append(self._mark(stream))
        self.closure_prune((self.B,), (self.prune_threads,), stream, *self.prune_args)
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

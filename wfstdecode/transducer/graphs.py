"""CUDA-graph drivers for the greedy loop programs of `programs.py`.

"loop_bodies": ``init_``, ``outer_begin_``, ``inner_step_`` and ``outer_end_`` are each captured
once as a `torch.cuda.CUDAGraph`; Python runs the loops and reads the two flags (one host sync
per iteration, like eager mode, but a few graph launches instead of hundreds of kernel launches).

"full": the whole decode is one graph; both loops are CUDA conditional *while* nodes (CUDA
>= 12.6 driver, cuda-python / cuda-bindings), as in "Speed of light exact greedy decoding for
RNN-T" §3.2: a one-thread kernel copies the loop's device flag into the node's condition before
the node and again at the end of its body, so the GPU runs the loops without the host.

The captured programs are cached per (model, batch size, frames rounded up to a multiple of 64,
dtype, device, options): a new shape captures anew. A program is out of the cache while a
decode uses it, so threads decoding at once never share one. cuda-python is imported lazily;
everything here runs on CUDA tensors only.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from functools import cache

import torch

from ..errors import BackendUnavailableError

__all__ = ["conditional_nodes_unavailable_reason", "resolve_mode", "run", "running"]

MIN_DRIVER = (12, 6)  # as NeMo requires for conditional nodes
_CACHE: OrderedDict = OrderedDict()
_CACHE_SIZE = 8
_LOCK = threading.Lock()  # (around the cache's own changes only)
TIME_BUCKET = 64

_SET_CONDITION_SRC = r"""
typedef __device_builtin__ unsigned long long cudaGraphConditionalHandle;
extern "C" __device__ __cudart_builtin__ void cudaGraphSetConditional(
    cudaGraphConditionalHandle handle, unsigned int value);
extern "C" __global__ void set_condition(cudaGraphConditionalHandle handle, const bool *flag)
{
    cudaGraphSetConditional(handle, *flag);
}
"""


def resolve_mode(requested: str, device: torch.device) -> str:
    """The CUDA-graph mode to run: ``requested``, or for "auto" the best the device supports."""
    if requested == "off":
        return "off"
    if device.type != "cuda":
        if requested == "auto":
            return "off"
        raise BackendUnavailableError(
            f"cuda_graphs={requested!r} needs CUDA tensors; enc is on {device}. "
            "Use cuda_graphs='off' or 'auto'."
        )
    reason = conditional_nodes_unavailable_reason()
    if requested == "auto":
        return "loop_bodies" if reason else "full"
    if requested == "full" and reason:
        raise BackendUnavailableError(
            f"cuda_graphs='full' needs CUDA graph conditional nodes: {reason}. "
            "Use cuda_graphs='loop_bodies' or 'auto'."
        )
    return requested


@cache
def conditional_nodes_unavailable_reason() -> str | None:
    """None when conditional while-nodes can be used here, else why not."""
    if not torch.cuda.is_available():
        return "no CUDA device"
    try:
        driver, _ = _bindings()
    except ImportError:
        return "cuda-python / cuda-bindings is not installed (pip install cuda-python)"
    err, version = driver.cuDriverGetVersion()
    if int(err) != 0:
        return f"cuDriverGetVersion failed ({err})"
    found = (version // 1000, version % 1000 // 10)
    if found < MIN_DRIVER:
        return f"the driver supports CUDA {found[0]}.{found[1]}; {MIN_DRIVER} or newer is needed"
    return None


@contextlib.contextmanager
def running(mode: str, adapter, enc, lengths, options, vocab):
    """Decode with a cached captured program; yields the program (its buffers hold results),
    held by the caller until the block ends. A program is taken out of the cache while in use:
    another thread decoding a batch of the same key meanwhile captures its own (it reloaded
    and replayed the shared one, and the first thread read the second's results)."""
    from .programs import make_program

    # Pad time to a multiple of TIME_BUCKET so that ragged batches share captured graphs; padded
    # frames lie beyond every length and are never read as valid.
    pad = -enc.shape[1] % TIME_BUCKET
    if pad:
        enc = torch.nn.functional.pad(enc, (0, 0, 0, pad))
    key = (id(adapter.model), mode, tuple(enc.shape), enc.dtype, enc.device, options, vocab)
    with _LOCK:
        entry = _CACHE.pop(key, None)
    if entry is None or entry[0]() is not adapter.model:
        program = make_program(adapter, enc, lengths, options, vocab, fixed=True)
        runner = _FullGraph(program) if mode == "full" else _BodyGraphs(program)
        entry = (_ref(adapter.model), runner)
    runner = entry[1]
    try:
        runner.program.load_(enc, lengths)
        runner.replay()
        yield runner.program
    finally:
        with _LOCK:  # (the most recently used; one another thread put back meanwhile goes)
            _CACHE[key] = entry
            _CACHE.move_to_end(key)
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)


def run(mode: str, adapter, enc, lengths, options, vocab):
    """`running`'s program, returned: its buffers hold the results until the next decode of
    the same key (one thread; `greedy_decode` reads them within `running`)."""
    with running(mode, adapter, enc, lengths, options, vocab) as program:
        return program


def _ref(obj):
    import weakref

    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


def _warm_up(program) -> None:
    """One eager run on a side stream: allocates the lazily made tensors, initialises cuBLAS."""
    from .programs import run_eager

    stream = torch.cuda.Stream(program.rows.device)
    stream.wait_stream(torch.cuda.current_stream(program.rows.device))
    with torch.cuda.stream(stream):
        run_eager(program)
    torch.cuda.current_stream(program.rows.device).wait_stream(stream)


class _BodyGraphs:
    """Each step of the program as its own CUDA graph; Python runs the loops."""

    STEPS = ("init_", "outer_begin_", "inner_step_", "outer_end_")

    def __init__(self, program):
        self.program = program
        _warm_up(program)
        pool = torch.cuda.graph_pool_handle()
        self.graphs = {}
        for name in self.STEPS:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool, capture_error_mode="thread_local"):
                getattr(program, name)()
            self.graphs[name] = graph

    def replay(self) -> None:
        from .programs import host_flag

        p, g = self.program, self.graphs
        g["init_"].replay()
        while host_flag(p.outer_flag):
            g["outer_begin_"].replay()
            while host_flag(p.inner_flag):
                g["inner_step_"].replay()
            g["outer_end_"].replay()


class _FullGraph:
    """The whole decode as one CUDA graph with two nested conditional while-nodes."""

    def __init__(self, program):
        self.program = program
        self._driver, self._nvrtc = _bindings()
        self._kernel = _set_condition_kernel()
        self._keep = []  # argument arrays the captured kernel launches point to
        _warm_up(program)
        p = program
        self.graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream(p.rows.device)
        with torch.cuda.graph(self.graph, stream=stream, capture_error_mode="thread_local"):
            p.init_()
            with self._while(p.outer_flag):
                p.outer_begin_()
                with self._while(p.inner_flag):
                    p.inner_step_()
                p.outer_end_()

    def replay(self) -> None:
        self.graph.replay()

    def _set_condition(self, handle, flag: torch.Tensor, stream) -> None:
        import numpy as np

        d = self._driver
        # kernelParams: the address of each argument's value (as NeMo passes them).
        flag_ptr = np.array([flag.data_ptr()], dtype=np.uint64)
        args = np.array([handle.getPtr(), flag_ptr.ctypes.data], dtype=np.uint64)
        self._keep += [handle, flag_ptr, args]
        _check(d.cuLaunchKernel(self._kernel, 1, 1, 1, 1, 1, 1, 0, stream, args.ctypes.data, 0))

    @contextlib.contextmanager
    def _while(self, flag: torch.Tensor):
        d = self._driver
        device = flag.device
        outer = torch.cuda.current_stream(device)
        outer_h = d.CUstream(outer.cuda_stream)
        info = _check(d.cuStreamGetCaptureInfo(outer_h))
        graph = info[2]
        ctx = _check(d.cuCtxGetCurrent())
        handle = _check(d.cuGraphConditionalHandleCreate(graph, ctx, 0, 0))
        self._set_condition(handle, flag, outer_h)  # the condition of the first iteration
        info = _check(d.cuStreamGetCaptureInfo(outer_h))
        deps = info[3]
        params = d.CUgraphNodeParams()
        params.type = d.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
        params.conditional.handle = handle
        params.conditional.type = d.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_WHILE
        params.conditional.size = 1
        params.conditional.ctx = ctx
        v13 = _bindings_major() >= 13  # CUDA 13 added edge data to these calls
        if v13:
            node = _check(d.cuGraphAddNode(graph, deps, None, len(deps), params))
        else:
            node = _check(d.cuGraphAddNode(graph, deps, len(deps), params))
        body = params.conditional.phGraph_out[0]
        flags = d.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES
        if v13:
            _check(d.cuStreamUpdateCaptureDependencies(outer_h, [node], None, 1, flags))
        else:
            _check(d.cuStreamUpdateCaptureDependencies(outer_h, [node], 1, flags))
        inner = torch.cuda.Stream(device)
        inner_h = d.CUstream(inner.cuda_stream)
        mode = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        _check(d.cuStreamBeginCaptureToGraph(inner_h, body, None, None, 0, mode))
        torch.cuda.set_stream(inner)
        try:
            yield
            self._set_condition(handle, flag, inner_h)  # the condition of the next iteration
        finally:
            _check(d.cuStreamEndCapture(inner_h))
            torch.cuda.set_stream(outer)


def _check(result):
    """cuda-python calls return (error, *values): raise on error, return the value(s)."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise BackendUnavailableError(f"CUDA driver call failed: {err}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def _bindings():
    """(driver, nvrtc) modules from cuda-bindings >= 12.6 or older cuda-python."""
    try:
        from cuda.bindings import driver, nvrtc
    except ImportError:
        from cuda import cuda as driver  # cuda-python < 12.6
        from cuda import nvrtc
    return driver, nvrtc


def _bindings_major() -> int:
    try:
        from cuda.bindings import __version__ as version
    except ImportError:
        from cuda import __version__ as version
    return int(str(version).split(".")[0])


@cache
def _set_condition_kernel():
    """Compile (NVRTC) and load the kernel that sets a while-node's condition from a flag."""
    import numpy as np

    driver, nvrtc = _bindings()
    prog = _check(nvrtc.nvrtcCreateProgram(_SET_CONDITION_SRC.encode(), b"cond.cu", 0, [], []))
    err, *_ = nvrtc.nvrtcCompileProgram(prog, 0, [])
    if int(err) != 0:
        size = _check(nvrtc.nvrtcGetProgramLogSize(prog))
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise BackendUnavailableError(f"NVRTC failed to compile the condition kernel: {log!r}")
    size = _check(nvrtc.nvrtcGetPTXSize(prog))
    ptx = b" " * size
    _check(nvrtc.nvrtcGetPTX(prog, ptx))
    ptx_arr = np.char.array(ptx)
    module = _check(driver.cuModuleLoadData(ptx_arr.ctypes.data))
    return _check(driver.cuModuleGetFunction(module, b"set_condition"))

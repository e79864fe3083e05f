"""Test-session set-up: without a GPU, the cuda backend's kernels run under Numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``), set here before anything imports Numba. WFSTDECODE_CUDASIM=0 / 1
overrides the detection."""

import hashlib
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np


def _has_gpu() -> bool:
    return Path("/dev/nvidiactl").exists() or any(Path("/dev").glob("nvidia[0-9]*"))


def _patch_simulator_shared_arrays() -> None:
    """The simulator creates a block's shared array on the first thread's call without a lock,
    so two threads can each get their own array (it showed as garbage in shared counters under
    load). This version creates them under a lock, keyed by call site as the simulator does."""
    import numpy as np
    from numba.core import types
    from numba.cuda.simulator import kernelapi
    from numba.np import numpy_support

    if getattr(kernelapi.FakeCUDAShared.array, "_wfstdecode_locked", False):
        return
    unlocked = kernelapi.FakeCUDAShared.array
    lock = threading.Lock()

    def array(self, shape, dtype):
        if shape == 0:  # dynamic shared memory: one buffer, no race
            return unlocked(self, shape, dtype)
        frame = sys._getframe(1)
        caller = (frame.f_code.co_filename, frame.f_lineno)
        with lock:
            res = self._allocations.get(caller)
            if res is None:
                if isinstance(dtype, types.Type):
                    dtype = numpy_support.as_dtype(dtype)
                res = self._allocations[caller] = np.empty(shape, dtype)
        return res

    array._wfstdecode_locked = True
    kernelapi.FakeCUDAShared.array = array


def _patch_simulator_barrier() -> None:
    """The simulator's block manager finds out that a block's threads all reached
    ``syncthreads`` by busy-polling each thread's flag while holding the GIL the threads need,
    so every barrier costs many thread switches; the cuda tests spent most of their time there.
    This version gives each block a real barrier (a condition variable counting the threads that
    arrived against those still running; a thread that returns leaves it, as the simulator's
    live-thread test does) and joins the threads at the end. What the threads compute, and the
    errors they raise (with their thread and block ids), are unchanged."""
    from numba.cuda.simulator import kernel

    manager = getattr(kernel, "BlockManager", None)
    if manager is None or getattr(manager.run, "_wfstdecode_barrier", False):
        return
    if not all(hasattr(kernel.BlockThread, name) for name in ("syncthreads", "run")):
        return

    class Barrier:
        def __init__(self, parties: int):
            self.cond = threading.Condition()
            self.alive, self.arrived, self.generation = parties, 0, 0
            self.aborted = False

        def wait(self) -> None:
            with self.cond:
                if self.aborted:
                    raise RuntimeError("abort flag set on syncthreads call")
                generation = self.generation
                self.arrived += 1
                if self.arrived == self.alive:
                    self._release()
                while generation == self.generation and not self.aborted:
                    self.cond.wait()
                if self.aborted:
                    raise RuntimeError("abort flag set on syncthreads clear")

        def _release(self) -> None:
            self.arrived = 0
            self.generation += 1
            self.cond.notify_all()

        def leave(self, failed: bool) -> None:
            with self.cond:
                self.alive -= 1
                if failed:
                    self.aborted = True
                    self.cond.notify_all()
                elif self.alive and self.arrived == self.alive:
                    self._release()

    class BarrierThread(kernel.BlockThread):
        def syncthreads(self):
            self._manager.barrier.wait()

        def run(self):
            try:
                super().run()  # records an exception in self.exception
            finally:
                self._manager.barrier.leave(self.exception is not None)

    def run(self, grid_point, *args):
        self.barrier = Barrier(int(np.prod(self._block_dim)))

        def target():
            self._f(*args)

        threads = [BarrierThread(target, self, grid_point, block_point, self._debug)
                   for block_point in np.ndindex(*self._block_dim)]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        failed = [t for t in threads if t.exception and "abort flag" not in str(t.exception[0])]
        for t in failed or [t for t in threads if t.exception]:
            raise t.exception[0].with_traceback(t.exception[1])

    run._wfstdecode_barrier = True
    manager.run = run


def _numba_cache_keyed_by_source() -> None:
    """Numba reuses a cached function while its own file is unchanged, even where it compiled
    in code of another module that changed (the cpu backend's steps): tests then ran the old
    code. The cache goes to a private folder named by a hash of every module that uses Numba
    (a NUMBA_CACHE_DIR already set is left alone); folders of other sources unused for two
    days are removed."""
    if "NUMBA_CACHE_DIR" in os.environ or "numba" in sys.modules:
        return
    package = Path(__file__).resolve().parents[1] / "wfstdecode"
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        text = path.read_bytes()
        if b"numba" in text:
            digest.update(path.relative_to(package).as_posix().encode() + b"\0" + text)
    root = Path(tempfile.gettempdir()) / f"wfstdecode-test-numba-{os.getuid()}"
    try:
        root.mkdir(mode=0o700, exist_ok=True)
        if root.stat().st_uid != os.getuid() or root.stat().st_mode & 0o022:
            return  # (not ours alone: cached code is loaded and run; keep Numba's own places)
        here = root / digest.hexdigest()[:16]
        here.mkdir(exist_ok=True)
        os.utime(here)
        for old in root.iterdir():
            if old != here and time.time() - old.stat().st_mtime > 2 * 86400:
                shutil.rmtree(old, ignore_errors=True)
    except OSError:
        return
    os.environ["NUMBA_CACHE_DIR"] = str(here)


_numba_cache_keyed_by_source()
_sim = os.environ.get("WFSTDECODE_CUDASIM")
if (_sim == "1" or (_sim is None and not _has_gpu())) and "numba" not in sys.modules:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    _patch_simulator_shared_arrays()
    _patch_simulator_barrier()


def pytest_configure(config):
    """Under pytest-xdist, the controller compiles the cpu backend once before the workers
    start: Numba caches it (in `_numba_cache_keyed_by_source`'s folder), so the workers and the
    processes tests spawn (corpus workers, CLI runs) load it instead of each compiling it again
    (~20 s apiece on a fresh clone)."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    from wfstdecode.ctc import CtcBeamOptions, decode_ctc
    from wfstdecode.testing import random_graph, random_log_probs

    graph = random_graph(1, num_states=20, num_tokens=5, arcs_per_state=3)
    decode_ctc(random_log_probs(1, 1, 9, graph.num_tokens), None, graph, CtcBeamOptions(),
               backend="cpu")  # fmt: skip

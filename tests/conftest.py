"""Test-session set-up: without a GPU, the cuda backend's kernels run under Numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``), set here before anything imports Numba. WFSTDECODE_CUDASIM=0 / 1
overrides the detection."""

import os
import sys
import threading
import time
from pathlib import Path


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


def _patch_simulator_polling() -> None:
    """The simulator's block manager busy-polls its threads (``is_alive`` of each, in a loop)
    holding the GIL the simulated threads need. Yielding it at each poll (``sleep(0)``) changes
    nothing the threads do and halves the cuda tests' time (two search tests: 18.6 -> 9.4 s)."""
    from numba.cuda.simulator import kernel

    thread = getattr(kernel, "BlockThread", None)
    if thread is None or getattr(thread.is_alive, "_wfstdecode_yields", False):
        return
    alive = thread.is_alive

    def is_alive(self):
        time.sleep(0)
        return alive(self)

    is_alive._wfstdecode_yields = True
    thread.is_alive = is_alive


_sim = os.environ.get("WFSTDECODE_CUDASIM")
if (_sim == "1" or (_sim is None and not _has_gpu())) and "numba" not in sys.modules:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    # The simulator runs a block's threads as Python threads and polls them at every
    # syncthreads; a short switch interval makes that several times faster.
    sys.setswitchinterval(5e-4)
    _patch_simulator_shared_arrays()
    _patch_simulator_polling()


def pytest_configure(config):
    """Under pytest-xdist, the controller compiles the cpu backend once before the workers
    start: Numba caches it next to the sources, so the workers and the processes tests spawn
    (corpus workers, CLI runs) load it instead of each compiling it again (~20 s apiece on a
    fresh clone)."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    from wfstdecode.ctc import CtcBeamOptions, decode_ctc
    from wfstdecode.testing import random_graph, random_log_probs

    graph = random_graph(1, num_states=20, num_tokens=5, arcs_per_state=3)
    decode_ctc(random_log_probs(1, 1, 9, graph.num_tokens), None, graph, CtcBeamOptions(),
               backend="cpu")  # fmt: skip

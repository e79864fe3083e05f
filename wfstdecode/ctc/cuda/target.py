"""What the cuda backend's device code runs on: a GPU, or Numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``, what tests run without a GPU). Every module of device code imports
``cuda`` and the bit casts from here, so the two differ in this file only.

Under the simulator, ``cuda`` is `_SimulatedCuda`: the simulator puts its per-launch fake
``cuda`` module into a module's globals only for the kernel's own module (for the launch) and for
a device function's module (for each call, undone when that call returns). A block's threads
run at once as Python threads, so with device functions in several modules one thread's return
would take the fake module away from another thread still inside that module. Reading it from
the running launch instead is the same for every thread, always.
"""

from __future__ import annotations

import numpy as np
from numba import config

SIM = bool(config.ENABLE_CUDASIM)

if SIM:
    from numba import cuda as _numba_cuda
    from numba.cuda.simulator.kernel import _get_kernel_context

    class _SimulatedCuda:
        """``numba.cuda`` inside a simulated launch (the launch's fake module), else itself."""

        def __getattr__(self, name):
            launch = _get_kernel_context()
            return getattr(_numba_cuda if launch is None else launch, name)

    cuda = _SimulatedCuda()

    # the simulator has no libdevice: reinterpret bits with NumPy
    def float_bits(c):
        return np.float32(c).view(np.uint32)

    def bits_float(u):
        return np.uint32(u).view(np.float32)

    def mul_rn(a, b):
        return np.float32(a) * np.float32(b)

else:
    from numba import cuda, int32, uint32
    from numba.cuda import libdevice

    @cuda.jit(device=True)
    def float_bits(c):
        return uint32(libdevice.float_as_int(c))

    @cuda.jit(device=True)
    def bits_float(u):
        return libdevice.int_as_float(int32(u))

    @cuda.jit(device=True)
    def mul_rn(a, b):  # a rounded product: never fused into a following add (FMA)
        return libdevice.fmul_rn(a, b)

"""Compile every kernel of the cuda CTC backend to PTX for a GPU architecture, without a GPU.

The simulator (what CI runs) executes the kernels as Python, so it cannot catch what only the
real compiler rejects (an untyped builtin, a float64 that slipped in, a missing atomic). This
compiles each kernel with the argument types a real search passes (taken from a tiny search's own
buffers) and reports, per kernel, the PTX size, float64 instructions (there should be none: every
cost is float32), fused multiply-adds (there should be none: the host rounds the acoustic
product before adding the arc cost) and the atomics used; with ptxas (on PATH or ``--ptxas``,
of the CUDA version of Numba's NVVM) also the registers per thread and the largest block they
allow, which bounds `prune_block_size`. It needs NVVM and libdevice: a CUDA toolkit Numba finds
(e.g. in /usr/local/cuda-13.0), or the ``nvidia-cuda-nvcc-cu12`` wheel::

    pip download --no-deps --only-binary=:all: -d /tmp/w nvidia-cuda-nvcc-cu12
    unzip -q /tmp/w/*.whl -d /tmp/nvcc
    NUMBA_CUDA_NVVM=/tmp/nvcc/nvidia/cuda_nvcc/nvvm/lib64/libnvvm.so \\
    NUMBA_CUDA_LIBDEVICE=/tmp/nvcc/nvidia/cuda_nvcc/nvvm/libdevice \\
        python tools/check_ptx.py --cc 9.0 --ptxas /tmp/nvcc/nvidia/cuda_nvcc/bin/ptxas

Exits non-zero when a kernel fails to compile or uses float64.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys

import numpy as np


class _NoLaunch:
    """Stands for a kernel whose launches are skipped: ``kernel[grid, block](*args)``."""

    def __getitem__(self, _config):
        return lambda *args: None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cc", default="9.0", help="compute capability, e.g. 9.0 (H100/H200)")
    ap.add_argument(
        "--ptxas", default=None, help="ptxas of the CUDA version of Numba's NVVM (default: on "
        "PATH)"
    )  # fmt: skip
    args = ap.parse_args()
    ptxas = args.ptxas or shutil.which("ptxas")
    cc = tuple(int(x) for x in args.cc.split("."))
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        sys.exit("check_ptx: unset NUMBA_ENABLE_CUDASIM (the simulator compiles nothing)")

    import numba
    from numba import cuda

    # A search's buffers as host arrays: their types are the kernels' argument types.
    def host(x, *_, **__):
        return np.asarray(x)

    cuda.to_device = host
    cuda.device_array = lambda n, dtype, **_: np.zeros(n, dtype)
    cuda.mapped_array = lambda shape, dtype, **_: np.zeros(shape, dtype)
    cuda.event = lambda: None
    cuda.synchronize = lambda: None
    cuda.current_context = lambda: None

    class _Device:  # device functions ask the current device for its architecture
        compute_capability = cc

    import numba.cuda.dispatcher

    numba.cuda.dispatcher.get_current_device = lambda: _Device()

    from wfstdecode.ctc import CtcBeamOptions
    from wfstdecode.ctc.cuda import buffers as D
    from wfstdecode.ctc.cuda import driver as C
    from wfstdecode.ctc.cuda import inputs as I
    from wfstdecode.ctc.cuda import kernels as K
    from wfstdecode.ctc.search import prepare_problem
    from wfstdecode.testing import random_graph, random_log_probs

    g = random_graph(0)
    problem = prepare_problem(
        random_log_probs(0, 2, 4, g.num_tokens), None, g, CtcBeamOptions(beam=8.0), None
    )
    H = C.table_size(g.num_states, problem.options)
    fill, K.fill_kernel = K.fill_kernel, _NoLaunch()  # host buffers: skip the fill launches
    d = D.allocate(problem, H, C.record_capacity(2, H), 4, None)
    K.fill_kernel = fill
    run = C.FrameSequence(problem, d, D.device_graph(problem), 4, 256, None)
    i32, i64 = np.zeros(1, np.int32), np.zeros(1, np.int64)
    f32 = np.zeros(1, np.float32)
    kernels = [
        ("expand_kernel", K.expand_kernel, (np.int32(1), *run.expand_args)),
        ("closure_prune_kernel", K.closure_prune_kernel, run.prune_args),
        ("begin_chunk_kernel", K.begin_chunk_kernel, (d.control, d.records)),
        ("begin_frame_kernel", K.begin_frame_kernel,
         (d.control, d.records, run.last_frame, run.need)),
        ("end_chunk_kernel", K.end_chunk_kernel, (d.control, d.records)),
        ("fill_kernel[int64]", K.fill_kernel, (d.tables.state, np.int64(D.EMPTY))),
        ("fill_kernel[uint64]", K.fill_kernel, (d.tables.key, D.NO_KEY)),
        ("gather_survivors_kernel", K.gather_survivors_kernel,
         (d.survivors, i32, i64, (i32, i32, f32, i32), np.int32(H))),
        ("restore_survivors_kernel", K.restore_survivors_kernel,
         (d.survivors, i32, i64, (i32, i32, f32, i32), i32, np.int32(H))),
    ]  # fmt: skip
    control, acoustics, *rest = run.expand_args
    for dtype in (np.float16, np.float32, np.float64):
        lp = np.zeros((2, 4, 6), dtype)
        strided = lp[:, ::2]
        for name, layout in (("C", lp), ("A", strided)):
            tag = f"[{np.dtype(dtype).name}, {name}]"
            kernels.append((
                f"_check_kernel{tag}", I._check_kernel,
                (layout, i32, i64, np.zeros((1, 1), np.float32)),
            ))  # fmt: skip
            kernels.append((
                f"_gather_kernel{tag}", I._gather_kernel,
                (layout, i64, i64, i64, f32),
            ))  # fmt: skip
            expand = (control, acoustics._replace(log_probs=layout), *rest)
            kernels.append((f"expand_kernel{tag}", K.expand_kernel, (np.int32(1), *expand)))

    failed = 0
    for name, kernel, kargs in kernels:
        sig = tuple(numba.typeof(a) for a in kargs)
        try:
            ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=cc)
        except Exception as exc:  # report every kernel, not just the first failure
            print(f"FAIL {name}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
            failed += 1
            continue
        f64 = len(re.findall(r"\.f64\b", ptx))
        fma = len(re.findall(r"\bfma\.", ptx))
        atomics = sorted(set(re.findall(r"atom\.[\w.]+", ptx)))
        regs = f", {_registers(ptxas, ptx, cc)}" if ptxas else ""
        print(f"ok   {name} ({len(kargs)} parameters): {len(ptx.splitlines())} PTX lines, "
              f"f64 ops {f64}, fma {fma}, {' '.join(atomics)}{regs}")  # fmt: skip
        failed += f64 > 0 and "float64" not in name  # float64 log-probs: only their loads
        failed += fma > 0  # a fused multiply-add would round costs unlike the host
    print(f"{len(kernels) - failed}/{len(kernels)} kernels compiled for sm_{cc[0]}{cc[1]}, "
          "float64 only where the log-probs are float64")  # fmt: skip
    return 1 if failed else 0


def _registers(ptxas: str, ptx: str, cc) -> str:
    """Registers per thread (ptxas -v) and the largest block they allow (a block has at most
    64K registers)."""
    import subprocess
    import tempfile

    from wfstdecode.ctc.cuda.driver import registers_per_warp

    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(ptx)
        f.flush()
        out = subprocess.run(
            [ptxas, f"-arch=sm_{cc[0]}{cc[1]}", "-v", "-o", os.devnull, f.name],
            capture_output=True, text=True,
        )  # fmt: skip
    found = re.findall(r"Used (\d+) registers", out.stderr)
    if out.returncode or not found:
        first = (out.stderr.strip().splitlines() or ["no output"])[0]
        return f"ptxas failed: {first}"
    regs = max(int(r) for r in found)
    largest = min(1024, 65536 // registers_per_warp(regs) * 32)
    return f"{regs} registers (blocks up to {largest} threads)"


if __name__ == "__main__":
    sys.exit(main())

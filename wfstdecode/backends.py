"""Backend names and resolution: ``"auto" | "reference" | "cpu" | "cuda"``.

Heavy or optional modules are imported only when a backend is used. An explicit ``"cuda"`` on a
machine that cannot run it raises `BackendUnavailableError`; it never falls back silently.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable

from .errors import BackendUnavailableError, OptionsError
from .interrupts import signals_deferred

CTC_BACKENDS = ("reference", "cpu", "cuda")
_CTC_MODULES = {
    "reference": ("wfstdecode.ctc.reference", "decode_reference"),
    "cpu": ("wfstdecode.ctc.cpu", "decode_cpu"),
    "cuda": ("wfstdecode.ctc.cuda.decode", "decode_cuda"),
}
# streaming: a class per backend with begin / advance / partial / end (see ctc/stream.py)
_CTC_STREAM_MODULES = {
    "reference": ("wfstdecode.ctc.reference", "ReferenceStreams"),
    "cpu": ("wfstdecode.ctc.cpu_streams", "CpuStreams"),
    "cuda": ("wfstdecode.ctc.cuda.streams", "CudaStreams"),
}


def cuda_available() -> bool:
    """True when Numba sees a usable CUDA GPU (or runs its CUDA simulator)."""
    try:
        from numba import cuda
    except Exception:  # pragma: no cover - numba without its cuda package
        return False
    try:
        return bool(cuda.is_available())
    except Exception:
        return False


def _cuda_backend_present() -> bool:
    return importlib.util.find_spec("wfstdecode.ctc.cuda.driver") is not None


DLPACK_CUDA = 2  # kDLCUDA, the device type ``__dlpack_device__`` reports for GPU memory


def is_device_array(x) -> bool:
    """True for a torch CUDA tensor, a Numba device array (also the simulator's), any object
    exposing ``__cuda_array_interface__``, and DLPack producers on a CUDA device (JAX, ...)."""
    if hasattr(x, "__cuda_array_interface__") or is_numba_device_array(x):
        return True
    if type(x).__module__.startswith("torch"):
        return bool(getattr(x, "is_cuda", False))
    return _dlpack_device_type(x) == DLPACK_CUDA


def _dlpack_device_type(x) -> int | None:
    try:
        return int(x.__dlpack_device__()[0]) if hasattr(x, "__dlpack_device__") else None
    except Exception:
        return None


def is_numba_device_array(x) -> bool:
    """A Numba device array (also the simulator's, which has no CUDA array interface); the
    module path differs between numba's own cuda package and numba-cuda."""
    return "numba" in type(x).__module__ and hasattr(x, "copy_to_host")


def available_ctc_backends() -> list[str]:
    """The CTC backends this machine can run."""
    names = ["reference", "cpu"]
    if _cuda_backend_present() and cuda_available():
        names.append("cuda")
    return names


def resolve_ctc_backend(name: str, log_probs=None) -> str:
    """The concrete backend for ``name``. ``"auto"`` is ``"cuda"`` when the log-probs live on a
    GPU and the cuda backend can run, else ``"cpu"``."""
    if name == "auto":
        if (
            log_probs is not None
            and is_device_array(log_probs)
            and "cuda" in available_ctc_backends()
        ):
            return "cuda"
        return "cpu"
    if name not in CTC_BACKENDS:
        raise OptionsError(f"unknown backend {name!r}; expected auto, {', '.join(CTC_BACKENDS)}")
    if name == "cuda":
        if not cuda_available():
            raise BackendUnavailableError(
                "backend='cuda' needs a CUDA GPU visible to Numba (numba.cuda.is_available() is "
                "False here); use backend='cpu' or 'auto'"
            )
        if not _cuda_backend_present():
            raise BackendUnavailableError(
                "backend='cuda' is not built into this version of wfstdecode (wfstdecode.ctc.cuda "
                "is missing); use backend='cpu'"
            )
    return name


def ctc_backend(name: str) -> Callable:
    """The decode function of a resolved CTC backend name."""
    module, func = _CTC_MODULES[name]
    try:
        return getattr(_imported(module), func)
    except ImportError as exc:
        raise BackendUnavailableError(f"backend {name!r} cannot be imported: {exc}") from exc


def ctc_stream_backend(name: str) -> type:
    """The streaming search class of a CTC backend: ``cls(tuning)`` with ``begin(problem)``,
    ``advance([(problem, state, costs), ...])``, ``partial(problem, state)`` and
    ``end(problem, state)``."""
    module, cls = _CTC_STREAM_MODULES[name]
    return getattr(_imported(module), cls)


def _imported(module: str):
    """A backend's module, imported with Ctrl-C held back until the import ends: one stopped
    half way leaves Numba's registries half filled, and every later import of it failed
    ("duplicate registration")."""
    return signals_deferred(importlib.import_module, module)

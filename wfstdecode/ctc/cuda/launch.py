"""Kernel launches with Numba's dispatch done once per search, and the record of which kernel
signatures have run in which CUDA context.

A Numba kernel call types every argument (tuples of arrays included) to pick the compiled
overload, at every launch: on an H200 that was ~40% of a launch's host time, and a batch-1
search is bound by launches (`bench/gpu_profile/`). A search launches the same few kernels with
the same arguments thousands of times, so `Launch` finds the overload after its first launch and
then launches it directly. Where this Numba does not expose overloads that way (the simulator,
another version), every launch goes through the dispatcher as before: slower, never different.
"""

from __future__ import annotations

import threading

_RAN: list = []  # (CUDA context, {kernel signatures whose kernels ran there outside a capture})
_RAN_LOCK = threading.Lock()


class Launch:
    """One kernel's launches; ``launch(grid, block, stream, *args)``."""

    __slots__ = ("compiled", "configs", "dispatcher")

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
        self.compiled = None  # the overload once known; False: go through the dispatcher
        self.configs: dict = {}

    def __call__(self, grid, block, stream, *args) -> None:
        key = (grid, block, id(stream))
        config = self.configs.get(key)
        if config is None:
            config = self.configs[key] = self.dispatcher[grid, block, stream]
        if self.compiled:
            self.compiled.launch(args, config.griddim, config.blockdim, config.stream,
                                 config.sharedmem)  # fmt: skip
            return
        config(*args)
        if self.compiled is None:
            self.compiled = compiled_overload(self.dispatcher, args) or False

    def signature(self, *args) -> tuple:
        """The argument types a launch with ``args`` compiles for (empty where unknown)."""
        try:
            return tuple(self.dispatcher.typeof_pyval(a) for a in args)
        except AttributeError:
            return ()


def compiled_overload(dispatcher, args):
    """The compiled kernel the dispatcher would launch for ``args``, or None."""
    try:
        types = tuple(dispatcher.typeof_pyval(a) for a in args)
        kernel = dispatcher.overloads.get(types)
    except (AttributeError, TypeError):
        return None
    return kernel if callable(getattr(kernel, "launch", None)) else None


def ran_before(context, signature: tuple) -> bool:
    """Whether kernels of ``signature`` were launched in ``context`` outside a stream capture
    (so they are compiled and loaded there: a capture must not compile or load a module)."""
    with _RAN_LOCK:
        return bool(signature) and signature in _signatures_ran(context)


def note_ran(context, signature: tuple) -> None:
    if signature:
        with _RAN_LOCK:
            _signatures_ran(context).add(signature)


def _signatures_ran(context) -> set:
    # Numba's Context objects are not hashable: found by identity (one per primary context).
    ran = next((ran for c, ran in _RAN if c is context), None)
    if ran is None:
        ran = set()
        _RAN.append((context, ran))
    return ran

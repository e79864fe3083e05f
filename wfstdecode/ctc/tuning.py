"""Speed-only settings of the CTC search backends, kept apart from `CtcBeamOptions` (which holds
what changes results): `decode_ctc(..., tuning=...)` passes one of these to its backend, so
benchmarks and tests vary them through the public entry point. None of them changes a result."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ..errors import OptionsError

# The process that started Numba's threading layer (any parallel region, or just asking for
# its thread count). GNU OpenMP, Numba's usual layer, cannot start threads in a process forked
# after that: Numba terminates such a child at its first parallel region (a fork pool or
# DataLoader worker that decodes), so it runs the compiled loops in turn.
_PARALLEL_PID = [0]


def claim_parallel() -> bool:
    """Whether this process may run Numba parallel regions; from now on it may have started
    the threading layer (call this before anything that starts it)."""
    if _PARALLEL_PID[0] not in (0, os.getpid()):
        return False  # forked from a process that started it
    _PARALLEL_PID[0] = os.getpid()
    return True


# Numba's workqueue threading layer (where neither TBB nor OpenMP loads: a slim container
# without libgomp, a Mac without libomp, NUMBA_THREADING_LAYER=workqueue) aborts the process
# when two threads run parallel regions at once: there, one region at a time.
_WORKQUEUE = threading.Lock()
os.register_at_fork(after_in_child=_WORKQUEUE._at_fork_reinit)


@contextmanager
def parallel_region() -> Iterator[bool]:
    """Whether the calling thread may run a Numba parallel region now (until the block ends):
    not in a forked child (`claim_parallel`), nor under the workqueue layer while another
    thread runs one — the caller then runs its loop in turn, with the same results."""
    import numba

    if not claim_parallel():
        yield False
        return
    numba.get_num_threads()  # (starts the threading layer: its name is known from then on)
    if numba.threading_layer() != "workqueue":
        yield True
        return
    mine = _WORKQUEUE.acquire(blocking=False)
    try:
        yield mine
    finally:
        if mine:
            _WORKQUEUE.release()


@contextmanager
def numba_threads(count: int | None) -> Iterator[int]:
    """Numba's parallel regions run on ``count`` threads (`CpuTuning.num_threads`: None keeps
    Numba's setting, more than its pool has are capped to it) until the block ends; yields the
    number in effect."""
    import numba

    claim_parallel()  # (asking for the count starts the threading layer)
    old = numba.get_num_threads()
    if count is not None:
        numba.set_num_threads(int(min(count, numba.config.NUMBA_NUM_THREADS)))
    try:
        yield numba.get_num_threads()
    finally:
        numba.set_num_threads(old)


MAX_ROOM = 1 << 31  # first_room: candidates, int32 indices


def int_at_least(owner: str, name: str, value, low: int, allow_none: bool = False,
                  high: int | None = None) -> None:  # fmt: skip
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        what = f"None or an int >= {low}" if allow_none else f"an int >= {low}"
        raise OptionsError(f"{owner}.{name} must be {what}; got {value!r}")
    if high is not None and value > high:
        raise OptionsError(f"{owner}.{name} must be at most {high}; got {value!r}")


@dataclass(frozen=True)
class CpuTuning:
    """num_threads: threads decoding utterances in parallel; None = Numba's default, more than
    Numba's pool has are capped to it; one in a process forked from one that had used this
    backend at all (GNU OpenMP cannot start threads there: `claim_parallel`).
    collect_records_at: an utterance's backpointer records are collected (those no surviving
    token traces back through are dropped, and the prefix every survivor shares is moved out of
    the store) once they number this many, then again each time they double: memory follows
    the active tokens, not the utterance's length. first_room: the candidates a frame's
    buffers hold at first (they double as a frame needs)."""

    num_threads: int | None = None
    collect_records_at: int = 1 << 16
    first_room: int = 256

    def __post_init__(self):
        for name in ("num_threads", "collect_records_at", "first_room"):
            value = getattr(self, name)
            if isinstance(value, np.integer):  # a NumPy integer is as good as an int
                object.__setattr__(self, name, int(value))
        int_at_least("CpuTuning", "num_threads", self.num_threads, 1, allow_none=True)
        int_at_least("CpuTuning", "collect_records_at", self.collect_records_at, 1)
        int_at_least("CpuTuning", "first_room", self.first_room, 1, high=MAX_ROOM)


@dataclass(frozen=True)
class CudaTuning:
    """frames_per_chunk: frame steps per captured CUDA graph / record copy; double_buffer: copy a
    chunk's records while the next chunk runs; prune_threads: threads of each utterance's
    closure/prune block (None = chosen from the batch size, see `cuda.driver.prune_block_size`);
    profile: a dict that gets the GPU milliseconds of expand, prune and copy added to it (CUDA
    events around each stage, so CUDA graphs are off), the frame steps and the chunks run.
    max_frames_per_call: a batch whose longest utterance has more frames is searched in calls
    of this many frames (`cuda.decode`): the records of each call's frames wait on the host
    until the end of the call, then only those the survivors trace back through stay.
    collect_records_at: the records kept between calls (and between a stream's chunks,
    `CtcStreamDecoder`) are collected as `CpuTuning.collect_records_at` says."""

    frames_per_chunk: int = 16
    double_buffer: bool = True
    prune_threads: int | None = None
    profile: dict | None = field(default=None, compare=False)
    max_frames_per_call: int = 4096
    collect_records_at: int = 1 << 16

    def __post_init__(self):
        for name in ("frames_per_chunk", "prune_threads", "max_frames_per_call",
                     "collect_records_at"):  # (a NumPy integer, as CpuTuning takes)  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, np.integer):
                object.__setattr__(self, name, int(value))
        int_at_least("CudaTuning", "frames_per_chunk", self.frames_per_chunk, 1)
        int_at_least("CudaTuning", "max_frames_per_call", self.max_frames_per_call, 1)
        int_at_least("CudaTuning", "collect_records_at", self.collect_records_at, 1)
        int_at_least("CudaTuning", "prune_threads", self.prune_threads, 1, allow_none=True)
        if not isinstance(self.double_buffer, bool):
            raise OptionsError(
                f"CudaTuning.double_buffer must be a bool; got {self.double_buffer!r}"
            )
        if self.profile is not None and not isinstance(self.profile, dict):
            raise OptionsError(f"CudaTuning.profile must be a dict or None; got {self.profile!r}")


TUNING = {"reference": None, "cpu": CpuTuning, "cuda": CudaTuning}


def tuning_for(backend: str, tuning, num_threads: int | None):
    """The tuning object for the resolved ``backend``: ``tuning`` checked against it, or built
    from the ``num_threads`` shorthand (cpu), or the backend's defaults."""
    kind = TUNING[backend]
    if num_threads is not None:
        if tuning is not None:
            raise OptionsError("give num_threads or tuning, not both")
        if kind is not CpuTuning:
            raise OptionsError(f"num_threads={num_threads!r} sets the cpu backend's threads; "
                               f"this search runs on {backend!r}")  # fmt: skip
        tuning = CpuTuning(num_threads)
    if tuning is None:
        return kind() if kind is not None else None
    if kind is None or not isinstance(tuning, kind):
        raise OptionsError(
            f"{type(tuning).__name__} tunes another backend; this search runs on {backend!r}"
            + (f" (takes {kind.__name__})" if kind is not None else " (takes no tuning)")
        )
    return tuning

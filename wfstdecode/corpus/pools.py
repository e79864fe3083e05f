"""Worker pools for a corpus decode: Ray actors, or local processes when Ray is absent.

Ray Core actors driven from here, rather than Ray Data's ``map_batches``: the driver must know
which shard a dead worker held, to retry that shard alone a bounded number of times and report it
when it keeps failing, while Ray Data retries actor tasks by its own rules and fails the whole
dataset when a task gives up (and needs pyarrow and pandas besides).

Both keep one shard in flight per worker, so when a worker dies the driver knows exactly which
shard it was decoding (that shard is retried; no other is touched), and both replace a dead worker
with a fresh one. Each worker loads the decoder (the graph) once, when it starts. A Ray actor
gets a shard only once it has started: on a cluster busy with other work an actor may wait for
its CPU, and a shard given to it would wait as long while started actors sat idle.

``next_event`` reports what happened to a shard: ``done`` (its `ShardOutput`), ``error`` (an
exception in the decoder; ``permanent`` when retrying cannot help, e.g. a corrupt file) or
``died`` (the worker was killed, crashed or ran out of memory, or held the shard longer than
``shard_timeout`` seconds: then it is stopped and replaced). A decoder that cannot be loaded at
all raises `WfstDecodeError` from ``next_event``.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import signal
import threading
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..errors import WfstDecodeError
from ..interrupts import signals_deferred
from .shards import PERMANENT_ERRORS

log = logging.getLogger(__name__)


@dataclass
class Job:
    index: int  # in the manifest
    path: Path
    name: str  # the shard's output name; default utterance ids start with it
    attempts: int = 0  # started so far
    submitted: float = 0.0  # time.monotonic() when handed to a worker


@dataclass(frozen=True)
class Event:
    job: Job
    kind: str  # "done", "error" or "died"
    value: object  # ShardOutput for "done", else the error message
    permanent: bool = False


def run_shard(decode, path: Path, name: str) -> tuple:
    """What a worker sends back for one shard: ("done", output) or ("error", message,
    permanent). The message of a `WfstDecodeError` already names the file."""
    try:
        return ("done", decode(path, name))
    except Exception as exc:
        message = str(exc) if isinstance(exc, WfstDecodeError) else f"{type(exc).__name__}: {exc}"
        return ("error", message, isinstance(exc, PERMANENT_ERRORS))


def _wait_time(jobs, shard_timeout: float | None, timeout: float | None) -> float | None:
    """How long to wait for a reply before the first in-flight shard runs out of time."""
    if shard_timeout is None or not jobs:
        return timeout
    left = min(j.submitted for j in jobs) + shard_timeout - time.monotonic()
    return max(0.0, left if timeout is None else min(timeout, left))


def _overdue(job: Job | None, shard_timeout: float | None) -> bool:
    return (job is not None and shard_timeout is not None
            and time.monotonic() - job.submitted >= shard_timeout)  # fmt: skip


def _timed_out(job: Job, shard_timeout: float, worker: str) -> Event:
    return Event(job, "died", f"no result after {shard_timeout:g} s; {worker} was stopped")


def _event(job: Job, reply: tuple) -> Event:
    if reply[0] == "init_error":
        raise WfstDecodeError(f"a worker could not load the decoder: {reply[1]}")
    if reply[0] == "done":
        return Event(job, "done", reply[1])
    return Event(job, "error", reply[1], reply[2])


# ----- local processes ------------------------------------------------------------------------
def _serve(conn, decoder) -> None:
    """A local worker's main loop: load once, then decode the paths it is sent until None."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    try:
        decode = decoder.load()
    except Exception as exc:
        conn.send(("init_error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready",))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        conn.send(run_shard(decode, *job))


class _Process:
    def __init__(self, ctx, decoder):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, decoder), daemon=True)
        self.proc.start()
        child.close()
        self.job: Job | None = None
        self.ready = False  # loaded the decoder: a death after this is the shard's doing

    def receive(self) -> tuple | None:
        """The next reply to a job, or None if there is none yet (a "ready" is taken in
        passing); raises EOFError or OSError when the worker is gone."""
        while self.conn.poll():
            reply = self.conn.recv()
            if reply[0] != "ready":
                return reply
            self.ready = True
        return None

    def stop(self, kill: bool = False) -> None:
        if not kill:
            with contextlib.suppress(OSError):
                self.conn.send(None)
            self.proc.join(timeout=30)
        if self.proc.is_alive():  # asked to, or deaf to the request
            self.proc.kill()
            self.proc.join(timeout=5)
        self.conn.close()


class LocalPool:
    """``workers`` processes (started with ``spawn``: no thread or lock state is inherited)."""

    kind = "local"

    def __init__(self, decoder, workers: int, shard_timeout: float | None = None):
        self._ctx = multiprocessing.get_context("spawn")
        self._decoder = decoder
        self._shard_timeout = shard_timeout
        self.size = workers
        self._loaded = False  # a worker has loaded the decoder (said "ready")
        self._load_deaths = 0
        self._workers = []
        try:
            for _ in range(workers):
                self._workers.append(_Process(self._ctx, decoder))
        except BaseException:  # e.g. Ctrl-C while they start: none is left running
            self.close(kill=True)
            raise

    def idle(self) -> int:
        return sum(w.job is None for w in self._workers)

    def in_flight(self) -> int:
        return sum(w.job is not None for w in self._workers)

    def submit(self, job: Job) -> None:
        worker = next(w for w in self._workers if w.job is None)
        worker.job = job
        job.submitted = time.monotonic()
        with contextlib.suppress(OSError):  # a dead worker: next_event reports it
            worker.conn.send((job.path, job.name))

    def next_event(self, timeout: float | None) -> Event | None:
        busy = [w for w in self._workers if w.job is not None]
        if not busy:
            return None
        waitables = [w.conn for w in busy] + [w.proc.sentinel for w in busy]
        wait = _wait_time([w.job for w in busy], self._shard_timeout, timeout)
        ready = multiprocessing.connection.wait(waitables, wait)
        for i, w in enumerate(self._workers):
            if w.job is None or (w.conn not in ready and w.proc.sentinel not in ready):
                continue
            try:
                reply = w.receive()
                if reply is not None:
                    job, w.job = w.job, None
                    return _event(job, reply)
                if w.proc.is_alive():
                    continue  # it only said "ready"
            except (EOFError, OSError):
                pass
            job, w.job = w.job, None
            w.proc.join(timeout=5)
            reason = _exit_reason(w.proc.exitcode)
            if w.proc.is_alive():  # its pipe broke but it lingers: it will get no more work
                w.proc.kill()
                w.proc.join(timeout=5)
            w.conn.close()
            # (any worker: one that loaded and is alive counts, not only one that died)
            self._loaded = self._loaded or any(o.ready for o in self._workers)
            if not w.ready:
                # none has loaded the decoder: each would die so (a script's missing guard);
                # once one has, a death while loading is a death (out of memory on a busy
                # node), bounded as the Ray actors' deaths while starting are
                self._load_deaths += 1
                if not self._loaded:
                    raise WfstDecodeError(
                        f"a worker process exited while loading the decoder ({reason}); when "
                        f"decode_corpus is called from a script, the script must guard it with "
                        f"'if __name__ == \"__main__\":' (local workers are spawned processes)"
                    )
                if self._load_deaths > 2 * self.size:
                    raise WfstDecodeError(f"worker processes died {self._load_deaths} times "
                                          f"while loading the decoder ({reason})")  # fmt: skip
            self._workers[i] = _Process(self._ctx, self._decoder)
            what = "died" if w.ready else "died while loading the decoder"
            return Event(job, "died", f"worker process {w.proc.pid} {what} ({reason})")
        for i, w in enumerate(self._workers):
            if _overdue(w.job, self._shard_timeout):
                job, w.job = w.job, None
                w.stop(kill=True)
                self._workers[i] = _Process(self._ctx, self._decoder)
                return _timed_out(job, self._shard_timeout, f"worker process {w.proc.pid}")
        return None

    def close(self, kill: bool = False) -> None:
        for w in self._workers:
            w.stop(kill=kill or w.job is not None)


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


# ----- Ray ------------------------------------------------------------------------------------
class _RayWorker:
    """The actor: loads the decoder once; a failure to load is reported, not raised, so that the
    driver can tell it from a crash."""

    def __init__(self, decoder):
        try:
            self._decode, self._error = decoder.load(), None
        except Exception as exc:
            self._decode, self._error = None, f"{type(exc).__name__}: {exc}"

    def run(self, path: Path, name: str) -> tuple:
        if self._error is not None:
            return ("init_error", self._error)
        return run_shard(self._decode, path, name)


class RayPool:
    """``workers`` Ray actors (default: as many as the cluster's CPUs or GPUs hold; never more
    than ``at_most``) with ``num_cpus`` / ``num_gpus`` each. Connects to the cluster at
    ``address`` (None: start a local one, or use the one this process already joined)."""

    kind = "ray"

    def __init__(self, decoder, workers: int | None, *, address: str | None = None,
                 num_cpus: float = 1, num_gpus: float = 0, at_most: int | None = None,
                 shard_timeout: float | None = None):  # fmt: skip
        import ray

        if not ray.is_initialized():
            _keeping_sigterm(ray.init, address=address, log_to_driver=False,
                             include_dashboard=False)  # fmt: skip
        elif address is not None:
            log.warning("Ray is already initialised in this process; --address %s is ignored",
                        address)  # fmt: skip
        self._ray = ray
        # An actor the cluster cannot place would wait forever: check that one fits.
        resources = ray.cluster_resources()
        fits = int(resources.get("GPU", 0) // num_gpus) if num_gpus else int(
            resources.get("CPU", 0) // max(num_cpus, 1e-9)
        )  # fmt: skip
        if fits < 1:
            raise WfstDecodeError(
                f"the Ray cluster has too few resources for one worker ({num_cpus} CPUs, "
                f"{num_gpus} GPUs each; the cluster has {resources.get('CPU', 0):g} CPUs, "
                f"{resources.get('GPU', 0):g} GPUs)"
            )
        if workers is None:
            workers = fits
        elif workers > fits:  # the rest could never be placed: their shards would wait forever
            warnings.warn(f"{workers} workers asked for, but the Ray cluster holds {fits} of "
                          f"{num_cpus:g} CPUs and {num_gpus:g} GPUs each now: running {fits}",
                          UserWarning, stacklevel=2)  # fmt: skip
            workers = fits
        self.size = min(workers, at_most or workers)  # no actor that would get no shard
        self._decoder = decoder
        self._options = dict(num_cpus=num_cpus, num_gpus=num_gpus, max_restarts=0)
        self._shard_timeout = shard_timeout
        self._run_id = uuid.uuid4().hex[:8]
        self._started = 0
        self._placed: set[int] = set()  # slots whose actor has started (loaded the decoder)
        self._starting: dict = {}  # actor.__ray_ready__ ObjectRef -> slot
        self._start_deaths = 0
        self._since, self._said_waiting = time.monotonic(), False
        self._actors = [None] * self.size
        for slot in range(self.size):
            self._actors[slot] = self._start(slot)
        self._busy: dict = {}  # ObjectRef -> (actor slot, job)

    def _start(self, slot: int):
        name = f"wfstdecode-corpus-{self._run_id}-{self._started}"
        self._started += 1
        remote = self._ray.remote(_RayWorker).options(name=name, **self._options)
        actor = remote.remote(self._decoder)
        # A shard goes only to an actor the cluster has placed: one that waits for resources
        # held by others (a shared or busy cluster) would keep its shard forever.
        self._placed.discard(slot)
        self._starting[actor.__ray_ready__.remote()] = slot
        return actor

    def idle(self) -> int:
        taken = {slot for slot, _ in self._busy.values()}
        return len(self._placed - taken)

    def in_flight(self) -> int:
        return len(self._busy)

    def submit(self, job: Job) -> None:
        taken = {slot for slot, _ in self._busy.values()}
        slot = min(self._placed - taken)
        job.submitted = time.monotonic()
        self._busy[self._actors[slot].run.remote(job.path, job.name)] = (slot, job)

    def next_event(self, timeout: float | None) -> Event | None:
        ray = self._ray
        if not self._busy and not self._starting:
            return None
        wait = _wait_time([job for _, job in self._busy.values()], self._shard_timeout, timeout)
        # Ray runs the signal handlers while it waits and raises a plain KeyboardInterrupt for
        # whatever they raise (a SIGTERM's `Terminated` read as a Ctrl-C): they run after it
        # (the driver waits half a second at a time)
        ready, _ = signals_deferred(
            lambda: ray.wait([*self._starting, *self._busy], num_returns=1, timeout=wait)
        )  # fmt: skip
        if ready and ready[0] in self._starting:
            slot = self._starting.pop(ready[0])
            try:
                ray.get(ready[0])
            except ray.exceptions.RayError as exc:  # died while starting: a fresh one in its place
                self._start_deaths += 1
                if self._start_deaths > 2 * self.size:  # (not one a shard could be blamed for)
                    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                    raise WfstDecodeError(
                        f"Ray workers died {self._start_deaths} times while "
                        f"starting ({type(exc).__name__}: {reason})"
                    ) from None
                self._replace(slot)
            else:
                self._placed.add(slot)
            return None
        if not self._placed and not self._said_waiting and time.monotonic() - self._since > 60:
            self._said_waiting = True  # (a shared cluster's CPUs held by other jobs: say so)
            log.warning("no Ray worker has started after 60 s: the cluster's free CPUs or GPUs "
                        "may be held by other work; waiting for them")  # fmt: skip
        if not ready:
            for ref, (slot, job) in list(self._busy.items()):
                if _overdue(job, self._shard_timeout):
                    del self._busy[ref]
                    self._replace(slot)
                    return _timed_out(job, self._shard_timeout, "its Ray actor")
            return None
        slot, job = self._busy.pop(ready[0])
        try:
            return _event(job, ray.get(ready[0]))
        except ray.exceptions.RayError as exc:  # actor died, worker crashed, out of memory, ...
            self._replace(slot)
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return Event(job, "died", f"Ray worker died ({type(exc).__name__}: {reason})")

    def _replace(self, slot: int) -> None:
        self._ray.kill(self._actors[slot], no_restart=True)
        for ref in [r for r, s in self._starting.items() if s == slot]:
            del self._starting[ref]
        self._actors[slot] = self._start(slot)

    def close(self, kill: bool = False) -> None:
        for actor in self._actors:
            self._ray.kill(actor, no_restart=True)
        self._busy.clear()
        self._starting.clear()


def _keeping_sigterm(init, **kwargs) -> None:
    """``init(**kwargs)`` (`ray.init`, which makes SIGTERM exit the process with SystemExit)
    with this process's SIGTERM handler put back: the command's own (`interrupts.Terminated`,
    so a stopped run keeps its shards and says it was stopped), or the default."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM) if main else None
    try:
        init(**kwargs)
    finally:
        if before is not None:
            signal.signal(signal.SIGTERM, before)

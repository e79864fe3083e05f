"""Ctrl-C (and any signal handler that raises) around compiled code on the main thread.

Python runs a signal handler at the next bytecode of the main thread. During a Numba call that
releases the GIL the signal only sets a flag; the first Python code after it is often inside
Numba's boxing of the call's result (`numba.core.serialize._numba_unpickle`, which fetches the
class of a NamedTuple it returns) or inside LLVM's loading of a cached function. A handler
raising there crashes the process (SIGSEGV boxing the searches' nested NamedTuples; SIGABRT in
LLVM) or, at best, surfaces as a `SystemError` ("returned a result with an exception set")
that ``except KeyboardInterrupt`` misses. So:

* `signals_deferred` runs a call with the main thread's Python signal handlers swapped for one
  that only notes the signal, then runs the real handlers once the call is done (~3 us): the
  call always completes, and a handler's exception comes out of a clean point. For calls that
  take milliseconds (a stream call, one utterance of a lattice pass, a short search: the
  first one of a process loads the compiled code);
* `on_worker` runs a long search on one long-lived worker thread while the main thread waits
  in an interruptible lock: Ctrl-C is seen within 0.1 s and tells the search to stop; the
  transducer beam searches load their compiled code there too (a Ctrl-C during LLVM's loading
  on the main thread was swallowed by one of its ctypes callbacks);
* `interrupts_raised` turns the `SystemError` back into the handler's own exception, for the
  short calls that run unguarded.
"""

from __future__ import annotations

import _signal
import _thread
import contextlib
import os
import queue
import signal
import sys
import threading


class _Worker:
    """One long-lived daemon thread that runs the main thread's long searches. Not a new thread
    per call: Numba's OpenMP layer would build a new thread team for each (measured: 3.4 ms
    instead of 0.8 ms per small call at 2 threads). Built on C-level primitives only (a
    `queue.SimpleQueue`, a lock): a handler raising inside a Python-level one (a
    ThreadPoolExecutor's submit, a Condition's wait) can leave it locked for good."""

    def __init__(self):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.pid = os.getpid()
        threading.Thread(target=self._serve, name="wfstdecode-worker", daemon=True).start()

    def _serve(self) -> None:
        while True:
            fn, args, box, ended = self.jobs.get()
            try:
                box.append((True, fn(*args)))
            except BaseException as exc:  # (handed to the caller)
                box.append((False, exc))
            # not held until the next job comes: the call's graph, log-probs and result
            del fn, args, box
            ended.release()


_WORKER: _Worker | None = None


def _worker() -> _Worker:
    global _WORKER
    if _WORKER is None or _WORKER.pid != os.getpid():  # a forked child makes its own
        _WORKER = _Worker()
    return _WORKER


def on_worker(fn, *args, cancel=None):
    """``fn(*args)``; called on the main thread, run on the worker while the main thread waits
    on a lock (interruptible, woken every 0.1 s). A KeyboardInterrupt (or a handler's
    exception) during the wait sets ``cancel[0]`` when given (a search stops at its next
    frame), waits for the call to end and goes on; the call's result is dropped. Elsewhere (no
    thread receives signals but the main one) ``fn`` runs directly."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
    # The wait is a C lock's acquire, not a Future's Condition: a handler raising inside
    # Condition.wait can leave its lock released twice ("cannot release un-acquired lock");
    # acquire returns every 0.1 s, so the handler runs within that.
    box: list = []  # the worker appends (ok, result or exception) before releasing `ended`
    ended = threading.Lock()
    ended.acquire()
    jobs = _worker().jobs
    try:
        # a handler runs after a call returns, never before it starts: once inside the try,
        # the job is on the queue, and the except below may wait for it
        jobs.put((fn, args, box, ended))
        while not ended.acquire(timeout=0.1):
            pass
    except BaseException:
        if cancel is not None:
            cancel[0] = 1
        while not box:  # a second Ctrl-C leaves it to finish alone
            ended.acquire(timeout=0.1)
        raise
    ok, value = box[0]
    if not ok:
        raise value
    return value


# the standard signals a handler can be set for (not the real-time ones: 31 fewer looks-up,
# ~3 us a call; Python's own `signal.getsignal` converts to enums and costs 10x `_signal`'s)
_UNCATCHABLE = {getattr(signal, name, None) for name in ("SIGKILL", "SIGSTOP")}
_SIGNALS = sorted(
    s for s in signal.valid_signals() - _UNCATCHABLE if s < getattr(signal, "SIGRTMIN", 32)
)


def signals_deferred(fn, *args, dropped=None):
    """``fn(*args)`` with the signals that arrive meanwhile handled once it returns (module
    docstring). When a handler then raises, ``fn``'s result goes to ``dropped`` (what the
    caller will never receive: to undo or keep) and the exception goes on; when ``fn`` raised,
    a handler's exception takes over, chained to it. Off the main thread ``fn`` just runs."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
    noted: list[int] = []
    swapped: dict[int, object] = {}
    note = _noting(noted)
    try:
        for sig in _SIGNALS:
            handler = _signal.getsignal(sig)
            if callable(handler):  # a Python handler (SIG_DFL / SIG_IGN act in C: left alone)
                _signal.signal(sig, note)
                swapped[sig] = handler
        result = fn(*args)
    except BaseException:
        _restore(swapped, note)
        _deliver(noted)
        raise
    try:
        _restore(swapped, note)
        _deliver(noted)
    except BaseException:
        if dropped is not None:
            dropped(result)
        raise
    return result


def _noting(noted: list):
    def note(signum, _frame):
        noted.append(signum)

    return note


def _restore(swapped: dict, note) -> None:
    """Put the real handlers back (not over one that ``fn`` set meanwhile). A signal whose
    handler is back may raise between two of them: the rest are still put back (else they
    would note signals for good)."""
    pending = list(swapped.items())
    try:
        while pending:
            sig, handler = pending[-1]
            if _signal.getsignal(sig) is note:
                _signal.signal(sig, handler)
            pending.pop()
    finally:
        for sig, handler in pending:
            if _signal.getsignal(sig) is note:
                _signal.signal(sig, handler)


def _deliver(noted: list) -> None:
    """Run the handler of each signal noted, once per signal in order of arrival (as Python
    runs a signal that arrived twice before its handler once). When one raises, the others
    are raised again for Python to handle at its next check, as it would have."""
    signals = list(dict.fromkeys(noted))
    for i, signum in enumerate(signals):
        try:
            handler = _signal.getsignal(signum)
            if callable(handler):
                handler(signum, sys._getframe(1))
        except BaseException:
            for later in signals[i + 1 :]:
                _thread.interrupt_main(later)
            raise


@contextlib.contextmanager
def interrupts_raised():
    """Re-raise a signal handler's exception that Numba's boxing wrapped in `SystemError`s."""
    try:
        yield
    except SystemError as exc:
        cause = exc
        while isinstance(cause, SystemError) and "with an exception set" in str(cause):
            cause = cause.__cause__  # (Numba's boxing may wrap it twice)
        if cause is None or cause is exc:
            raise
        raise cause from None


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (a job scheduler, a closed terminal), raised as Ctrl-C is so that the
    same clean-up runs: no temporary file beside an output is left behind."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _terminated(signum, _frame):
    raise Terminated(signum)


@contextlib.contextmanager
def termination_raised():
    """Within the block, SIGTERM and SIGHUP raise `Terminated` (on the main thread, for the
    signals whose handler is still the default); the handlers are put back after."""
    swapped = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)):
            if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
                swapped[sig] = signal.signal(sig, _terminated)
    try:
        yield
    finally:
        for sig, handler in swapped.items():
            signal.signal(sig, handler)

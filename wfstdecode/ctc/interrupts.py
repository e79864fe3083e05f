"""Ctrl-C (and any signal handler that raises) around compiled code on the main thread.

Python runs a signal handler at the next bytecode of the main thread. During a Numba call that
releases the GIL the signal only sets a flag; the first Python code after it is often inside
Numba's boxing of the call's result (`numba.core.serialize._numba_unpickle`, which fetches the
class of a NamedTuple or array it returns). A handler raising there crashes the process
(SIGSEGV, seen when boxing the stream searches' nested NamedTuples) or, at best, surfaces as a
`SystemError` ("returned a result with an exception set") that ``except KeyboardInterrupt``
misses. So:

* `on_worker` runs a call on one long-lived worker thread while the main thread waits in short
  slices: the handler runs in that wait, never inside the boxing, and the call finishes (or is
  told to stop through ``cancel``) before the exception goes on;
* `interrupts_raised` turns the `SystemError` back into the handler's own exception, for the
  short calls that run where they are made (a hand-off costs ~0.05 ms).
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading


class _Worker:
    """One long-lived daemon thread that runs the main thread's compiled calls. Not a new thread
    per call: Numba's OpenMP layer would build a new thread team for each (measured: 3.4 ms
    instead of 0.8 ms per small call at 2 threads). Built on C-level primitives only (a
    `queue.SimpleQueue`, a lock): a handler raising inside a Python-level one (a
    ThreadPoolExecutor's submit, a Condition's wait) can leave it locked for good."""

    def __init__(self):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.pid = os.getpid()
        threading.Thread(target=self._serve, name="wfstdecode-ctc-cpu", daemon=True).start()

    def _serve(self) -> None:
        while True:
            fn, args, box, ended = self.jobs.get()
            try:
                box.append((True, fn(*args)))
            except BaseException as exc:  # (handed to the caller)
                box.append((False, exc))
            ended.release()


_WORKER: _Worker | None = None


def _worker() -> _Worker:
    global _WORKER
    if _WORKER is None or _WORKER.pid != os.getpid():  # a forked child makes its own
        _WORKER = _Worker()
    return _WORKER


def on_worker(fn, *args, cancel=None, dropped=None):
    """``fn(*args)``; called on the main thread, run on the worker while the main thread waits
    on a lock (interruptible, woken every 0.1 s). A KeyboardInterrupt (or a handler's
    exception) during the wait sets ``cancel[0]`` when given (a search stops at its next
    frame), waits for the call to end, hands its result to ``dropped`` when given (what the
    caller will never receive: to undo or keep) and goes on. Elsewhere (no thread receives
    signals but the main one) ``fn`` runs directly."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
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
        if dropped is not None and box[0][0]:
            dropped(box[0][1])
        raise
    ok, value = box[0]
    if not ok:
        raise value
    return value


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

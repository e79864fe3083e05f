"""`wfstdecode.interrupts` on its own: deferred signals and the handlers put back, the
worker thread across a fork, SystemError unwrapping, `termination_raised` (nohup, a program's
own handlers, off the main thread), and a CLI command under a real SIGTERM."""

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest


def _python(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (real signals, nothing of pytest's)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_its_own_worker():
    """A child forked after the parent used `on_worker` gets a worker of its own: the parent's
    thread does not exist in the child, and a call handed to it would wait for good (the alarm
    below ends such a child)."""
    proc = _python("""
        import os, signal
        from wfstdecode.interrupts import on_worker
        assert on_worker(lambda: 1) == 1  # the parent's worker exists
        pid = os.fork()
        if pid == 0:
            signal.alarm(10)  # a child stuck on a worker that is not there dies of SIGALRM
            os._exit(0 if on_worker(lambda: 42) == 42 else 3)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """)
    assert proc.stdout.strip() == "child 0", (proc.stdout, proc.stderr)


def test_a_default_sigterm_during_a_deferred_call_still_ends_the_process():
    """A SIGTERM with its default action that arrives during a deferred call ends the process:
    SIG_DFL / SIG_IGN act in C and are left alone (swapped for the noting handler, it would be
    noted, then dropped, there being no Python handler to run)."""
    proc = _python("""
        import os, signal, time
        from wfstdecode.interrupts import signals_deferred
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        def call():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)
        signals_deferred(call)
        time.sleep(0.5)
        print("still running")
    """)
    assert proc.returncode == -signal.SIGTERM and "still running" not in proc.stdout, proc


def test_a_handler_set_during_a_deferred_call_is_kept():
    """A handler that the deferred call itself set (e.g. `termination_raised` or a library's init
    inside it) stays: it is not overwritten by the one from before the call."""
    from wfstdecode.interrupts import signals_deferred

    def before(signum, frame):
        pass

    def mine(signum, frame):
        pass

    previous = signal.signal(signal.SIGUSR1, before)
    try:
        signals_deferred(signal.signal, signal.SIGUSR1, mine)
        assert signal.getsignal(signal.SIGUSR1) is mine
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_handlers_are_all_put_back_when_one_raises_while_they_are_put_back(monkeypatch):
    """A signal whose real handler is back and raises (a Ctrl-C) while the others are put back must
    not leave those with the noting handler for good (they would never run again). Simulated:
    putting back the first handler raises, as a pending signal's handler does from inside
    `signal.signal`."""
    import _signal as real_signal

    from wfstdecode import interrupts

    def h1(signum, frame):
        pass

    def h2(signum, frame):
        pass

    def h3(signum, frame):
        pass

    sigs = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM)
    previous = {s: signal.signal(s, h) for s, h in zip(sigs, (h1, h2, h3), strict=True)}
    raised = []

    class Raising:
        getsignal = staticmethod(real_signal.getsignal)

        @staticmethod
        def signal(sig, handler):
            old = real_signal.signal(sig, handler)
            if handler in (h1, h2, h3) and not raised:  # the first handler put back
                raised.append(sig)
                raise KeyboardInterrupt
            return old

    monkeypatch.setattr(interrupts, "_signal", Raising)
    try:
        with pytest.raises(KeyboardInterrupt):
            interrupts.signals_deferred(lambda: None)
        monkeypatch.undo()
        assert [signal.getsignal(s) for s in sigs] == [h1, h2, h3]
    finally:
        monkeypatch.undo()
        for s, h in previous.items():
            signal.signal(s, h)


def test_a_system_error_of_its_own_is_not_replaced_by_its_cause():
    """`interrupts_raised` unwraps only Numba's "returned a result with an exception set" wrapper is
    a handler's exception in disguise; a SystemError raised ``from`` something is a real one and
    goes on as such."""
    from wfstdecode.interrupts import interrupts_raised

    with pytest.raises(SystemError, match="a real one"), interrupts_raised():
        raise SystemError("a real one") from ValueError("its cause")


def test_termination_raised_leaves_ignored_and_own_handlers_alone():
    """`termination_raised` replaces only default handlers: under ``nohup`` SIGHUP is ignored (a
    closed terminal must not stop the command), and a handler the program set for SIGTERM runs."""
    from wfstdecode.interrupts import termination_raised

    seen = []

    def own(signum, frame):
        seen.append(signum)

    hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    term = signal.signal(signal.SIGTERM, own)
    try:
        with termination_raised():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is own
            os.kill(os.getpid(), signal.SIGHUP)  # ignored: nothing happens
            signal.raise_signal(signal.SIGTERM)  # the program's own handler runs
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGHUP, hup)
        signal.signal(signal.SIGTERM, term)


def test_termination_raised_off_the_main_thread_is_a_no_op():
    """Off the main thread `termination_raised` does nothing (`signal.signal` there raises
    ValueError: a command run from an embedding application's worker thread would fail)."""
    from wfstdecode.interrupts import termination_raised

    errors = []

    def body():
        try:
            with termination_raised():
                pass
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert errors == []


def test_sigterm_in_a_cli_command_exits_143_in_a_real_process(tmp_path):
    """End to end, with a real signal from outside: `run_reporting` (the CLI's wrapper) under
    SIGTERM says "terminated (SIGTERM)" and exits 128 + 15."""
    proc = _python("""
        import os, signal, time
        from wfstdecode.cli import run_reporting
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        def command():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        status = run_reporting(command)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        raise SystemExit(status)
    """)
    assert proc.returncode == 143, proc
    assert "terminated (SIGTERM)" in proc.stderr


def test_a_ctrl_c_inside_an_unguarded_compiled_call_in_a_cli_command_exits_130():
    """A Ctrl-C during a Numba call that no `signals_deferred` guards (`decode --write-lattices`
    pruning a lattice, `rescore`, `score`) comes out of Numba's boxing of a tuple of arrays as a
    `SystemError` ("returned a result with an exception set"): `run_reporting` must still say
    "interrupted" and exit 130, not print a SystemError traceback and exit 1."""
    proc = _python("""
        import os, signal, threading
        import numba, numpy as np
        from wfstdecode.cli import run_reporting

        @numba.njit
        def busy(n):  # (a tuple of arrays: its boxing runs Python code, where the handler raises)
            a = np.zeros(2)
            s = 0.0
            for i in range(n):
                s += np.sqrt(i)
            a[0] = s
            return a, a[:1]

        busy(10)  # compiled before the signal

        def command():
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
            busy(10**9)  # seconds: the signal arrives inside it

        raise SystemExit(run_reporting(command))
    """)
    assert proc.returncode == 130, proc
    assert "interrupted" in proc.stderr and "SystemError" not in proc.stderr, proc.stderr


def test_decode_npz_with_lattices_raises_a_ctrl_c_as_itself(tmp_path, monkeypatch):
    """`decode_npz(..., lattices=True)` (the CLI's `decode --write-lattices`, each corpus
    worker) runs the lattice search outside `decode_ctc`'s `interrupts_raised`: a Ctrl-C that
    Numba's boxing wrapped in a `SystemError` must come out as the KeyboardInterrupt, as
    `decode_ctc` raises it (simulated: the wrapper as Numba makes it)."""
    import numpy as np

    from wfstdecode.ctc import CtcBeamOptions
    from wfstdecode.ctc import npz as npz_module
    from wfstdecode.testing import random_graph

    g = random_graph(3, num_states=6, num_tokens=4, arcs_per_state=2)
    path = tmp_path / "lp.npz"
    lp = np.log(np.full((1, 5, 4), 0.25, np.float32))
    np.savez(path, log_probs=lp, lengths=np.array([5]))

    def interrupted(*args, **kwargs):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as inner:
            raise SystemError("_within returned a result with an exception set") from inner

    monkeypatch.setattr(npz_module, "lattice_decode", interrupted)
    with pytest.raises(KeyboardInterrupt):
        npz_module.decode_npz(path, g, CtcBeamOptions(lattice_beam=4.0), backend="cpu",
                              lattices=True)  # fmt: skip


def test_the_worker_keeps_nothing_of_a_call_once_it_returns():
    """The worker thread held its last job's function, arguments and result (a search's graph,
    log-probs and hypotheses, gigabytes for a big batch) until the next job came: a server that
    dropped them still paid for them, and a reloaded graph kept the old one alive."""
    import gc
    import weakref

    from wfstdecode.interrupts import on_worker

    class Held:
        pass

    assert threading.current_thread() is threading.main_thread()  # (else no worker is used)
    arg = Held()
    seen = []

    def job(a):
        result = Held()
        seen.append(weakref.ref(result))
        return result

    def failing(a):
        raise ValueError(a)

    got = on_worker(job, arg)
    refs = [weakref.ref(arg), seen[0]]
    del arg, got
    gc.collect()
    assert [r() for r in refs] == [None, None]
    arg = Held()
    with pytest.raises(ValueError):
        on_worker(failing, arg)
    ref = weakref.ref(arg)
    del arg
    gc.collect()
    assert ref() is None

"""The cpu backend's threads: a stream decoder carried into a forked child, the jobs of a
thread pool call that raised, and the thread count of a search handed to the worker thread."""

import os
import subprocess
import sys
import threading
from contextlib import contextmanager

import numba
import pytest

import wfstdecode.ctc.cpu as cpu
from wfstdecode.ctc import CpuTuning, CtcBeamOptions, decode_ctc
from wfstdecode.ctc.cpu import DIRECT_FRAMES
from wfstdecode.ctc.cpu_streams import CpuStreams
from wfstdecode.testing import random_graph, random_log_probs

FORKED_STREAMS = """
import os, sys
from wfstdecode.ctc import CpuTuning, CtcBeamOptions, CtcStreamDecoder
from wfstdecode.testing import random_graph, random_log_probs
g = random_graph(3)
lp = random_log_probs(3, 3, 20, g.num_tokens)
d = CtcStreamDecoder(g, CtcBeamOptions(beam=6.0), tuning=CpuTuning(num_threads=2))

def use():
    sids = [d.open() for _ in range(3)]
    d.advance({sid: lp[i] for i, sid in enumerate(sids)})  # (a group: on the pool)
    return [d.finish(sid) for sid in sids]

want = use()  # the parent made the decoder's thread pool
pid = os.fork()
if pid == 0:  # a server that made its decoder before forking its workers
    os._exit(0 if use() == want else 3)
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_stream_decoder_carried_into_a_forked_child_streams_there():
    """The pool the parent made has no threads in the child: a group of streams advanced
    there waited for ever on jobs no thread would run. The child advances them in turn."""
    run = subprocess.run([sys.executable, "-c", FORKED_STREAMS], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert run.returncode == 0, run.stderr


def test_the_jobs_of_a_map_that_raised_are_not_run():
    """A Ctrl-C (or a job's error) out of `CpuStreams.map` — a lattice decode's searches —
    left every queued job to run in the background, and the interpreter's exit waited for them
    all (seconds to minutes after a Ctrl-C on a large batch). The jobs wait at a gate opened
    only after the map raised: only those already on a thread (one per thread) may start."""
    streams = CpuStreams(CpuTuning(num_threads=2))
    gate, started = threading.Event(), []

    def job(i):
        if i == 0:
            raise KeyboardInterrupt
        started.append(i)
        gate.wait(timeout=60)

    with pytest.raises(KeyboardInterrupt):
        streams.map(job, list(range(40)))
    gate.set()
    streams._pool.shutdown(wait=True)
    assert len(started) <= 2, started  # (was all 39)


@contextmanager
def _threads_seen(seen):
    original = cpu.numba_threads

    @contextmanager
    def spy(count):
        with original(count) as n:
            seen.append(n)
            yield n

    cpu.numba_threads = spy
    try:
        yield
    finally:
        cpu.numba_threads = original


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 Numba threads")
def test_a_long_search_keeps_the_callers_numba_thread_count():
    """``num_threads=None`` keeps Numba's setting, which is per thread: a search long enough
    to run on the worker thread took the worker's (Numba's default), not the caller's."""
    assert threading.current_thread() is threading.main_thread()
    g = random_graph(3)
    lp = random_log_probs(3, 4, DIRECT_FRAMES, g.num_tokens)  # (1024 frames: on the worker)
    want = decode_ctc(lp, None, g, CtcBeamOptions(beam=6.0), backend="cpu", num_threads=1)
    before, seen = numba.get_num_threads(), []
    numba.set_num_threads(1)
    try:
        with _threads_seen(seen):
            got = decode_ctc(lp, None, g, CtcBeamOptions(beam=6.0), backend="cpu")
    finally:
        numba.set_num_threads(before)
    assert got == want
    assert seen == [1]


FORKED_CACHE = """
import os, sys
from wfstdecode.ctc import phrase_cache
phrase_cache._LOCK.acquire()  # (as another thread compiling a list at the fork)
pid = os.fork()
if pid == 0:
    os._exit(0 if phrase_cache._LOCK.acquire(timeout=5) else 3)
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_the_phrase_cache_lock_is_free_in_a_forked_child():
    """A child forked while another thread held the compiled-list cache's lock waited on it
    for ever at its first decode with a list of 64 phrases or more."""
    run = subprocess.run([sys.executable, "-c", FORKED_CACHE], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert run.returncode == 0, run.stderr


WORKQUEUE_THREADS = """
import sys
from concurrent.futures import ThreadPoolExecutor
import numba
from wfstdecode.ctc import CtcBeamOptions, decode_ctc
from wfstdecode.testing import random_graph, random_log_probs
g = random_graph(1, num_states=60)
lp = random_log_probs(1, 4, 60, g.num_tokens)
for opts in (CtcBeamOptions(beam=8.0), CtcBeamOptions(beam=8.0, lattice_beam=4.0)):
    want = decode_ctc(lp, None, g, opts, backend="cpu", num_threads=1)
    with ThreadPoolExecutor(4) as pool:  # (a server's request threads)
        got = list(pool.map(lambda _: decode_ctc(lp, None, g, opts, backend="cpu",
                                                 num_threads=2), range(24)))
    assert all(x == want for x in got)
assert numba.threading_layer() == "workqueue", numba.threading_layer()
"""


def test_threads_decoding_at_once_under_numba_s_workqueue_layer():
    """Where neither OpenMP nor TBB loads (a slim container without libgomp, a Mac without
    libomp), Numba falls back to its workqueue layer, which aborts the whole process when two
    threads run parallel regions at once: a server's concurrent decodes killed it (SIGABRT).
    One thread's region at a time there; the others search in turn, with the same results."""
    env = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue", "NUMBA_NUM_THREADS": "2"}
    run = subprocess.run([sys.executable, "-c", WORKQUEUE_THREADS], capture_output=True,
                         text=True, timeout=300, env=env)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]


def test_a_long_search_does_not_keep_the_graph_alive_once_it_returns():
    """A search of more than `DIRECT_FRAMES` frames runs on the worker thread, which kept its
    last job (the problem: graph, log-probs, costs) until the next long search: a service
    that dropped or reloaded its graph kept the old one, and the batch's arrays, alive."""
    import gc
    import weakref

    assert threading.current_thread() is threading.main_thread()
    refs = []
    for lattice_beam in (None, 4.0):
        g = random_graph(3)
        lp = random_log_probs(3, 2, DIRECT_FRAMES, g.num_tokens)
        decode_ctc(lp, None, g, CtcBeamOptions(beam=6.0, lattice_beam=lattice_beam),
                   backend="cpu")  # fmt: skip
        refs += [weakref.ref(g), weakref.ref(lp)]
        del g, lp
        gc.collect()
        assert [r() for r in refs] == [None] * len(refs), lattice_beam


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 Numba threads")
def test_lattice_decodes_reuse_their_threads_and_state_maps():
    """Each lattice decode made a thread pool of its own (`lattice_search`'s one-call
    `CpuStreams`): new threads every call, so new state maps every call (`scratch`: one
    int32 per graph state and thread, 33 MB and 1.2 ms each on an 8.2M-state graph), which
    they exist to avoid. The one-call objects share a pool: the maps are made once."""
    import wfstdecode.ctc.lattice as lattice_module

    g = random_graph(3)
    lp = random_log_probs(3, 4, 20, g.num_tokens)
    seen, threads_seen, original = [], set(), lattice_module.state_maps

    @contextmanager
    def spy(graph, count=1):
        with original(graph, count) as maps:
            seen.append(maps)  # (held: an id is not reused)
            threads_seen.add(threading.current_thread())
            yield maps

    options = CtcBeamOptions(beam=6.0, lattice_beam=3.0)
    lattice_module.state_maps = spy
    try:
        for _ in range(5):
            decode_ctc(lp, None, g, options, backend="cpu", num_threads=2)
    finally:
        lattice_module.state_maps = original
    assert len(seen) == 20
    assert len({id(m) for m in seen}) <= 2, len({id(m) for m in seen})
    assert len(threads_seen) <= 2

"""decode-corpus on a real local Ray (2 CPUs): the same results as one process, and nothing lost
or duplicated when an actor crashes or is killed from outside mid-shard."""

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from wfstdecode.corpus import CtcCorpusDecoder, decode_corpus
from wfstdecode.errors import WfstDecodeError
from wfstdecode.testing.corpus import FaultyDecoder, assert_outputs_match

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'wfstdecode[ray]')")


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    """A local Ray, started as decode-corpus starts one: the SIGTERM handler ray.init sets
    (SystemExit) is put back, as it was, for the tests this process runs next."""
    from wfstdecode.corpus.pools import _keeping_sigterm

    before = signal.getsignal(signal.SIGTERM)
    _keeping_sigterm(ray.init, num_cpus=2, include_dashboard=False, log_to_driver=False)
    assert signal.getsignal(signal.SIGTERM) is before
    yield
    ray.shutdown()


def test_a_sigterm_during_a_ray_run_is_the_commands_to_handle():
    """ray.init makes SIGTERM raise SystemExit(15): a decode-corpus run on Ray, stopped by a
    scheduler, would end without saying so (or keeping its summary) and exit 15, not 143."""
    from wfstdecode.corpus.pools import _keeping_sigterm
    from wfstdecode.interrupts import Terminated, termination_raised

    def init_as_ray_does():
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))

    with termination_raised():
        _keeping_sigterm(init_as_ray_does)
        with pytest.raises(Terminated):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def run(corpus, out, decoder, **kw):
    return decode_corpus(corpus.shard_dir, out, decoder, executor="ray", progress="quiet", **kw)


def test_ray_results_equal_single_process_decode(corpus, tmp_path):
    summary = run(corpus, tmp_path / "out", CtcCorpusDecoder(str(corpus.graph_path)))
    assert summary.ok and summary.executor == "ray" and summary.workers == 2
    assert sorted(summary.decoded) == sorted(p.stem for p in corpus.shards)
    assert_outputs_match(corpus, tmp_path / "out")
    workers = {json.loads(p.read_text())["worker"] for p in (tmp_path / "out").glob("*.done.json")}
    assert len(workers) == 2  # both actors took shards


def test_an_actor_that_crashes_once_loses_and_duplicates_nothing(corpus, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    base = CtcCorpusDecoder(str(corpus.graph_path))
    crash = FaultyDecoder(base, "crash_once", str(state), corpus.shards[1].stem)
    summary = run(corpus, tmp_path / "out", crash)
    assert summary.ok and summary.retries == 1
    assert_outputs_match(corpus, tmp_path / "out")


def test_killing_an_actor_mid_shard_loses_and_duplicates_nothing(corpus, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    base = CtcCorpusDecoder(str(corpus.graph_path))
    target = corpus.shards[3].stem
    blocking = FaultyDecoder(base, "wait_for_kill", str(state), target)
    killed = []

    def killer():
        started = Path(state) / "started"
        deadline = time.monotonic() + 120
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if started.exists():
            ray.kill(ray.get_actor(started.read_text()), no_restart=True)
            killed.append(started.read_text())

    thread = threading.Thread(target=killer)
    thread.start()
    summary = run(corpus, tmp_path / "out", blocking)
    thread.join()
    assert killed, "the blocking shard never started"
    assert summary.ok and summary.retries == 1
    assert_outputs_match(corpus, tmp_path / "out")
    done = json.loads((tmp_path / "out" / f"{target}.done.json").read_text())
    assert done["attempts"] == 2


def test_an_actor_that_hangs_is_replaced_at_the_timeout(corpus, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    base = CtcCorpusDecoder(str(corpus.graph_path))
    hang = FaultyDecoder(base, "hang", str(state), corpus.shards[0].stem)
    summary = run(corpus, tmp_path / "out", hang, max_attempts=1, shard_timeout=5.0)
    assert [f["name"] for f in summary.failed] == [corpus.shards[0].stem]
    assert "no result after 5 s" in summary.failed[0]["error"]
    assert len(summary.decoded) == len(corpus.shards) - 1


def test_gpu_workers_on_a_cluster_without_gpus_are_refused(corpus, tmp_path):
    """An actor asking for a GPU on this CPU-only Ray would wait forever: refused at once."""
    from wfstdecode.corpus.pools import RayPool
    from wfstdecode.errors import WfstDecodeError

    decoder = CtcCorpusDecoder(str(corpus.graph_path))
    for workers in (None, 2):
        with pytest.raises(WfstDecodeError, match="too few resources.*0 GPUs"):
            RayPool(decoder, workers, num_gpus=1)


def test_more_workers_than_the_cluster_holds_run_as_many_as_fit(corpus, tmp_path):
    """Workers beyond the cluster's CPUs could never be placed and their shards would wait
    forever: the pool says so and runs as many as fit."""
    with pytest.warns(UserWarning, match="4 workers asked for.*holds 2 .*running 2"):
        summary = run(corpus, tmp_path / "out", CtcCorpusDecoder(str(corpus.graph_path)),
                      workers=4)  # fmt: skip
    assert len(summary.decoded) == len(corpus.shards) and not summary.failed


def test_actors_that_die_while_starting_end_the_run_saying_so(corpus, tmp_path):
    """A Ray actor dying as it loads the decoder is replaced; one that always does (a crash or
    out-of-memory on load) must not be replaced forever: after twice the pool's size of such
    deaths the run stops with an error that says so."""
    state = tmp_path / "state"
    state.mkdir()
    base = CtcCorpusDecoder(str(corpus.graph_path))
    crash = FaultyDecoder(base, "crash_on_load", str(state))
    with pytest.raises(WfstDecodeError, match=r"Ray workers died 3 times while starting"):
        decode_corpus(corpus.shard_dir, tmp_path / "out", crash, executor="ray", workers=1,
                      progress="quiet")  # fmt: skip
    assert not list((tmp_path / "out").glob("*.jsonl"))


def test_a_sigterm_while_ray_waits_is_reported_as_sigterm(corpus, tmp_path):
    """Ray's ray.wait runs the Python signal handlers itself and turns whatever they raise into
    a plain KeyboardInterrupt: a run stopped by SIGTERM (a scheduler) said SIGINT in its
    summary and exited 130, not 143."""
    from wfstdecode.interrupts import termination_raised

    state, out = tmp_path / "state", tmp_path / "out"
    state.mkdir()
    gated = FaultyDecoder(CtcCorpusDecoder(str(corpus.graph_path), backend="reference"),
                          "gated", str(state), seconds=60)  # fmt: skip

    def stop():
        deadline = time.monotonic() + 120
        while not list(out.glob("*.done.json")) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)  # the others wait for "go": the run is midway

    thread = threading.Thread(target=stop)
    try:
        with termination_raised():
            thread.start()
            summary = run(corpus, out, gated, workers=2)
    finally:
        thread.join()
        (state / "go").touch()
    assert summary.interrupted and summary.interrupted_by == "SIGTERM"
    assert 1 <= len(summary.decoded) < len(corpus.shards)
    said = json.loads((out / "summary.json").read_text())
    assert said["interrupted_by"] == "SIGTERM"

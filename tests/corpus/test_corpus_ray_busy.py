"""decode-corpus on a Ray cluster already in use: the pool sizes itself from the cluster's CPUs
and starts one actor per CPU, but an actor whose CPU another job holds cannot start. A shard
handed to it would wait forever (or fail at --shard-timeout) while a started actor sat idle:
shards go only to started actors."""

import signal

import pytest

from wfstdecode.corpus import CtcCorpusDecoder, decode_corpus

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'wfstdecode[ray]')")


@pytest.fixture(scope="module")
def ray_with_a_busy_cpu():
    from wfstdecode.corpus.pools import _keeping_sigterm

    before = signal.getsignal(signal.SIGTERM)
    _keeping_sigterm(ray.init, num_cpus=2, include_dashboard=False, log_to_driver=False)
    assert signal.getsignal(signal.SIGTERM) is before

    @ray.remote(num_cpus=1)
    class Hog:  # the user's own actor, holding one of the two CPUs for the whole run
        def ping(self):
            return 1

    hog = Hog.remote()
    ray.get(hog.ping.remote())
    yield
    ray.kill(hog)
    ray.shutdown()


def test_a_shard_is_not_pinned_to_an_actor_the_cluster_cannot_place(
    corpus, tmp_path, ray_with_a_busy_cpu
):
    # shard_timeout bounds the test: today a shard waits on the unplaceable actor until then
    summary = decode_corpus(corpus.shard_dir, tmp_path / "out",
                            CtcCorpusDecoder(str(corpus.graph_path)), executor="ray",
                            progress="quiet", shard_timeout=20, max_attempts=1)  # fmt: skip
    assert summary.ok, summary.failed
    assert sorted(summary.decoded) == sorted(p.stem for p in corpus.shards)

"""Threads sharing `transducer.graphs`' cache of captured programs: two server threads decoding
same-shaped batches with one model (same cache key) must each get their own batch's result.

The CUDA graphs are replaced by an eager run of the same program (as `graphs._BodyGraphs` runs
the same steps), so that the cache's sharing logic runs on the CPU."""

import threading

import pytest
import torch

from wfstdecode.testing.transducer_models import random_transducer
from wfstdecode.transducer import graphs, programs
from wfstdecode.transducer.greedy import greedy_decode
from wfstdecode.transducer.options import GreedyOptions


class _EagerBodies:
    """`_BodyGraphs` without CUDA: replay runs the program's steps eagerly."""

    def __init__(self, program):
        self.program = program

    def replay(self):
        programs.run_eager(self.program)


@pytest.fixture
def graph_mode_on_cpu(monkeypatch):
    monkeypatch.setattr(graphs, "_BodyGraphs", _EagerBodies)
    monkeypatch.setattr(graphs, "resolve_mode", lambda requested, device: "loop_bodies")
    monkeypatch.setattr(graphs, "_CACHE", type(graphs._CACHE)())


def _tokens(hyps):
    return [(list(h.tokens), list(h.timestamps)) for h in hyps]


def test_a_thread_reads_its_own_batch_not_the_next_callers(graph_mode_on_cpu, monkeypatch):
    """Thread A's decode returned the cached program, whose buffers hold A's result; before A
    read them, thread B's decode of a same-shaped batch reloaded and replayed the same program:
    A got B's tokens."""
    model = random_transducer(vocab_size=16, seed=3)
    gen = torch.Generator().manual_seed(0)
    enc_a = torch.randn(2, 30, 24, generator=gen)
    enc_b = torch.randn(2, 30, 24, generator=gen)
    lengths = torch.tensor([30, 25])
    options = GreedyOptions(cuda_graphs="loop_bodies")
    want_a = _tokens(greedy_decode(model, enc_a, lengths, options))
    want_b = _tokens(greedy_decode(model, enc_b, lengths, options))
    assert want_a != want_b  # (else the test shows nothing)

    # A stops between its search and the reading of its result until B's decode is done
    a_searched, b_done = threading.Event(), threading.Event()
    reading = programs._Program.hypotheses

    def hypotheses(self, notes=()):
        if threading.current_thread().name == "A":
            a_searched.set()
            b_done.wait(5)  # (a fix that makes B wait for A instead goes on after 5 s)
        return reading(self, notes)

    monkeypatch.setattr(programs._Program, "hypotheses", hypotheses)
    got, errors = {}, []

    def a():
        try:
            got["a"] = _tokens(greedy_decode(model, enc_a, lengths, options))
        except BaseException as exc:
            errors.append(exc)
            a_searched.set()

    def b():
        try:
            a_searched.wait(5)
            got["b"] = _tokens(greedy_decode(model, enc_b, lengths, options))
        except BaseException as exc:
            errors.append(exc)
        finally:
            b_done.set()

    threads = [threading.Thread(target=a, name="A"), threading.Thread(target=b, name="B")]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert got["b"] == want_b
    assert got["a"] == want_a


def test_an_entry_evicted_by_another_thread_is_no_keyerror(graph_mode_on_cpu, monkeypatch):
    """`run` inserted its new entry, then (after another thread's insertions evicted it: the
    cache keeps 8) called ``_CACHE.move_to_end(key)``: KeyError. Forced here by evicting the
    entry while the program is made... i.e. between the insert and the move."""
    model = random_transducer(vocab_size=16, seed=3)
    enc = torch.randn(1, 10, 24, generator=torch.Generator().manual_seed(1))
    lengths = torch.tensor([10])
    options = GreedyOptions(cuda_graphs="loop_bodies")
    want = _tokens(greedy_decode(model, enc, lengths, options))
    graphs._CACHE.clear()

    class Evicting(type(graphs._CACHE)):
        """Another thread's 8 insertions land right after this thread's own."""

        def __setitem__(self, key, value):
            super().__setitem__(key, value)
            if threading.current_thread().name == "A":
                for i in range(graphs._CACHE_SIZE):
                    super().__setitem__(("other thread", i), (lambda: None, None))

    monkeypatch.setattr(graphs, "_CACHE", Evicting())
    got, errors = {}, []

    def a():
        try:
            got["a"] = _tokens(greedy_decode(model, enc, lengths, options))
        except BaseException as exc:
            errors.append(exc)

    th = threading.Thread(target=a, name="A")
    th.start()
    th.join()
    assert not errors, errors
    assert got["a"] == want

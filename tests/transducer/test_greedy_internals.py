"""Greedy transducer internals a mutation probe showed untested: the fixed (CUDA-graph)
buffers' capacity, the model adapter's checks and projection hooks, and the graph cache (keyed
by options, bounded, its driver check), the last run on CPU through an eager stand-in."""

import pytest
import torch

from wfstdecode.errors import DecodeInputError
from wfstdecode.testing.transducer_models import BareProtocol, planted_batch, planted_transducer
from wfstdecode.transducer import GreedyOptions, greedy_decode
from wfstdecode.transducer.greedy import make_program, run_eager
from wfstdecode.transducer.model import ModelAdapter


class Counting:
    """A model that never emits blank and whose next label is always the last one + 1: every
    frame fills up to max_symbols_per_frame, and every label differs from the one before."""

    blank_id, vocab_size = 0, 50

    def init_state(self, batch_size, device):
        return torch.zeros(batch_size, 1, device=device)

    def predict(self, labels, state):
        return torch.nn.functional.one_hot(labels % 49 + 1, 50).float(), state

    def joint(self, enc, pred):
        return pred * 10.0 + 0.0 * enc.sum(-1, keepdim=True)


@pytest.mark.parametrize("algorithm", ["frame_looping", "label_looping", "wind"])
@pytest.mark.parametrize("max_symbols", [1, 2, 3])
def test_fixed_buffers_hold_max_symbols_on_every_frame(algorithm, max_symbols):
    """programs.py:82 capacity T*max_symbols -> T*max_symbols-1: the fixed (CUDA-graph)
    buffers must hold a row that emits max_symbols labels on every one of T frames; with one
    slot less, frame-looping's later masked appends overwrite that row's last label."""
    model = Counting()
    enc, lengths = torch.zeros(2, 6, 4), torch.tensor([6, 4])
    opts = GreedyOptions(algorithm, max_symbols_per_frame=max_symbols)
    want = greedy_decode(model, enc, lengths, opts)
    assert [len(h.tokens) for h in want] == [6 * max_symbols, 4 * max_symbols]
    with torch.inference_mode():
        program = make_program(ModelAdapter(model), enc, lengths, opts, 50, fixed=True)
        run_eager(program)
        got = program.hypotheses()
    assert [h.tokens for h in got] == [h.tokens for h in want]
    assert [h.timestamps for h in got] == [h.timestamps for h in want]


@pytest.fixture(scope="module")
def small():
    model = planted_transducer(30, 64, 64, 64, seed=5)
    pb = planted_batch(model, 3, 30, min_frames=5, seed=5)
    return model, pb.enc, pb.lengths


def test_state_batch_dim_past_the_state_rank_is_a_decode_input_error(small):
    """model.py:122 `like.dim() <= dim` -> `<`: a state_batch_dim equal to the state's rank
    must give the clear DecodeInputError, not an IndexError from torch."""
    inner, enc, lengths = small
    model = BareProtocol(inner)
    model.state_batch_dim = 3  # the LSTM state is 3-D: (layers, B, H)
    with pytest.raises(DecodeInputError, match=r"state_batch_dim = 3"):
        greedy_decode(model, enc, lengths, GreedyOptions("frame_looping"))


def test_a_partial_set_of_projection_hooks_is_not_used(small):
    """model.py:152 all(...) -> any(...): projections are used only when all three hooks exist;
    a model with just ``project_encoder`` decodes through its plain ``joint``."""
    inner, enc, lengths = small
    plain = BareProtocol(inner)
    want = greedy_decode(plain, enc, lengths, GreedyOptions("label_looping"))
    partial = BareProtocol(inner)
    partial.project_encoder = lambda e: torch.zeros_like(e)  # would change every result
    got = greedy_decode(partial, enc, lengths, GreedyOptions("label_looping"))
    assert [h.tokens for h in got] == [h.tokens for h in want]
    assert [h.score for h in got] == pytest.approx([h.score for h in want])


class _EagerRunner:
    """Stands in for graphs._BodyGraphs on CPU: the same cached fixed program, run eagerly."""

    def __init__(self, program):
        self.program = program

    def replay(self):
        run_eager(self.program)


@pytest.fixture
def cpu_graph_cache(monkeypatch):
    from wfstdecode.transducer import graphs

    monkeypatch.setattr(graphs, "_BodyGraphs", _EagerRunner)
    monkeypatch.setattr(graphs, "_CACHE", type(graphs._CACHE)())
    return graphs


def test_graph_cache_keeps_programs_of_other_options_apart(cpu_graph_cache):
    """graphs.py:94 `options` dropped from the cache key: a program captured for
    max_symbols_per_frame=1 must not be replayed for max_symbols_per_frame=3."""
    graphs, model = cpu_graph_cache, Counting()
    enc, lengths = torch.zeros(2, 6, 4), torch.tensor([6, 4])
    for max_symbols in (1, 3):
        opts = GreedyOptions("frame_looping", max_symbols_per_frame=max_symbols)
        with torch.inference_mode():
            got = graphs.run("loop_bodies", ModelAdapter(model), enc, lengths, opts, 50)
            got = got.hypotheses()
        want = greedy_decode(model, enc, lengths, opts)
        assert [h.tokens for h in got] == [h.tokens for h in want]
        assert len(got[0].tokens) == 6 * max_symbols


def test_graph_cache_holds_its_size_and_evicts_the_oldest(cpu_graph_cache):
    """graphs.py:101 `len(_CACHE) > _CACHE_SIZE` -> `>=`: the cache holds _CACHE_SIZE programs."""
    graphs, model = cpu_graph_cache, Counting()
    opts = GreedyOptions("label_looping")
    for batch in range(1, graphs._CACHE_SIZE + 2):
        enc, lengths = torch.zeros(batch, 3, 4), torch.full((batch,), 3)
        with torch.inference_mode():
            graphs.run("loop_bodies", ModelAdapter(model), enc, lengths, opts, 50)
    assert len(graphs._CACHE) == graphs._CACHE_SIZE
    assert [key[2][0] for key in graphs._CACHE] == list(range(2, graphs._CACHE_SIZE + 2))


def test_conditional_nodes_accept_exactly_the_minimum_driver(monkeypatch):
    """graphs.py:80 `found < MIN_DRIVER` -> `<=`: a CUDA 12.6 driver is new enough, 12.5 is not."""
    from types import SimpleNamespace

    from wfstdecode.transducer import graphs

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for version, want in ((12060, None), (12050, "12.5")):
        driver = SimpleNamespace(cuDriverGetVersion=lambda v=version: (0, v))
        monkeypatch.setattr(graphs, "_bindings", lambda d=driver: (d, None))
        graphs.conditional_nodes_unavailable_reason.cache_clear()
        try:
            reason = graphs.conditional_nodes_unavailable_reason()
        finally:
            graphs.conditional_nodes_unavailable_reason.cache_clear()
        assert reason is None if want is None else want in reason


class _CapturingRunner(_EagerRunner):
    """Stands in for graphs._BodyGraphs on CPU as capture would use the program: the eager
    warm-up, then every step once (capture records each step, whatever the loop flags say)."""

    def __init__(self, program):
        super().__init__(program)
        run_eager(program)
        for name in ("init_", "outer_begin_", "inner_step_", "outer_end_"):
            getattr(program, name)()


class _NoVocab(Counting):
    vocab_size = None  # the joint's width is probed on the first frame


@pytest.mark.parametrize("model", [Counting(), _NoVocab()], ids=["vocab_size", "probed"])
@pytest.mark.parametrize("algorithm", ["frame_looping", "label_looping", "wind"])
def test_graph_modes_take_a_batch_of_zero_frames(monkeypatch, algorithm, model):
    """greedy.py: a (B, 0, D) enc went to the CUDA-graph driver, whose capture of the loop
    bodies indexed frame 0 of nothing ("index is out of bounds for dimension with size 0"),
    or, for a model without vocab_size, held the joint to a width never probed; with
    cuda_graphs='off' the same call returns empty hypotheses."""
    from wfstdecode.transducer import graphs

    monkeypatch.setattr(graphs, "_BodyGraphs", _CapturingRunner)
    monkeypatch.setattr(graphs, "_CACHE", type(graphs._CACHE)())
    monkeypatch.setattr(graphs, "resolve_mode", lambda requested, device: requested)
    for frames in (0, 3):
        enc, lengths = torch.zeros(2, frames, 4), torch.tensor([frames, 0])
        want = greedy_decode(model, enc, lengths, GreedyOptions(algorithm))
        got = greedy_decode(
            model, enc, lengths, GreedyOptions(algorithm, cuda_graphs="loop_bodies")
        )
        assert [h.tokens for h in got] == [h.tokens for h in want]
        assert [len(h.tokens) for h in got] == [frames * 10, 0]  # (10 labels a frame)

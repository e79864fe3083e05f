"""Exactness: every greedy algorithm equals frame-looping (RNN-T) and the per-utterance
reference (RNN-T and TDT), token for token and frame for frame."""

from typing import NamedTuple

import pytest
import torch

from wfstdecode.testing.transducer_models import (
    planted_batch,
    planted_transducer,
    random_transducer,
)
from wfstdecode.transducer import GreedyOptions, greedy_decode, greedy_reference
from wfstdecode.transducer.greedy import make_program, run_eager
from wfstdecode.transducer.model import ModelAdapter

TDT = (0, 1, 2, 3, 4)


@pytest.fixture(scope="module")
def rnnt():
    return planted_transducer(40, 128, 128, 128, seed=1)


@pytest.fixture(scope="module")
def tdt():
    return planted_transducer(40, 128, 128, 128, durations=TDT, seed=2)


def assert_same(hyps, ref, tdt=False):
    assert len(hyps) == len(ref)
    for b, (h, r) in enumerate(zip(hyps, ref, strict=True)):
        assert h.tokens == r.tokens, f"utterance {b}"
        assert h.timestamps == r.timestamps, f"utterance {b}"
        assert h.durations == r.durations, f"utterance {b}"
        assert h.score == pytest.approx(r.score, abs=1e-4), f"utterance {b}"
        if tdt:
            assert len(h.durations) == len(h.tokens)


def batch(model, size, frames, seed, min_frames=None):
    pb = planted_batch(model, size, frames, min_frames=min_frames, seed=seed)
    return pb.enc, pb.lengths


@pytest.mark.parametrize("size", [1, 3, 8])
@pytest.mark.parametrize("max_symbols", [1, 2, 10])
def test_rnnt_all_algorithms_equal_frame_looping(rnnt, size, max_symbols):
    enc, lengths = batch(rnnt, size, 48, seed=size + 10 * max_symbols, min_frames=0)
    base = greedy_decode(
        rnnt, enc, lengths, GreedyOptions("frame_looping", max_symbols_per_frame=max_symbols)
    )
    assert sum(len(h.tokens) for h in base) > 0
    assert_same(base, greedy_reference(rnnt, enc, lengths, max_symbols_per_frame=max_symbols))
    variants = [GreedyOptions("label_looping", max_symbols_per_frame=max_symbols)]
    variants += [
        GreedyOptions("wind", window=w, max_symbols_per_frame=max_symbols) for w in (1, 2, 3, 8, 64)
    ]
    for opts in variants:
        assert_same(greedy_decode(rnnt, enc, lengths, opts), base)


@pytest.mark.parametrize("size", [1, 4, 9])
@pytest.mark.parametrize("max_symbols", [1, 3, 10])
def test_tdt_label_looping_equals_reference(tdt, size, max_symbols):
    enc, lengths = batch(tdt, size, 48, seed=size + 7 * max_symbols, min_frames=0)
    opts = GreedyOptions("label_looping", durations=TDT, max_symbols_per_frame=max_symbols)
    hyps = greedy_decode(tdt, enc, lengths, opts)
    ref = greedy_reference(tdt, enc, lengths, durations=TDT, max_symbols_per_frame=max_symbols)
    assert_same(hyps, ref, tdt=True)
    if size > 1:  # the plant exercises zero durations and frame skipping
        durs = [d for h in hyps for d in h.durations]
        assert 0 in durs and max(durs) > 1


@pytest.mark.parametrize("durations", [(0, 1, 2, 3, 4), (1, 2), (0, 2, 5), (3, 0, 1)])
def test_tdt_random_model_and_duration_sets(durations):
    # A random model hits the corner cases a planted one avoids (blank with duration 0,
    # zero-duration label runs up to max_symbols_per_frame, durations past the end).
    model = random_transducer(vocab_size=12, n_durations=len(durations), seed=len(durations))
    enc = torch.randn(5, 30, 24) * 2
    lengths = torch.tensor([30, 0, 17, 1, 29])
    for max_symbols in (1, 4):
        opts = GreedyOptions(durations=durations, max_symbols_per_frame=max_symbols)
        ref = greedy_reference(model, enc, lengths, durations, max_symbols)
        assert_same(greedy_decode(model, enc, lengths, opts), ref, tdt=True)


def test_rnnt_random_model_many_symbols_per_frame():
    model = random_transducer(vocab_size=10, seed=3)
    with torch.no_grad():
        model.out.bias[model.blank_id] -= 2.0  # emits a lot: max_symbols_per_frame binds
    enc = torch.randn(4, 25, 24)
    lengths = torch.tensor([25, 11, 0, 24])
    for max_symbols in (1, 3):
        opts = GreedyOptions("frame_looping", max_symbols_per_frame=max_symbols)
        base = greedy_decode(model, enc, lengths, opts)
        assert max(len(h.tokens) for h in base) > (25 if max_symbols > 1 else 15)
        for opts in (
            GreedyOptions("label_looping", max_symbols_per_frame=max_symbols),
            GreedyOptions("wind", window=4, max_symbols_per_frame=max_symbols),
        ):
            assert_same(greedy_decode(model, enc, lengths, opts), base)


def test_batch_equals_each_utterance_alone(rnnt):
    enc, lengths = batch(rnnt, 5, 40, seed=5)
    opts = GreedyOptions("wind", window=4)
    together = greedy_decode(rnnt, enc, lengths, opts)
    alone = [greedy_decode(rnnt, enc[b : b + 1], lengths[b : b + 1], opts)[0] for b in range(5)]
    assert_same(together, alone)


class PlainModel:
    """Only the required protocol (no projections, no vocab_size); state batch dim 0."""

    def __init__(self, inner):
        self.inner, self.blank_id = inner, inner.blank_id

    def init_state(self, batch_size, device):
        h, c = self.inner.init_state(batch_size, device)
        return [h.transpose(0, 1).contiguous(), c.transpose(0, 1).contiguous()]

    def predict(self, labels, state):
        h, c = (s.transpose(0, 1).contiguous() for s in state)
        pred, (h, c) = self.inner.predict(labels, (h, c))
        return pred, [h.transpose(0, 1), c.transpose(0, 1)]

    def joint(self, enc, pred):
        return self.inner.joint(enc, pred)


def test_model_without_projections_and_batch_first_state(rnnt):
    plain = PlainModel(rnnt)
    assert not ModelAdapter(plain).projected
    enc, lengths = batch(rnnt, 4, 40, seed=6)
    want = greedy_decode(rnnt, enc, lengths, GreedyOptions("frame_looping"))
    for algo in ("frame_looping", "label_looping", "wind"):
        assert_same(greedy_decode(plain, enc, lengths, GreedyOptions(algo)), want)


class LstmState(NamedTuple):
    h: torch.Tensor
    c: torch.Tensor


class NamedTupleState(PlainModel):
    """A state held in a NamedTuple (a tuple whose constructor takes its fields one by one)."""

    state_batch_dim = 1

    def init_state(self, batch_size, device):
        return LstmState(*self.inner.init_state(batch_size, device))

    def predict(self, labels, state):
        pred, (h, c) = self.inner.predict(labels, tuple(state))
        return pred, LstmState(h, c)


def test_namedtuple_state(rnnt):
    from wfstdecode.transducer import BeamOptions, beam_decode

    model = NamedTupleState(rnnt)
    enc, lengths = batch(rnnt, 3, 24, seed=11)
    want = greedy_reference(rnnt, enc, lengths)
    assert sum(len(h.tokens) for h in want) > 0
    for algo in ("frame_looping", "label_looping", "wind"):
        assert_same(greedy_decode(model, enc, lengths, GreedyOptions(algo)), want)
    beam = BeamOptions(beam_size=2)
    got, ref = beam_decode(model, enc, lengths, beam), beam_decode(rnnt, enc, lengths, beam)
    assert [h[0].tokens for h in got] == [h[0].tokens for h in ref]


def test_float32_benchmark_sized_model_is_exact():
    model = planted_transducer(257, 256, 256, 256, seed=4)
    enc, lengths = batch(model, 6, 60, seed=4)
    base = greedy_decode(model, enc, lengths, GreedyOptions("frame_looping"))
    for opts in (GreedyOptions("label_looping"), GreedyOptions("wind", window=8)):
        assert_same(greedy_decode(model, enc, lengths, opts), base)


@pytest.mark.parametrize("algorithm", ["frame_looping", "label_looping", "wind"])
def test_static_program_reused_like_a_graph_replay(rnnt, tdt, algorithm):
    """The fixed-capacity programs the CUDA-graph modes capture, replayed on new inputs."""
    model, durations = (tdt, TDT) if algorithm == "label_looping" else (rnnt, None)
    opts = GreedyOptions(algorithm, durations=durations, max_symbols_per_frame=3)
    enc1, len1 = batch(model, 3, 32, seed=7)
    enc2, len2 = batch(model, 3, 32, seed=8, min_frames=0)
    adapter = ModelAdapter(model)
    with torch.inference_mode():
        program = make_program(adapter, enc1, len1, opts, model.vocab_size, fixed=True)
        storage = program.hyps["labels"].data_ptr()
        for enc, lengths in ((enc1, len1), (enc2, len2), (enc1, len1)):
            program.load_(enc, lengths)
            run_eager(program)
            got = program.hypotheses()
            assert_same(got, greedy_reference(model, enc, lengths, durations, 3))
        assert program.hyps["labels"].data_ptr() == storage


def test_empty_batch_and_zero_frames(rnnt):
    assert greedy_decode(rnnt, torch.zeros(0, 5, 128), torch.zeros(0, dtype=torch.long)) == []
    hyps = greedy_decode(rnnt, torch.zeros(2, 0, 128), torch.zeros(2, dtype=torch.long))
    assert [h.tokens for h in hyps] == [(), ()] and hyps[0].score == 0.0


def test_notes_report_algorithm_and_graph_mode(rnnt):
    enc, lengths = batch(rnnt, 2, 10, seed=9)
    hyp = greedy_decode(rnnt, enc, lengths, GreedyOptions("wind", cuda_graphs="auto"))[0]
    assert hyp.notes == ("algorithm=wind", "window=8", "cuda_graphs=off (auto)")


def test_wind_notes_of_an_utterance_do_not_depend_on_its_batch(rnnt):
    """An utterance's hypothesis, notes included, is the one it gets alone: the window noted is
    the one its own frames cut it to, not the batch's longest (an utterance of 3 frames said
    window=8 in a batch of 20 frames, window=3 alone; an empty one window=8, not 1)."""
    enc, _ = batch(rnnt, 3, 20, seed=4)
    lengths = torch.tensor([20, 3, 0])
    opts = GreedyOptions("wind", window=8)
    batched = greedy_decode(rnnt, enc, lengths, opts)
    for b, n in enumerate(lengths.tolist()):
        alone = greedy_decode(rnnt, enc[b : b + 1, :n], lengths[b : b + 1], opts)[0]
        assert (batched[b].tokens, batched[b].notes) == (alone.tokens, alone.notes)
    assert [h.notes[1] for h in batched] == ["window=8", "window=3", "window=1"]

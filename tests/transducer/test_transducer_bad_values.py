"""Hostile values: non-finite encoder output or logits, models whose shapes change between
calls, and option values that would size an allocation (issue 11, item 6)."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from wfstdecode.errors import DecodeInputError, DeviceMemoryError, OptionsError
from wfstdecode.testing.transducer_models import (
    greedy_variants,
    planted_batch,
    planted_transducer,
    random_transducer,
)
from wfstdecode.transducer import (
    BeamOptions,
    GreedyOptions,
    beam_decode,
    greedy_decode,
    greedy_reference,
)
from wfstdecode.transducer.greedy import make_program, run_eager
from wfstdecode.transducer.model import ModelAdapter
from wfstdecode.transducer.options import MAX_COUNT

TDT = (0, 1, 2, 3)
OPTIONS, IDS = greedy_variants(TDT)


@pytest.fixture(scope="module")
def models():
    return {d: planted_transducer(30, 64, 64, 64, durations=d, seed=5) for d in (None, TDT)}


def case(models, opts, size=3, frames=30):
    model = models[opts.durations]
    pb = planted_batch(model, size, frames, min_frames=5, seed=5)
    return model, pb.enc, pb.lengths


class Wrapped:
    """The plain protocol around a reference model; ``on_joint(call, logits)`` and
    ``on_predict(call, pred)`` may replace what the model returns."""

    state_batch_dim = 1

    def __init__(self, inner, on_joint=None, on_predict=None):
        self.inner, self.blank_id, self.vocab_size = inner, inner.blank_id, inner.vocab_size
        self.on_joint, self.on_predict = on_joint, on_predict
        self.joint_calls = self.predict_calls = 0

    def init_state(self, batch_size, device):
        return self.inner.init_state(batch_size, device)

    def predict(self, labels, state):
        self.predict_calls += 1
        pred, state = self.inner.predict(labels, state)
        return (self.on_predict(self.predict_calls, pred) if self.on_predict else pred), state

    def joint(self, enc, pred):
        self.joint_calls += 1
        logits = self.inner.joint(enc, pred)
        return self.on_joint(self.joint_calls, logits) if self.on_joint else logits


def run_fixed(model, enc, lengths, opts):
    """The fixed-buffer program the CUDA-graph modes capture and replay, run on CPU."""
    vocab = getattr(model, "vocab_size", None) or model.inner.vocab_size
    with torch.inference_mode():
        program = make_program(ModelAdapter(model), enc, lengths, opts, vocab, fixed=True)
        run_eager(program)
        return program.hypotheses()


def assert_same(got, want):
    assert [h.tokens for h in got] == [h.tokens for h in want]
    assert [h.timestamps for h in got] == [h.timestamps for h in want]
    assert [h.durations for h in got] == [h.durations for h in want]
    assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-4)


# Non-finite encoder output.


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("opts", OPTIONS, ids=IDS)
def test_non_finite_valid_frame_raises(models, opts, value):
    model, enc, lengths = case(models, opts)
    enc[1, 3, 7] = value
    with pytest.raises(
        DecodeInputError, match=r"NaN or inf in frame 3 of utterance 1 \(enc\[1, 3\]"
    ):
        greedy_decode(model, enc, lengths, opts)


@pytest.mark.parametrize("opts", OPTIONS, ids=IDS)
def test_non_finite_padding_decodes_as_zero_padding(models, opts):
    model, enc, lengths = case(models, opts)
    lengths[2] = 0
    want = greedy_decode(model, enc, lengths, opts)
    assert_same(want, greedy_reference(model, enc, lengths, opts.durations))
    dirty = enc.clone()
    for b in range(3):
        dirty[b, int(lengths[b]) :] = float("nan")
    dirty[2, :5] = float("inf")
    assert_same(greedy_decode(model, dirty, lengths, opts), want)
    assert_same(run_fixed(model, dirty, lengths, opts), want)


# Non-finite logits: one check of the scores at the end, the same for every program.


def poison(at_call, value, column=None):
    def on_joint(call, logits):
        if call != at_call:
            return logits
        logits = logits.clone()
        if column is None:
            logits.fill_(value)
        else:
            logits[:, column] = value
        return logits

    return on_joint


@pytest.mark.parametrize("fixed", [False, True], ids=["greedy_decode", "graph_program"])
@pytest.mark.parametrize(
    ("value", "column"),
    [(float("nan"), 3), (float("inf"), 3), (float("inf"), None), (-float("inf"), None)],
    ids=["nan", "+inf", "all+inf", "all-inf"],
)
@pytest.mark.parametrize("opts", OPTIONS, ids=IDS)
def test_non_finite_logits_raise(models, opts, value, column, fixed):
    inner, enc, lengths = case(models, opts)
    model = Wrapped(inner, on_joint=poison(4, value, column))
    with pytest.raises(
        DecodeInputError, match=r"model.joint returned non-finite logits.*utterance"
    ):
        if fixed:
            run_fixed(model, enc, lengths, opts)
        else:
            greedy_decode(model, enc, lengths, opts)
    assert model.joint_calls > 4


def test_non_finite_duration_logits_raise(models):
    opts = OPTIONS[3]
    inner, enc, lengths = case(models, opts)
    model = Wrapped(inner, on_joint=poison(3, float("nan"), column=inner.vocab_size + 1))
    with pytest.raises(DecodeInputError, match="non-finite logits"):
        greedy_decode(model, enc, lengths, opts)


@pytest.mark.parametrize("opts", OPTIONS, ids=IDS)
def test_minus_inf_for_ruled_out_tokens_is_fine(models, opts):
    """-inf for a token a model rules out changes nothing else: a masking joint is legitimate."""
    inner, enc, lengths = case(models, opts)
    want = greedy_decode(inner, enc, lengths, opts)
    never = next(k for k in range(1, 30) if all(k not in h.tokens for h in want))

    def mask(_call, logits):
        logits = logits.clone()
        logits[:, never] = -float("inf")
        return logits

    got = greedy_decode(Wrapped(inner, on_joint=mask), enc, lengths, opts)
    assert [h.tokens for h in got] == [h.tokens for h in want]
    assert [h.timestamps for h in got] == [h.timestamps for h in want]
    assert all(-1e3 < h.score <= 0 for h in got)


# Shapes that change after the first call.


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda x: x[:, :-1], r"logits of shape \(\d+, 29\); expected \(\d+, 30"),
        (lambda x: x[:1], r"logits of shape \(1, \d+\); expected \(\d+, \d+\)"),
    ],
    ids=["width", "rows"],
)
@pytest.mark.parametrize("fixed", [False, True], ids=["greedy_decode", "graph_program"])
@pytest.mark.parametrize("opts", OPTIONS[:3], ids=IDS[:3])
def test_joint_shape_change_raises(models, opts, fixed, change, match):
    inner, enc, lengths = case(models, opts)
    model = Wrapped(inner, on_joint=lambda call, x: change(x) if call > 1 else x)
    with pytest.raises(DecodeInputError, match=match):
        if fixed:
            run_fixed(model, enc, lengths, opts)
        else:
            greedy_decode(model, enc, lengths, opts)


@pytest.mark.parametrize("opts", OPTIONS, ids=IDS)
def test_predictor_shape_change_raises(models, opts):
    inner, enc, lengths = case(models, opts)
    model = Wrapped(inner, on_predict=lambda call, p: p[:1] if call > 2 else p)
    with pytest.raises(
        DecodeInputError, match=r"model.predict .* shape \(1, 64\); expected \(3, 64\)"
    ):
        greedy_decode(model, enc, lengths, opts)


def test_wrong_state_batch_dim_raises(models):
    inner, enc, lengths = case(models, OPTIONS[0])
    model = Wrapped(inner)
    model.state_batch_dim = 0  # the LSTM state is (layers, B, H)
    with pytest.raises(DecodeInputError, match=r"state_batch_dim = 0 \(nn.LSTM states need 1\)"):
        greedy_decode(model, enc, lengths, OPTIONS[0])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_enc_of_another_float_type_than_the_model_names_both(models, dtype):
    """float64 from NumPy is the usual case: a clear error naming both types, from greedy and
    beam search alike (it was torch's "expected m1 and m2 to have the same dtype")."""
    model, enc, lengths = case(models, OPTIONS[0])
    want = rf"enc is {dtype} but the model's weights are torch.float32: pass enc.to"
    with pytest.raises(DecodeInputError, match=want):
        greedy_decode(model, enc.to(dtype), lengths, OPTIONS[0])
    with pytest.raises(DecodeInputError, match=want):
        beam_decode(model, enc.to(dtype), lengths, BeamOptions("wind", beam_size=2))


@pytest.mark.parametrize(
    ("name", "value"),
    [("blank_id", 0.5), ("blank_id", "0"), ("blank_id", None), ("vocab_size", 30.0)],
)
def test_non_integer_model_attributes_raise(models, name, value):
    inner, enc, lengths = case(models, OPTIONS[1])
    model = Wrapped(inner)
    setattr(model, name, value)
    with pytest.raises(DecodeInputError, match=rf"model.{name} must be an int"):
        greedy_decode(model, enc, lengths)


# Option values that size allocations.


class LargestTensor(TorchDispatchMode):
    """Records the size of the largest tensor any operator returns."""

    largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel() * t.element_size())
        return out


def test_huge_wind_window_is_cut_to_the_frames(models):
    inner, enc, lengths = case(models, OPTIONS[0], frames=20)
    opts = GreedyOptions("wind", window=10**6)
    with LargestTensor() as sizes:
        hyps = greedy_decode(inner, enc, lengths, opts)
    assert sizes.largest < 2**20  # was gigabytes: a (B * 10**6, D) joint input per step
    assert_same(hyps, greedy_decode(inner, enc, lengths, GreedyOptions("frame_looping")))
    assert "window=20" in hyps[0].notes
    with torch.inference_mode():
        program = make_program(ModelAdapter(inner), enc, lengths, opts, 30, fixed=True)
    assert program.window == 20 and program.offsets.numel() == 20
    short = greedy_decode(inner, enc[:, :3], lengths.clamp(max=3), GreedyOptions("wind"))
    assert "window=3" in short[0].notes  # the default window too


def test_huge_max_symbols_per_frame(models):
    inner, enc, lengths = case(models, OPTIONS[0], frames=20)
    opts = GreedyOptions("label_looping", max_symbols_per_frame=MAX_COUNT)
    # Eager buffers grow with the labels actually emitted.
    with LargestTensor() as sizes:
        hyps = greedy_decode(inner, enc, lengths, opts)
    assert sizes.largest < 2**20
    assert_same(hyps, greedy_decode(inner, enc, lengths, GreedyOptions("label_looping")))
    # The graph modes' fixed buffers hold frames x max_symbols_per_frame labels: refused early.
    with (
        pytest.raises(DeviceMemoryError, match=r"max_symbols_per_frame=2147483647.*lower"),
        torch.inference_mode(),
    ):
        make_program(ModelAdapter(inner), enc, lengths, opts, 30, fixed=True)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_symbols_per_frame": MAX_COUNT + 1}, "max_symbols_per_frame"),
        ({"max_symbols_per_frame": 2**64}, "max_symbols_per_frame"),
        ({"durations": (0, 2**63)}, "durations"),
    ],
)
def test_option_values_beyond_the_counters_raise(kwargs, match):
    with pytest.raises(OptionsError, match=match):
        GreedyOptions(**kwargs)


def test_largest_duration_does_not_overflow():
    model = random_transducer(vocab_size=12, n_durations=2, seed=1)
    enc, lengths = torch.randn(3, 15, 24), torch.tensor([15, 7, 0])
    durations = (1, MAX_COUNT)
    ref = greedy_reference(model, enc, lengths, durations)
    assert_same(greedy_decode(model, enc, lengths, GreedyOptions(durations=durations)), ref)

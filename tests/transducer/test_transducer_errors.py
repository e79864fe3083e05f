import pytest
import torch

from wfstdecode.errors import BackendUnavailableError, DecodeInputError, OptionsError
from wfstdecode.testing.transducer_models import random_transducer
from wfstdecode.transducer import GreedyOptions, graphs, greedy_decode


@pytest.fixture(scope="module")
def model():
    return random_transducer(vocab_size=12, enc_dim=24)


def inputs(B=2, T=7, D=24):
    return torch.randn(B, T, D), torch.full((B,), T)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"algorithm": "beam"}, "algorithm"),
        ({"cuda_graphs": "yes"}, "cuda_graphs"),
        ({"max_symbols_per_frame": 0}, "max_symbols_per_frame"),
        ({"max_symbols_per_frame": 2.5}, "max_symbols_per_frame"),
        ({"algorithm": "frame_looping", "window": 4}, "window=4.*algorithm='wind'"),
        ({"algorithm": "label_looping", "window": 4}, "window"),
        ({"algorithm": "wind", "window": 0}, "window"),
        ({"algorithm": "frame_looping", "durations": (0, 1)}, "durations.*label_looping"),
        ({"algorithm": "wind", "durations": (0, 1)}, "durations.*label_looping"),
        ({"durations": (0, -1, 2)}, "non-negative"),
        ({"durations": (0, 1.5)}, "non-negative"),
        ({"durations": (1, 1)}, "distinct"),
        ({"durations": (0,)}, "positive"),
        ({"durations": 3}, "sequence"),
    ],
)
def test_impossible_options_raise(kwargs, match):
    with pytest.raises(OptionsError, match=match):
        GreedyOptions(**kwargs)


def test_durations_list_becomes_tuple_and_options_are_frozen():
    opts = GreedyOptions(durations=[0, 1, 2])
    assert opts.durations == (0, 1, 2)
    with pytest.raises(AttributeError):
        opts.window = 3
    assert GreedyOptions("wind").effective_window == 8
    assert GreedyOptions("label_looping").effective_window == 1
    # an RNN-T model's durations are (): durations=model.durations fits either kind of model
    from wfstdecode.transducer import BeamOptions

    assert GreedyOptions("wind", durations=()).durations is None
    assert BeamOptions("alsd", durations=[]).durations is None
    assert BeamOptions("tokenwise", durations=()).durations is None  # (an RNN-T-only search)
    assert BeamOptions("wind").for_model(()).durations is None


def test_wrong_enc_rank(model):
    with pytest.raises(DecodeInputError, match=r"\(B, T, D\); got \(7, 24\)"):
        greedy_decode(model, torch.randn(7, 24), torch.tensor([7]))


def test_integer_enc(model):
    with pytest.raises(DecodeInputError, match="float"):
        greedy_decode(model, torch.zeros(1, 3, 24, dtype=torch.long), torch.tensor([3]))


@pytest.mark.parametrize("bad", [[8, 3], [-1, 3]])
def test_lengths_out_of_range(model, bad):
    enc, _ = inputs()
    with pytest.raises(DecodeInputError, match=rf"\[0, T=7\].*\(2, 7, 24\).*= {bad[0]}"):
        greedy_decode(model, enc, torch.tensor(bad))


def test_lengths_shape_and_dtype(model):
    enc, _ = inputs()
    with pytest.raises(DecodeInputError, match=r"\(B,\) = \(2,\).*got \(3,\)"):
        greedy_decode(model, enc, torch.tensor([1, 2, 3]))
    with pytest.raises(DecodeInputError, match="integer"):
        greedy_decode(model, enc, torch.tensor([1.0, 2.0]))


def test_device_mismatch(model):
    enc, lengths = inputs()
    meta = torch.empty(2, dtype=torch.long, device="meta")
    with pytest.raises(DecodeInputError, match=r"meta.*cpu"):
        greedy_decode(model, enc, meta)
    with pytest.raises(DecodeInputError, match="model is on meta"):
        greedy_decode(random_transducer(enc_dim=24).to("meta"), enc, lengths)


def test_joint_width_must_match_vocab_and_durations(model):
    enc, lengths = inputs()
    with pytest.raises(
        DecodeInputError, match=r"joint width 12 != vocab_size 12 \+ len\(durations\) 3"
    ):
        greedy_decode(model, enc, lengths, GreedyOptions(durations=(0, 1, 2)))
    tdt = random_transducer(vocab_size=12, enc_dim=24, n_durations=2)
    with pytest.raises(
        DecodeInputError, match=r"joint width 14 != vocab_size 12 \+ len\(durations\) 0"
    ):
        greedy_decode(tdt, enc, lengths)


def test_model_missing_methods():
    enc, lengths = inputs()
    with pytest.raises(DecodeInputError, match="predict"):
        greedy_decode(
            object.__new__(type("M", (), {"blank_id": 0, "init_state": None, "joint": None})),
            enc,
            lengths,
        )


def test_options_type(model):
    enc, lengths = inputs()
    with pytest.raises(OptionsError, match="GreedyOptions"):
        greedy_decode(model, enc, lengths, {"algorithm": "wind"})


@pytest.mark.parametrize("mode", ["loop_bodies", "full"])
def test_cuda_graphs_on_cpu_tensors_raise(model, mode):
    enc, lengths = inputs()
    with pytest.raises(BackendUnavailableError, match=f"cuda_graphs='{mode}' needs CUDA tensors"):
        greedy_decode(model, enc, lengths, GreedyOptions(cuda_graphs=mode))


def test_auto_mode_resolution(monkeypatch):
    cuda = torch.device("cuda")
    assert graphs.resolve_mode("auto", torch.device("cpu")) == "off"
    monkeypatch.setattr(graphs, "conditional_nodes_unavailable_reason", lambda: None)
    assert graphs.resolve_mode("auto", cuda) == "full"
    assert graphs.resolve_mode("loop_bodies", cuda) == "loop_bodies"
    monkeypatch.setattr(graphs, "conditional_nodes_unavailable_reason", lambda: "old driver")
    assert graphs.resolve_mode("auto", cuda) == "loop_bodies"
    with pytest.raises(BackendUnavailableError, match="conditional nodes: old driver"):
        graphs.resolve_mode("full", cuda)


def test_conditional_nodes_reason_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    assert graphs.conditional_nodes_unavailable_reason() == "no CUDA device"

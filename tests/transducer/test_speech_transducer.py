"""The trainable speech transducer: the TransducerModel protocol, training-time and decoding-time
predictor agree, weights round-trip, and a few steps of the project's losses learn."""

import pytest
import torch

from wfstdecode import DecodeInputError
from wfstdecode.models.speech_transducer import SpeechTransducer
from wfstdecode.transducer import GreedyOptions, TransducerModel, greedy_decode, rnnt_loss, tdt_loss


@pytest.mark.parametrize("durations", [(), (0, 1, 2, 3, 4)])
def test_protocol_sequence_and_round_trip(tmp_path, durations):
    torch.manual_seed(0)
    model = SpeechTransducer(
        enc_dim=32, pred_dim=24, joint_dim=16, durations=durations, bidirectional=bool(durations)
    ).eval()
    assert isinstance(model, TransducerModel)
    labels = torch.tensor([[3, 4, 1, 5], [7, 7, 2, 0]])
    seq = model.predict_sequence(labels)
    state = model.init_state(2, torch.device("cpu"))
    steps = [model.predict(torch.zeros(2, dtype=torch.int64), state)]
    for u in range(labels.shape[1]):
        steps.append(model.predict(labels[:, u], steps[-1][1]))
    torch.testing.assert_close(seq, torch.stack([h for h, _ in steps], 1), atol=1e-5, rtol=1e-5)

    x = torch.randn(2, 41, 191).log_softmax(-1)
    enc, lengths = model.encode(x, torch.tensor([41, 30]))
    assert enc.shape == (2, 21, 32) and lengths.tolist() == [21, 15]
    model.save(tmp_path / "m.npz", {"note": "test"})
    loaded = SpeechTransducer.load(tmp_path / "m.npz")
    assert loaded.meta["note"] == "test" and loaded.durations == tuple(durations)
    options = GreedyOptions(durations=durations or None)
    a = greedy_decode(model.half().float(), enc, lengths, options)  # weights stored as float16
    b = greedy_decode(loaded, enc, lengths, options)
    assert [h.tokens for h in a] == [h.tokens for h in b]


def test_a_bad_weights_file_is_named(tmp_path):
    """Whatever is wrong with a weights file, `load` names the file and the fault."""
    import json

    import numpy as np

    from wfstdecode.errors import InputFileError

    SpeechTransducer(enc_dim=16, pred_dim=8, joint_dim=12, enc_layers=1).save(tmp_path / "ok.npz")
    with np.load(tmp_path / "ok.npz") as z:
        members = dict(z)
    meta = json.loads(str(members.pop("__meta__")))

    def saved(name, **arrays):
        np.savez(tmp_path / name, **arrays)
        return tmp_path / name

    def with_config(**change):
        return np.array(json.dumps({**meta, "config": {**meta["config"], **change}}))

    cases = {
        saved("no_config.npz", __meta__=np.array("{}"), **members): "no 'config' object",
        saved("no_meta.npz", **members): "no '__meta__' member",
        saved("missing.npz", __meta__=with_config(), **{k: v for k, v in members.items()
                                                        if k != "out.bias"}): "missing: out.bias",
        saved("bogus.npz", __meta__=with_config(bogus=1), **members): "unexpected keyword",
        saved("durs.npz", __meta__=with_config(durations=5), **members): "durations 5",
        saved("neg.npz", __meta__=with_config(durations=[0, -1]), **members): "durations",
        saved("shape.npz", __meta__=with_config(), **{**members, "out.bias": np.zeros(3)}):
            r"out.bias has shape \(3,\)",
        saved("bidir.npz", __meta__=with_config(bidirectional="no"), **members):
            "bidirectional 'no' is not true or false",
        saved("odd.npz", __meta__=with_config(bidirectional=True, enc_dim=15), **members):
            "even enc_dim",
        saved("dim.npz", __meta__=with_config(enc_dim=16.0), **members): "enc_dim 16.0",
        saved("drop.npz", __meta__=with_config(dropout=5), **members): "dropout 5",
        saved("nan.npz", __meta__=with_config(),
              **{**members, "out.bias": np.full_like(members["out.bias"], np.nan)}):
            "out.bias holds NaN or inf",
        # shapes are checked before the weights are made: this one would need ~26 GB
        saved("huge.npz", __meta__=with_config(enc_dim=40_000), **members):
            r"has shape .* expected",
        saved("deep.npz", __meta__=with_config(enc_layers=20_000), **members):
            "its enc_layers is 20000; it holds 1 encoder layers",
    }  # fmt: skip
    (tmp_path / "text.npz").write_text("hello")
    (tmp_path / "cut.npz").write_bytes((tmp_path / "ok.npz").read_bytes()[:300])
    cases[tmp_path / "text.npz"] = "not an .npz archive"
    cases[tmp_path / "cut.npz"] = "not an .npz archive"
    for path, fault in cases.items():
        with pytest.raises(InputFileError, match=f"{path.name}.*{fault}"):
            SpeechTransducer.load(path)


@pytest.mark.parametrize("durations", [(), (0, 1, 2)])
def test_a_few_steps_of_the_losses_fit_a_tiny_task(durations):
    """The encoder sees which character to emit (a one-hot per frame): training must learn it."""
    torch.manual_seed(1)
    model = SpeechTransducer(enc_dim=32, pred_dim=16, joint_dim=32, durations=durations)
    targets = torch.randint(3, 29, (8, 5))
    x = torch.full((8, 20, 191), -10.0)
    for u in range(5):  # character u at frames 4u .. 4u+3
        x[
            torch.arange(8)[:, None], torch.arange(4 * u, 4 * u + 4)[None, :], targets[:, u, None]
        ] = 0.0
    lengths, target_lengths = torch.full((8,), 20), torch.full((8,), 5)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(150):
        enc, enc_len = model.encode(x, lengths)
        pred = model.predict_sequence(targets)
        logits = model.joint_after_projection(
            model.enc_proj(enc)[:, :, None], model.pred_proj(pred)[:, None]
        )
        if durations:
            loss = tdt_loss(logits, targets, enc_len, target_lengths, 0, durations)
        else:
            loss = rnnt_loss(logits, targets, enc_len, target_lengths, 0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0], losses[::10]
    model.eval()
    with torch.no_grad():
        enc, enc_len = model.encode(x, lengths)
        hyps = greedy_decode(model, enc, enc_len, GreedyOptions(durations=durations or None))
    right = sum(list(h.tokens) == targets[i].tolist() for i, h in enumerate(hyps))
    assert right >= 6, [h.tokens for h in hyps]


def test_an_empty_batch_or_input_encodes_to_nothing():
    """B = 0 or T = 0 (a shard with no utterances, or no frames): empty encoder outputs, as
    `greedy_decode` takes them (packing raised "Cannot pack empty tensors")."""
    model = SpeechTransducer(enc_dim=32, pred_dim=8, joint_dim=8, bidirectional=True).eval()
    for B, T in ((0, 15), (2, 0)):
        enc, lengths = model.encode(torch.zeros(B, T, 191), torch.zeros(B, dtype=torch.int64))
        assert enc.shape == (B, 0 if T == 0 else 8, 32) and lengths.tolist() == [0] * B
        hyps = greedy_decode(model, enc, lengths, GreedyOptions())
        assert [h.tokens for h in hyps] == [()] * B


def test_encoder_output_does_not_depend_on_the_batch():
    """A BiLSTM's backward direction must start at each utterance's own end, not in the padding."""
    torch.manual_seed(2)
    model = SpeechTransducer(enc_dim=32, pred_dim=8, joint_dim=8, bidirectional=True).eval()
    short, long = torch.randn(1, 13, 191).log_softmax(-1), torch.randn(1, 40, 191).log_softmax(-1)
    batch = torch.zeros(2, 40, 191)
    batch[0, :13], batch[1] = short[0], long[0]
    with torch.no_grad():
        alone, n_alone = model.encode(short, torch.tensor([13]))
        both, n_both = model.encode(batch, torch.tensor([13, 40]))
    assert n_alone.tolist() == [7] and n_both.tolist() == [7, 20]
    torch.testing.assert_close(both[0, :7], alone[0], atol=1e-5, rtol=1e-5)
    # whatever the padding holds: NaN * 0 was NaN, and the odd length (13) stacks frame 12 with
    # the first padded one, so the whole utterance went NaN through the backward direction
    for pad in (float("nan"), 100.0, float("inf")):
        batch[0, 13:] = pad
        with torch.no_grad():
            padded, _ = model.encode(batch, torch.tensor([13, 40]))
        torch.testing.assert_close(padded[0, :7], alone[0], atol=1e-5, rtol=1e-5)
    # within the lengths, a value that is no log-prob is named
    batch[1, 5, 3] = float("nan")
    with pytest.raises(DecodeInputError, match=r"log_probs\[1, 5, 3\] = nan \(frame within "):
        model.encode(batch, torch.tensor([13, 40]))


@pytest.mark.parametrize(
    "lengths, match",
    [
        (torch.tensor([50, 3]), r"lengths must lie in \[0, T=41\].*lengths\[0\] = 50"),
        (torch.tensor([41, -1]), r"lengths must lie in \[0, T=41\].*lengths\[1\] = -1"),
        (torch.tensor([41.0, 3.0]), "lengths must be an integer tensor"),
        (torch.tensor([41]), r"lengths must be an integer tensor \(B,\) = \(2,\)"),
        ([41, 3], "lengths must be an integer tensor"),
    ],
)
def test_encode_refuses_lengths_outside_the_frames(lengths, match):
    """A length past T failed deep in packing ("start (24) + length (1) exceeds dimension
    size"), a length of -1 silently encoded an empty utterance, a list an AttributeError."""
    model = SpeechTransducer(enc_dim=32, pred_dim=8, joint_dim=8, bidirectional=True).eval()
    with pytest.raises(DecodeInputError, match=match):
        model.encode(torch.randn(2, 41, 191).log_softmax(-1), lengths)


def test_encode_takes_float64_log_probs():
    """NumPy's float64 log-probs (torch.from_numpy) failed in the first linear layer with
    "mat1 and mat2 must have the same dtype"."""
    model = SpeechTransducer(enc_dim=32, pred_dim=8, joint_dim=8, bidirectional=True).eval()
    x = torch.randn(2, 41, 191).log_softmax(-1)
    with torch.no_grad():
        want, _ = model.encode(x, torch.tensor([41, 30]))
        got, _ = model.encode(x.double(), torch.tensor([41, 30]))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want)


def test_a_weight_beyond_float16_saves_as_float32_and_loads(tmp_path):
    """`save` stored every weight as float16: a value beyond its range (65504) became inf and
    the file saved without a word was one `load` refuses ('holds NaN or inf'). Such a weight is
    now stored as float32; a NaN weight is refused when saving, naming it; a bfloat16 model
    saves (NumPy has no bfloat16)."""
    import numpy as np

    from wfstdecode.errors import OptionsError

    model = SpeechTransducer(enc_dim=16, pred_dim=8, joint_dim=12, enc_layers=1).eval()
    with torch.no_grad():
        model.out.bias[0] = 1e5
    model.save(tmp_path / "big.npz")
    loaded = SpeechTransducer.load(tmp_path / "big.npz")
    assert float(loaded.out.bias[0].detach()) == 1e5
    torch.testing.assert_close(loaded.out.weight, model.out.weight.half().float())
    with np.load(tmp_path / "big.npz") as z:
        assert z["out.bias"].dtype == np.float32 and z["out.weight"].dtype == np.float16
    with torch.no_grad():
        model.out.bias[1] = float("nan")
    with pytest.raises(OptionsError, match="out.bias holds NaN"):
        model.save(tmp_path / "nan.npz")
    assert not (tmp_path / "nan.npz").exists()
    with torch.no_grad():
        model.out.bias[:2] = 0.5
    model.bfloat16().save(tmp_path / "bf16.npz")
    assert float(SpeechTransducer.load(tmp_path / "bf16.npz").out.bias[0].detach()) == 0.5

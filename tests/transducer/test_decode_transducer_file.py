"""``wfstdecode decode-transducer``: a saved encoder output (or hama posteriors) decoded with a
shipped or saved transducer, greedy or beam; bad files get errors naming them."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from wfstdecode.errors import InputFileError
from wfstdecode.models import load_speech_transducer
from wfstdecode.transducer import BeamOptions, GreedyOptions, beam_decode, greedy_decode
from wfstdecode.transducer.files import decode_transducer_npz


def posteriors(seed=0, batch=3, frames=60):
    gen = np.random.default_rng(seed)
    logits = gen.normal(size=(batch, frames, 191)).astype(np.float32) * 3
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return log_probs, np.array([frames, frames - 17, 9])


def run(*args):
    cmd = [sys.executable, "-m", "wfstdecode.cli", "decode-transducer", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.mark.parametrize("kind", ["rnnt", "tdt"])
def test_encoder_output_file_equals_the_library(tmp_path, kind):
    model = load_speech_transducer(kind)
    log_probs, lengths = posteriors()
    with torch.inference_mode():
        enc, enc_len = model.encode(torch.from_numpy(log_probs), torch.from_numpy(lengths))
    np.savez(tmp_path / "enc.npz", enc=enc.numpy(), lengths=enc_len.numpy(), ids=["a", "b", "c"])
    np.savez(tmp_path / "lp.npz", log_probs=log_probs, lengths=lengths)
    durations = model.durations or None
    options = BeamOptions("alsd", beam_size=3, nbest=2, durations=durations)
    want = beam_decode(model, enc, enc_len, options)
    got = decode_transducer_npz(
        model, tmp_path / "enc.npz", BeamOptions("alsd", beam_size=3, nbest=2)
    )
    assert [[h.tokens for h in hyps] for hyps in got.hypotheses] == [
        [h.tokens for h in hyps] for hyps in want
    ]
    assert got.ids == ["a", "b", "c"] and got.wer is None
    from_posteriors = decode_transducer_npz(model, tmp_path / "lp.npz")
    greedy = greedy_decode(model, enc, enc_len, GreedyOptions(durations=durations))
    assert [h[0].tokens for h in from_posteriors.hypotheses] == [h.tokens for h in greedy]

    out = run(kind, tmp_path / "enc.npz", "--beam-size", 3, "--nbest", 2, "--json")
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["id"], r["rank"]) for r in records] == [(u, k) for u in "abc" for k in (1, 2)]
    assert [r["tokens"] for r in records] == [list(h.tokens) for hyps in want for h in hyps]
    assert all(("durations" in r) == (kind == "tdt") for r in records)  # tokens or none
    # ranked by score per token, which the notes say (the scores shown are the raw ones)
    assert all("ranked by score per token (length_norm)" in r["notes"] for r in records)


def test_saved_model_texts_and_wer(tmp_path):
    model = load_speech_transducer("rnnt")
    model.save(tmp_path / "mine.npz")
    log_probs, lengths = posteriors(1)
    np.savez(tmp_path / "lp.npz", log_probs=log_probs, lengths=lengths, texts=["x", "y", "z"])
    out = run(tmp_path / "mine.npz", tmp_path / "lp.npz")
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 3 and "WER" in out.stderr


def test_bad_files_and_options(tmp_path):
    np.savez(tmp_path / "none.npz", x=np.zeros(3))
    with pytest.raises(InputFileError, match="none.npz.*no 'enc' or 'log_probs'"):
        decode_transducer_npz(load_speech_transducer("rnnt"), tmp_path / "none.npz")
    np.savez(tmp_path / "len.npz", enc=np.zeros((2, 5, 4), np.float32), lengths=[5, 9])
    with pytest.raises(InputFileError, match=r"lengths\[1\] = 9 is outside 0..T=5"):
        decode_transducer_npz(load_speech_transducer("rnnt"), tmp_path / "len.npz")
    out = run("rnnt", tmp_path / "len.npz", "--nbest", 2)
    assert out.returncode != 0 and "--nbest and --beam-algorithm need --beam-size" in out.stderr
    out = run("rnnt", tmp_path / "len.npz", "--nbest", 0)
    assert out.returncode == 2 and "--nbest must be >= 1; got 0" in out.stderr
    np.savez(tmp_path / "both.npz", enc=np.zeros((1, 5, 4), np.float32),
             log_probs=np.zeros((1, 9, 191), np.float32))  # fmt: skip
    with pytest.raises(InputFileError, match="both.npz.*both 'enc'.*and 'log_probs'"):
        decode_transducer_npz(load_speech_transducer("rnnt"), tmp_path / "both.npz")
    out = run(tmp_path / "missing.npz", tmp_path / "len.npz")
    assert out.returncode != 0 and "missing.npz" in out.stderr and "Traceback" not in out.stderr


def test_a_tdt_record_has_durations_even_without_tokens(tmp_path):
    model = load_speech_transducer("tdt")
    enc = np.zeros((2, 3, model.config["enc_dim"]), np.float32)
    np.savez(tmp_path / "enc.npz", enc=enc, lengths=np.array([0, 3]))
    out = run("tdt", tmp_path / "enc.npz", "--json")
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert records[0]["tokens"] == [] and records[0]["durations"] == []
    assert all("durations" in r for r in records)


def test_a_shipped_name_in_another_case_and_a_closed_stdout_are_said(tmp_path):
    path = tmp_path / "p.npz"
    log_probs, lengths = posteriors()
    np.savez(path, log_probs=log_probs, lengths=lengths)
    out = run("RNNT", path)
    assert out.returncode == 2 and "'rnnt' and 'tdt' (lower case)" in out.stderr
    shell = '"$0" -m wfstdecode.cli decode-transducer rnnt "$1" >&-'  # stdout closed
    closed = subprocess.run(["sh", "-c", shell, sys.executable, str(path)], capture_output=True,
                            text=True)  # fmt: skip
    assert closed.returncode == 2 and "standard output is closed" in closed.stderr


@pytest.mark.parametrize(
    "flags, options",
    [
        (["--beam-algorithm", "wind", "--window", "2"], dict(algorithm="wind", window=2)),
        (["--beam-algorithm", "tokenwise", "--segment-size", "5", "--no-length-norm"],
         dict(algorithm="tokenwise", segment_size=5, length_norm=False)),
        (["--max-tokens", "3", "--max-symbols-per-frame", "1"],
         dict(algorithm="alsd", max_tokens=3, max_symbols_per_frame=1)),
        (["--beam-algorithm", "maes", "--maes-steps", "1", "--expansion-beta", "0",
          "--expansion-gamma", "0.5"],
         dict(algorithm="maes", maes_steps=1, expansion_beta=0, expansion_gamma=0.5)),
    ],
)  # fmt: skip
def test_beam_parameters_on_the_command_line_are_the_librarys(tmp_path, flags, options):
    model = load_speech_transducer("rnnt")
    log_probs, lengths = posteriors(2)
    with torch.inference_mode():
        enc, enc_len = model.encode(torch.from_numpy(log_probs), torch.from_numpy(lengths))
    np.savez(tmp_path / "enc.npz", enc=enc.numpy(), lengths=enc_len.numpy())
    want = beam_decode(model, enc, enc_len, BeamOptions(beam_size=3, nbest=3, **options))
    out = run("rnnt", tmp_path / "enc.npz", "--beam-size", 3, "--nbest", 3, "--json", *flags)
    assert out.returncode == 0, out.stderr
    got = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["tokens"], r["score"]) for r in got] == [
        (list(h.tokens), round(h.score, 4)) for hyps in want for h in hyps
    ]


def test_beam_parameters_need_the_beam_and_their_algorithm(tmp_path):
    np.savez(tmp_path / "enc.npz", enc=np.zeros((1, 5, 4), np.float32))
    out = run("rnnt", tmp_path / "enc.npz", "--window", 4)
    assert out.returncode != 0 and "--window: beam search options; they need --beam-size" in (
        out.stderr
    )
    out = run("rnnt", tmp_path / "enc.npz", "--no-length-norm")
    assert out.returncode != 0 and "--no-length-norm: beam search" in out.stderr
    out = run("rnnt", tmp_path / "enc.npz", "--beam-size", 2, "--window", 4)
    assert out.returncode != 0 and "window=4 is only used by algorithm 'wind'" in out.stderr
    assert "Traceback" not in out.stderr


def test_values_nan_inf_or_beyond_float32_are_named(tmp_path):
    """A float64 file's 1e300 became inf when read as float32 and was said as 'contains inf',
    which the file does not hold (with a NumPy overflow warning); now named as beyond float32.
    A -1e300 log-prob is -inf, a log-prob of 0 probability, and decodes."""
    model = load_speech_transducer("rnnt")
    cases = [("enc", 2, np.nan, r"enc\[0, 2\] contains NaN"),
             ("enc", 3, -np.inf, r"enc\[0, 3\] contains inf"),
             ("enc", 1, 1e300, r"enc\[0, 1, 1\] = 1e\+300 is beyond float32's range"),
             ("log_probs", 4, 1e300, r"log_probs\[0, 4, 1\] = 1e\+300 is beyond")]  # fmt: skip
    for name, t, value, match in cases:
        data = np.zeros((1, 6, 4 if name == "enc" else 191))
        data[0, t, 1] = value
        np.savez(tmp_path / "x.npz", **{name: data})
        with pytest.raises(InputFileError, match=match):
            decode_transducer_npz(model, tmp_path / "x.npz")
    log_probs, lengths = posteriors(batch=1, frames=8)
    log_probs = log_probs.astype(np.float64)
    log_probs[0, 3, 5] = -1e300
    np.savez(tmp_path / "x.npz", log_probs=log_probs, lengths=lengths[:1])
    assert decode_transducer_npz(model, tmp_path / "x.npz").texts is not None

"""tools/train_transducer.py's train stage on a tiny made-up corpus: arguments and data checked
before any work, and weights that record a better held-out CER are not replaced by a worse run
(by default the weights are the shipped models')."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "train_transducer.py"
TEXTS = ["the cat sat", "a dog ran off", "hello there friend", "we can go"] * 2


def _save_set(path: Path, texts: list[str], rng) -> None:
    """A set as the corpus stage writes it: hama log-probs end to end, offsets, texts."""
    feats = []
    for i, _ in enumerate(texts):
        x = rng.normal(size=(30 + 4 * i, 191))
        feats.append((x - np.log(np.exp(x).sum(-1, keepdims=True))).astype(np.float16))
    np.savez(path, features=np.concatenate(feats) if feats else np.zeros((0, 191), np.float16),
             offsets=np.cumsum([0] + [len(f) for f in feats]),
             texts=np.array(texts, dtype=str))  # fmt: skip


def _work(tmp_path, train=TEXTS, dev=TEXTS[:3]) -> Path:
    rng = np.random.default_rng(0)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    _save_set(work / "train.npz", train, rng)
    _save_set(work / "heldout_voices.npz", dev, rng)
    return work


def _train(work: Path, save: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(TOOL), "train", "--work", str(work), "--save-dir", str(save),
         "--minutes", "0.002", *extra],
        capture_output=True, text=True, timeout=300,
        env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_a_run_keeps_weights_that_record_a_better_cer_unless_told(tmp_path):
    work, save = _work(tmp_path), tmp_path / "weights"
    first = _train(work, save)
    assert first.returncode == 0, first.stderr
    model = save / "rnnt.npz"
    with np.load(model) as z:
        meta = json.loads(str(z["__meta__"]))
    meta["trained"]["dev_cer"] = -1.0  # no run can beat it
    with np.load(model) as z:
        members = {k: z[k] for k in z.files if k != "__meta__"}
    np.savez(model, __meta__=np.array(json.dumps(meta)), **members)
    kept = model.read_bytes()
    second = _train(work, save)
    assert second.returncode == 0, second.stderr
    assert "stays unless a model beats its dev CER" in second.stdout
    assert model.read_bytes() == kept
    assert json.loads((work / "train_rnnt.json").read_text())  # the run's log
    assert _train(work, save, "--replace").returncode == 0
    assert model.read_bytes() != kept


@pytest.mark.parametrize(
    ("args", "sets", "message"),
    [
        (["--minutes", "0"], {}, "--minutes: 0 is not >= 0.001"),
        (["--batch", "0"], {}, "--batch: 0 is not >= 1"),
        (["--dropout", "1"], {}, "--dropout: 1 is not in [0, 1)"),
        ([], {"dev": []}, "heldout_voices.npz holds no utterances"),
        ([], {"train": []}, "train.npz holds no utterances"),
        ([], {"train": ["The Cat 2"]}, "no token for: '2CT'"),
        ([], {"dev": ["Sat", "the cat"]}, "heldout_voices.npz: a text has characters"),
        (["--batch", "1.5"], {}, "invalid int value: '1.5'"),
        (["--lr", "inf"], {}, "--lr: inf is not a finite number"),
        (["--ctc-weight", "inf"], {}, "--ctc-weight: inf is not a finite number"),
    ],
)
def test_bad_arguments_and_data_are_refused_before_training(tmp_path, args, sets, message):
    work, save = _work(tmp_path, **sets), tmp_path / "weights"
    (work / "train_rnnt.json").write_text("[earlier log]")
    run = _train(work, save, *args)
    assert run.returncode != 0 and message in run.stderr
    assert (work / "train_rnnt.json").read_text() == "[earlier log]"
    assert not save.exists()


@pytest.mark.parametrize("kind", ["file", "sub of a file", "weights a folder"])
def test_a_save_dir_that_cannot_hold_the_weights_is_refused_before_training(tmp_path, kind):
    """The save folder was made (and the weights written) only when the first epoch ended: a
    --save-dir naming a file failed there, a whole epoch later, with a traceback and no log."""
    work, mine = _work(tmp_path), tmp_path / "mine"
    mine.write_text("a user's file")
    save = {"file": mine, "sub of a file": mine / "sub", "weights a folder": tmp_path / "w"}[kind]
    if kind == "weights a folder":
        (save / "rnnt.npz").mkdir(parents=True)
    run = _train(work, save)
    assert run.returncode != 0 and "--save-dir" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert '"step"' not in run.stdout  # no epoch ran
    assert mine.read_text() == "a user's file"


def test_a_file_in_the_save_dir_that_is_not_its_weights_is_not_written_over(tmp_path):
    """A --save-dir/rnnt.npz that records no training run (unreadable, or some other file) was
    taken as 'nothing recorded' and replaced without --replace: a user's file lost."""
    work, save = _work(tmp_path), tmp_path / "weights"
    save.mkdir()
    (save / "rnnt.npz").write_bytes(b"a user's own file")
    run = _train(work, save)
    assert run.returncode != 0 and "records no training run" in run.stderr, run.stderr
    assert (save / "rnnt.npz").read_bytes() == b"a user's own file"
    assert '"step"' not in run.stdout  # refused before training

#!/usr/bin/env python
"""Train the shipped character RNN-T and TDT on synthetic speech over hama's frozen phone model.

Stages (each reads what the previous wrote under --work):

``corpus``: sentences of Debian fortunes (the LM training side of tools/make_demo_lm.py's split:
the 60 test sentences of wfstdecode/data and every held-out sentence are excluded), 3-16 words,
spoken by the training voices (flite kal, kal16, awb, rms; espeak-ng en-us, en-gb,
en-gb-scotland, en-029) with speed perturbation (0.9 / 1.0 / 1.1) and white noise (SNR 10-30 dB,
half of the utterances), until --hours of audio; each utterance's hama log-probs are kept.
Held-out sets: the 60 test sentences spoken by voices never used in training (flite slt,
espeak-ng en-gb-x-rp) and by training voices (unseen sentences), and the LibriVox clips.

``train --kind rnnt|tdt``: `SpeechTransducer` trained with the project's own `rnnt_loss` /
`tdt_loss` (durations 0-4) plus an auxiliary CTC loss on the encoder (--ctc-weight), Adam,
length-bucketed batches, for --minutes of CPU time; the
weights with the best held-out CER are written (float16 .npz) to wfstdecode/data/transducer/ (or
--save-dir), unless the weights there record a lower held-out CER (--replace: write anyway).

``eval``: greedy WER/CER and label statistics of the shipped models on the held-out sets.

    python tools/train_transducer.py corpus --hours 1.5
    OMP_NUM_THREADS=1 python tools/train_transducer.py train --kind rnnt --minutes 15 &
    OMP_NUM_THREADS=1 python tools/train_transducer.py train --kind tdt --minutes 15
    python tools/train_transducer.py eval --out bench/transducer_speech.md
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parent.parent
TRAIN_VOICES = ["kal", "kal16", "awb", "rms", "espeak:en-us", "espeak:en-gb",
                "espeak:en-gb-scotland", "espeak:en-029"]  # fmt: skip
HELDOUT_VOICES = ["slt", "espeak:en-gb-x-rp"]
CHAR_SET = set("abcdefghijklmnopqrstuvwxyz' ")

_model = None


def _features(job):
    """(hama log-probs float16 [T, 191], text) of one synthesised utterance."""
    global _model
    from wfstdecode.speech.phone_model import HamaPhoneModel
    from wfstdecode.testing.speech import perturb, synthesize

    text, voice, speed, snr, seed = job
    if _model is None:
        _model = HamaPhoneModel()
    rng = np.random.default_rng(seed)
    wpm = int(rng.integers(140, 200)) if voice.startswith("espeak:") else 0
    audio = perturb(synthesize(text, voice, words_per_minute=wpm), rng, speed, snr)
    return _model.log_probs_of(audio).astype(np.float16), text


def _run_jobs(jobs, processes):
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        return pool.map(_features, jobs, chunksize=8)


def _save(path: Path, items) -> None:
    from wfstdecode.safe_io import replacing

    feats = [f for f, _ in items]
    with replacing(path) as out:
        np.savez(out, features=np.concatenate(feats),
                 offsets=np.cumsum([0] + [len(f) for f in feats]),
                 texts=np.array([t for _, t in items]))  # fmt: skip


def load_set(path: Path) -> list[tuple[np.ndarray, str]]:
    if not path.is_file():
        raise SystemExit(f"{path}: no such file (make the sets with the corpus stage)")
    with np.load(path) as z:
        f, o, t = z["features"], z["offsets"], z["texts"]
    return [(f[o[i] : o[i + 1]].astype(np.float32), str(t[i])) for i in range(len(t))]


def _write_text(path: Path, text: str) -> None:
    from wfstdecode.safe_io import replacing

    with replacing(path) as out:
        out.write(text.encode())


def corpus(args) -> None:
    from make_demo_lm import normalise, read_fortunes, split_sentences

    test = [
        s.strip() for s in (ROOT / "wfstdecode/data/test_sentences.txt").read_text().splitlines()
    ]
    fortunes = read_fortunes(Path("/usr/share/games/fortunes"))
    sents = sorted({" ".join(w) for _, body in fortunes for s in split_sentences(body)
                    if (w := normalise(s))})  # fmt: skip
    # The same held-out share as make_demo_lm (seed 20240611), so no training sentence was held out.
    heldout = set(random.Random(20240611).sample(sents, round(0.03 * len(sents))))
    train = [
        s for s in sents if s not in heldout and 3 <= len(s.split()) <= 16 and set(s) <= CHAR_SET
    ]
    rng = random.Random(args.seed)
    rng.shuffle(train)
    jobs, seconds = [], 0.0
    for i, text in enumerate(train):
        if seconds >= args.hours * 3600:
            break
        voice = rng.choice(TRAIN_VOICES)
        snr = rng.uniform(10, 30) if rng.random() < 0.5 else None
        jobs.append((text, voice, rng.choice([0.9, 1.0, 1.1]), snr, args.seed * 1_000_003 + i))
        seconds += 0.075 * len(text)  # about 13 characters per second of synthetic speech
    t0 = time.time()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    items = _run_jobs(jobs, args.jobs)
    frames = sum(len(f) for f, _ in items)
    _save(work / "train.npz", items)
    print(
        f"train: {len(items)} utterances, {frames * 0.02 / 3600:.2f} h ({time.time() - t0:.0f} s)"
    )
    for name, voices in (
        ("heldout_voices", HELDOUT_VOICES),
        ("train_voices", TRAIN_VOICES[:2] + TRAIN_VOICES[4:5]),
    ):
        jobs = [(s, v, 1.0, None, 7 + i) for v in voices for i, s in enumerate(test)]
        _save(work / f"{name}.npz", _run_jobs(jobs, args.jobs))
    from wfstdecode.speech.graph import CLIPS
    from wfstdecode.speech.phone_model import HamaPhoneModel
    from wfstdecode.speech.transcribe import read_transcripts

    model = HamaPhoneModel()
    refs = read_transcripts(CLIPS / "transcripts.tsv")
    _save(work / "librivox.npz", [(model.log_probs_of_file(CLIPS / f"{u}.wav").astype(np.float16),
                                   " ".join(w)) for u, w in refs.items()])  # fmt: skip
    _write_text(work / "corpus.json", json.dumps({"hours": frames * 0.02 / 3600, "utterances": len(items),
                                                  "seconds": time.time() - t0, "args": vars(args)}))  # fmt: skip


def _check_texts(tokens, path: Path, items) -> None:
    """Every text of a set written with the model's characters (space: the separator)."""
    for _, text in items:
        bad = sorted({c for c in text if c != " " and tokens.get(c) is None})
        if bad:
            raise SystemExit(f"{path}: a text has characters the model has no token for: "
                             f"{''.join(bad)!r} in {text!r}")  # fmt: skip


def _targets(model, texts):
    ids = [[model.tokens.id("|" if c == " " else c) for c in t] for t in texts]
    U = max(len(x) for x in ids)
    out = torch.zeros(len(ids), U, dtype=torch.int64)
    for i, x in enumerate(ids):
        out[i, : len(x)] = torch.tensor(x)
    return out, torch.tensor([len(x) for x in ids])


def _batch(items):
    """(log-probs [B, T, V], lengths, texts), padded as the toolkit pads (`pad_log_probs`)."""
    from wfstdecode.speech.phone_model import pad_log_probs

    log_probs, lengths = pad_log_probs([f for f, _ in items], items[0][0].shape[1])
    return torch.from_numpy(log_probs), torch.from_numpy(lengths), [t for _, t in items]


def greedy(model, items, batch=32):
    """Greedy hypotheses of every item and the encoder lengths."""
    from wfstdecode.transducer import GreedyOptions, greedy_decode

    options = GreedyOptions(durations=model.durations or None)
    hyps, lengths = [], []
    with torch.inference_mode():
        for lo in range(0, len(items), batch):
            x, xl, _ = _batch(items[lo : lo + batch])
            enc, enc_len = model.encode(x, xl)
            hyps += greedy_decode(model, enc, enc_len, options)
            lengths += enc_len.tolist()
    return hyps, lengths


def greedy_texts(model, items) -> list[str]:
    return [model.text(h.tokens) for h in greedy(model, items)[0]]


def error_rates(refs, hyps) -> tuple[float, float]:
    """(WER %, CER %) of text lines."""
    from wfstdecode.metrics import word_error_rate

    words = word_error_rate([r.split() for r in refs], [h.split() for h in hyps])
    return 100 * words, 100 * word_error_rate([list(r) for r in refs], [list(h) for h in hyps])


def train(args) -> None:
    from wfstdecode.models.speech_transducer import WEIGHTS, SpeechTransducer
    from wfstdecode.transducer import rnnt_loss, tdt_loss

    torch.manual_seed(args.seed)
    work = Path(args.work)
    data = load_set(work / "train.npz")
    dev = load_set(work / "heldout_voices.npz")[::3]
    for name, items in (("train.npz", data), ("heldout_voices.npz", dev)):
        if not items:  # (an empty dev set would score every model 0 % CER: "best")
            raise SystemExit(f"{work / name} holds no utterances")
    out = Path(args.save_dir or WEIGHTS) / f"{args.kind}.npz"
    best = None if args.replace or not out.exists() else _recorded_cer(out)
    if out.is_file() and best is None and not args.replace:  # (not weights this tool wrote)
        raise SystemExit(f"{out} exists and records no training run (a dev CER): not written "
                         "over; --replace to replace it")  # fmt: skip
    if best is not None:
        print(f"{out} stays unless a model beats its dev CER {best:.2f} % (--replace: always)")
    durations = (0, 1, 2, 3, 4) if args.kind == "tdt" else ()
    model = SpeechTransducer(durations=durations, bidirectional=args.encoder == "bilstm",
                             dropout=args.dropout)  # fmt: skip
    for name, items in (("train.npz", data), ("heldout_voices.npz", dev)):
        _check_texts(model.tokens, work / name, items)
    # Where the weights go, checked before any training (not at the first epoch's end).
    if out.parent.exists() and not out.parent.is_dir():
        raise SystemExit(f"--save-dir {out.parent} is not a folder")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SystemExit(f"--save-dir {out.parent}: {exc.strerror}") from None
    if out.exists() and not out.is_file():
        raise SystemExit(f"--save-dir: {out} exists and is not a file")
    if not os.access(out.parent, os.W_OK):  # (an installed package's data folder, read-only)
        raise SystemExit(f"--save-dir {out.parent} is not writable")
    # An auxiliary CTC head on the encoder (as NeMo and icefall recipes use) teaches the encoder
    # the alignment early; it is not part of the shipped model.
    ctc_head = torch.nn.Linear(model.config["enc_dim"], model.vocab_size)
    opt = torch.optim.Adam([*model.parameters(), *ctc_head.parameters()], lr=args.lr)
    data.sort(key=lambda item: len(item[0]))
    batches = [data[i : i + args.batch] for i in range(0, len(data), args.batch)]
    rng = random.Random(args.seed)
    start, step, log = time.process_time(), 0, []
    budget = args.minutes * 60 * torch.get_num_threads()
    while time.process_time() - start < budget:
        rng.shuffle(batches)
        model.train()
        total = 0.0
        for items in batches:
            x, lengths, texts = _batch(items)
            targets, target_lengths = _targets(model, texts)
            enc, enc_len = model.encode(x, lengths)
            pred = model.predict_sequence(targets)
            logits = model.joint_after_projection(
                model.enc_proj(enc)[:, :, None], model.pred_proj(pred)[:, None]
            )
            if durations:
                loss = tdt_loss(logits, targets, enc_len, target_lengths, 0, durations, sigma=0.05)
            else:
                loss = rnnt_loss(logits, targets, enc_len, target_lengths, 0)
            opt.zero_grad()
            ctc = torch.nn.functional.ctc_loss(
                ctc_head(enc).log_softmax(-1).transpose(0, 1),
                targets,
                enc_len,
                target_lengths,
                zero_infinity=True,
            )
            (loss / target_lengths.float().mean() + args.ctc_weight * ctc).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            total += loss.item()
            step += 1
        model.eval()
        wer, cer = error_rates([t for _, t in dev], greedy_texts(model, dev))
        cpu_min = (time.process_time() - start) / 60
        log.append(
            {
                "step": step,
                "loss": total / len(batches),
                "dev_wer": wer,
                "dev_cer": cer,
                "cpu_minutes": cpu_min,
            }
        )
        print(json.dumps(log[-1]), flush=True)
        if best is None or cer < best:
            best = cer
            model.save(out, {"trained": {"kind": args.kind, "steps": step, "dev_cer": cer,
                       "dev_wer": wer, "cpu_minutes": cpu_min, "command": " ".join(sys.argv),
                       "torch": torch.__version__, "machine": platform.machine()}})  # fmt: skip
    _write_text(work / f"train_{args.kind}.json", json.dumps(log, indent=1))


def _recorded_cer(path: Path) -> float | None:
    """The dev CER a weights file records of its training, if it is one that does."""
    from wfstdecode.errors import InputFileError
    from wfstdecode.models.speech_transducer import SpeechTransducer

    if not path.is_file():
        return None
    try:
        cer = SpeechTransducer.load(path).meta.get("trained", {}).get("dev_cer")
    except InputFileError:
        return None
    return float(cer) if isinstance(cer, (int, float)) else None


def _at_least(low: float, kind=float, below: float | None = None):
    """An argparse type: a ``kind`` >= ``low`` (and < ``below``)."""

    def parse(text: str):
        value = kind(text)
        if not math.isfinite(value):  # (an inf --lr or --ctc-weight: NaN weights an epoch later)
            raise argparse.ArgumentTypeError(f"{text} is not a finite number")
        if not value >= low or (below is not None and not value < below):
            bound = f"in [{low:g}, {below:g})" if below is not None else f">= {low:g}"
            raise argparse.ArgumentTypeError(f"{text} is not {bound}")
        return value

    parse.__name__ = kind.__name__  # argparse's "invalid int value"
    return parse


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("stage", choices=("corpus", "train", "eval"))
    ap.add_argument("--work", default="/tmp/transducer_work")
    ap.add_argument("--hours", type=_at_least(1e-3), default=1.5)
    ap.add_argument("--jobs", type=_at_least(1, int), default=2)
    ap.add_argument("--kind", choices=("rnnt", "tdt"), default="rnnt")
    ap.add_argument("--minutes", type=_at_least(1e-3), default=15,
                    help="CPU-time budget (per thread)")  # fmt: skip
    ap.add_argument("--batch", type=_at_least(1, int), default=16)
    ap.add_argument("--lr", type=_at_least(1e-12), default=2e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save-dir", help="where the weights go (default: the shipped ones)")
    ap.add_argument("--replace", action="store_true",
                    help="write the run's best model even if the weights there record a lower "
                         "dev CER (default: keep them unless beaten)")  # fmt: skip
    ap.add_argument("--encoder", choices=("bilstm", "lstm"), default="bilstm",
                    help="bilstm (offline; learns far faster here) or lstm (streamable)")  # fmt: skip
    ap.add_argument("--dropout", type=_at_least(0.0, below=1.0), default=0.0,
                    help="encoder dropout (training)")  # fmt: skip
    ap.add_argument("--ctc-weight", type=_at_least(0.0), default=0.3,
                    help="auxiliary CTC loss weight")  # fmt: skip
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    {"corpus": corpus, "train": train, "eval": evaluate}[args.stage](args)
    return 0


def evaluate(args) -> None:
    from wfstdecode.models import load_speech_transducer
    from wfstdecode.testing.transducer_models import (
        label_statistics,
        planted_batch,
        planted_transducer,
    )
    from wfstdecode.transducer import GreedyOptions, greedy_decode

    work = Path(args.work)
    sets = {
        name: load_set(work / f"{name}.npz")
        for name in ("heldout_voices", "train_voices", "librivox")
    }
    lines = [
        "| model | set | utterances | WER % | CER % | labels/frame | frames with ≥1 label | "
        "frames with ≥2 labels | TDT durations |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for kind in ("rnnt", "tdt"):
        model = load_speech_transducer(kind)
        for name, items in sets.items():
            hyps, lengths = greedy(model, items)
            wer, cer = error_rates([t for _, t in items], [model.text(h.tokens) for h in hyps])
            st = label_statistics(hyps, lengths)
            several = (st["labels_in_frame"][2] + st["labels_in_frame"]["3+"]) / st["frames"]
            lines.append(
                f"| {kind} | {name} | {len(items)} | {wer:.1f} | {cer:.1f} | {st['labels_per_frame']:.3f} | "
                f"{st['frames_with_labels']:.3f} | {several:.3f} | {st.get('durations', '–')} |"
            )
            print(lines[-1], flush=True)
    for kind, durs in (("rnnt", None), ("tdt", (0, 1, 2, 3, 4))):
        planted = planted_transducer(1025, 640, 640, 640, durations=durs, seed=1)
        pb = planted_batch(planted, 16, 200, seed=2)
        hyps = greedy_decode(planted, pb.enc, pb.lengths, GreedyOptions(durations=durs))
        st = label_statistics(hyps, pb.lengths.tolist())
        several = (st["labels_in_frame"][2] + st["labels_in_frame"]["3+"]) / st["frames"]
        lines.append(
            f"| planted {kind} (bench_transducer) | synthetic | 16 | – | – | {st['labels_per_frame']:.3f} | "
            f"{st['frames_with_labels']:.3f} | {several:.3f} | {st.get('durations', '–')} |"
        )
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        _write_text(args.out, report)


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark transducer greedy decoding, decoder only (the encoder output is given).

Times every algorithm on the same planted-alignment workload (`wfstdecode.testing.
transducer_models`: LSTM predictor 640, joint 640, vocabulary 1025, TDT durations 0-4) at
several batch sizes, checks that every algorithm returns the frame-looping tokens, prints a
table with speed-ups over frame-looping, and writes it as markdown with the device and command.

    python tools/bench_transducer.py --device cpu --out bench/transducer_cpu.md
    python tools/bench_transducer.py --device cuda --out bench/transducer_cuda.md
    python tools/bench_speech_ctc.py --write-npz /tmp/speech    # hama log-probs of the speech sets
    python tools/bench_transducer.py --speech /tmp/speech/flite.npz --out bench/transducer_speech_cpu.md

Beam searches against greedy: `tools/bench_transducer_beam.py`.

With ``--speech``, the workload is the shipped trained character RNN-T / TDT
(`wfstdecode.models.load_speech_transducer`) on real posteriors, and each row also reports its
word error rate against the set's transcripts.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from functools import partial

import torch
from speech_npz import speech_npz

from wfstdecode.testing.transducer_models import (
    label_statistics,
    planted_batch,
    planted_transducer,
)
from wfstdecode.transducer import BeamOptions, GreedyOptions, beam_decode, greedy_decode

TDT = (0, 1, 2, 3, 4)
CLOCKS = {"wall": time.perf_counter, "process": time.process_time}


def variants(device: str, window: int):
    """(name, model kind, options); graph modes only where CUDA is."""
    rows = [
        ("frame_looping", "rnnt", GreedyOptions("frame_looping")),
        ("label_looping", "rnnt", GreedyOptions("label_looping")),
        (f"wind (w={window})", "rnnt", GreedyOptions("wind", window=window)),
        ("tdt label_looping", "tdt", GreedyOptions("label_looping", durations=TDT)),
    ]
    if device == "cuda":
        from wfstdecode.transducer.graphs import conditional_nodes_unavailable_reason

        modes = ["loop_bodies"]
        if conditional_nodes_unavailable_reason() is None:
            modes.append("full")
        for mode in modes:
            rows += [
                (
                    f"frame_looping + graphs:{mode}",
                    "rnnt",
                    GreedyOptions("frame_looping", cuda_graphs=mode),
                ),
                (
                    f"label_looping + graphs:{mode}",
                    "rnnt",
                    GreedyOptions("label_looping", cuda_graphs=mode),
                ),
                (
                    f"wind (w={window}) + graphs:{mode}",
                    "rnnt",
                    GreedyOptions("wind", window=window, cuda_graphs=mode),
                ),
                (
                    f"tdt label_looping + graphs:{mode}",
                    "tdt",
                    GreedyOptions("label_looping", durations=TDT, cuda_graphs=mode),
                ),
            ]
    return rows


def decode_all(model, enc, lengths, order, batch_size, opts):
    """Decode every utterance in batches of ``batch_size`` (longest first); hyps in input order
    (`BeamOptions`: the best hypothesis of each)."""
    hyps = [None] * len(order)
    lengths_cpu = lengths.cpu()
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        n = int(lengths_cpu[idx.cpu()].max())  # host copy: no device sync per batch
        if isinstance(opts, BeamOptions):
            out = [h[0] for h in beam_decode(model, enc[idx, :n], lengths[idx], opts)]
        else:
            out = greedy_decode(model, enc[idx, :n], lengths[idx], opts)
        for i, h in zip(idx.tolist(), out, strict=True):
            hyps[i] = h
    return hyps


def timed(fn, device, clock) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = clock()
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return clock() - t0


def device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    return f"{model} ({torch.get_num_threads()} torch threads)"


def speech_workload(path, dev, dtype, first: int = 0):
    """The shipped trained models and their encoder outputs for a set of hama log-probs (its
    ``first`` utterances; 0: all)."""
    import numpy as np

    from wfstdecode.models import load_speech_transducer

    with np.load(path) as z:
        log_probs, lengths, texts = z["log_probs"], z["lengths"], [str(t) for t in z["texts"]]
    if first:
        log_probs, lengths, texts = log_probs[:first], lengths[:first], texts[:first]
    models, data = {}, {}
    for kind in ("rnnt", "tdt"):
        model = load_speech_transducer(kind)
        with torch.inference_mode():
            enc, enc_len = model.encode(torch.from_numpy(log_probs), torch.from_numpy(lengths))
        models[kind] = model.to(dev, dtype)
        order = torch.argsort(enc_len, descending=True).to(dev)
        data[kind] = (enc.to(dev, dtype), enc_len.to(dev), order)
    return models, data, texts


def speech_wer(model, hyps, refs) -> float:
    from wfstdecode.metrics import word_error_rate

    return 100 * word_error_rate(
        [r.split() for r in refs], [model.text(h.tokens).split() for h in hyps]
    )


def report(args, dev, command, frames, table, stats, load) -> str:
    if args.speech:
        workload = (
            f"{len(args.refs)} utterances of `{args.speech}`, {frames} encoder frames (40 ms) in "
            "all; the shipped trained character RNN-T and TDT (`wfstdecode.models`, BiLSTM encoder "
            "over hama's posteriors, LSTM predictor 192, joint 256, 29 tokens, TDT durations 0-4)"
        )
    else:
        workload = (
            f"{args.utterances} utterances, {frames} encoder frames in all (longest {args.frames}); "
            "planted-alignment models from `wfstdecode.testing.transducer_models`: LSTM predictor "
            "640, joint 640, vocabulary 1025 (blank included), TDT durations 0-4"
        )
    return (
        "# Transducer greedy decoding, decoder only\n\n"
        f"- device: {dev}, {device_name(dev)}; torch {torch.__version__}; {args.dtype}\n"
        f"- command: `{command}`\n"
        f"- workload: {workload}; batches formed longest first; the encoder "
        f"output is given, only decoding is timed; best of {args.repeats} runs after a warm-up, "
        "the runs taken round-robin over all cells.\n"
        f"- clock: {args.clock} time ("
        + (
            "CPU time of this process, less sensitive to other processes' load than elapsed time"
            if args.clock == "process"
            else "elapsed"
        )
        + f"); machine load (1-min load average when timing began): {load:.2f}.\n"
        "- cells: total milliseconds (of that clock) for all utterances and, in brackets, the speed-up over "
        "frame-looping (RNN-T, no CUDA graphs) at the same batch size. The TDT rows decode a TDT "
        "model on its own encoder outputs, so their ratio compares workloads, not only "
        'algorithms. "NOT EXACT" would mark tokens or timestamps that differ from frame-looping '
        "(TDT rows: from TDT label-looping without graphs).\n\n"
        f"{table}\n\n"
        "Label statistics of the workload (as decoded):\n\n"
        f"- RNN-T: {_rounded(stats.get('rnnt'))}\n- TDT: {_rounded(stats.get('tdt'))}\n"
    )


def _rounded(stats):
    return (
        None
        if stats is None
        else {k: round(v, 3) if isinstance(v, float) else v for k, v in stats.items()}
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--utterances", type=int, help="how many utterances (planted workload: 64 by "
                    "default; --speech: the file's first N, all by default)")  # fmt: skip
    ap.add_argument("--frames", type=int, default=200,
                    help="longest planted utterance, in encoder frames")  # fmt: skip
    ap.add_argument("--batch-sizes", default="1,4,16,32")
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per cell (best is kept)")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: leave)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        help="wall: elapsed time; process: this process's CPU time, steadier on a shared CPU "
        "(default: process on CPU, wall on CUDA)",
    )
    ap.add_argument("--out", help="markdown file to write")
    ap.add_argument("--speech", type=speech_npz, metavar="NPZ", help="the shipped trained models on these hama "
                    "log-probs (log_probs, lengths, texts), with WER")  # fmt: skip
    args = ap.parse_args(argv)
    if args.utterances is not None and args.utterances < 1:
        ap.error(f"--utterances must be at least 1; got {args.utterances}")
    if args.threads:
        torch.set_num_threads(args.threads)
    dev, dtype = args.device, getattr(torch, args.dtype)
    if args.clock is None:
        args.clock = "wall" if dev == "cuda" else "process"
    sizes = [int(b) for b in args.batch_sizes.split(",")]

    models, data, args.refs = {}, {}, None
    if args.speech:
        models, data, args.refs = speech_workload(args.speech, dev, dtype, args.utterances or 0)
    elif args.utterances is None:
        args.utterances = 64
    for kind, durs in (("rnnt", None), ("tdt", TDT)) if not args.speech else ():
        models[kind] = planted_transducer(
            1025, 640, 640, 640, durations=durs, seed=1, dtype=dtype
        ).to(dev)
        pb = planted_batch(models[kind], args.utterances, args.frames, seed=2, device=dev)
        data[kind] = (pb.enc, pb.lengths, torch.argsort(pb.lengths.cpu(), descending=True).to(dev))
    frames = int(data["rnnt"][1].sum())

    # Warm-up (and CUDA-graph capture) of every cell, then the timed runs round-robin over the
    # cells, so that load from elsewhere on the machine hits every algorithm alike.
    cells, stats, base_hyps = [], {}, {}
    for name, kind, opts in variants(dev, args.window):
        enc, lengths, order = data[kind]
        for bs in sizes:
            run = partial(decode_all, models[kind], enc, lengths, order, bs, opts)
            began = time.perf_counter()
            hyps = run()
            # Progress as it goes: a run cut short by a time limit still says how far it got.
            print(f"warm-up {name} B={bs}: {time.perf_counter() - began:.1f} s", flush=True)
            ref = base_hyps.setdefault((kind, bs), hyps)
            exact = all(
                a.tokens == b.tokens and a.timestamps == b.timestamps
                for a, b in zip(hyps, ref, strict=True)
            )
            stats.setdefault(kind, label_statistics(hyps, lengths.tolist()))
            wer = speech_wer(models[kind], hyps, args.refs) if args.refs else None
            cells.append({"name": name, "bs": bs, "run": run, "exact": exact, "best": float("inf"),
                          "wer": wer})  # fmt: skip
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    for _ in range(args.repeats):
        for cell in cells:
            cell["best"] = min(cell["best"], timed(cell["run"], dev, CLOCKS[args.clock]))
    for cell in cells:
        print(
            f"{cell['name']:40s} B={cell['bs']:<3d} {cell['best'] * 1e3:9.1f} ms  "
            f"exact={cell['exact']}"
        )
    base_time = {c["bs"]: c["best"] for c in cells if c["name"] == "frame_looping"}
    rows, wers = {}, {}
    for c in cells:
        rows.setdefault(c["name"], []).append((c["best"], c["exact"]))
        wers.setdefault(c["name"], c["wer"])
    rows = list(rows.items())

    header = "| algorithm | " + " | ".join(f"B={b}: ms (× frame-looping)" for b in sizes) + " |"
    lines = [header, "|" + "---|" * (len(sizes) + 1)]
    if args.refs:
        lines = [header[:-1] + "| WER % |", "|" + "---|" * (len(sizes) + 2)]
    for name, cells in rows:
        parts = []
        for bs, (secs, exact) in zip(sizes, cells, strict=True):
            ratio = base_time[bs] / secs
            parts.append(f"{secs * 1e3:.0f} ({ratio:.2f}×){'' if exact else ' NOT EXACT'}")
        if args.refs:
            parts.append(f"{wers[name]:.1f}")
        lines.append(f"| {name} | " + " | ".join(parts) + " |")
    table = "\n".join(lines)
    print()
    print(table)

    command = "python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])])
    if args.out:
        with open(args.out, "w") as f:
            f.write(report(args, dev, command, frames, table, stats, load))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

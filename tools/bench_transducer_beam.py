"""Benchmark transducer beam searches against greedy decoding: WER and decoding time, as the
WIND paper's Table 3 (decoder only; the encoder output is given).

Workloads, in one run: the planted-alignment models of `tools/bench_transducer.py` (LSTM
predictor 640, joint 640, vocabulary 1025; time only, no transcripts) and, per ``--speech``
file, the shipped trained character RNN-T and TDT on real hama posteriors (WER against the
file's transcripts). Rows: greedy label-looping and every beam search at beams 2/4/8, TDT
greedy and the TDT searches (standard, MAES, ALSD), or those whose name matches ``--rows``;
columns: WER and CPU time at each batch size. Every cell is run once for
its result, then timed ``--repeats`` times round-robin over all cells (best kept), so load from
elsewhere on the machine hits every row alike.

    python tools/bench_speech_ctc.py --write-npz /tmp/speech   # hama log-probs of the sets
    python tools/bench_transducer_beam.py --speech /tmp/speech/flite.npz \\
        --speech /tmp/speech/librivox.npz --out bench/transducer_beam.md

With ``--device cuda`` the cells are wall seconds (the device synchronised before and after
each), the planted data is made on the device, and each timed cell is printed as it ends, so a
run cut by a time limit still reports what it measured.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shlex
import sys
import time
from functools import partial

import torch
from bench_transducer import TDT, decode_all, device_name, speech_wer, speech_workload, timed
from speech_npz import speech_npz

import wfstdecode.transducer.beam as beam_package
from wfstdecode.testing.transducer_models import planted_batch, planted_transducer
from wfstdecode.transducer import BeamOptions, GreedyOptions


def variants(beams, segments, windows):
    """(row name, model kind, options): greedy first, then each search at each beam (WIND at
    each window)."""
    rows = [("greedy (label-looping)", "rnnt", GreedyOptions())]
    for beam in beams:
        rows += [
            (f"standard, beam {beam}", "rnnt", BeamOptions("standard", beam_size=beam)),
            *(
                (
                    f"tokenwise S={s}, beam {beam}",
                    "rnnt",
                    BeamOptions("tokenwise", beam_size=beam, segment_size=s),
                )
                for s in (segments if beam == 4 else [3])  # every segment size at beam 4
            ),
            (f"maes, beam {beam}", "rnnt", BeamOptions("maes", beam_size=beam)),
            (f"alsd, beam {beam}", "rnnt", BeamOptions("alsd", beam_size=beam)),
            *(
                (f"wind w={w}, beam {beam}", "rnnt", BeamOptions("wind", beam_size=beam, window=w))
                for w in windows
            ),
        ]
    rows.append(("TDT greedy (label-looping)", "tdt", GreedyOptions(durations=TDT)))
    for beam in beams:
        rows += [
            (f"TDT {name}, beam {beam}", "tdt", BeamOptions(name, beam_size=beam, durations=TDT))
            for name in ("standard", "maes", "alsd")
        ]
    return rows


def compiled_on_cpu(options) -> bool:
    """Whether these options' search has a compiled CPU form (`beam_package.beam_decode`): all
    beam searches have one."""
    return isinstance(options, BeamOptions)


def tensor_form(run):
    """``run()`` with the tensor searches (what CUDA runs) instead of the compiled CPU forms."""
    beam_package.COMPILED_ON_CPU = False
    try:
        return run()
    finally:
        beam_package.COMPILED_ON_CPU = True


def planted_workload(utterances, frames, device):
    models, data = {}, {}
    for kind, durs in (("rnnt", None), ("tdt", TDT)):
        models[kind] = planted_transducer(1025, 640, 640, 640, durations=durs, seed=1).to(device)
        pb = planted_batch(models[kind], utterances, frames, seed=2, device=device)
        order = torch.argsort(pb.lengths.cpu(), descending=True).to(device)
        data[kind] = (pb.enc, pb.lengths, order)
    return models, data, None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--speech", type=speech_npz, action="append", default=[], metavar="NPZ")
    ap.add_argument("--utterances", type=int, default=32, help="planted workload")
    ap.add_argument("--frames", type=int, default=200, help="planted: longest utterance")
    ap.add_argument("--beams", default="2,4,8")
    ap.add_argument("--segments", default="2,3,5", help="tokenwise segment sizes at beam 4")
    ap.add_argument("--speech-utterances", type=int, default=0, help="first N of each set (0: all)")
    ap.add_argument("--window", default="8", help="WIND's window(s), e.g. 2,4,8")
    ap.add_argument("--batch-sizes", default="1,32")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-planted", action="store_true")
    ap.add_argument("--rows", metavar="REGEX", help="only the rows whose name matches (the "
                    "greedy rows, the ratios' base, are always run)")  # fmt: skip
    ap.add_argument("--tensor-forms", action="store_true", help="also time the tensor form (the "
                    "CUDA code) of each search with a compiled CPU form, on the CPU")  # fmt: skip
    ap.add_argument("--device", default="cpu", help="cpu: CPU seconds of one core; cuda: wall")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    cuda = args.device == "cuda"
    clock = time.perf_counter if cuda else time.process_time
    torch.set_num_threads(1)  # CPU seconds of one core: comparable rows
    beams = [int(b) for b in args.beams.split(",")]
    windows = [int(w) for w in args.window.split(",")]
    segments = [int(s) for s in args.segments.split(",")]
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    workloads = (
        []
        if args.no_planted
        else [("planted", planted_workload(args.utterances, args.frames, args.device))]
    )
    workloads += [
        (
            os.path.basename(p),
            speech_workload(p, args.device, torch.float32, args.speech_utterances),
        )
        for p in args.speech
    ]
    cells = []
    for wname, (models, data, refs) in workloads:
        for name, kind, options in variants(beams, segments, windows):
            if args.rows and "greedy" not in name and not re.search(args.rows, name):
                continue
            enc, lengths, order = data[kind]
            forms = [(name, False)]
            if args.tensor_forms and compiled_on_cpu(options):
                forms.append((f"{name} (tensor form)", True))
            for (name, tensor), bs in itertools.product(forms, sizes):
                run = partial(decode_all, models[kind], enc, lengths, order, bs, options)
                if tensor:
                    run = partial(tensor_form, run)
                hyps = run()
                wer = speech_wer(models[kind], hyps, refs) if refs else None
                cells.append({"workload": wname, "name": name, "bs": bs, "run": run, "wer": wer,
                              "best": float("inf"), "frames": int(lengths.sum())})  # fmt: skip
                print(f"{wname:14s} {name:32s} B={bs:<3d} WER={wer}", flush=True)
    load = os.getloadavg()[0]
    for rep in range(args.repeats):
        for cell in cells:
            cell["best"] = min(cell["best"], timed(cell["run"], args.device, clock))
            if cuda:
                print(f"timed {rep + 1}/{args.repeats} {cell['workload']:14s} "
                      f"{cell['name']:32s} B={cell['bs']:<3d} {cell['best']:.3f} s", flush=True)  # fmt: skip
    tables = []
    for wname, _ in workloads:
        mine = [c for c in cells if c["workload"] == wname]
        greedy = {  # TDT rows against TDT greedy
            (tdt, c["bs"]): c["best"]
            for tdt in (False, True)
            for c in mine
            if c["name"] == ("TDT greedy (label-looping)" if tdt else "greedy (label-looping)")
        }
        header = "| search | WER % | " + " | ".join(f"B={b}: s (÷ greedy)" for b in sizes) + " |"
        lines = [f"### {wname} ({mine[0]['frames']} encoder frames)", "", header,
                 "|" + "---|" * (len(sizes) + 2)]  # fmt: skip
        rows = {}
        for c in mine:
            rows.setdefault(c["name"], {})[c["bs"]] = c
        for name, by_bs in rows.items():
            wer = next(iter(by_bs.values()))["wer"]
            base = [greedy[name.startswith("TDT"), b] for b in sizes]
            parts = [
                f"{by_bs[b]['best']:.2f} ({by_bs[b]['best'] / g:.2f})"
                for b, g in zip(sizes, base, strict=True)
            ]
            lines.append(
                f"| {name} | {'–' if wer is None else f'{wer:.1f}'} | " + " | ".join(parts) + " |"
            )
        tables.append("\n".join(lines))
        print("\n" + tables[-1])
    command = "python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])])
    if args.out:
        with open(args.out, "w") as f:
            f.write(
                "# Transducer beam searches against greedy: WER and "
                + ("wall time on the GPU\n\n" if cuda else "CPU time\n\n")
                + f"- command: `{command}`\n"
                f"- machine: {device_name(args.device)}; torch {torch.__version__}; 1 torch thread; "
                f"1-min load average when timing began: {load:.2f}\n"
                "- cells: "
                + ("wall seconds" if cuda else "CPU seconds (this process)")
                + " to decode the whole set, best of "
                f"{args.repeats} runs taken round-robin over all cells, and in brackets the ratio "
                "to greedy label-looping at the same batch size (TDT rows: to TDT greedy). WER of "
                "the best hypothesis (length-normalised scores, NeMo's default), no LM.\n\n"
                + "\n\n".join(tables)
                + "\n"
            )
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""Time and peak memory of decoding hostile but finite inputs next to ordinary inputs of the same
shape (issue 11: one frame of -1e10 log-probs must not cost more than an ordinary frame).

The graph is the demo TLG built from the shipped data; the ordinary input is the shipped OCR
log-probs tiled to T frames (one long text line). Hostile variants: one frame of -1e10 in every
column; one column at -1e10 in every frame; log-probs of magnitude 1e30 (unnormalised). Each case
runs in a fresh process (so peak RSS is its own), after a warm-up decode that compiles and loads
everything: the figures are the decode's wall and CPU seconds and the growth of peak RSS.

    python tools/bench_hostile_inputs.py --frames 1000 180000 --out bench/hostile_inputs.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CASES = ("ordinary", "frame_-1e10", "column_-1e10", "magnitude_1e30")


def make_input(case: str, frames: int) -> np.ndarray:
    from wfstdecode.demo import DATA

    with np.load(DATA / "ocr_emissions.npz") as z:
        lp, lengths = z["log_probs"], z["lengths"]
    line = np.concatenate([lp[b, : lengths[b]] for b in range(len(lengths))])
    reps = -(-frames // len(line))
    x = np.ascontiguousarray(np.tile(line, (reps, 1))[:frames][None], np.float32)
    if case == "frame_-1e10":
        x[0, frames // 2, :] = -1e10
    elif case == "column_-1e10":
        x[0, :, 5] = -1e10
    elif case == "magnitude_1e30":
        x *= np.float32(1e30 / max(1.0, float(-x.min())))
    return x


def child(graph_dir: str, case: str, frames: int, backend: str) -> dict:
    from wfstdecode import CtcBeamOptions, DecodingGraph, decode_ctc

    graph = DecodingGraph.load(graph_dir)
    options = CtcBeamOptions(beam=16.0, max_active=2000, acoustic_scale=2.0)
    decode_ctc(make_input("ordinary", 50), None, graph, options, backend=backend)  # compile
    x = make_input(case, frames)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    wall, cpu = time.perf_counter(), time.process_time()
    hyp = decode_ctc(x, None, graph, options, backend=backend)[0][0]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "case": case, "frames": frames, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
        "peak_rss_mb": round(rss1 / 1024, 1), "rss_growth_mb": round((rss1 - rss0) / 1024, 1),
        "words": len(hyp.words), "notes": list(hyp.notes),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, nargs="+", default=[1000, 180_000])
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--runs", type=int, default=3, help="runs per cell, taken alternately")
    ap.add_argument("--out", type=Path, help="write a markdown table here")
    ap.add_argument("--child", nargs=3, metavar=("GRAPH", "CASE", "FRAMES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], int(args.child[2]), args.backend)))
        return

    from wfstdecode.demo import DATA
    from wfstdecode.graph import build_tlg, read_lexicon
    from wfstdecode.graph.output import write_graph_dir
    from wfstdecode.symbols import SymbolTable

    with tempfile.TemporaryDirectory() as tmp:
        tokens = SymbolTable.read(DATA / "tokens.txt")
        build = build_tlg(tokens, read_lexicon(DATA / "lexicon.txt", tokens),
                          str(DATA / "lm.arpa.gz"), "compact", separator="|")  # fmt: skip
        graph_dir = write_graph_dir(build, Path(tmp) / "graph")
        best: dict = {}
        for _ in range(args.runs):
            for frames in args.frames:
                for case in CASES:
                    cmd = [sys.executable, __file__, "--backend", args.backend,
                           "--child", str(graph_dir), case, str(frames)]  # fmt: skip
                    res = json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                                    text=True).stdout.splitlines()[-1])  # fmt: skip
                    key = (frames, case)
                    if key not in best or res["cpu_s"] < best[key]["cpu_s"]:
                        best[key] = res
                    print(json.dumps(res), flush=True)
    lines = [
        "| frames | input | CPU s | wall s | peak RSS MB | RSS growth MB | words |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for (frames, case), r in sorted(best.items(), key=lambda kv: (kv[0][0], CASES.index(kv[0][1]))):
        lines.append(f"| {frames:,} | {case} | {r['cpu_s']:.3f} | {r['wall_s']:.3f} | "
                     f"{r['peak_rss_mb']:.0f} | {r['rss_growth_mb']:.0f} | {r['words']} |")  # fmt: skip
    table = "\n".join(lines)
    print(table)
    if args.out:
        import numba

        load = os.getloadavg()
        args.out.write_text(
            "# Hostile inputs: time and memory next to ordinary inputs\n\n"
            f"Command: `python {' '.join(sys.argv)}`  \n"
            f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average "
            f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end; Python "
            f"{platform.python_version()}, NumPy {np.__version__}, Numba {numba.__version__}; "
            f"backend {args.backend}, best (least CPU) of {args.runs} runs per cell taken "
            "alternately, each in a fresh process after a warm-up decode.\n\n"
            "Demo TLG (shipped data), options beam=16, max_active=2000, acoustic_scale=2; "
            "input: the shipped OCR log-probs tiled to the frame count, batch 1. Hostile inputs: "
            "`frame_-1e10` one frame of -1e10 in every column (middle frame), `column_-1e10` "
            "column 5 at -1e10 in every frame, `magnitude_1e30` every log-prob scaled to "
            "magnitudes up to 1e30.\n\n" + table + "\n"
        )


if __name__ == "__main__":
    main()

"""Peak memory of the cpu backend on one long input: does the search's memory follow the active
tokens (record collection, `CpuTuning.collect_records_at`) or the input's length?

The input is the shipped real OCR posteriors (60 lines, 3,680 frames) joined end to end and
repeated to 1, 10 and 60 minutes of 20 ms frames (3,000 / 30,000 / 180,000 frames), decoded
against the shipped TLG (compact, built once here). Each decode runs in its own process, which
reports its peak RSS (VmHWM) and its RSS just before the decode (the graph and the input
loaded, the search costs computed), so "search" is what the search itself added.
Without collection (``collect_records_at=2**62``) only the shorter inputs are run at the wide
beam: the store grows with every frame. Usage::

    python tools/bench_long_input.py --out bench/long_input.md
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "wfstdecode" / "data"
MINUTES = {1: 3_000, 10: 30_000, 60: 180_000}
NEVER = 2**62


def _rss_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(graph_path: str, frames: int, beam: float, collect_at: int) -> None:
    """One decode; prints a JSON line."""
    from wfstdecode import DecodingGraph
    from wfstdecode.ctc import CpuTuning, CtcBeamOptions, decode_ctc

    graph = DecodingGraph.load(graph_path)
    z = np.load(DATA / "ocr_emissions.npz")
    lines = [z["log_probs"][i, :n] for i, n in enumerate(z["lengths"])]
    joined = np.concatenate(lines)
    reps = -(-frames // len(joined))
    lp = np.ascontiguousarray(np.tile(joined, (reps, 1))[:frames][None], np.float32)
    opts = CtcBeamOptions(beam=beam)
    tuning = CpuTuning(num_threads=1, collect_records_at=collect_at)
    decode_ctc(lp[:, :200], None, graph, opts, tuning=tuning)  # compiled, warm
    Path("/proc/self/clear_refs").write_text("5")  # restart the peak (VmHWM) from here
    before = _rss_mb("VmRSS")
    t0, c0 = time.perf_counter(), time.process_time()
    hyp = decode_ctc(lp, None, graph, opts, tuning=tuning)[0][0]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = _rss_mb("VmHWM")
    print(json.dumps({
        "frames": frames, "beam": beam, "collect_at": collect_at, "before_mb": before,
        "peak_mb": peak, "wall_s": wall, "cpu_s": cpu, "words": len(hyp.words),
        "words_sha1": hashlib.sha1(" ".join(hyp.words).encode()).hexdigest(), "score": hyp.score,
    }))  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the markdown table here too")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        g, frames, beam, at = args.child
        child(g, int(frames), float(beam), int(at))
        return 0

    from wfstdecode.ctc import CtcBeamOptions
    from wfstdecode.graph.build_dir import build_graph_dir
    from wfstdecode.graph.lexicon import read_lexicon
    from wfstdecode.symbols import SymbolTable

    def inputs():
        tokens = SymbolTable.read(DATA / "tokens.txt")
        return tokens, read_lexicon(DATA / "lexicon.txt", tokens)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        graph_dir, _ = build_graph_dir(Path(tmp) / "graph", inputs, DATA / "lm.arpa.gz", "compact")
        beam = CtcBeamOptions().beam
        runs = [(m, beam, at) for m in MINUTES for at in (1 << 16, NEVER)]
        runs += [(m, float("inf"), 1 << 16) for m in MINUTES]
        runs += [(m, float("inf"), NEVER) for m in (1, 10)]
        for minutes, beam, at in runs:
            cmd = [sys.executable, __file__, "--child", str(graph_dir), str(MINUTES[minutes]),
                   str(beam), str(at)]  # fmt: skip
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            r["minutes"] = minutes
            rows.append(r)
            print(json.dumps(r), flush=True)

    load = os.getloadavg()
    from importlib.metadata import version

    lines = [
        "# Peak memory of the cpu backend on one long input",
        "",
        f"`python tools/bench_long_input.py --out bench/long_input.md`; {platform.machine()}, "
        f"{os.cpu_count()} cores, load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} at "
        f"the end; python {platform.python_version()}, numba {version('numba')}, numpy "
        f"{np.__version__}. Shipped OCR posteriors joined and repeated to the length, shipped "
        "TLG (compact), default options (beam 16) and beam=inf, one thread. `search MB` = peak RSS less "
        "the RSS before the decode (graph, input and warm-up already in memory); the input's "
        "search costs (a float32 copy, 116 bytes per frame) are made inside the decode and "
        "counted there.",
        "",
        "| input | frames | beam | record collection | before MB | peak MB | search MB | CPU s "
        "| words | same words as uncollected |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    ref = {(r["frames"], r["beam"]): r["words_sha1"] for r in rows if r["collect_at"] == NEVER}
    for r in rows:
        key = (r["frames"], r["beam"])
        same = "—" if r["collect_at"] == NEVER or key not in ref else (
            "yes" if ref[key] == r["words_sha1"] else "NO"
        )  # fmt: skip
        collect = "never" if r["collect_at"] == NEVER else f"at {r['collect_at']:,} records"
        lines.append(
            f"| {r['minutes']} min | {r['frames']:,} | {r['beam']:g} | {collect} | "
            f"{r['before_mb']:.0f} | {r['peak_mb']:.0f} | {r['peak_mb'] - r['before_mb']:.0f} | "
            f"{r['cpu_s']:.1f} | {r['words']:,} | {same} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

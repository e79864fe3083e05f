"""Benchmark: build TLG from a real LM with the recipes, normal vs compact topology.

Runs each build in its own process (so its peak memory is its own), reads the build.json each
writes, and writes a markdown table of time, peak memory and sizes per stage.

    python tools/bench_build_tlg.py --arpa ../shared/data/en-us.arpa.gz --out bench/build_tlg.md
    python tools/bench_build_tlg.py --recipes characters --topologies compact --kaldi  # vs Kaldi
    python tools/bench_build_tlg.py --recipes phones_cmudict --topologies compact --kaldi \\
        --out /tmp/phones.md       # (without --out the table is only printed)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPES = {
    "characters": ["graph_recipes/characters.py", "--tokens", "wfstdecode/data/tokens.txt",
                   "--separator", "|"],
    "phones_cmudict": ["graph_recipes/phones_cmudict.py"],
}  # fmt: skip


def run(recipe: str, topology: str, arpa: Path, work: Path) -> dict:
    out = work / f"{recipe}_{topology}"
    cmd = [sys.executable, *RECIPES[recipe], "--arpa", str(arpa), "--topology", topology,
           "--out", str(out), "--force"]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True)
    wall = time.perf_counter() - start
    report = json.loads((out / "build.json").read_text())
    return {"recipe": recipe, "topology": topology, "wall_s": round(wall, 1),
            "peak_rss_mb": max([s["peak_rss_mb"] for s in report["stages"]]
                               + [report.get("peak_rss_mb", 0)]),  # with the files' writing
            "fst_mb": round((out / "TLG.fst").stat().st_size / 2**20, 1), **report}  # fmt: skip


def run_kaldi(recipe: str, topology: str, arpa: Path, work: Path) -> dict:
    """The same TLG built the Kaldi way (`build_tlg_kaldi.py`), in its own process."""
    out = work / f"kaldi_{recipe}_{topology}"
    cmd = [sys.executable, "tools/build_tlg_kaldi.py", "--recipe", recipe,
           *RECIPES[recipe][1:], "--arpa", str(arpa), "--topology", topology,
           "--out", str(out)]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    stages = json.loads(done.stdout.splitlines()[-1])["stages"]
    last = next(s for s in reversed(stages) if "arcs" in s)
    return {"recipe": f"{recipe}, Kaldi way (kaldilm + kaldifst)", "topology": topology,
            "wall_s": round(wall, 1), "peak_rss_mb": max(s["peak_rss_mb"] for s in stages),
            "fst_mb": round((out / "TLG.fst").stat().st_size / 2**20, 1), "stages": stages,
            "graph": {"states": last["states"], "arcs": last["arcs"], "epsilon_arcs": None}}  # fmt: skip


def markdown(rows: list[dict], args, command: str) -> str:
    lines = [
        "# TLG build benchmark",
        "",
        f"Command: `{command}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"{time.strftime('%Y-%m-%d')}  ",
        f"LM: `{args.arpa}`",
        "",
        "| recipe | topology | wall s | peak RSS MB | TLG states | TLG arcs | ε-input arcs | TLG.fst MB |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        g = r["graph"]
        eps = "–" if g["epsilon_arcs"] is None else f"{g['epsilon_arcs']:,}"
        lines.append(f"| {r['recipe']} | {r['topology']} | {r['wall_s']} | {r['peak_rss_mb']:.0f} | "
                     f"{g['states']:,} | {g['arcs']:,} | {eps} | {r['fst_mb']} |")  # fmt: skip
    lines += ["", "Stages (states / arcs / seconds / peak RSS MB):", ""]
    for r in rows:
        stages = "; ".join(
            f"{s['stage']} "
            + (f"{s['states']:,}/{s['arcs']:,}/" if "arcs" in s else "")
            + f"{s['seconds']:.0f}s/{s.get('peak_rss_mb', 0):.0f}"
            for s in r["stages"]
        )
        lines.append(f"- {r['recipe']} {r['topology']}: {stages}")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--arpa", type=Path, default=ROOT.parent / "shared/data/en-us.arpa.gz")
    p.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    p.add_argument("--topologies", nargs="+", default=["compact", "normal"])
    p.add_argument("--work", type=Path, default=None, help="keep the graphs here")
    p.add_argument("--out", type=Path, help="markdown file to write (e.g. bench/build_tlg.md; "
                   "default: the table is only printed)")  # fmt: skip
    p.add_argument("--kaldi", action="store_true", help="also build each TLG the Kaldi way, "
                   "right after ours (kaldilm + kaldifst: pip install kaldilm kaldifst)")  # fmt: skip
    args = p.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_tlg_"))
    rows = []
    for recipe in args.recipes:
        for topology in args.topologies:
            builds = [run] + ([run_kaldi] if args.kaldi else [])
            for build in builds:  # ours, then the Kaldi way: the same load for both
                rows.append(build(recipe, topology, args.arpa.resolve(), work))
                print(json.dumps({k: rows[-1][k] for k in ("recipe", "topology", "wall_s",
                                                           "peak_rss_mb")}), flush=True)  # fmt: skip
    text = markdown(rows, args, "python " + " ".join(sys.argv))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

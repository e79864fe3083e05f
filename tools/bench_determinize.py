"""Word determinization of real lattices (`wfstdecode.compact_lattice.determinize`): its CPU time
next to the lattice pass that made the lattices, and what it does to their size.

The shipped OCR CTC posteriors (60 lines) on the character TLG of the shipped 5k-word trigram
(beam 10, max-active 10000); with ``--speech NPZ`` (from ``tools/bench_speech_ctc.py
--write-npz``) also hama's phone posteriors on the shipped speech graph (acoustic scale 1.25,
beam 12, max-active 4000). One thread, CPU seconds, best of ``--repeats``.

    python tools/bench_determinize.py --lattice-beams 4,8 [--speech /tmp/speech/flite.npz]
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "wfstdecode" / "data"


def ocr_set():
    from wfstdecode.graph import build_tlg, read_arpa, read_lexicon
    from wfstdecode.symbols import SymbolTable

    tokens = SymbolTable.read(DATA / "tokens.txt")
    lexicon = read_lexicon(DATA / "lexicon.txt", tokens)
    model = read_arpa(DATA / "lm.arpa.gz", {e.word for e in lexicon} - {"<unk>"})
    graph = build_tlg(tokens, lexicon, model, topology="compact", separator="|").graph
    with np.load(DATA / "ocr_emissions.npz") as z:
        return "ocr", graph, z["log_probs"], z["lengths"], dict(beam=10.0, max_active=10000)


def speech_set(npz: Path):
    from wfstdecode.speech.graph import load_speech_graph

    with np.load(npz) as z:
        lp, lengths = z["log_probs"], z["lengths"]
    options = dict(beam=12.0, max_active=4000, acoustic_scale=1.25)
    return "speech", load_speech_graph(verbose=False), lp, lengths, options


def best_cpu(fn, repeats: int):
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lattice-beams", default="4,8")
    ap.add_argument("--speech", type=Path, help=".npz of speech posteriors (optional)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from wfstdecode.compact_lattice import determinize
    from wfstdecode.ctc import CtcBeamOptions, ctc_lattices

    sets = [ocr_set()] + ([speech_set(args.speech)] if args.speech else [])
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.2f}, python {sys.version.split()[0]}")  # fmt: skip
    print("| data | lattice beam | lattice pass CPU s | determinize CPU s | lattice nodes / arcs "
          "| CompactLattice states / arcs | word sequences (largest lattice) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, graph, lp, lengths, options in sets:
        for beam in (float(b) for b in args.lattice_beams.split(",")):
            opts = CtcBeamOptions(lattice_beam=beam, **options)
            ctc_lattices(lp[:1], lengths[:1], graph, opts, backend="cpu", num_threads=1)

            search = functools.partial(ctc_lattices, lp, lengths, graph, opts, backend="cpu",
                                       num_threads=1)  # fmt: skip
            t_lat, lats = best_cpu(search, args.repeats)
            t_det, comp = best_cpu(lambda lats=lats: [determinize(x) for x in lats], args.repeats)
            seqs = [c.num_paths() for c in comp]
            print(f"| {name} ({len(lats)} utts) | {beam:g} | {t_lat:.3f} | {t_det:.3f} | "
                  f"{sum(x.num_nodes for x in lats):,} / {sum(x.num_arcs for x in lats):,} | "
                  f"{sum(c.num_states for c in comp):,} / {sum(c.num_arcs for c in comp):,} | "
                  f"{sum(seqs):,} ({max(seqs):,}) |")  # fmt: skip


if __name__ == "__main__":
    main()

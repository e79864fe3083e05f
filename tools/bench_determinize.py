"""Word determinization of real lattices (`wfstdecode.compact_lattice.determinize`): its CPU time
next to the lattice pass that made the lattices, and what it does to their size.

The shipped OCR CTC posteriors (60 lines) on the character TLG of the shipped 5k-word trigram
(beam 10, max-active 10000); with ``--speech NPZ`` (from ``tools/bench_speech_ctc.py
--write-npz``) also hama's phone posteriors on the shipped speech graph (acoustic scale 1.25,
beam 12, max-active 4000). One thread, CPU seconds, best of ``--repeats``.

    python tools/bench_determinize.py --lattice-beams 4,8 [--speech /tmp/speech/flite.npz]

``--quality`` instead compares what the posteriors are computed on (``CtcBeamOptions.posteriors``:
the state-level lattice, or the lattice determinized on words): WER of the one-best and of MBR
over the 10 best sequences, and how well the one-best's word confidences tell its correct words
(aligned to an identical reference word) from its errors: the mean confidence of each, the
area under the ROC curve and the normalised cross entropy (NCE; 1 is perfect, below 0 worse
than one constant confidence).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import platform
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ctc_pareto import best_cpu  # the sibling tool's best-of-N CPU timer
from speech_npz import speech_npz

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
        refs = [str(t).split() for t in z["texts"]]
        options = dict(beam=10.0, max_active=10000)
        return "ocr", graph, z["log_probs"], z["lengths"], options, refs


def speech_set(npz: Path):
    from wfstdecode.speech.graph import load_speech_graph

    with np.load(npz) as z:
        lp, lengths, refs = z["log_probs"], z["lengths"], [str(t).split() for t in z["texts"]]
    options = dict(beam=12.0, max_active=4000, acoustic_scale=1.25)
    return "speech", load_speech_graph(verbose=False), lp, lengths, options, refs


def confidence_quality(refs, hyps) -> str:
    """Mean confidence of correct / wrong one-best words, ROC AUC, NCE (module docstring)."""
    from wfstdecode.metrics import alignment

    ok, conf = [], []
    for ref, utt in zip(refs, hyps, strict=True):
        pairs = [(r, h) for r, h in alignment(ref, list(utt[0].words)) if h is not None]
        ok += [r == h for r, h in pairs]
        conf += list(utt[0].word_confidences)
    ok, conf = np.array(ok), np.clip(np.array(conf), 1e-6, 1 - 1e-6)
    good, bad = conf[ok], conf[~ok]
    auc = float(np.mean((good[:, None] > bad[None, :]) + 0.5 * (good[:, None] == bad[None, :])))
    p = ok.mean()
    h_base = -(p * np.log2(p) + (1 - p) * np.log2(1 - p))
    nce = (h_base + np.mean(np.where(ok, np.log2(conf), np.log2(1 - conf)))) / h_base
    return f"{good.mean():.3f} / {bad.mean():.3f} | {auc:.3f} | {nce:.3f}"


def quality(sets, beams: str, utts: int) -> None:
    from wfstdecode.ctc import CtcBeamOptions, decode_ctc
    from wfstdecode.metrics import word_error_rate

    print("| data | lattice beam | posteriors | one-best WER % | MBR (10) WER % | confidence "
          "correct / wrong | AUC | NCE |\n|---|---|---|---|---|---|---|---|")  # fmt: skip
    for name, graph, lp, lengths, options, refs in sets:
        lp, lengths, refs = lp[:utts], lengths[:utts], refs[:utts]
        for beam in (float(b) for b in beams.split(",")):
            for posteriors in ("lattice", "determinized"):
                opts = CtcBeamOptions(lattice_beam=beam, posteriors=posteriors, **options)
                hyps = decode_ctc(lp, lengths, graph, opts, backend="cpu")
                mbr = decode_ctc(lp, lengths, graph, dataclasses.replace(opts, mbr_candidates=10),
                                 backend="cpu")  # fmt: skip
                one = 100 * word_error_rate(refs, [h[0].words for h in hyps])
                rank = 100 * word_error_rate(refs, [h[0].words for h in mbr])
                print(f"| {name} ({len(refs)} utts) | {beam:g} | {posteriors} | {one:.2f} | "
                      f"{rank:.2f} | {confidence_quality(refs, hyps)} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lattice-beams", default="4,8")
    ap.add_argument("--speech", type=speech_npz, help=".npz of speech posteriors (optional)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quality", action="store_true", help="MBR and confidences (docstring)")
    ap.add_argument("--utts", type=int, default=60, help="--quality: the first N utterances")
    args = ap.parse_args()
    from wfstdecode.compact_lattice import determinize
    from wfstdecode.ctc import CtcBeamOptions, ctc_lattices

    sets = [ocr_set()] + ([speech_set(args.speech)] if args.speech else [])
    if args.quality:
        quality(sets, args.lattice_beams, args.utts)
        return
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.2f}, python {sys.version.split()[0]}")  # fmt: skip
    print("| data | lattice beam | lattice pass CPU s | determinize CPU s | lattice nodes / arcs "
          "| CompactLattice states / arcs | word sequences (largest lattice) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, graph, lp, lengths, options, _ in sets:
        for beam in (float(b) for b in args.lattice_beams.split(",")):
            opts = CtcBeamOptions(lattice_beam=beam, **options)
            ctc_lattices(lp[:1], lengths[:1], graph, opts, backend="cpu", num_threads=1)

            search = functools.partial(ctc_lattices, lp, lengths, graph, opts, backend="cpu",
                                       num_threads=1)  # fmt: skip
            lats, t_lat = best_cpu(search, args.repeats)
            comp, t_det = best_cpu(lambda lats=lats: [determinize(x) for x in lats], args.repeats)
            seqs = [c.num_paths() for c in comp]
            print(f"| {name} ({len(lats)} utts) | {beam:g} | {t_lat:.3f} | {t_det:.3f} | "
                  f"{sum(x.num_nodes for x in lats):,} / {sum(x.num_arcs for x in lats):,} | "
                  f"{sum(c.num_states for c in comp):,} / {sum(c.num_arcs for c in comp):,} | "
                  f"{sum(seqs):,} ({max(seqs):,}) |")  # fmt: skip


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Reproduce the shape of Fig. 6 of gpu-wfst-beam-search-ctc.txt: WER against word-boost
magnitude, for "accurate" boosting (every distinct in-vocabulary word of the references is boosted)
and "inaccurate" boosting (as many in-vocabulary words that never occur in the references).

Decodes the shipped OCR emissions against the shipped TLG with the CPU backend and writes a PNG
(needs matplotlib, a tool-only dependency) plus the table on stdout.

    python tools/plot_boosting.py --out bench/ctc_boosting_fig6.png
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from wfstdecode import DecodingGraph
from wfstdecode.ctc import CtcBeamOptions, decode_ctc
from wfstdecode.testing import word_error_rate

DATA = Path(__file__).resolve().parents[1] / "wfstdecode" / "data"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--graph", help="a DecodingGraph (default: build TLG from the shipped data)")
    ap.add_argument("--emissions", default=str(DATA / "ocr_emissions.npz"))
    ap.add_argument("--beam", type=float, default=12.0)
    ap.add_argument("--max-active", type=int, default=10000)
    ap.add_argument("--steps", type=int, default=13, help="magnitudes 0 .. beam in this many steps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="the plot (the committed one: "
                    "bench/ctc_boosting_fig6.png)")  # fmt: skip
    args = ap.parse_args(argv)

    if args.graph:
        graph = DecodingGraph.load(args.graph)
    else:
        from wfstdecode.graph import build_tlg, read_lexicon
        from wfstdecode.symbols import SymbolTable

        tokens = SymbolTable.read(DATA / "tokens.txt")
        lexicon = read_lexicon(DATA / "lexicon.txt", tokens)
        graph = build_tlg(tokens, lexicon, str(DATA / "lm.arpa.gz"), topology="compact",
                          separator="|").graph  # fmt: skip
    with np.load(args.emissions) as z:
        lp, lengths = z["log_probs"], z["lengths"]
        refs = [str(t).split() for t in z["texts"]]
    vocab = [w for w, i in graph.words if i and not w.startswith(("#", "<"))]
    present = sorted({w for r in refs for w in r} & set(vocab))
    rng = np.random.default_rng(args.seed)
    absent_pool = sorted(set(vocab) - {w for r in refs for w in r})
    absent = list(rng.choice(absent_pool, size=len(present), replace=False))
    opts = CtcBeamOptions(beam=args.beam, max_active=args.max_active)
    magnitudes = np.linspace(0.0, args.beam, args.steps)
    rows = []
    t0 = time.perf_counter()
    for m in magnitudes:
        wers = []
        for words in (present, absent):
            boosts = {w: float(m) for w in words} if m else None
            hyps = decode_ctc(lp, lengths, graph, opts, boosts, backend="cpu")
            wers.append(word_error_rate(refs, [list(h[0].words) for h in hyps]))
        rows.append((float(m), *wers))
    print(f"# {len(refs)} lines, {sum(map(len, refs))} words; {len(present)} boosted words per "
          f"scenario; beam {args.beam}, max_active {args.max_active}; "
          f"{time.perf_counter() - t0:.1f} s")  # fmt: skip
    print("| boost magnitude | WER accurate | WER inaccurate |\n|---|---|---|")
    for m, acc, inacc in rows:
        print(f"| {m:.1f} | {100 * acc:.2f} | {100 * inacc:.2f} |")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    ax.plot([r[0] for r in rows], [100 * r[1] for r in rows], "o-", label="Accurate")
    ax.plot([r[0] for r in rows], [100 * r[2] for r in rows], "s-", label="Inaccurate")
    ax.axvline(args.beam / 2, color="grey", ls=":", label="beam / 2")
    ax.set_xlabel("Boost magnitude")
    ax.set_ylabel("WER (%)")
    ax.set_title(f"Effect of boost magnitude on WER (beam {args.beam:g})")
    ax.legend()
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

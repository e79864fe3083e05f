"""What a lattice decode costs as the input grows: the shipped real OCR posteriors (60 lines,
3,680 frames) joined end to end and repeated, decoded against the shipped TLG (compact) by the
cpu backend, one thread, beam 10: the one-best alone, then with a lattice (beam 8, 10-best,
word confidences), and the lattice's word posteriors alone. CPU seconds of one run each, and the
process's peak RSS at the end. For A/B runs of two trees: ``PYTHONPATH=TREE python
tools/bench_long_lattice.py``. Usage::

    python tools/bench_long_lattice.py --repeats 1 2 4 8
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_streaming import DATA, shipped_graph


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, nargs="+", default=[1, 2, 4, 8])
    args = ap.parse_args()
    from wfstdecode.ctc import CtcBeamOptions, decode_ctc
    from wfstdecode.ctc.search import ctc_lattices

    g = shipped_graph()
    with np.load(DATA / "ocr_emissions.npz") as z:
        lp, ln = z["log_probs"], z["lengths"]
    joined = np.concatenate([lp[i, : ln[i]] for i in range(len(ln))])
    decode_ctc(joined[None, :200], None, g, CtcBeamOptions(lattice_beam=8.0, nbest=10))  # (compile)
    print("| frames | lattice arcs | one-best CPU s | lattice, 10-best, confidences CPU s "
          "| word posteriors CPU s | peak MB |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|")
    for reps in args.repeats:
        x = np.concatenate([joined] * reps)[None]
        t0 = time.process_time()
        decode_ctc(x, None, g, CtcBeamOptions(beam=10.0), backend="cpu")
        t1 = time.process_time()
        opts = CtcBeamOptions(beam=10.0, nbest=10, lattice_beam=8.0)
        decode_ctc(x, None, g, opts, backend="cpu")
        t2 = time.process_time()
        lattice = ctc_lattices(x, None, g, CtcBeamOptions(beam=10.0, lattice_beam=8.0))[0]
        t3 = time.process_time()
        lattice.word_posteriors()
        t4 = time.process_time()
        with open("/proc/self/status") as status:
            peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
        print(f"| {x.shape[1]:,} | {lattice.num_arcs:,} | {t1 - t0:.2f} | {t2 - t1:.2f} "
              f"| {t4 - t3:.2f} | {peak // 1024:,} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

"""How much a second core speeds up the CTC cpu search (issue 17): `decode_ctc` on one thread
and on ``--threads`` threads, taken alternately, best wall time of ``--repeats`` each, with the
CPU seconds and the machine's load average beside it (a busy neighbour on a small machine
takes the second core's time: read the load before the speed-up).

    python tools/bench_ctc_threads.py --speech /tmp/speech/flite.npz --beams 8,12

Without ``--speech`` it decodes the shipped OCR posteriors (60 short lines) with the shipped
character TLG; with it, every utterance of the file with the shipped speech graph.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from speech_npz import speech_npz

ROOT = Path(__file__).resolve().parents[1]


def workload(speech: Path | None):
    from wfstdecode import DecodingGraph

    if speech is None:
        from wfstdecode.graph import build_tlg, read_lexicon
        from wfstdecode.symbols import SymbolTable

        data = ROOT / "wfstdecode" / "data"
        tokens = SymbolTable.read(data / "tokens.txt")
        lexicon = read_lexicon(data / "lexicon.txt", tokens)
        graph = build_tlg(tokens, lexicon, str(data / "lm.arpa.gz"), "compact", separator="|")
        with np.load(data / "ocr_emissions.npz") as z:
            return "ocr", graph.graph, z["log_probs"], z["lengths"], 1.0, 10_000
    from wfstdecode.speech.graph import speech_graph_dir

    graph = DecodingGraph.load(speech_graph_dir(verbose=False))
    with np.load(speech) as z:
        return speech.name, graph, z["log_probs"], z["lengths"], 1.25, 4_000


def main() -> None:
    from wfstdecode.ctc import CtcBeamOptions, decode_ctc

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speech", type=speech_npz, help=".npz of speech posteriors (optional)")
    ap.add_argument("--beams", type=lambda v: [float(x) for x in v.split(",")], default=[8, 12])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=4)
    args = ap.parse_args()
    name, graph, lp, lengths, scale, max_active = workload(args.speech)
    print(f"{name}: {len(lengths)} utterances, {int(lengths.sum())} frames; {os.cpu_count()} "
          f"cores; load average {os.getloadavg()[0]:.2f} before")  # fmt: skip
    print("| beam | 1 thread: wall s / CPU s | "
          f"{args.threads} threads: wall s / CPU s | wall speed-up | load after |")  # fmt: skip
    print("|---|---|---|---|---|")
    for beam in args.beams:
        options = CtcBeamOptions(beam=beam, max_active=max_active, acoustic_scale=scale)
        counts = (1, args.threads)
        words = {}
        for n in counts:  # warm-up (Numba compilation, thread start); the same words both ways
            words[n] = [h[0].words for h in decode_ctc(lp, lengths, graph, options,
                                                       backend="cpu", num_threads=n)]  # fmt: skip
        assert words[1] == words[args.threads], "the threads changed the result"
        best: dict[int, tuple[float, float]] = {}
        for _ in range(args.repeats):
            for n in counts:
                wall, cpu = time.perf_counter(), time.process_time()
                decode_ctc(lp, lengths, graph, options, backend="cpu", num_threads=n)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                if n not in best or wall < best[n][0]:
                    best[n] = (wall, cpu)
        one, many = best[1], best[args.threads]
        print(f"| {beam:g} | {one[0]:.3f} / {one[1]:.3f} | {many[0]:.3f} / {many[1]:.3f} "
              f"| {one[0] / many[0]:.2f}x | {os.getloadavg()[0]:.2f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

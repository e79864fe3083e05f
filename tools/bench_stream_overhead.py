"""What streaming costs over decoding whole utterances: the same utterances through
`decode_ctc` at once and through `CtcStreamDecoder`, every utterance a stream, all streams fed
``--chunk`` frames per `advance` call (the results are checked equal first), with and without a
lattice beam. CPU seconds of one thread, best of ``--repeats`` taken alternately.

* ocr: the shipped real OCR posteriors (60 lines) and the shipped 5k-word LM's compact TLG;
* speech (``--speech``, from ``tools/bench_speech_ctc.py --write-npz``): the first 60 flite
  utterances through hama and the shipped 72,547-word speech graph.

    python tools/bench_stream_overhead.py --speech /tmp/speech/flite.npz --chunks 4,16,64
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_ctc_pareto  # the data sets
from speech_npz import speech_npz


def streamed(graph, options, lp, lengths, chunk):
    from wfstdecode.ctc import CpuTuning, CtcStreamDecoder

    def run():
        d = CtcStreamDecoder(graph, options, tuning=CpuTuning(num_threads=1))
        sids = [d.open() for _ in range(len(lp))]
        for t in range(0, int(lengths.max(initial=0)), chunk):
            d.advance({sid: lp[b, t : min(t + chunk, lengths[b])]
                       for b, sid in enumerate(sids) if t < lengths[b]})  # fmt: skip
        return [d.finish(sid) for sid in sids]

    return run


def main() -> None:
    from wfstdecode.ctc import CtcBeamOptions, decode_ctc

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speech", type=speech_npz)
    ap.add_argument("--chunks", default="16", help="comma-separated frames per chunk")
    ap.add_argument("--beam", type=float, default=6.0)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    chunks = [int(c) for c in args.chunks.split(",")]
    load = os.getloadavg()[0]
    print("| data | lattice | system | CPU s | x whole |\n|---|---|---|---:|---:|")
    with tempfile.TemporaryDirectory() as work:
        for s in bench_ctc_pareto.data_sets(Path(work), args.speech, 60):
            g, (lp, lengths, _) = s["graph"], s["data"]
            for lattice in (False, True):
                extra = dict(lattice_beam=8.0, nbest=10) if lattice else {}
                options = CtcBeamOptions(beam=args.beam, max_active=s["max_active"],
                                         acoustic_scale=s["scale"], **extra)  # fmt: skip

                def whole(o=options, lp=lp, n=lengths, g=g):
                    return decode_ctc(lp, n, g, o, backend="cpu", num_threads=1)

                systems = {"whole utterances": whole}
                for c in chunks:
                    systems[f"streams, {c}-frame chunks"] = streamed(g, options, lp, lengths, c)
                want = systems["whole utterances"]()
                for name, fn in systems.items():
                    if fn() != want:
                        raise AssertionError(f"{s['name']}: {name} differs from decode_ctc")
                best = dict.fromkeys(systems, float("inf"))
                for _ in range(args.repeats):
                    for name, fn in systems.items():
                        t = time.process_time()
                        fn()
                        best[name] = min(best[name], time.process_time() - t)
                for name, cpu in best.items():
                    print(f"| {s['name']} | {'yes' if lattice else 'no'} | {name} | {cpu:.4f} "
                          f"| {cpu / best['whole utterances']:.2f} |", flush=True)  # fmt: skip
    print(f"\n{platform.machine()}, {os.cpu_count()} cores, load average {load:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after; beam {args.beam:g}")  # fmt: skip


if __name__ == "__main__":
    main()

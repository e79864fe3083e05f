"""wfstdecode cpu against kaldi-decoder's FasterDecoder alone in one process, at the same search
(`KaldiFasterDecoder.like`: the same WER at every beam), on the shipped OCR posteriors (acoustic
scales 1 and 2) and hama's phone posteriors of flite speech: CPU seconds of one thread, best of
``--repeats`` taken alternately, and how many utterances get the same best words.

Until the forty-third session `bench_ctc_pareto.py` timed flashlight-text in the same process,
building its decoder (KenLM and its trie) for every beam; the C++ decoders ran up to 2.5x slower
there than here (`bench/ctc_cpu_pareto.md`), ours not. That tool now runs each decoder in a
process of its own; this one is the quicker check of the two CPU searches alone.

    python tools/bench_ctc_vs_kaldi.py --speech /tmp/speech/flite.npz
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
from bench_ctc_pareto import data_sets
from speech_npz import speech_npz


def compare(graph, lp, lengths, options, repeats: int) -> tuple[float, float, int]:
    """``(our CPU s, kaldi-decoder's CPU s, utterances with the same best words)``."""
    from wfstdecode.ctc import decode_ctc
    from wfstdecode.testing.oracles import KaldiFasterDecoder

    kaldi = KaldiFasterDecoder.like(graph, options)
    scale = options.acoustic_scale

    def ours():
        return [h[0].word_ids for h in decode_ctc(lp, lengths, graph, options, backend="cpu",
                                                  num_threads=1)]  # fmt: skip

    def theirs():
        return [tuple((kaldi.best_path(lp[b, : lengths[b]], scale) or ((),))[0])
                for b in range(len(lp))]  # fmt: skip

    same = sum(a == b for a, b in zip(ours(), theirs(), strict=True))  # (also the warm-up)
    best = [float("inf"), float("inf")]
    for _ in range(repeats):  # alternately
        for i, fn in enumerate((ours, theirs)):
            t = time.process_time()
            fn()
            best[i] = min(best[i], time.process_time() - t)
    return best[0], best[1], same


def main() -> None:
    from wfstdecode.ctc import CtcBeamOptions

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speech", type=speech_npz, help="hama posteriors .npz (bench_speech_ctc.py)")
    ap.add_argument("--speech-utts", type=int, default=60)
    ap.add_argument("--beams", default="4,6,10")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, python "
          f"{sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}; "
          f"{time.strftime('%Y-%m-%d %H:%M %Z')}")  # fmt: skip
    print("\n| data | beam | wfstdecode frames/CPU-s | kaldi-decoder | ours / kaldi | same words |")
    print("|---|---|---:|---:|---|---|")
    with tempfile.TemporaryDirectory() as work:  # (the sets as bench_ctc_pareto makes them)
        sets = data_sets(Path(work), args.speech, args.speech_utts, ocr_scales=(1.0, 2.0))
    for s in sets:
        (lp, lengths, _), frames = s["data"], int(s["data"][1].sum())
        for beam in (float(b) for b in args.beams.split(",")):
            options = CtcBeamOptions(beam=beam, max_active=s["max_active"],
                                     acoustic_scale=s["scale"])  # fmt: skip
            ours, theirs, same = compare(s["graph"], lp, lengths, options, args.repeats)
            print(f"| {s['name']} | {beam:g} | {frames / ours:,.0f} | {frames / theirs:,.0f} | "
                  f"{theirs / ours:.2f}x | {same}/{len(lp)} |", flush=True)  # fmt: skip
    print(f"# load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

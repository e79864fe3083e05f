"""decode-corpus throughput with 1 and 2 workers (Ray actors and local processes), and the graph
memory of each worker with the graph memory-mapped or read — on real posteriors:

* speech: hama phone posteriors (``--speech`` .npz files from ``tools/bench_speech_ctc.py
  --write-npz``) against the shipped 72k-word speech graph, SPEECH_OPTIONS;
* ocr: the shipped real OCR CTC posteriors against the demo's character graph (5k-word LM).

The speech sets are split into shards of ``--shard-size`` utterances, copied ``--copies`` times,
and the 60 OCR lines are one shard copied ``--ocr-copies`` times, so that decoding, not start-up,
dominates. Runs alternate between configurations and the best of
``--repeats`` is kept. Times are wall seconds of the whole ``decode_corpus`` call (workers
started, graph loaded, every shard decoded and written) on an already running local Ray;
``cpu`` is the workers' decode CPU seconds. Memory is each worker's ``/proc/self/smaps_rollup``
after its last shard (`wfstdecode.corpus.shards.worker_memory`).

    python tools/bench_corpus.py --speech /tmp/speech/flite.npz --speech /tmp/speech/librivox.npz
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from speech_npz import speech_npz

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "wfstdecode" / "data"


def split_into_shards(sources: list[Path], out: Path, shard_size: int, copies: int) -> int:
    """Shards of ``shard_size`` utterances (trimmed to their longest utterance), ``copies``
    times over; returns the number of shards."""
    out.mkdir(parents=True)
    n = 0
    for copy in range(copies):
        for src in sources:
            with np.load(src) as z:
                lp, lengths, texts = z["log_probs"], z["lengths"], z["texts"]
                tokens = z["tokens"] if "tokens" in z.files else None
            for lo in range(0, len(lp), shard_size):
                hi = min(lo + shard_size, len(lp))
                frames = int(lengths[lo:hi].max())
                arrays = {"log_probs": lp[lo:hi, :frames], "lengths": lengths[lo:hi],
                          "texts": texts[lo:hi]}  # fmt: skip
                if tokens is not None:
                    arrays["tokens"] = tokens
                np.savez(out / f"c{copy}-{src.stem}-{lo // shard_size:03d}.npz", **arrays)
                n += 1
    return n


def prepare(work: Path, speech: list[Path], shard_size: int, copies: int, ocr_copies: int) -> dict:
    from wfstdecode import DecodingGraph
    from wfstdecode.ctc import CtcBeamOptions

    sets = {}
    if speech:
        from wfstdecode.speech.graph import speech_graph_dir
        from wfstdecode.speech.transcribe import SPEECH_OPTIONS

        graph = work / "speech.npz"
        DecodingGraph.load(speech_graph_dir()).save(graph)  # re-saved: aligned members
        shards = split_into_shards(speech, work / "speech-shards", shard_size, copies)
        sets["speech"] = (graph, work / "speech-shards", SPEECH_OPTIONS, 0.02, shards)
    out = work / "ocr-graph"
    subprocess.run(
        [sys.executable, "-m", "wfstdecode.cli", "build-tlg", "--tokens", str(DATA / "tokens.txt"),
         "--lexicon", str(DATA / "lexicon.txt"), "--arpa", str(DATA / "lm.arpa.gz"),
         "--topology", "compact", "--separator", "|", "--out", str(out)],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    # One shard per copy of the 60 OCR lines: they decode ~10x faster than speech per frame.
    shards = split_into_shards([DATA / "ocr_emissions.npz"], work / "ocr-shards", 60, ocr_copies)
    ocr_options = CtcBeamOptions(beam=16.0, max_active=2000, acoustic_scale=2.0)  # the demo's
    sets["ocr"] = (out / "TLG.npz", work / "ocr-shards", ocr_options, None, shards)
    return sets


def run_once(data, executor: str, workers: int, mmap: bool, out: Path) -> dict:
    from wfstdecode.corpus import CtcCorpusDecoder, decode_corpus

    graph, shards, options, shift, _ = data
    decoder = CtcCorpusDecoder(str(graph), options, mmap=mmap, frame_shift=shift)
    if out.exists():
        shutil.rmtree(out)
    summary = decode_corpus(shards, out, decoder, workers=workers, executor=executor,
                            progress="quiet")  # fmt: skip
    assert summary.ok, summary.failed
    memory = {}
    for done in out.rglob("*.done.json"):
        record = json.loads(done.read_text())
        memory[record["worker"]] = record["worker_memory_mb"]  # files are written in order
    return {"wall": summary.wall_seconds, "cpu": summary.worker_cpu_seconds,
            "frames": summary.decoded_frames, "utterances": summary.decoded_utterances,
            "wer": summary.wer, "memory": memory}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--speech", type=speech_npz, action="append", default=[])
    parser.add_argument("--shard-size", type=int, default=15)
    parser.add_argument("--copies", type=int, default=2, help="copies of the speech shards")
    parser.add_argument("--ocr-copies", type=int, default=40, help="copies of the OCR set")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write the raw results here")
    args = parser.parse_args()

    import ray

    load_before = os.getloadavg()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    work = Path(tempfile.mkdtemp(prefix="bench_corpus_"))
    try:
        sets = prepare(work, args.speech, args.shard_size, args.copies, args.ocr_copies)
        configs = [("ray", 1), ("ray", 2), ("local", 1), ("local", 2)]
        results: dict = {}
        for name, data in sets.items():
            run_once(data, "ray", 2, True, work / "warm")  # Numba's cache, page cache
            for _ in range(args.repeats):
                for executor, workers in configs:  # alternating, best kept
                    r = run_once(data, executor, workers, True, work / "out")
                    key = (name, executor, workers)
                    if key not in results or r["wall"] < results[key]["wall"]:
                        results[key] = r
            for mmap in (True, False):
                results[(name, "memory", mmap)] = run_once(data, "ray", 2, mmap, work / "out")
        report(sets, results, load_before, args)
    finally:
        ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)


def report(sets, results, load_before, args) -> None:
    import numba
    import ray

    from wfstdecode import DecodingGraph

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"python {platform.python_version()}, ray {ray.__version__}, numba {numba.__version__}, "
          f"numpy {np.__version__}; {time.strftime('%Y-%m-%d %H:%M %Z')}")  # fmt: skip
    print()
    print("| data | executor | workers | shards | utterances | frames | wall s | worker CPU s "
          "| frames/s | speed-up | WER % |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, data in sets.items():
        for executor in ("ray", "local"):
            one = results[(name, executor, 1)]["wall"]
            for workers in (1, 2):
                r = results[(name, executor, workers)]
                print(f"| {name} | {executor} | {workers} | {data[4]} | {r['utterances']} "
                      f"| {r['frames']:,} | {r['wall']:.2f} | {r['cpu']:.2f} "
                      f"| {r['frames'] / r['wall']:,.0f} | {one / r['wall']:.2f}x "
                      f"| {100 * r['wer']:.2f} |")  # fmt: skip
    print()
    print("| data | graph MB (arrays) | graph | actor | RSS MB | PSS MB | anonymous MB "
          "| file-backed MB |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name, data in sets.items():
        size = DecodingGraph.load(data[0], mmap=True).summary()["megabytes"]
        for mmap in (True, False):
            memory = results[(name, "memory", mmap)]["memory"]
            for i, (_, m) in enumerate(sorted(memory.items())):
                print(f"| {name} | {size} | {'mapped' if mmap else 'read'} | {i + 1} "
                      f"| {m['rss']} | {m['pss']} | {m['anonymous']} | {m['file']} |")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({" ".join(map(str, k)): v for k, v in results.items()},
                                        indent=1))  # fmt: skip


if __name__ == "__main__":
    main()

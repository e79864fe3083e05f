"""Latency of streaming CTC decoding under load: N streams whose chunks arrive as Poisson
processes (the M/D/1 set-up of gpu-wfst-beam-search-ctc.txt §3.1), served by one
`CtcStreamDecoder` on the cpu backend (``--backend cuda``: the GPU; `tools/gpu_run.sh streaming`).

Each stream sends chunks of ``--chunk`` frames of the shipped real OCR posteriors (joined end to
end; a frame stands for ``--frame-shift`` seconds of audio), with exponential gaps of mean
``chunk * frame_shift`` (real time on average). The server loop takes every chunk that has
arrived, advances those streams in one call (groups of ``max_lanes``) and computes their partial
results; a chunk's latency is from its arrival to its partial result. Reported per number of
streams: latency percentiles, the frames decoded per second, and how far behind real time the
server fell. Usage::

    python tools/bench_streaming.py --streams 1 16 64 256 --seconds 20 --out bench/streaming.md
"""

from __future__ import annotations

import argparse
import heapq
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "wfstdecode" / "data"


def shipped_graph():
    from wfstdecode.graph import build_tlg, read_lexicon
    from wfstdecode.symbols import SymbolTable

    tokens = SymbolTable.read(DATA / "tokens.txt")
    lexicon = read_lexicon(DATA / "lexicon.txt", tokens)
    return build_tlg(tokens, lexicon, str(DATA / "lm.arpa.gz"), topology="compact",
                     separator="|").graph  # fmt: skip


def run(graph, frames, n_streams, args, rng) -> dict:
    from wfstdecode.ctc import CpuTuning, CtcBeamOptions
    from wfstdecode.ctc.stream import CtcStreamDecoder

    tuning = CpuTuning(num_threads=args.threads) if args.backend == "cpu" else None
    decoder = CtcStreamDecoder(graph, CtcBeamOptions(beam=args.beam), args.backend,
                               max_lanes=args.max_lanes, tuning=tuning)  # fmt: skip
    period = args.chunk * args.frame_shift
    sids = [decoder.open() for _ in range(n_streams)]
    offsets = rng.integers(0, len(frames) - args.chunk, size=n_streams)
    start = time.perf_counter()
    arrivals = [(start + rng.exponential(period), i) for i in range(n_streams)]
    heapq.heapify(arrivals)
    latencies, decoded, busy = [], 0, 0.0
    end = start + args.seconds
    cpu0 = time.process_time()
    while arrivals and arrivals[0][0] < end:
        now = time.perf_counter()
        if arrivals[0][0] > now:
            time.sleep(min(arrivals[0][0] - now, 0.005))
            continue
        ready = []
        while arrivals and arrivals[0][0] <= now:
            t_arr, i = heapq.heappop(arrivals)
            ready.append((t_arr, i))
            heapq.heappush(arrivals, (t_arr + rng.exponential(period), i))
        pieces: dict = {}  # a server behind can find two chunks of one stream: both decoded
        for _, i in ready:  # (in arrival order, end to end in one advance)
            o = int(offsets[i]) % (len(frames) - args.chunk)
            pieces.setdefault(sids[i], []).append(frames[o : o + args.chunk])
            offsets[i] = o + args.chunk
        chunks = {sid: np.concatenate(p) if len(p) > 1 else p[0] for sid, p in pieces.items()}
        t0 = time.perf_counter()
        decoder.advance(chunks)
        for sid in chunks:
            decoder.partial(sid)
        done = time.perf_counter()
        busy += done - t0
        latencies += [done - t_arr for t_arr, _ in ready]
        decoded += args.chunk * len(ready)
    wall = max(time.perf_counter() - start, args.seconds)  # the whole window, idle tail too
    lat = np.array(latencies) * 1e3
    return {
        "streams": n_streams, "chunks": len(lat), "p50": np.percentile(lat, 50),
        "p90": np.percentile(lat, 90), "p99": np.percentile(lat, 99),
        "frames_per_s": decoded / wall, "busy": busy / wall,
        "cpu_s": time.process_time() - cpu0, "wall_s": wall,
        "offered": n_streams * args.chunk / period,
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 16, 64, 256])
    ap.add_argument("--seconds", type=float, default=20.0, help="per number of streams")
    ap.add_argument("--chunk", type=int, default=16, help="frames per chunk")
    ap.add_argument("--frame-shift", type=float, default=0.04, help="seconds per frame")
    ap.add_argument("--beam", type=float, default=12.0)
    ap.add_argument("--max-lanes", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None, help="cpu backend")
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--out", help="write the markdown table here too")
    args = ap.parse_args()

    graph = shipped_graph()
    with np.load(DATA / "ocr_emissions.npz") as z:
        frames = np.concatenate([z["log_probs"][i, :n] for i, n in enumerate(z["lengths"])])
    rng = np.random.default_rng(0)
    run(graph, frames, 2, argparse.Namespace(**{**vars(args), "seconds": 1.0}), rng)  # warm-up
    rows = []
    for n in args.streams:
        r = run(graph, frames, n, args, rng)
        rows.append(r)
        print(r, flush=True)

    from importlib.metadata import version

    load = os.getloadavg()
    lines = [
        f"# Streaming latency, {args.backend} backend",
        "",
        f"`python tools/bench_streaming.py {' '.join(sys.argv[1:])}`; {platform.machine()}, "
        f"{os.cpu_count()} cores, load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} at "
        f"the end; python {platform.python_version()}, numba {version('numba')}. Shipped TLG, "
        f"beam {args.beam:g}, chunks of {args.chunk} frames = "
        f"{args.chunk * args.frame_shift:g} s arriving as Poisson processes (one per stream, "
        f"real time on average), {args.seconds:g} s per row, max_lanes {args.max_lanes}. "
        "Latency: a chunk's arrival to its stream's partial result.",
        "",
        "| streams | chunks | p50 ms | p90 ms | p99 ms | frames/s decoded | frames/s offered "
        "| server busy | CPU s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['streams']} | {r['chunks']:,} | {r['p50']:.1f} | {r['p90']:.1f} | "
            f"{r['p99']:.1f} | {r['frames_per_s']:,.0f} | {r['offered']:,.0f} | "
            f"{100 * r['busy']:.0f}% | {r['cpu_s']:.1f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

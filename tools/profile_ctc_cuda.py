#!/usr/bin/env python
"""Where a cuda CTC frame step's time goes: device time per kernel (CUPTI, through
torch.profiler's kernel trace, CUDA graphs on and off) against the wall time of the same decode.

bench_ctc's stage split puts CUDA events around each stage with graphs off, so its intervals
include the stream's waits for the host's next launch. This times the kernels themselves, as
they run in production (graphs on), so the host's share is the wall time minus the busy time.

    python tools/profile_ctc_cuda.py --tokens wfstdecode/data/tokens.txt \\
        --lexicon .gpu/en-cut.lexicon.txt --arpa .gpu/en-cut.arpa.gz --batches 1:32,512:512

(each ``B:N`` decodes N utterances in batches of B). Takes bench_ctc's graph / emission
arguments; the chrome traces go to ``--trace-dir`` when given.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_ctc  # the sibling tool: graph building and simulated emissions)


def short_name(name: str) -> str:
    """A Numba kernel's mangled name without its namespace and argument types."""
    m = re.search(r"([a-z_]+_kernel)", name)
    return m.group(1) if m else name[:60]


def kernel_table(trace_path: str) -> tuple[dict, float, float]:
    """{(category, name): [calls, microseconds]} of the GPU events in a chrome trace, the sum
    of the kernels' durations and the span from the first GPU event's start to the last's end."""
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    table: dict = collections.defaultdict(lambda: [0, 0.0])
    busy, first, last = 0.0, float("inf"), 0.0
    for e in events:
        cat = e.get("cat", "")
        if cat not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        row = table[(cat, short_name(e["name"]))]
        row[0] += 1
        row[1] += e["dur"]
        busy += e["dur"] if cat == "kernel" else 0.0
        first, last = min(first, e["ts"]), max(last, e["ts"] + e["dur"])
    return table, busy, (last - first) if table else 0.0


def profile_decode(dev_lp, lengths, graph, opts, batch, graphs, trace_path, cprofile=False):
    import dataclasses

    import torch
    from numba import cuda

    from wfstdecode.ctc import decode_ctc

    o = dataclasses.replace(opts, cuda_graphs=graphs)

    def decode_all():
        out = []
        for i in range(0, len(lengths), batch):
            out += decode_ctc(dev_lp[i : i + batch], lengths[i : i + batch], graph, o,
                              backend="cuda")  # fmt: skip
        return out

    decode_all()  # compile, allocate, capture
    cuda.synchronize()
    t0 = time.perf_counter()
    hyps = decode_all()
    plain_wall = time.perf_counter() - t0
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        t0 = time.perf_counter()
        decode_all()
        cuda.synchronize()
        wall = time.perf_counter() - t0
    prof.export_chrome_trace(trace_path)
    if cprofile:  # the host's share: where the wall time outside the kernels goes
        import cProfile
        import pstats

        host = cProfile.Profile()
        host.runcall(decode_all)
        cuda.synchronize()
        for key in ("tottime", "cumulative"):
            print(f"\n### host profile (cProfile), batch {batch}, graphs {graphs}, by {key}")
            pstats.Stats(host).sort_stats(key).print_stats(22)
    return hyps, plain_wall, wall


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--lexicon", required=True)
    ap.add_argument("--arpa", required=True)
    ap.add_argument("--batches", default="1:32,512:512", help="B:N pairs (batch size: utterances)")
    ap.add_argument("--graphs", default="auto,off", help="cuda_graphs modes to profile")
    ap.add_argument("--cprofile", action="store_true", help="also profile the host (cProfile)")
    ap.add_argument("--trace-dir", help="keep the chrome traces here")
    ap.add_argument("--utts", type=int, default=512)
    ap.add_argument("--beam", type=float, default=12.0)
    ap.add_argument("--max-active", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    # The simulated workload of tools/gpu_run.sh's ctc stage.
    sim = argparse.Namespace(topology="compact", separator="|", words_per_utt=12,
                             confusion_prob=0.3, deletion_prob=0.03, noise=2.0, peak=7.0,
                             **vars(args))  # fmt: skip
    from numba import cuda

    from wfstdecode.ctc import CtcBeamOptions, decode_ctc

    print("# ncu:", shutil.which("ncu"), "nsys:", shutil.which("nsys"))
    graph, model = bench_ctc.build(sim)
    _, lp, lengths = bench_ctc.emissions(graph, None, sim, args.seed + 1, model)
    opts = CtcBeamOptions(beam=args.beam, max_active=args.max_active)
    dev = cuda.to_device(lp)
    cpu = decode_ctc(lp, lengths, graph, opts, backend="cpu")
    trace_dir = args.trace_dir or tempfile.mkdtemp()
    for pair in args.batches.split(","):
        batch, n = (int(x) for x in pair.split(":"))
        for graphs in args.graphs.split(","):
            path = os.path.join(trace_dir, f"ctc_b{batch}_graphs_{graphs}.json")
            hyps, plain, wall = profile_decode(dev[:n], lengths[:n], graph, opts, batch, graphs,
                                               path, args.cprofile)  # fmt: skip
            same = sum(a[0].words == b[0].words for a, b in zip(hyps, cpu[:n], strict=False))
            table, busy, span = kernel_table(path)
            steps = sum(c for (cat, name), (c, _) in table.items() if name == "expand_kernel")
            frames = int(lengths[:n].sum())
            print(f"\n## batch {batch}, {n} utterances ({frames} frames), CUDA graphs {graphs}: "
                  f"wall {1e3 * plain:.0f} ms unprofiled, {1e3 * wall:.0f} ms profiled; kernels "
                  f"busy {busy / 1e3:.0f} ms = {100 * busy / (1e6 * wall):.0f}% of the profiled "
                  f"wall; GPU span {span / 1e3:.0f} ms; same words as cpu {same}/{n}")  # fmt: skip
            print("| kind | name | calls | total ms | us per call | us per expand call |")
            print("|---|---|---|---|---|---|")
            for (cat, name), (calls, us) in sorted(table.items(), key=lambda kv: -kv[1][1]):
                per_step = us / steps if steps else float("nan")
                print(f"| {cat} | {name} | {calls} | {us / 1e3:.1f} | {us / calls:.1f} | "
                      f"{per_step:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()

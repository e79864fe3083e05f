"""Where a transducer beam search's time goes on a device: `torch.profiler` over one decode of
the first N utterances of a speech set (the shipped trained models, hama posteriors) at one
batch size, after a warm-up decode; prints the operators by total device time and by host
time, and the number of steps' host reads (``aten::item`` / ``aten::_local_scalar_dense``).

    python tools/profile_transducer_beam.py --speech /tmp/speech/flite.npz \
        --search "TDT standard" --beam 2 --batch-size 32 --device cuda

``--search``: an algorithm name ("alsd", "maes", "standard", "tokenwise", "wind"), prefixed
with "TDT " for the TDT model. On a CPU the table has host times only; with ``--tensor-form``
the CPU runs the tensor search (what CUDA runs) instead of the compiled one, its predictor on
every row as on CUDA, and the count of its leaf operators that compute (views and allocations
left out) stands in for the kernel launches a GPU would make.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_transducer import decode_all, speech_workload
from speech_npz import speech_npz

import wfstdecode.transducer.beam as beam_package
from wfstdecode.transducer import BeamOptions
from wfstdecode.transducer.beam import rows as beam_rows

# operators that launch no kernel: views, shapes, allocations
_NO_KERNEL = {"aten::" + name for name in (
    "view", "as_strided", "reshape", "_reshape_alias", "expand", "select", "slice", "unsqueeze",
    "squeeze", "permute", "t", "transpose", "empty", "empty_strided", "empty_like", "resize_",
    "detach", "alias", "_unsafe_view", "unbind", "split", "chunk", "lift_fresh", "result_type",
    "narrow", "unfold", "numpy_T", "movedim", "_local_scalar_dense", "item", "is_nonzero",
    "contiguous",
)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speech", type=speech_npz, required=True)
    ap.add_argument("--search", default="TDT standard")
    ap.add_argument("--beam", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--utterances", type=int, default=60)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rows", type=int, default=25, help="operators listed")
    ap.add_argument("--tensor-form", action="store_true", help="on a CPU: the tensor search")
    args = ap.parse_args()
    if args.tensor_form:
        beam_package.COMPILED_ON_CPU = beam_rows.COMPACT_ON_CPU = False
    dev = torch.device(args.device)
    models, data, _ = speech_workload(args.speech, dev, torch.float32)
    tdt = args.search.startswith("TDT ")
    algorithm = args.search.removeprefix("TDT ")
    model = models["tdt" if tdt else "rnnt"]
    enc, lengths, order = data["tdt" if tdt else "rnnt"]
    order = order[order < args.utterances]
    options = BeamOptions(algorithm, beam_size=args.beam,
                          durations=model.durations if tdt else None)  # fmt: skip

    def decode():
        with torch.inference_mode():
            decode_all(model, enc, lengths, order, args.batch_size, options)
        if dev.type == "cuda":
            torch.cuda.synchronize()

    decode()  # warm-up: compilation, allocator
    start = time.perf_counter()
    decode()
    wall = time.perf_counter() - start
    activities = [torch.profiler.ProfilerActivity.CPU]
    if dev.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        decode()
    events = prof.key_averages()
    reads = sum(e.count for e in events if e.key in ("aten::item", "aten::_local_scalar_dense"))
    leaves = sum(
        1
        for e in prof.events()
        if e.name.startswith("aten::") and not e.cpu_children and e.name not in _NO_KERNEL
    )
    print(f"{args.search} beam {args.beam}, B = {args.batch_size}, {len(order)} utterances on "
          f"{dev}: {wall:.3f} s wall unprofiled; host reads {reads}; leaf operators that "
          f"compute {leaves}")  # fmt: skip
    if dev.type == "cuda":
        print(events.table(sort_by="cuda_time_total", row_limit=args.rows))
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()

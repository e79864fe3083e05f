"""Fuzz every file loader with mutated valid files (the mutations of tests/test_fuzz_loaders.py,
for many more inputs) and report, per loader: inputs, clean errors, accepted inputs, escaped
exceptions by type, the largest traced allocation and the slowest input; then the peak RSS.

An input escapes when anything but a WfstDecodeError comes out (for `wfstdecode info`: anything
but exit 2 with one error line), or when it allocates more than 200 MB; each is saved under
--out for `--replay`. Exits 1 if anything escaped.

    python tools/fuzz_loaders.py --n 100000 --seed 0
    python tools/fuzz_loaders.py --replay fuzz-escapes/arpa-000123-IndexError.bin --targets arpa
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
import traceback
import tracemalloc
from pathlib import Path

from wfstdecode.testing.fuzz import Tally, make_targets, random_case, run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="inputs in all (round robin)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--targets", help="comma-separated loader names (default: all)")
    parser.add_argument("--out", type=Path, default=Path("fuzz-escapes"),
                        help="directory for reproducers of escaped inputs")  # fmt: skip
    parser.add_argument("--no-tracemalloc", action="store_true", help="faster; no memory check")
    parser.add_argument("--replay", type=Path, help="run one saved input and show what escapes")
    args = parser.parse_args()
    if args.n < 1:
        parser.error(f"--n must be >= 1; got {args.n}")
    names = args.targets.split(",") if args.targets else None
    with tempfile.TemporaryDirectory() as tmp:
        targets = make_targets(Path(tmp), names)
        if args.replay:
            return replay(targets, args.replay)
        for t in targets:  # warm-up: imports happen before memory is traced
            outcome = run(t, t.seed, trace=False)
            if outcome.status != "accepted":
                raise SystemExit(f"the seed of {t.name} does not load: {outcome.error!r}")
        if not args.no_tracemalloc:
            tracemalloc.start()  # once: the warm-up's imports are not traced
        rng = random.Random(args.seed)
        tallies = {t.name: Tally() for t in targets}
        start = time.perf_counter()
        for i in range(args.n):
            target = targets[i % len(targets)]
            data = target.mutate(random_case(rng, target))
            outcome = run(target, data, trace=not args.no_tracemalloc)
            tallies[target.name].add(outcome)
            if outcome.status == "escaped":
                save(args.out, target.name, i, data, outcome.error)
    report(tallies, time.perf_counter() - start, args)
    return 1 if any(t.escaped for t in tallies.values()) else 0


def save(out: Path, name: str, i: int, data: bytes, error: BaseException) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{name}-{i:06d}-{type(error).__name__}"
    (out / f"{stem}.bin").write_bytes(data)
    text = "".join(traceback.format_exception(error))
    (out / f"{stem}.txt").write_text(f"{error!r}\n\n{text}", encoding="utf-8")


def replay(targets, path: Path) -> int:
    if len(targets) != 1:
        raise SystemExit("--replay needs --targets NAME (one loader)")
    outcome = run(targets[0], path.read_bytes())
    print(f"{targets[0].name}: {outcome.status}: {outcome.error!r}")
    if outcome.status == "escaped":
        traceback.print_exception(outcome.error)
        return 1
    return 0


def report(tallies: dict[str, Tally], seconds: float, args) -> None:
    print(f"fuzz_loaders --n {args.n} --seed {args.seed}: {seconds:.0f} s")
    print(f"{'loader':<24}{'inputs':>8}{'errors':>8}{'accepted':>9}{'escaped':>8}"
          f"{'max MB':>8}{'max s':>7}  escaped types")  # fmt: skip
    for name, t in tallies.items():
        kinds = ", ".join(f"{k} x{v}" for k, v in sorted(t.escaped.items())) or "-"
        print(f"{name:<24}{t.inputs:>8}{t.errors:>8}{t.accepted:>9}{sum(t.escaped.values()):>8}"
              f"{t.peak_bytes / 2**20:>8.2f}{t.max_seconds:>7.2f}  {kinds}")  # fmt: skip
    total = sum(t.inputs for t in tallies.values())
    escaped = sum(sum(t.escaped.values()) for t in tallies.values())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"total {total} inputs, {escaped} escaped; peak RSS {rss:.0f} MB"
        + (f"; reproducers in {args.out}" if escaped else "")
    )


if __name__ == "__main__":
    sys.exit(main())

"""Differential fuzzing of the CTC search for a while: random graphs (epsilon arcs and cycles,
negative weights), random log-probs (some -inf), random options (beam, max/min-active,
penalties, n-best, lattice beams, MBR) and random word and phrase boosts, decoded by the cpu
backend and by streams (cpu and reference, random chunkings and groupings) against the
reference backend's `decode_ctc`. Hypotheses must be equal field for field (words, times,
scores, word confidences, notes); where the reference raises, the others must raise the same
error type. Prints each failing seed with its options, then a summary; exit status 1 on any.

    python tools/fuzz_ctc.py --seconds 600               # both campaigns, 300 s each
    python tools/fuzz_ctc.py --seconds 60 --only streams --first-seed 5000
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings

import numpy as np


def random_case(seed: int):
    """A graph, log-probs, lengths, options and boosts drawn from ``seed``."""
    from wfstdecode.ctc import CtcBeamOptions
    from wfstdecode.testing import random_graph, random_log_probs

    rng = np.random.default_rng(seed)
    g = random_graph(seed, num_states=int(rng.integers(3, 25)), num_tokens=int(rng.integers(2, 9)),
                     num_words=int(rng.integers(2, 8)), arcs_per_state=int(rng.integers(1, 6)),
                     eps_arcs_per_state=float(rng.uniform(0, 1.2)),
                     word_prob=float(rng.uniform(0.1, 0.7)),
                     eps_cycles=bool(rng.random() < 0.25))  # fmt: skip
    B, T = int(rng.integers(1, 5)), int(rng.integers(0, 16))
    lp = random_log_probs(seed + 7, B, T, g.num_tokens, peaky=float(rng.uniform(0.5, 4)))
    if rng.random() < 0.1:
        lp[rng.random(lp.shape) < 0.1] = -np.inf
    lengths = rng.integers(0, T + 1, size=B)
    kw = dict(beam=float(rng.choice([math.inf, 0.5, 2.0, 4.0, 8.0])),
              max_active=int(rng.choice([100_000, 3, 8, 20])),
              min_active=int(rng.choice([1, 1, 2, 4])),
              acoustic_scale=float(rng.choice([1.0, 0.7, 1.3])),
              blank_penalty=float(rng.choice([0.0, 0.0, 0.5, -0.3])),
              word_insertion_penalty=float(rng.choice([0.0, 0.0, 0.4, -0.6])),
              nbest=int(rng.choice([1, 1, 3])))  # fmt: skip
    kw["min_active"] = min(kw["min_active"], kw["max_active"])
    if rng.random() < 0.25:
        kw["blank_skip_threshold"] = float(rng.choice([0.3, 0.6, 0.9]))
    if rng.random() < 0.4:
        kw["lattice_beam"] = float(rng.choice([1.0, 4.0, 10.0]))
        kw["mbr_candidates"] = int(rng.choice([0, 0, 4]))
    words = [w for w in (f"w{i}" for i in range(1, 8)) if w in g.words]

    def phrases():
        return {" ".join(rng.choice(words, int(rng.integers(1, 4)))):
                float(rng.choice([-1.0, 0.5, 1.5, 3.0])) for _ in range(int(rng.integers(1, 6)))}  # fmt: skip

    boosts = None
    if words and rng.random() < 0.5:
        boosts = phrases() if rng.random() < 0.4 else [
            phrases() if rng.random() < 0.6 else None for _ in range(B)]  # fmt: skip
    return g, lp, lengths, CtcBeamOptions(**kw), boosts, rng


def _outcome(fn):
    try:
        return fn()
    except Exception as exc:  # the type is compared: which error, not its wording
        return type(exc)


def batch_case(seed: int) -> str | None:
    from wfstdecode.ctc import decode_ctc

    g, lp, lengths, opts, boosts, _ = random_case(seed)
    want = _outcome(lambda: decode_ctc(lp, lengths, g, opts, boosts, backend="reference"))
    got = _outcome(lambda: decode_ctc(lp, lengths, g, opts, boosts, backend="cpu"))
    return None if got == want else "cpu differs from the reference"


def stream_case(seed: int) -> str | None:
    from wfstdecode.ctc import CtcStreamDecoder, decode_ctc

    g, lp, lengths, opts, boosts, rng = random_case(seed)
    want = _outcome(lambda: decode_ctc(lp, lengths, g, opts, boosts, backend="reference"))
    for backend in ("cpu", "reference"):

        def streamed(backend=backend):
            d = CtcStreamDecoder(g, opts, backend, max_lanes=int(rng.integers(1, 3)))
            sids = [d.open(boosts[b] if isinstance(boosts, list) else boosts)
                    for b in range(len(lp))]  # fmt: skip
            fed = [0] * len(lp)
            while any(fed[b] < lengths[b] for b in range(len(lp))):
                chunks = {}
                for b in range(len(lp)):
                    if fed[b] < lengths[b] and rng.random() < 0.7:
                        end = min(fed[b] + int(rng.choice([0, 1, 2, 5])), int(lengths[b]))
                        chunks[sids[b]], fed[b] = lp[b, fed[b] : end], end
                d.advance(chunks)
            return [d.finish(sid) for sid in sids]

        if _outcome(streamed) != want:
            return f"{backend} streams differ from the reference's decode_ctc"
    return None


def campaign(name: str, case, seconds: float, seed: int) -> tuple[int, int]:
    deadline, n, failures = time.time() + seconds, 0, 0
    while time.time() < deadline:
        seed += 1
        n += 1
        what = case(seed)
        if what is not None:
            failures += 1
            print(f"FAIL {name} seed {seed}: {what}", flush=True)
    print(f"{name}: {n} cases (seeds to {seed}), {failures} failures", flush=True)
    return n, failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="in all, shared by campaigns")
    ap.add_argument("--only", choices=["batch", "streams"])
    ap.add_argument("--first-seed", type=int, default=0)
    args = ap.parse_args()
    if not args.seconds > 0:  # NaN too: a campaign of no cases would report a clean pass
        ap.error(f"--seconds must be > 0; got {args.seconds}")
    warnings.simplefilter("ignore")  # boosted words a random graph lacks warn; expected here
    runs = {"batch": batch_case, "streams": stream_case}
    if args.only:
        runs = {args.only: runs[args.only]}
    failed = 0
    for name, case in runs.items():
        failed += campaign(name, case, args.seconds / len(runs), args.first_seed)[1]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

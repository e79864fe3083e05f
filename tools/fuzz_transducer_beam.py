"""Time-bounded differential fuzzing of the transducer beam searches with a compiled CPU form
("alsd", "standard", "tokenwise", "maes"; RNN-T and TDT; "wind", RNN-T): random models, inputs and options,
decoded by the CPU form, the tensor form (what CUDA runs) and the per-utterance reference;
every hypothesis compared (tokens, timestamps, durations; scores within 1e-6 relative). The
CPU form must equal the reference. The joints have 16-32 units: with a few, the ReLU often
turns them all off and different frames give equal logits, so alignments tie exactly and each
search breaks the ties in its own order, at the end or in an earlier step's pruning. Ties
that remain are counted: where only hypotheses of equal scores differ, and where the tensor
form chose otherwise (its first few printed), neither failed.

    python tools/fuzz_transducer_beam.py --seconds 300

Prints each difference found (seed and options, enough to replay) and a count of cases.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time

import torch

import wfstdecode.transducer.beam as beam_package
from wfstdecode.testing.transducer_models import random_transducer
from wfstdecode.transducer import BeamOptions, beam_decode, beam_reference


def case(seed: int):
    """A random model, batch and `BeamOptions` for ``seed``."""
    rng = random.Random(seed)
    vocab, enc_dim = rng.randint(2, 8), rng.randint(2, 8)
    durations = None
    if rng.random() < 0.5:
        durations = tuple(sorted(rng.sample(range(5), rng.randint(1, 4))))
        if durations == (0,):
            durations = (0, 1)
    model = random_transducer(
        vocab, enc_dim, rng.randint(2, 8), rng.randint(16, 32), len(durations or ()), seed=seed
    )
    with torch.no_grad():  # blank bias between "mostly labels" and "mostly blanks"
        model.out.bias[model.blank_id] += rng.uniform(-2.0, 2.0)
    batch, frames = rng.randint(1, 5), rng.randint(1, 12)
    gen = torch.Generator().manual_seed(seed)
    enc = torch.randn(batch, frames, enc_dim, generator=gen) * rng.uniform(0.5, 4.0)
    lengths = torch.tensor([rng.randint(0, frames) for _ in range(batch)])
    width = rng.randint(1, 6)
    algorithm = rng.choice(
        ["alsd", "standard", "maes"] + ([] if durations else ["tokenwise", "wind"])
    )
    own = {
        "alsd": {"max_tokens": rng.choice([None, None, rng.randint(0, 5)])},
        "standard": {},
        "tokenwise": {"segment_size": rng.randint(1, 4)},
        "wind": {"window": rng.randint(1, 6), "max_tokens": rng.choice([None, rng.randint(0, 5)])},
        "maes": {
            "maes_steps": rng.randint(1, 3),
            "expansion_beta": rng.randint(0, 3),
            "expansion_gamma": rng.choice([0.5, 2.3, math.inf]),
        },
    }[algorithm]
    options = BeamOptions(
        algorithm,
        beam_size=width,
        nbest=rng.randint(1, width),
        length_norm=rng.random() < 0.5,
        max_symbols_per_frame=rng.randint(1, 3),
        durations=durations,
        **own,
    )
    return model, enc, lengths, options


def differ(got, want) -> tuple[str, str] | None:
    """None, or ("tie", ...) where only hypotheses of equal scores differ (random models with
    saturated joints give alignments of exactly equal scores, which each search may break
    differently), or ("difference", ...). A tie needs a hypothesis of equal score: where a
    hypothesis differs, its score is that of another hypothesis of the same list (the n-best
    shows the tie); equal scores alone (a wrong time or duration keeps the score) are a
    difference. A tie whole in the list (a worse hypothesis follows it) must hold the same
    hypotheses on both sides; only one at the list's end may go on past the n-best cut."""

    def close(x, y):
        return abs(x - y) <= 1e-6 * max(1.0, abs(y))

    def content(h):
        return h.tokens, h.timestamps, h.durations

    def tie_of(hs, score):
        return [content(h) for h in hs if close(h.score, score)]

    for b, (g, w) in enumerate(zip(got, want, strict=True)):
        if len(g) != len(w):
            return "difference", f"utterance {b}: {len(g)} != {len(w)} hypotheses"
        for hg, hw in zip(g, w, strict=True):
            if not close(hg.score, hw.score):
                return "difference", f"utterance {b}: {hg} != {hw}"
        for i, (hg, hw) in enumerate(zip(g, w, strict=True)):
            if (hg.tokens, hg.timestamps, hg.durations) == (hw.tokens, hw.timestamps, hw.durations):
                continue
            tied = any(close(h.score, hw.score) for hs in (g, w)
                       for j, h in enumerate(hs) if j != i)  # fmt: skip
            if tied and not close(hw.score, w[-1].score):  # a tie whole in the list (a worse
                # hypothesis follows): each side's hypothesis is one of the other's of its score
                tied = content(hg) in tie_of(w, hw.score) and content(hw) in tie_of(g, hw.score)
            if not tied:
                return "difference", f"utterance {b}: {hg} != {hw}"
        if list(map(content, g)) != list(map(content, w)):
            return "tie", f"utterance {b}"
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=0, help="first case's seed")
    args = ap.parse_args(argv)
    if not args.seconds > 0:  # NaN too: a campaign of no cases would report a clean pass
        ap.error(f"--seconds must be > 0; got {args.seconds}")
    torch.set_num_threads(1)
    end = time.monotonic() + args.seconds
    seed, found, ties, tensor_differs = args.seed, 0, 0, 0
    while time.monotonic() < end:
        model, enc, lengths, options = case(seed)
        compiled = beam_decode(model, enc, lengths, options)
        beam_package.COMPILED_ON_CPU = False
        try:
            tensor = beam_decode(model, enc, lengths, options)
        finally:
            beam_package.COMPILED_ON_CPU = True
        reference = beam_reference(model, enc, lengths, options)
        for name, other in (("reference", reference), ("tensor form", tensor)):
            diff = differ(compiled, other)
            if diff and diff[0] == "tie":
                ties += 1
            elif diff and name == "tensor form":
                tensor_differs += 1
                if tensor_differs <= 3:
                    print(f"seed {seed}: compiled vs tensor form: {diff[1]}", flush=True)
            elif diff:
                found += 1
                print(f"seed {seed} ({options}): compiled vs {name}: {diff[1]}", flush=True)
        seed += 1
    print(
        f"{seed - args.seed} cases (seeds {args.seed}..{seed - 1}): {found} differences from "
        f"the reference; {ties} comparisons that differ only between hypotheses of equal "
        f"scores; the tensor form differs otherwise in {tensor_differs}"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

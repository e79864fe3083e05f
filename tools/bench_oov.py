"""Out-of-vocabulary words through the oov slot, on the shipped real OCR posteriors: words taken
out of the lexicon (and so out of the LM) and then boosted — how often do they come back?

Per seed, ``--removed`` distinct words of the references (3 letters or more) are the targets; with
``--distractors N`` as many other lexicon words (not in any reference) are taken out too and
boosted alongside (a realistic list: more names than the utterance says). Graphs (compact TLG of
the shipped 5k-word LM, characters): the full lexicon (what the words would give if they were in
it), and the reduced lexicon with ``--oov-slot`` (each slot log10 probability of
``--oov-logprob``; the LM has no ``<unk>``). All rows of a seed take the same words out (targets
and the most distractors), so they differ only in what is boosted. Every utterance gets the whole list (targets + distractors) at each
``--bonus`` per word.

Reported per configuration: recall (reference occurrences of target words that the aligned
hypothesis has, over their count), false alarms (hypothesis words of the list the aligned
reference word is not), WER, and CPU seconds of one thread for the batch.

    python tools/bench_oov.py --out bench/ctc_oov.md
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from speech_npz import speech_npz

from wfstdecode.metrics import alignment

DATA = Path(__file__).resolve().parent.parent / "wfstdecode" / "data"


def score(refs, hyps, targets: set[str], listed: set[str]) -> dict:
    found = total = false = errors = words = 0
    for r, h in zip(refs, hyps, strict=True):
        for a, b in alignment(r, h):
            total += a in targets
            found += a in targets and a == b
            false += b in listed and a != b
            errors += a != b
        words += len(r)
    return dict(recall=100 * found / max(total, 1), occurrences=total, false_alarms=false,
                wer=100 * errors / max(words, 1))  # fmt: skip


def choose(refs, lexicon_words: list[str], removed: int, distractors: int, seed: int):
    rng = np.random.default_rng(seed)
    in_refs = sorted({w for r in refs for w in r} & set(lexicon_words))
    candidates = [w for w in in_refs if len(w) >= 3]
    targets = sorted(rng.choice(candidates, size=min(removed, len(candidates)), replace=False))
    others = sorted(set(lexicon_words) - set(in_refs))
    extra = sorted(rng.choice(others, size=min(distractors, len(others)), replace=False))
    return [str(w) for w in targets], [str(w) for w in extra]


def data_sets(speech: Path | None) -> list[dict]:
    """ocr: the shipped OCR posteriors, characters; with ``speech``, flite speech through hama
    and the shipped speech lexicon (phones, ``<wb>`` between words), whose pronunciations of the
    removed words (hama's G2P and CMU dict's) are given at decode time as a user's would be."""
    from wfstdecode import SymbolTable
    from wfstdecode.graph import read_lexicon

    tokens = SymbolTable.read(DATA / "tokens.txt")
    with np.load(DATA / "ocr_emissions.npz") as z:
        ocr = (z["log_probs"], z["lengths"], [str(t).split() for t in z["texts"]])
    sets = [dict(name="ocr", tokens=tokens, lexicon=read_lexicon(DATA / "lexicon.txt", tokens),
                 arpa=str(DATA / "lm.arpa.gz"), data=ocr, separator="|", scale=1.0,
                 max_active=10000, spelling="chars")]  # fmt: skip
    if speech:
        sp = DATA / "speech"
        tokens = SymbolTable.read(sp / "tokens.txt")
        with np.load(speech) as z:
            lengths = z["lengths"]
            data = (z["log_probs"][:, : int(lengths.max())], lengths,
                    [str(t).split() for t in z["texts"]])  # fmt: skip
        sets.append(dict(name="speech", tokens=tokens,
                         lexicon=read_lexicon(sp / "lexicon.txt.gz", tokens),
                         arpa=str(sp / "lm.arpa.gz"), data=data, separator="<wb>", scale=1.25,
                         max_active=4000, spelling="lexicon"))  # fmt: skip
    return sets


def run(s: dict, args, sizes, bonuses) -> list[dict]:
    from wfstdecode.ctc import CtcBeamOptions, decode_ctc
    from wfstdecode.graph import build_tlg

    lp, lengths, refs = s["data"]
    tokens, lexicon, arpa, sep = s["tokens"], s["lexicon"], s["arpa"], s["separator"]
    opts = CtcBeamOptions(beam=args.beam, max_active=s["max_active"], acoustic_scale=s["scale"])

    def decode(g, boosts=None, oov_lexicon=None):
        t = time.process_time()
        hyps = decode_ctc(lp, lengths, g, opts, boosts, backend="cpu", num_threads=1,
                          oov_lexicon=oov_lexicon)  # fmt: skip
        return [list(h[0].words) for h in hyps], time.process_time() - t

    full = build_tlg(tokens, lexicon, arpa, "compact", separator=sep).graph
    decode(full)  # compile
    rows = []
    words = sorted({e.word for e in lexicon})
    for seed in range(args.seeds):
        targets, extra = choose(refs, words, args.removed, max(sizes), seed)
        gone = set(targets) | set(extra)
        kept = [e for e in lexicon if e.word not in gone]
        prons = None
        if s["spelling"] == "lexicon":  # the removed words' pronunciations, as a G2P gives them
            prons = {}
            for e in lexicon:
                if e.word in gone:
                    prons.setdefault(e.word, []).append(e.tokens)
        base, cpu = decode(full)
        rows.append(dict(data=s["name"], seed=seed, graph="full lexicon", n=0, bonus=None,
                         cpu=cpu, **score(refs, base, set(targets), set(targets))))  # fmt: skip
        for logprob in [float(x) for x in args.oov_logprob.split(",")]:
            g = build_tlg(tokens, kept, arpa, "compact", separator=sep,
                          oov_slot={"spelling": s["spelling"]}, oov_logprob=logprob).graph  # fmt: skip
            name = f"without them, oov slot at {logprob:g}"
            for n in sizes:
                listed = targets + extra[:n]
                for bonus in [None, *bonuses] if n == sizes[0] else bonuses:
                    boosts = None if bonus is None else dict.fromkeys(listed, bonus)
                    hyps, cpu = decode(g, boosts, prons)
                    row = dict(data=s["name"], seed=seed, graph=name, n=n, bonus=bonus, cpu=cpu,
                               **score(refs, hyps, set(targets), set(listed)))  # fmt: skip
                    rows.append(row)
                    print(row, flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--removed", type=int, default=40, help="target words taken out per seed")
    ap.add_argument("--distractors", default="0,100,1000", help="other words taken out and boosted")
    ap.add_argument("--bonus", default="0,2,4", help="bonuses per word (comma-separated)")
    ap.add_argument("--oov-logprob", default="-3,-5,-7",
                    help="the slot's log10 probabilities to try (comma-separated; negatives "
                    "with '=': --oov-logprob=-5,-3)")  # fmt: skip
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--beam", type=float, default=16.0)
    ap.add_argument("--speech", type=speech_npz, help="flite.npz of tools/bench_speech_ctc.py")
    ap.add_argument("--out", help="markdown file to write")
    args = ap.parse_args(argv)

    sizes = [int(x) for x in args.distractors.split(",")]
    bonuses = [float(x) for x in args.bonus.split(",")]
    load = os.getloadavg()[0]
    rows = []
    for data in data_sets(args.speech):
        rows += run(data, args, sizes, bonuses)
    lines = [
        "| data | seed | graph | listed words | bonus per word | recall % | false alarms | "
        "WER % | CPU s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        listed = "—" if r["bonus"] is None else f"{args.removed} + {r['n']}"
        bonus = "no boosting" if r["bonus"] is None else f"{r['bonus']:g}"
        lines.append(f"| {r['data']} | {r['seed']} | {r['graph']} | {listed} | {bonus} | {r['recall']:.1f} "
                     f"({r['occurrences']}) | {r['false_alarms']} | {r['wer']:.2f} | "
                     f"{r['cpu']:.2f} |")  # fmt: skip
    table = "\n".join(lines)
    print(table)
    if args.out:
        import numba

        command = "python " + " ".join([sys.argv[0], *(argv or sys.argv[1:])])
        Path(args.out).write_text(
            "# Out-of-vocabulary words through the oov slot\n\n"
            f"- command: `{command}`\n"
            f"- machine: {platform.machine()}, {os.cpu_count()} cores, python "
            f"{platform.python_version()}, numba {numba.__version__}; 1-min load average "
            f"{load:.2f} when it began\n"
            "- data: **ocr**, the shipped OCR posteriors (60 lines) with the shipped 5k-word "
            "trigram, characters, max-active 10000; **speech** (with `--speech`), flite speech "
            "through hama's phone model with the shipped 72k-word speech lexicon and trigram, "
            "`<wb>` between words, acoustic scale 1.25, max-active 4000, the removed words' "
            "own pronunciations (hama G2P and CMU dict) given at decode time (`oov_lexicon`). "
            "Neither LM has `<unk>`: the slot's log10 probability is given. Compact TLG, "
            f"beam {args.beam:g}; all rows of a seed take the same {args.removed} targets and "
            f"{max(sizes)} distractors out of the lexicon\n"
            "- recall: reference occurrences of the target words (in brackets) that the aligned "
            "hypothesis word equals; false alarms: hypothesis words of the boosted list where the "
            "aligned reference word differs. The full-lexicon rows say what the same words give "
            "when the lexicon and LM have them.\n\n" + table + "\n"
        )
        print(f"wrote {args.out}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory():
        main()

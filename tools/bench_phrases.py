"""Phrase boosting on real posteriors: biased-word and unbiased WER and decoding time with each
utterance's target phrases plus 0 / 100 / 1,000 / 10,000 distractor phrases, next to no boosting.

Per utterance, the target phrases are ``--targets`` word bigrams of its reference, drawn at
random (seeded) among those whose words are in the graph's vocabulary; the biasing list is those
plus N distractors: with ``--distractors real`` (default) bigrams of the other utterances'
references first (real, frequent pairs of the same domain: the hard case), then random
in-vocabulary word pairs; with ``--distractors random`` only random in-vocabulary word pairs
(mostly rare words, as a contact list's names are). Every phrase gets each ``--bonus`` per
word. Biased-word WER (B-WER) counts the errors on the target phrases' words of the reference
(substitutions, deletions) and the insertions of those words, over their count; unbiased WER
(U-WER) the rest, over the other reference words (Le et al. 2021's split).

Data sets (`bench_ctc_pareto.data_sets`): ocr (the shipped OCR posteriors, 60 lines, the shipped
5k-word LM's compact TLG) and, with ``--speech``, flite speech through hama (the shipped
72,547-word speech graph). CPU seconds of one thread for the whole batch, the automata built
inside (`decode_ctc` builds them; the cache of lists seen before, `phrase_cache`, is emptied
before each timed call), best of ``--repeats`` taken alternately over the list sizes; also the
lists' compile alone (`prepare_problem`), the same again right after (the lists recalled from the
cache, as a server sending the same lists with each call has them), and the search alone
(`decode_cpu` on the prepared problem), and the automaton build of one list (10 .. 100,000
phrases). The "one list"
rows (``--distractors random`` only) give every utterance the same list (all targets and 1,000
random distractors), as a user's hotword list is: compiled once per call.

    python tools/bench_phrases.py --speech /tmp/speech/flite.npz --plot bench/ctc_phrases.png
    python tools/bench_phrases.py --speech /tmp/speech/flite.npz --distractors random
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ctc_pareto import best_cpu, data_sets
from speech_npz import speech_npz

from wfstdecode.metrics import alignment

SIZES = (0, 100, 1000, 10000)


def split_errors(ref: list[str], hyp: list[str], biased: set[str]) -> tuple[int, int]:
    """(biased errors, unbiased errors) of one edit-distance alignment of ``hyp`` to ``ref``:
    a substitution or deletion counts where its reference word is, an insertion where the
    inserted word is."""
    b = u = 0
    for r, h in alignment(ref, hyp):
        if r != h:
            word = h if r is None else r
            b, u = (b + 1, u) if word in biased else (b, u + 1)
    return b, u


def biasing_lists(refs, vocab: list[str], targets: int, sizes, seed: int, real: bool = True):
    """Per utterance: its target phrases and its distractors (the first N of them for list size
    N): with ``real``, the other references' bigrams first, then random word pairs."""
    rng = np.random.default_rng(seed)
    known = set(vocab)
    bigrams = [[f"{a} {b}" for a, b in itertools.pairwise(r) if a in known and b in known]
               for r in refs]  # fmt: skip
    pool = sorted({p for bg in bigrams for p in bg})
    out = []
    for b, bg in enumerate(bigrams):
        chosen = list(rng.choice(bg, size=min(targets, len(bg)), replace=False)) if bg else []
        own = set(bigrams[b])
        others = [p for p in pool if p not in own] if real else []
        rng.shuffle(others)
        biggest = max(sizes)
        distract = others[:biggest]
        while len(distract) < biggest:
            a, c = rng.choice(len(vocab), size=2)
            phrase = f"{vocab[a]} {vocab[c]}"
            if phrase not in own:
                distract.append(phrase)
        out.append((chosen, distract))
    return out


def run(s, args) -> list[dict]:
    from wfstdecode.ctc import CpuTuning, CtcBeamOptions, clear_phrase_cache, decode_ctc
    from wfstdecode.ctc.cpu import decode_cpu
    from wfstdecode.ctc.search import prepare_problem

    single = CpuTuning(num_threads=1)

    g, (lp, lengths, refs) = s["graph"], s["data"]
    vocab = [w for w, i in g.words if i and not w.startswith(("#", "<"))]
    lists = biasing_lists(refs, vocab, args.targets, SIZES, args.seed,
                          real=args.distractors == "real")  # fmt: skip
    opts = CtcBeamOptions(beam=args.beam, max_active=s["max_active"], acoustic_scale=s["scale"])
    decode_ctc(lp[:1, :5], [5], g, opts, [{"a b": 1.0}], backend="cpu", num_threads=1)  # compile
    configs = [("none", None)]
    for bonus in args.bonus:
        for n in SIZES:
            per = []
            for chosen, distract in lists:
                table = dict.fromkeys(distract[:n], bonus)
                table.update(dict.fromkeys(chosen, bonus))
                per.append(table or None)
            configs.append((f"{bonus:g} per word, targets + {n}", per))
        if args.distractors == "real":
            continue  # a list shared by all would hold every reference's bigrams: no test
        # one list for every utterance, as a user's hotword list is (compiled once per call):
        # every utterance's targets and the first utterance's 1,000 distractors
        shared = dict.fromkeys(lists[0][1][:1000], bonus)
        for chosen, _ in lists:
            shared.update(dict.fromkeys(chosen, bonus))
        configs.append((f"{bonus:g} per word, one list: all targets + 1000", shared))
    results: dict[str, tuple] = {}
    for _ in range(args.repeats):  # alternately: the best CPU time of each kept
        for name, boosts in configs:

            def decode(boosts=boosts):
                return decode_ctc(lp, lengths, g, opts, boosts, backend="cpu", num_threads=1)

            def compile_lists(boosts=boosts):  # what decode_ctc does before it searches
                return prepare_problem(lp, lengths, g, opts, boosts)

            clear_phrase_cache()  # every list compiled afresh, as an unseen list is
            hyps, cpu = best_cpu(decode, 1)
            clear_phrase_cache()
            problem, build = best_cpu(compile_lists, 1)
            _, recalled = best_cpu(compile_lists, 1)  # the same lists again: from the cache
            _, search = best_cpu(lambda problem=problem: decode_cpu(problem, single), 1)
            old = results.get(name, (None, cpu, build, search, recalled))
            results[name] = (hyps, *(min(x, y) for x, y in
                                     zip((cpu, build, search, recalled), old[1:], strict=True)))  # fmt: skip
    frames = int(lengths.sum())
    rows = []
    base_cpu, base_build, base_search, base_recalled = results["none"][1:]
    for name, _ in configs:
        hyps, cpu, build, search, recalled = results[name]
        be = ue = nb = nu = 0
        for r, h, (chosen, _d) in zip(refs, hyps, lists, strict=True):
            biased = {w for p in chosen for w in p.split()}
            b, u = split_errors(list(r), list(h[0].words), biased)
            be, ue = be + b, ue + u
            nb += sum(w in biased for w in r)
            nu += sum(w not in biased for w in r)
        row = dict(data=s["name"], boosting=name, cpu=cpu, rel=cpu / base_cpu,
                   compile=build - base_build, search_rel=search / base_search,
                   recalled=recalled - base_recalled,
                   b_wer=100 * be / max(nb, 1), u_wer=100 * ue / max(nu, 1),
                   wer=100 * (be + ue) / max(nb + nu, 1), frames=frames, biased_words=nb)  # fmt: skip
        rows.append(row)
        print(f"| {s['name']} | {name} | {row['b_wer']:.2f} | {row['u_wer']:.2f} | "
              f"{row['wer']:.2f} | {cpu:.3f} | {row['rel']:.2f} | {row['compile']:.3f} | "
              f"{row['recalled']:.4f} | {row['search_rel']:.2f} |", flush=True)  # fmt: skip
    return rows


def build_times(graph, repeats: int):
    """CPU ms to resolve and compile N random phrase bigrams of ``graph``'s words."""
    from wfstdecode.ctc.boost import build_boost_tables, resolve_boosts

    vocab = [w for w, i in graph.words if i and not w.startswith(("#", "<"))]
    rng = np.random.default_rng(0)
    out = []
    for n in (10, 100, 1000, 10000, 100000):
        pairs = {f"{vocab[a]} {vocab[b]}": 2.0 for a, b in rng.choice(len(vocab), (n, 2))}

        def build(pairs=pairs):
            return build_boost_tables(resolve_boosts(pairs, 1, graph.words))

        tables, cpu = best_cpu(build, repeats)
        out.append((len(pairs), cpu, int(tables.contexts[0])))
        print(f"| {len(pairs)} | {1000 * cpu:.1f} | {int(tables.contexts[0])} |", flush=True)
    return out


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for data in sorted({r["data"] for r in rows}):
        none = next(r for r in rows if r["data"] == data and r["boosting"] == "none")
        for bonus in sorted(
            {r["boosting"].split(" per")[0] for r in rows if " per" in r["boosting"]}
        ):
            mine = [r for r in rows if r["data"] == data and r["boosting"].startswith(bonus + " ")
                    and "one list" not in r["boosting"]]  # fmt: skip
            sizes = [int(r["boosting"].split("+ ")[1]) + 1 for r in mine]
            tag = f"{data}, {bonus}/word"
            (line,) = axes[0].plot(sizes, [r["b_wer"] for r in mine], "o-", label=f"{tag} B-WER")
            axes[0].plot(sizes, [r["u_wer"] for r in mine], "s--", color=line.get_color(),
                         label=f"{tag} U-WER")  # fmt: skip
            axes[1].plot(sizes, [r["rel"] for r in mine], "o-", color=line.get_color(),
                         label=f"{tag} total")  # fmt: skip
            axes[1].plot(sizes, [r["search_rel"] for r in mine], "s--", color=line.get_color(),
                         label=f"{tag} search only")  # fmt: skip
            one = [r for r in rows if r["data"] == data and r["boosting"].startswith(bonus + " ")
                   and "one list" in r["boosting"]]  # fmt: skip
            axes[1].plot([1001] * len(one), [r["rel"] for r in one], "*", ms=10,
                         color=line.get_color(), label=f"{tag} one list, total")  # fmt: skip
        axes[0].axhline(none["b_wer"], color="grey", lw=0.8, ls=":")
    axes[0].set(xscale="log", xlabel="distractor phrases + 1", ylabel="WER %",
                title="biased / unbiased WER (dotted: B-WER unboosted)")  # fmt: skip
    axes[1].set(xscale="log", yscale="log", xlabel="distractor phrases + 1",
                ylabel="CPU time / no boosting", title="decoding time")  # fmt: skip
    axes[1].axhline(1.2, color="grey", lw=0.8, ls=":")
    for ax in axes:
        ax.legend(fontsize=6)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--speech", type=speech_npz, help="flite.npz of tools/bench_speech_ctc.py")
    ap.add_argument("--speech-utts", type=int, default=60)
    ap.add_argument("--beam", type=float, default=12.0)
    ap.add_argument("--bonus", type=float, nargs="+", default=[1.5, 3.0], help="per word")
    ap.add_argument("--targets", type=int, default=1, help="target bigrams per utterance")
    ap.add_argument("--distractors", choices=("real", "random"), default="real",
                    help="real: the other references' bigrams first (hard: frequent pairs of "
                         "the same sentences); random: random in-vocabulary word pairs (as a "
                         "contact list's names are: rare words)")  # fmt: skip
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args(argv)
    print(f"python {platform.python_version()}, {platform.machine()}, load "
          f"{os.getloadavg()[0]:.2f} at start")  # fmt: skip
    with tempfile.TemporaryDirectory() as work:
        sets = data_sets(Path(work), args.speech, args.speech_utts)
        print("\n| data | boosting | B-WER % | U-WER % | WER % | CPU s | × none | lists' compile "
              "CPU s | same lists again CPU s | search × none |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|---|---|")
        rows = [r for s in sets for r in run(s, args)]
        print("\n| phrases | build CPU ms | context states |")
        print("|---|---|---|")
        build_times(sets[-1]["graph"], args.repeats)
    print(f"load {os.getloadavg()[0]:.2f} at the end")
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"wall {time.perf_counter() - t0:.0f} s")

#!/usr/bin/env python3
"""Build the small real-text trigram LM and held-out test sentences shipped in wfstdecode/data/.

Text: the Debian ``fortunes`` and ``fortunes-min`` packages (BSD licence, see
wfstdecode/data/README.md), read from /usr/share/games/fortunes/*. Each fortune is cleaned
(attribution lines such as ``-- Mark Twain`` are dropped), split into sentences and normalised to
lowercase words over ``[a-z']`` (hyphens and slashes become spaces, words with digits are dropped).
A seeded random share of the distinct sentences is held out; every copy of a held-out sentence is
removed from the training text. The vocabulary is the ``--vocab-size`` most frequent training
words; other words become ``<unk>`` for training.

Model: a backoff Kneser-Ney trigram (unmodified KN, the SRILM recipe
``-ukndiscount -kn-modify-counts-at-end``) trained with ``kaldingram``, then made
closed-vocabulary by conditioning on "the next word is not ``<unk>``" (every n-gram containing
``<unk>`` is removed and the remaining probabilities and backoff weights are renormalised
exactly, so each context still sums to one), then entropy-pruned (Stolcke, kaldingram's
implementation) with ``--prune-threshold``; trigrams whose suffix bigram was pruned are dropped
too and the backoff weights recomputed. The result is checked (counts, prefixes/suffixes present,
every context's distribution sums to one), written sorted and gzipped reproducibly, and, if the
``kenlm`` module is importable (pip ``kenlm-ex``), loaded in KenLM, which also gives the
perplexities printed at the end.

Set-up (optional tool; the package never imports it)::

    apt-get install fortunes fortunes-min
    pip install kaldingram==0.1.2 kenlm-ex

Run (from the repository root; under a minute on one core)::

    python tools/make_demo_lm.py --out-dir wfstdecode/data

Writes ``lm.arpa.gz``, ``test_sentences.txt``, ``tokens.txt`` (the fixed character token set,
k2 format), ``lexicon.txt`` (each LM word spelled in characters, no separator) and
``lm_info.json`` (figures and settings).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import io
import json
import math
import random
import re
import sys
import time
from pathlib import Path

DEFAULT_FORTUNES_DIR = Path("/usr/share/games/fortunes")
# The fixed token set of the shipped character model (k2 format): blank, the word separator
# (the OCR model's space), apostrophe, a-z.
TOKENS = ["<blk>", "|", "'", *"abcdefghijklmnopqrstuvwxyz"]
# Files that are not running English prose.
EXCLUDED_FILES = {"ascii-art", "translate-me"}

BOS, EOS, UNK = "<s>", "</s>", "<unk>"

_ATTRIBUTION = re.compile(r"^\s*(--|~~|—)\s")
_SENT_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]*\s+")
_CLEAN_RAW = re.compile(r"^[A-Z][A-Za-z ,;'\"!?.-]*[.!?][\"']?$")
_WORD_SPLIT = re.compile(r"[^a-z0-9']+")


# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------


def read_fortunes(directory: Path) -> list[tuple[str, str]]:
    """Return (file name, fortune text) pairs, attribution lines removed, in a fixed order."""
    out = []
    files = sorted(
        p
        for p in directory.iterdir()
        if p.is_file()
        and not p.is_symlink()
        and p.suffix != ".dat"
        and p.name not in EXCLUDED_FILES
    )
    if not files:
        raise SystemExit(f"no fortune files in {directory} (apt-get install fortunes fortunes-min)")
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        for chunk in re.split(r"^%\s*$", text, flags=re.M):
            lines = [ln for ln in chunk.splitlines() if not _ATTRIBUTION.match(ln)]
            body = " ".join(ln.strip() for ln in lines).strip()
            if body:
                out.append((path.name, body))
    return out


def split_sentences(text: str) -> list[str]:
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("`", "'")
    text = re.sub(r"\s+", " ", text)
    return [s.strip() for s in _SENT_SPLIT.split(text) if s.strip()]


def normalise(sentence: str) -> list[str]:
    """Lowercase words over [a-z']; words with digits or other letters are dropped."""
    words = []
    for tok in _WORD_SPLIT.split(sentence.lower()):
        tok = tok.strip("'")
        if not tok or any(c.isdigit() for c in tok):
            continue
        words.append(tok)
    return words


# --------------------------------------------------------------------------------------------
# ARPA model in memory: order -> {ngram tuple: [log10 prob, log10 backoff or None]}
# --------------------------------------------------------------------------------------------


def parse_arpa(text: str) -> dict[int, dict[tuple[str, ...], list]]:
    model: dict[int, dict[tuple[str, ...], list]] = {}
    declared: dict[int, int] = {}
    order = 0
    section = "pre"
    for lineno, raw in enumerate(io.StringIO(text), 1):
        line = raw.strip()
        if not line:
            continue
        if line == "\\data\\":
            section = "data"
            continue
        if line == "\\end\\":
            section = "end"
            break
        m = re.match(r"^\\(\d+)-grams:$", line)
        if m:
            order = int(m.group(1))
            model[order] = {}
            section = "grams"
            continue
        if section == "data":
            m = re.match(r"^ngram (\d+)=(\d+)$", line)
            if not m:
                raise ValueError(f"line {lineno}: bad count line {line!r}")
            declared[int(m.group(1))] = int(m.group(2))
        elif section == "grams":
            parts = line.split()
            if len(parts) == order + 1:
                bow = None
            elif len(parts) == order + 2:
                bow = float(parts[-1])
            else:
                raise ValueError(f"line {lineno}: bad {order}-gram line {line!r}")
            model[order][tuple(parts[1 : order + 1])] = [float(parts[0]), bow]
    if section != "end":
        raise ValueError("ARPA text has no \\end\\")
    for n, c in declared.items():
        if len(model.get(n, {})) != c:
            raise ValueError(f"ngram {n}={c} declared but {len(model.get(n, {}))} present")
    return model


class Scorer:
    """Backoff log10 probabilities from an in-memory model."""

    def __init__(self, model):
        self.model = model
        self.order = max(model)

    def logp(self, hist: tuple[str, ...], w: str) -> float:
        hist = hist[-(self.order - 1) :] if self.order > 1 else ()
        acc = 0.0
        while True:
            entry = self.model[len(hist) + 1].get((*hist, w))
            if entry is not None:
                return acc + entry[0]
            if not hist:
                return -math.inf
            ctx = self.model[len(hist)].get(hist)
            if ctx is not None and ctx[1] is not None:
                acc += ctx[1]
            hist = hist[1:]


def contexts(model) -> dict[tuple[str, ...], list[str]]:
    """Context h -> the words w with an explicit n-gram h w (orders >= 2)."""
    ctx: dict[tuple[str, ...], list[str]] = collections.defaultdict(list)
    for n in range(2, max(model) + 1):
        for ng in model[n]:
            ctx[ng[:-1]].append(ng[-1])
    return ctx


def drop_unk(model) -> dict:
    """Condition the model on 'next word != <unk>' and remove every n-gram containing <unk>.

    p'(w|h) = p(w|h) / (1 - p(<unk>|h)) for every history h, which keeps the backoff structure:
    explicit probabilities are divided by z(h) = 1 - p(<unk>|h) and the backoff weight of h
    becomes bow(h) * z(h[1:]) / z(h).
    """
    if UNK not in {ng[0] for ng in model[1]}:
        return model
    sc = Scorer(model)
    z: dict[tuple[str, ...], float] = {(): 1.0 - 10 ** model[1][(UNK,)][0]}

    def zf(h):
        if h not in z:
            z[h] = 1.0 - 10 ** sc.logp(h, UNK)
        return z[h]

    new = {}
    for n in sorted(model):
        new[n] = {}
        for ng, (lp, bow) in model[n].items():
            if UNK in ng:
                continue
            h = ng[:-1]
            nlp = lp - math.log10(zf(h))
            nbow = None
            if bow is not None:
                nbow = bow + math.log10(zf(ng[1:])) - math.log10(zf(ng))
            new[n][ng] = [nlp, nbow]
    return new


def check_model(model, tol: float = 1e-4) -> dict:
    """Structural checks and normalisation of every context; returns figures."""
    order = max(model)
    if sorted(model) != list(range(1, order + 1)):
        raise ValueError("missing n-gram orders")
    for w in (BOS, EOS):
        if (w,) not in model[1]:
            raise ValueError(f"{w} missing from the unigrams")
    for n in range(2, order + 1):
        for ng in model[n]:
            if ng[:-1] not in model[n - 1] or ng[1:] not in model[n - 1]:
                raise ValueError(f"n-gram {' '.join(ng)} lacks its prefix or suffix")
            if model[n - 1][ng[:-1]][1] is None:
                raise ValueError(f"{' '.join(ng[:-1])} is a context but has no backoff weight")
    sc = Scorer(model)
    total = sum(10**lp for ng, (lp, _) in model[1].items() if ng[0] != BOS)
    worst = abs(total - 1.0)
    for h, ws in contexts(model).items():
        bow = model[len(h)][h][1] or 0.0
        seen = sum(10 ** model[len(h) + 1][(*h, w)][0] for w in ws)
        lower = sum(10 ** sc.logp(h[1:], w) for w in ws)
        worst = max(worst, abs(seen + 10**bow * (1.0 - lower) - 1.0))
    if worst > tol:
        raise ValueError(f"a context's distribution sums to 1 +- {worst:.2e} (> {tol})")
    return {"max_normalisation_error": worst}


def recompute_backoffs(model) -> None:
    """Set every context's backoff weight so that its distribution sums to one (in place)."""
    ctx = contexts(model)
    sc = Scorer(model)
    for n in sorted(model)[:-1]:  # lower orders first: P(w|h') must already be final
        for ng, entry in model[n].items():
            ws = ctx.get(ng)
            if not ws:
                entry[1] = None if n > 1 else entry[1]
                continue
            seen = sum(10 ** model[n + 1][(*ng, w)][0] for w in ws)
            lower = sum(10 ** sc.logp(ng[1:], w) for w in ws)
            entry[1] = math.log10(max(1.0 - seen, 1e-12)) - math.log10(max(1.0 - lower, 1e-12))


def close_suffixes(model) -> int:
    """Remove n-grams whose suffix (n-1)-gram was pruned away; return how many."""
    removed = 0
    for n in range(max(model), 1, -1):
        drop = [ng for ng in model[n] if ng[1:] not in model[n - 1]]
        for ng in drop:
            del model[n][ng]
        removed += len(drop)
    if removed:
        recompute_backoffs(model)
    return removed


def write_arpa(model) -> str:
    out = io.StringIO()
    out.write("\\data\\\n")
    for n in sorted(model):
        out.write(f"ngram {n}={len(model[n])}\n")
    for n in sorted(model):
        out.write(f"\n\\{n}-grams:\n")
        for ng in sorted(model[n]):
            lp, bow = model[n][ng]
            if ng == (BOS,):
                lp = -99.0  # <s> is never predicted
            line = f"{max(lp, -99.0):.6f}\t{' '.join(ng)}"
            if bow is not None:
                line += f"\t{bow:.6f}"
            out.write(line + "\n")
    out.write("\n\\end\\\n")
    return out.getvalue()


# --------------------------------------------------------------------------------------------
# Training and pruning with kaldingram
# --------------------------------------------------------------------------------------------


def train_kn(sentences: list[list[str]], order: int) -> str:
    from kaldingram import train as kt

    counts = kt.NgramCounts(order)
    for words in sentences:
        counts.add_raw_counts_from_line(" ".join(words))
    counts.cal_discounting_constants()
    counts.cal_f()
    counts.cal_bow()
    buf = io.StringIO()
    counts.print_as_arpa(fout=buf)
    return buf.getvalue()


def entropy_prune(arpa_text: str, threshold: float) -> str:
    import logging

    from kaldingram import prune as kp

    logging.getLogger().setLevel(logging.WARNING)
    lm = kp.ArpaParser().loads(arpa_text)[0]
    kp.prune(lm, threshold, 1)
    return kp.ArpaParser().dumps(lm)


# --------------------------------------------------------------------------------------------


def own_perplexity(model, sentences: list[list[str]]) -> float:
    """Perplexity by the in-memory scorer, OOV words excluded (they also restart the context)."""
    sc = Scorer(model)
    logsum, n = 0.0, 0
    for words in sentences:
        hist: tuple[str, ...] = (BOS,)
        for w in [*words, EOS]:
            if (w,) not in model[1]:
                hist = ()
                continue
            logsum += sc.logp(hist, w)
            n += 1
            hist = (*hist, w)
    return 10 ** (-logsum / n)


def kenlm_perplexity(path: Path, sentences: list[list[str]]) -> dict | None:
    """SRILM-style perplexity with KenLM: OOV words are excluded from the sum and the count."""
    try:
        import kenlm
    except ImportError:
        print("kenlm not importable (pip install kenlm-ex): skipping the KenLM check")
        return None
    m = kenlm.Model(str(path))
    logsum, n, oov = 0.0, 0, 0
    for words in sentences:
        for (lp, _ngram_len, is_oov), _w in zip(
            m.full_scores(" ".join(words), bos=True, eos=True), [*words, EOS], strict=True
        ):
            if is_oov:
                oov += 1
                continue
            logsum += lp
            n += 1
    return {
        "sentences": len(sentences),
        "words": sum(len(s) for s in sentences),
        "oov_words": oov,
        "scored_tokens_incl_eos": n,
        "perplexity": 10 ** (-logsum / n),
        "kenlm_order": m.order,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fortunes-dir", type=Path, default=DEFAULT_FORTUNES_DIR)
    ap.add_argument("--out-dir", type=Path, default=Path("wfstdecode/data"))
    ap.add_argument("--order", type=int, default=3)
    ap.add_argument("--vocab-size", type=int, default=5000)
    ap.add_argument("--heldout-fraction", type=float, default=0.03)
    ap.add_argument("--prune-threshold", type=float, default=5e-6)
    ap.add_argument("--max-bytes", type=int, default=1_500_000, help="limit on the .arpa text")
    ap.add_argument("--num-test", type=int, default=60)
    ap.add_argument(
        "--num-test-oov", type=int, default=6, help="test sentences with exactly one OOV word"
    )
    ap.add_argument("--min-words", type=int, default=3)
    ap.add_argument("--max-words", type=int, default=8)
    ap.add_argument("--seed", type=int, default=20240611)
    args = ap.parse_args(argv)
    t0 = time.time()

    fortunes = read_fortunes(args.fortunes_dir)
    raw_sents = [s for _f, body in fortunes for s in split_sentences(body)]
    norm = [normalise(s) for s in raw_sents]
    pairs = [(r, w) for r, w in zip(raw_sents, norm, strict=True) if w]
    print(
        f"{len(fortunes)} fortunes, {len(pairs)} sentences, {sum(len(w) for _, w in pairs)} words"
    )

    rng = random.Random(args.seed)
    distinct = sorted({" ".join(w) for _, w in pairs})
    heldout = set(rng.sample(distinct, round(args.heldout_fraction * len(distinct))))
    train = [w for _, w in pairs if " ".join(w) not in heldout]
    freq = collections.Counter(w for s in train for w in s)
    vocab_list = sorted(freq, key=lambda w: (-freq[w], w))[: args.vocab_size]
    vocab = set(vocab_list)
    cover = sum(freq[w] for w in vocab) / sum(freq.values())
    print(
        f"train: {len(train)} sentences, {sum(freq.values())} words, {len(freq)} types; "
        f"vocab {len(vocab)} covers {100 * cover:.2f}% of training tokens"
    )

    # Held-out sentences: the raw text must be plain prose, so that the normalised words are a
    # faithful transcript of what is rendered / said.
    cands, seen = [], set()
    for raw, words in pairs:
        key = " ".join(words)
        if key not in heldout or key in seen or not _CLEAN_RAW.match(raw):
            continue
        if not args.min_words <= len(words) <= args.max_words:
            continue
        if any(len(w) == 1 and w not in ("a", "i") for w in words):  # initials, "A: ..." dialogue
            continue
        seen.add(key)
        cands.append(words)
    rng.shuffle(cands)
    n_oov_target = min(args.num_test_oov, args.num_test)
    test, n_oov = [], 0
    for words in cands:
        k = sum(w not in vocab for w in words)
        if k == 0 and len(test) - n_oov < args.num_test - n_oov_target:
            test.append(words)
        elif k == 1 and n_oov < n_oov_target:
            test.append(words)
            n_oov += 1
        if len(test) == args.num_test:
            break
    if len(test) < args.num_test:
        raise SystemExit(f"only {len(test)} test sentences found")
    heldout_all = [w for _, w in pairs if " ".join(w) in heldout]

    train_unk = [[w if w in vocab else UNK for w in s] for s in train]
    t1 = time.time()
    full = parse_arpa(train_kn(train_unk, args.order))
    print(
        f"kaldingram KN {args.order}-gram: "
        + ", ".join(f"{n}-grams {len(full[n])}" for n in sorted(full))
        + f" ({time.time() - t1:.1f} s)"
    )
    closed = drop_unk(full)
    check_model(closed)
    t1 = time.time()
    pruned = parse_arpa(entropy_prune(write_arpa(closed), args.prune_threshold))
    n_suffix = close_suffixes(pruned)
    figures = check_model(pruned)
    text = write_arpa(pruned)
    check_model(parse_arpa(text))  # the written text round-trips: counts, structure, sums
    counts = {n: len(pruned[n]) for n in sorted(pruned)}
    print(
        f"pruned (threshold {args.prune_threshold:g}): "
        + ", ".join(f"{n}-grams {c}" for n, c in counts.items())
        + f" (+{n_suffix} removed for lack of their suffix n-gram)"
        + f"; {len(text)} bytes ({time.time() - t1:.1f} s); "
        f"max |sum p - 1| over contexts {figures['max_normalisation_error']:.1e}"
    )
    if len(text) > args.max_bytes:
        raise SystemExit(
            f"ARPA is {len(text)} bytes > --max-bytes {args.max_bytes}: "
            "raise --prune-threshold or lower --vocab-size"
        )

    own = {
        "unpruned_test": own_perplexity(closed, test),
        "unpruned_heldout": own_perplexity(closed, heldout_all),
        "pruned_test": own_perplexity(pruned, test),
        "pruned_heldout": own_perplexity(pruned, heldout_all),
    }
    print(
        "perplexity (own scorer, OOV excluded): test_sentences "
        f"{own['unpruned_test']:.1f} unpruned -> {own['pruned_test']:.1f} pruned; all held-out "
        f"{own['unpruned_heldout']:.1f} -> {own['pruned_heldout']:.1f}"
    )

    args.out_dir.mkdir(parents=True, exist_ok=True)
    arpa_path = args.out_dir / "lm.arpa.gz"
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(text.encode("ascii"))
    arpa_path.write_bytes(buf.getvalue())
    (args.out_dir / "test_sentences.txt").write_text("".join(" ".join(s) + "\n" for s in test))
    (args.out_dir / "tokens.txt").write_text("".join(f"{t} {i}\n" for i, t in enumerate(TOKENS)))
    lm_words = sorted(ng[0] for ng in pruned[1] if ng[0] not in (BOS, EOS))
    assert all(set(w) <= set(TOKENS[2:]) for w in lm_words)
    (args.out_dir / "lexicon.txt").write_text("".join(f"{w} {' '.join(w)}\n" for w in lm_words))

    ppl_test = kenlm_perplexity(arpa_path, test)
    ppl_heldout = kenlm_perplexity(arpa_path, heldout_all)
    info = {
        "source": "Debian fortunes + fortunes-min, /usr/share/games/fortunes/*",
        "excluded_files": sorted(EXCLUDED_FILES),
        "trainer": "kaldingram (Kneser-Ney backoff, SRILM -ukndiscount recipe)",
        "order": args.order,
        "vocab_size": args.vocab_size,
        "vocab_coverage_train": cover,
        "seed": args.seed,
        "heldout_fraction": args.heldout_fraction,
        "prune_threshold": args.prune_threshold,
        "train_sentences": len(train),
        "train_words": sum(freq.values()),
        "ngram_counts": counts,
        "arpa_bytes": len(text),
        "arpa_gz_bytes": arpa_path.stat().st_size,
        "test_sentences": len(test),
        "test_sentences_with_oov": n_oov,
        "perplexity_own_scorer": own,
        "perplexity_test_sentences": ppl_test,
        "perplexity_heldout": ppl_heldout,
    }
    (args.out_dir / "lm_info.json").write_text(json.dumps(info, indent=2) + "\n")
    for name, p in (("test_sentences.txt", ppl_test), ("all held-out", ppl_heldout)):
        if p:
            print(
                f"KenLM perplexity on {name}: {p['perplexity']:.1f} "
                f"({p['sentences']} sentences, {p['words']} words, {p['oov_words']} OOV excluded)"
            )
    print(f"wrote {arpa_path} ({info['arpa_gz_bytes']} bytes) in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

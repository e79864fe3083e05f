#!/usr/bin/env python
"""Cut a big real ARPA model down to one whose TLG builds in seconds (`restrict_arpa`).

Keeps the --words most probable unigrams (with --tokens: only words spelled by its characters,
blank and --separator excepted), the n-grams over that vocabulary, and at most --max-ngrams
n-grams of each order >= 2 (those of highest chain probability, prefix- and suffix-closed).
Probabilities and backoff weights are copied, not renormalised. With --lexicon, also writes the
character lexicon of the kept words (``word c h a r s``, as in wfstdecode/data/lexicon.txt).

    python tools/restrict_arpa.py --arpa ../shared/data/en-us.arpa.gz \\
        --tokens wfstdecode/data/tokens.txt --words 20000 --max-ngrams 600000 400000 \\
        --out /tmp/en-us-20k.arpa.gz --lexicon /tmp/en-us-20k.lexicon.txt
"""

from __future__ import annotations

import argparse
import gzip
import time
from pathlib import Path

from wfstdecode.symbols import BLANK, SymbolTable
from wfstdecode.testing.lm import arpa_text, restrict_arpa


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--arpa", required=True, type=Path, help="source ARPA (plain or .gz)")
    ap.add_argument("--words", required=True, type=int, help="vocabulary size to keep")
    ap.add_argument("--max-ngrams", type=int, nargs="*", default=[],
                    help="at most this many 2-grams, 3-grams, … (in order)")  # fmt: skip
    ap.add_argument("--tokens", type=Path, help="tokens.txt of a character model")
    ap.add_argument("--separator", default="|", help="word-separator token of --tokens")
    ap.add_argument("--out", required=True, type=Path, help="ARPA to write (.gz: gzipped)")
    ap.add_argument("--lexicon", type=Path, help="also write the kept words' character lexicon")
    args = ap.parse_args(argv)
    if args.words < 1:
        ap.error(f"--words must be >= 1; got {args.words}")
    if any(n < 0 for n in args.max_ngrams):
        ap.error(f"--max-ngrams must be >= 0; got {args.max_ngrams}")
    for out in (args.out, args.lexicon):  # before the minutes of work, not after
        if out is not None and not out.parent.is_dir():
            ap.error(f"{out}: its folder {out.parent} does not exist")

    alphabet = None
    if args.tokens:
        alphabet = {s for s, _ in SymbolTable.read(args.tokens)} - {BLANK, args.separator}
    start = time.perf_counter()
    model = restrict_arpa(args.arpa, args.words, args.max_ngrams, alphabet)
    text = arpa_text(model).encode("utf-8")
    if args.out.suffix == ".gz":
        text = gzip.compress(text, mtime=0)
    args.out.write_bytes(text)
    words = sorted(k[0] for k in model.ngrams[0] if k[0] not in ("<s>", "</s>"))
    if args.lexicon:
        args.lexicon.write_text("".join(f"{w} {' '.join(w)}\n" for w in words), encoding="utf-8")
    counts = " / ".join(f"{c:,}" for c in model.counts())
    print(f"wrote {args.out}: {len(words):,} words, n-grams {counts} "
          f"({time.perf_counter() - start:.1f} s)")  # fmt: skip


if __name__ == "__main__":
    main()

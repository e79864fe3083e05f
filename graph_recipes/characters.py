"""Recipe: TLG for a character CTC model; words are spelled, a separator token between words."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import arpa_words, build_and_write, parser, run_reporting

from wfstdecode import SymbolTable
from wfstdecode.graph.lexicon import spell_lexicon


def main(argv: list[str] | None = None) -> Path:
    p = parser(__doc__)
    p.add_argument("--tokens", required=True, type=Path, help="tokens.txt: <blk> 0, then chars")
    p.add_argument("--separator", default=None, help="word-separator token, e.g. '|'")
    args = p.parse_args(argv)

    def read_inputs():
        tokens = SymbolTable.read(args.tokens)
        return tokens, *spell_lexicon(arpa_words(args.arpa), tokens, args.separator)

    return build_and_write(args, read_inputs, separator=args.separator, recipe="characters",
                           tokens=str(args.tokens))  # fmt: skip


if __name__ == "__main__":
    sys.exit(run_reporting(main))

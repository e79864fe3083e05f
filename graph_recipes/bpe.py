"""Recipe: TLG for a BPE / unigram-piece CTC model; the lexicon splits each ARPA word with the
sentencepiece model. Without --tokens, tokens.txt is the model's pieces numbered as the model
numbers them when it has a blank piece (<blk> or <blank>, usually id 0), else with <blk> at id 0
and every piece shifted up by one."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import arpa_words, build_and_write, parser, run_reporting

from wfstdecode import SymbolTable
from wfstdecode.graph.lexicon import load_sentencepiece, sentencepiece_lexicon
from wfstdecode.symbols import blank_symbol


def tokens_from_sentencepiece(model: Path) -> SymbolTable:
    sp = load_sentencepiece(model)
    pieces = SymbolTable.from_list(sp.id_to_piece(i) for i in range(sp.get_piece_size()))
    if blank_symbol(pieces) is not None:  # the model's own blank, wherever it is: its numbering
        return pieces
    return SymbolTable.from_list(["<blk>", *pieces.symbols()])


def main(argv: list[str] | None = None) -> Path:
    p = parser(__doc__)
    p.add_argument("--spm", required=True, type=Path, help="sentencepiece .model file")
    p.add_argument("--tokens", type=Path, help="tokens.txt of the acoustic model (optional)")
    args = p.parse_args(argv)

    def read_inputs():
        tokens = (
            SymbolTable.read(args.tokens) if args.tokens else tokens_from_sentencepiece(args.spm)
        )
        return tokens, *sentencepiece_lexicon(arpa_words(args.arpa), args.spm, tokens)

    tokens = {"tokens": str(args.tokens)} if args.tokens else {}
    return build_and_write(args, read_inputs, recipe="bpe", spm=str(args.spm.absolute()),
                           **tokens)  # fmt: skip


if __name__ == "__main__":
    sys.exit(run_reporting(main))

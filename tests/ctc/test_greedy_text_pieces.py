"""`decode --text` prints the greedy CTC WER beside the graph's. The greedy transcript joins
tokens with spaces unless every token is one character or ``|``: a SentencePiece model's pieces
("▁the", "▁c", "at") came out as "▁the ▁c at", so its greedy WER compared pieces with words
(100% for a perfect greedy output)."""

import numpy as np

from wfstdecode import SymbolTable
from wfstdecode.ctc.npz import greedy_ctc_texts


def test_sentencepiece_pieces_are_joined_into_words():
    tokens = SymbolTable.from_list(["<blk>", "▁the", "▁c", "at"])
    frames = [1, 0, 2, 3, 3]  # ▁the <blk> ▁c at at
    lp = np.full((1, len(frames), 4), -10.0, np.float32)
    lp[0, np.arange(len(frames)), frames] = 0.0
    assert greedy_ctc_texts(lp, [len(frames)], tokens) == ["the cat"]

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


def _greedy(symbols, frames):
    tokens = SymbolTable.from_list(symbols)
    lp = np.full((1, len(frames), len(symbols)), -10.0, np.float32)
    lp[0, np.arange(len(frames)), frames] = 0.0
    return greedy_ctc_texts(lp, [len(frames)], tokens)


def test_special_symbols_do_not_make_characters_tokens():
    """A character table with <unk> (or <sos/eos>, as icefall's hold) is still characters: its
    greedy text was 'a b | b a', scored against words."""
    frames = [2, 0, 3, 1, 3, 2]  # a <blk> b | b a
    assert _greedy(["<blk>", "|", "a", "b"], frames) == ["ab ba"]
    assert _greedy(["<blk>", "|", "a", "b", "<unk>"], frames) == ["ab ba"]
    assert _greedy(["<blk>", "<sos/eos>", "|", "a", "b", "<unk>"],
                   [f + (f > 0) for f in frames]) == ["ab ba"]  # fmt: skip


def test_character_sentencepiece_pieces_are_joined_into_words():
    """A character-level SentencePiece table ("\u2581" a piece of its own) without <unk>: its
    greedy text was one word, '\u2581ab\u2581ba'."""
    assert _greedy(["<blk>", "\u2581", "a", "b"], [1, 2, 3, 1, 3, 2]) == ["ab ba"]

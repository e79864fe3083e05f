"""Words from a character transducer's tokens: split at the separator, each word's frames from
its first and last character (separators belong to no word)."""

import dataclasses

from wfstdecode import Hypothesis, SymbolTable
from wfstdecode.models.speech_transducer import CHARS
from wfstdecode.speech.transcribe import spelled_words

TOKENS = SymbolTable.from_list(CHARS)


def hyp(text: str, frames: list[int]) -> Hypothesis:
    ids = tuple(TOKENS.id("|" if c == " " else c) for c in text)
    return Hypothesis(tokens=ids, timestamps=tuple(frames), score=-1.0)


def test_words_and_their_frames():
    h = spelled_words(hyp("as it", [2, 4, 6, 7, 7]), TOKENS)
    assert h.words == ("as", "it") and h.word_timestamps == ((2, 4), (7, 7))
    assert h.tokens == hyp("as it", [2, 4, 6, 7, 7]).tokens and h.score == -1.0


def test_leading_trailing_and_repeated_separators():
    h = spelled_words(hyp("  don't  ", [0, 1, 3, 3, 4, 5, 8, 9, 9]), TOKENS)
    assert h.words == ("don't",) and h.word_timestamps == ((3, 8),)
    assert spelled_words(hyp("", []), TOKENS).words == ()


def test_a_tdt_words_end_is_its_last_characters_duration():
    """A TDT token emitted at frame t with duration d covers frames t .. t + d - 1 (NeMo's
    offsets end at t + d): a word ended at its last character's emission frame, short by up to
    d - 1 frames; within the utterance where its length is given."""
    h = dataclasses.replace(hyp("as it", [2, 4, 6, 7, 8]), durations=(2, 3, 1, 1, 4))
    assert spelled_words(h, TOKENS).word_timestamps == ((2, 6), (7, 11))
    assert spelled_words(h, TOKENS, frames=10).word_timestamps == ((2, 6), (7, 9))
    zero = dataclasses.replace(h, durations=(0, 0, 0, 0, 0))  # (a 0 duration stays on its frame)
    assert spelled_words(zero, TOKENS).word_timestamps == ((2, 4), (7, 8))

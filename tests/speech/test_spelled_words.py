"""Words from a character transducer's tokens: split at the separator, each word's frames from
its first and last character (separators belong to no word)."""

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

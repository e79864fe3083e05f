"""Boost lists resolved in one compiled call (`ctc.word_index`) against Python's own rule —
``key.split()``, each word looked up — on random keys with every kind of whitespace, unknown
words, non-ASCII words and malformed keys; and the repeated-phrase check of the bulk path."""

import numpy as np
import pytest

from wfstdecode.ctc.phrases import PhraseAutomaton, PhraseList, has_repeat
from wfstdecode.ctc.word_index import phrase_ids_bulk, word_index
from wfstdecode.symbols import SymbolTable

VOCAB = ["<eps>", "cat", "cap", "dog", "kubernetes", "café", "東京", "naïve", "a", "ab", "#0"]
SEPARATORS = [" ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", " \t "]
UNICODE_SPACES = ["\xa0", "\u3000", "\u2009", "\x85", "\u2028"]


def python_rule(keys, words, max_words):
    """What the bulk path must give: ``(ids, lengths)``, or None where any key is not a phrase
    of known words (the epsilon excluded) of 1..max_words words."""
    ids, lengths = [], []
    for key in keys:
        if not isinstance(key, str):
            return None
        parts = key.split()
        found = [words.get(p) for p in parts]
        if not 0 < len(parts) <= max_words or None in found or 0 in found:
            return None
        ids += found
        lengths.append(len(parts))
    return ids, lengths


def random_key(rng, unknown_rate):
    n = int(rng.integers(0, 5))
    pool = VOCAB[1:] + (["zebra", "CAT", "caf", "東"] if rng.random() < unknown_rate else [])
    words = [pool[int(rng.integers(len(pool)))] for _ in range(n)]
    out = SEPARATORS[int(rng.integers(len(SEPARATORS)))] if rng.random() < 0.2 else ""
    for i, w in enumerate(words):
        if i:
            out += SEPARATORS[int(rng.integers(len(SEPARATORS)))]
        out += w
    return out + (" " if rng.random() < 0.2 else "")


@pytest.mark.parametrize("seed", range(30))
def test_bulk_ids_equal_split_and_look_up(seed):
    rng = np.random.default_rng(seed)
    words = SymbolTable.from_list(VOCAB)
    for _ in range(20):
        keys = [random_key(rng, 0.05) for _ in range(int(rng.integers(1, 12)))]
        keys = [k for k in keys if k.split()] if rng.random() < 0.8 else keys
        if not keys:
            continue
        max_words = int(rng.integers(1, 5))
        want = python_rule(keys, words, max_words)
        got = phrase_ids_bulk(keys, words, max_words)
        if want is None:
            assert got is None, keys
        else:
            assert got is not None, keys
            assert got[0].tolist() == want[0] and got[1].tolist() == want[1]


@pytest.mark.parametrize("space", UNICODE_SPACES)
def test_keys_the_compiled_pass_cannot_split_are_left_to_python(space):
    """Non-ASCII whitespace (str.split splits there), the separator byte, non-strings and lone
    surrogates: None, so the phrase-by-phrase path decides."""
    words = SymbolTable.from_list(VOCAB)
    assert phrase_ids_bulk(["cat dog", f"cat{space}dog"], words, 8) is None
    assert phrase_ids_bulk(["cat\0dog"], words, 8) is None
    assert phrase_ids_bulk(["cat", 3], words, 8) is None
    assert phrase_ids_bulk(["cat", "\ud800"], words, 8) is None
    assert phrase_ids_bulk(["<eps>"], words, 8) is None  # the epsilon is never a word
    assert phrase_ids_bulk([np.str_("café  東京")], words, 8)[0].tolist() == [5, 6]


def test_the_index_follows_symbols_added_to_the_table():
    words = SymbolTable.from_list(VOCAB)
    assert phrase_ids_bulk(["cat zebra"], words, 8) is None
    first = word_index(words)
    assert word_index(words) is first  # made once
    zebra = words.add("zebra")
    assert phrase_ids_bulk(["cat zebra"], words, 8)[0].tolist() == [1, zebra]


@pytest.mark.parametrize("seed", range(20))
def test_has_repeat_finds_exactly_the_lists_with_a_phrase_twice(seed):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        phrases = [tuple(rng.integers(1, 4, size=int(rng.integers(1, 4))).tolist())
                   for _ in range(int(rng.integers(1, 9)))]  # fmt: skip
        words = np.array([w for p in phrases for w in p], np.int64)
        lengths = np.array([len(p) for p in phrases], np.int64)
        assert has_repeat(words, lengths) == (len(set(phrases)) < len(phrases)), phrases


def test_a_phrase_list_reads_as_its_mapping_and_builds_the_same_automaton():
    words = np.array([1, 2, 3, 2, 4], np.int64)
    lengths = np.array([2, 1, 2], np.int64)
    bonus = np.array([1.5, -0.5, 2.0], np.float32)
    listed = PhraseList(words, lengths, bonus)
    mapping = {(1, 2): np.float32(1.5), (3,): np.float32(-0.5), (2, 4): np.float32(2.0)}
    assert listed == mapping and len(listed) == 3 and listed[(3,)] == np.float32(-0.5)
    a, b = PhraseAutomaton(listed), PhraseAutomaton(mapping)
    for name in ("key", "child", "fail", "enter", "phi", "gain", "word_bits"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name

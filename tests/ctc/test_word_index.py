"""Boost lists resolved in one compiled call (`ctc.word_index`) against Python's own rule —
``key.split()``, each word looked up — on random keys with every kind of whitespace, unknown
words, non-ASCII words and malformed keys; and the repeated-phrase check of the bulk path."""

import numpy as np
import pytest

from wfstdecode.ctc.phrases import PhraseAutomaton, PhraseList, _mixed, has_repeat
from wfstdecode.ctc.word_index import fnv1a, phrase_ids_bulk, word_index
from wfstdecode.symbols import SymbolTable

VOCAB = ["<eps>", "cat", "cap", "dog", "kubernetes", "café", "東京", "naïve", "a", "ab", "#0"]
SEPARATORS = [" ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", " \t "]
UNICODE_SPACES = ["\xa0", "\u3000", "\u2009", "\x85", "\u2028"]


def python_rule(keys, words, max_words):
    """What the bulk path must give: per key, its word ids if it is a phrase of 1..max_words
    known words (the epsilon excluded), else None."""
    out = []
    for key in keys:
        parts = key.split()
        found = [words.get(p) for p in parts]
        good = 0 < len(parts) <= max_words and None not in found and 0 not in found
        out.append(found if good else None)
    return out


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
        ids, lengths, ok = phrase_ids_bulk(keys, words, max_words)
        assert ok.tolist() == [w is not None for w in want], keys
        assert ids.tolist() == [i for w in want if w is not None for i in w], keys
        assert lengths.tolist() == [len(w) for w in want if w is not None], keys


@pytest.mark.parametrize("space", UNICODE_SPACES)
def test_keys_the_compiled_pass_cannot_split_are_left_to_python(space):
    """Non-ASCII whitespace (str.split splits there), the separator byte, non-strings and lone
    surrogates: None, so the phrase-by-phrase path decides for the whole list."""
    words = SymbolTable.from_list(VOCAB)
    assert phrase_ids_bulk(["cat dog", f"cat{space}dog"], words, 8) is None
    assert phrase_ids_bulk(["cat\0dog"], words, 8) is None
    assert phrase_ids_bulk(["cat", "dog\0", "cap"], words, 8) is None
    assert phrase_ids_bulk(["cat", ""], words, 8)[2].tolist() == [True, False]  # empty: not ok
    assert phrase_ids_bulk(["cat", 3], words, 8) is None
    assert phrase_ids_bulk(["cat", "\ud800"], words, 8) is None
    assert phrase_ids_bulk(["<eps>"], words, 8)[2].tolist() == [False]  # never a word
    assert phrase_ids_bulk([np.str_("café  東京")], words, 8)[0].tolist() == [5, 6]


def test_the_index_follows_symbols_added_to_the_table():
    words = SymbolTable.from_list(VOCAB)
    assert phrase_ids_bulk(["cat zebra"], words, 8)[2].tolist() == [False]
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


def test_the_repeat_checks_hash_spreads_phrases_of_word_ids():
    """`has_repeat` probes a table from a hash of each phrase's word ids: FNV-1a alone over
    ids (not bytes) put 1,000 random bigrams on ~60 slots' runs; stirred, they spread as
    random keys do (~790 distinct of 2,048 expected)."""
    rng = np.random.default_rng(0)
    words = rng.integers(1, 70_000, 2_000).astype(np.int64)
    mask = np.uint64(2047)
    homes = {int(_mixed(np.uint64(fnv1a(words, 2 * p, 2 * p + 2))) & mask) for p in range(1_000)}
    assert len(homes) > 700


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

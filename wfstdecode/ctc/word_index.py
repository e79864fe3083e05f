"""Boost lists to word ids in one compiled call: the graph's word table as a hash table over the
words' UTF-8 bytes (`WordIndex`, made once per table and kept while the table is unchanged), and
`phrase_ids_bulk`, which splits a whole list of phrases into words and looks every word up.

Why: a request's own hotword list (a contact list, a meeting's names) is compiled for that
request, and splitting and looking up 1,000 phrases in Python took ~0.6 ms — about half the
search of a short utterance. Here a list is one joined byte string and one Numba call.

It gives exactly what ``[tuple(words.get(w) for w in key.split()) for key in keys]`` gives for
the keys that are phrases of known words, and says which keys are not (a word not in the table
or the epsilon, id 0; no word; more than ``max_words``): the caller's phrase-by-phrase path
takes those (and names them in its warning or error). The whole list goes that way (None) when
a key is not a string or holds the phrase separator ``\\0`` or a non-ASCII whitespace character
(``str.split`` splits at those; the compiled pass splits at ASCII whitespace only).
"""

from __future__ import annotations

import re
import weakref
from typing import NamedTuple

import numpy as np
from numba import njit

from ..symbols import SymbolTable

FNV_OFFSET = np.uint64(14695981039346656037)  # FNV-1a, 64 bits
FNV_PRIME = np.uint64(1099511628211)
_NON_ASCII_SPACE = re.compile("[\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
# str.split's ASCII whitespace: \t \n \v \f \r, the four information separators, space
_ASCII_SPACE = np.zeros(256, np.bool_)
_ASCII_SPACE[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True


class WordIndex(NamedTuple):
    """A word table's symbols as UTF-8 bytes (``blob``; symbol ``i`` at ``info[i, 0]``, of
    ``info[i, 1]`` bytes, id ``info[i, 2]``: one 24-byte row to fetch) and an open-addressing
    hash table of them (``slots``: -1 or the symbol's hash's upper 31 bits << 32 | ``i``,
    linear probing from the FNV-1a hash of the bytes & ``mask``, capacity - 1)."""

    blob: np.ndarray
    info: np.ndarray
    slots: np.ndarray
    mask: int


_INDEXES: dict[int, tuple] = {}  # id(table) -> (its size then, WordIndex), while it lives


def word_index(words: SymbolTable) -> WordIndex:
    """``words``' index, made on first use (~10 ms for 72k words) and again after `add`."""
    kept = _INDEXES.get(id(words))
    if kept is None or kept[0] != len(words):  # a table only grows (`SymbolTable.add`)
        symbols = list(words)
        encoded = [s.encode("utf-8", "surrogatepass") for s, _ in symbols]
        info = np.zeros((len(encoded), 3), np.int64)
        info[:, 1] = [len(e) for e in encoded]
        info[1:, 0] = np.cumsum(info[:-1, 1])
        info[:, 2] = [i for _, i in symbols]
        blob = np.frombuffer(b"".join(encoded), np.uint8)
        cap = 1 << max(1, (2 * len(encoded) - 1).bit_length())
        if kept is None:
            weakref.finalize(words, _INDEXES.pop, id(words), None)
        kept = (len(words), WordIndex(blob, info, _fill_slots(blob, info, cap), cap - 1))
        _INDEXES[id(words)] = kept
    return kept[1]


def phrase_ids_bulk(keys: list, words: SymbolTable, max_words: int):
    """``(word ids, words per phrase, ok)`` of the phrase strings ``keys``: ``ok`` (bool per
    key) says which keys are phrases of 1..``max_words`` known words (the epsilon excluded);
    the ids and lengths are those keys' only, in order. None where the list as a whole cannot
    be split here (module docstring)."""
    try:
        joined = "\0".join(keys)
    except TypeError:  # a key that is not a string
        return None
    if not joined.isascii() and _NON_ASCII_SPACE.search(joined):
        return None
    try:
        data = np.frombuffer(joined.encode("utf-8"), np.uint8)
    except UnicodeEncodeError:  # a lone surrogate: no symbol of a table read from a file
        return None
    index = word_index(words)
    ids, lengths, ok, split = _split_and_look_up(
        data, len(keys), _ASCII_SPACE, index.blob, index.info, index.slots, index.mask, max_words
    )
    return (ids, lengths, ok) if split else None


@njit(inline="always", cache=True)
def fnv1a(data, start, stop):
    """The FNV-1a hash (64 bits) of ``data[start:stop]`` (bytes, or any non-negative ints)."""
    h = FNV_OFFSET
    for i in range(start, stop):
        h = (h ^ np.uint64(data[i])) * FNV_PRIME
    return h


@njit(inline="always", cache=True)
def same_run(x, a, y, b, n):
    """Whether ``x[a:a+n]`` equals ``y[b:b+n]``."""
    for k in range(n):  # noqa: SIM110 (all() over a generator does not compile in Numba)
        if x[a + k] != y[b + k]:
            return False
    return True


@njit(cache=True)
def _fill_slots(blob, info, cap):
    slots = np.full(cap, -1, np.int64)
    mask = np.uint64(cap - 1)
    for i in range(info.shape[0]):
        h = fnv1a(blob, info[i, 0], info[i, 0] + info[i, 1])
        slot = h & mask
        while slots[slot] >= 0:
            slot = (slot + np.uint64(1)) & mask
        slots[slot] = np.int64(h >> np.uint64(33)) << 32 | i  # >= 0: 31 bits of the hash
    return slots


@njit(cache=True)
def _split_and_look_up(data, n_keys, space, blob, info, slots, mask, max_words):
    """``(word ids, words per phrase, ok per key, split)`` of ``n_keys`` phrases joined by zero
    bytes (ids and lengths of the ok keys only); ``split`` is False when the zero bytes do not
    count ``n_keys`` phrases (a key held one).

    In three passes, so that the table's cache misses (the table is megabytes, and cold after
    a search) overlap: the words and their hashes, then every word's first slot, then each
    word checked against its symbol's bytes (probing on where the first slot was not it)."""
    most = data.shape[0] // 2 + 1  # a word and a separator: >= 2 bytes
    begin = np.empty(most, np.int64)
    stop = np.empty(most, np.int64)
    hashes = np.empty(most, np.uint64)
    owner = np.empty(most, np.int64)  # the key of each word
    lengths = np.zeros(n_keys, np.int64)
    ok = np.ones(n_keys, np.bool_)
    n, p, i, end = 0, 0, 0, data.shape[0]
    while p < n_keys:
        while i < end and data[i] != 0:
            if space[data[i]]:
                i += 1
                continue
            j = i
            while j < end and data[j] != 0 and not space[data[j]]:
                j += 1
            begin[n], stop[n], hashes[n], owner[n] = i, j, fnv1a(data, i, j), p
            n += 1
            lengths[p] += 1
            i = j
        if (p == n_keys - 1) != (i >= end):  # a key held the separator byte: the count is off
            return begin[:0], lengths, ok, False
        ok[p] = 0 < lengths[p] <= max_words
        p += 1
        i += 1  # past the separator
    umask = np.uint64(mask)
    first = np.empty(n, np.int64)
    for k in range(n):
        first[k] = slots[hashes[k] & umask]
    ids = np.empty(n, np.int64)
    for k in range(n):
        h, slot, entry = hashes[k], hashes[k] & umask, first[k]
        fingerprint = np.int64(h >> np.uint64(33))
        ids[k] = 0  # not found: as the epsilon, never a word
        while entry >= 0:
            if entry >> 32 == fingerprint:
                sym = entry & 0xFFFFFFFF
                size = stop[k] - begin[k]
                if size == info[sym, 1] and same_run(data, begin[k], blob, info[sym, 0], size):
                    ids[k] = info[sym, 2]
                    break
            slot = (slot + np.uint64(1)) & umask
            entry = slots[slot]
        if ids[k] == 0:
            ok[owner[k]] = False
    m = 0
    for k in range(n):  # the ok keys' words, in place
        if ok[owner[k]]:
            ids[m] = ids[k]
            m += 1
    kept = 0
    for q in range(n_keys):
        if ok[q]:
            lengths[kept] = lengths[q]
            kept += 1
    return ids[:m].copy(), lengths[:kept].copy(), ok, True

"""Recently compiled phrase lists, kept across `decode_ctc` calls: a server or a stream loop that
sends the same hotword list with every request compiles it once, as a recognizer's hotword list
is compiled once in sherpa-onnx or NeMo, where it is given with the recognizer, not per call.

A list is found again by its content — its phrases and bonuses, in order (the same list sent again;
the same phrases in another order compile afresh) — and the graph's word table and oov spelling
(`OovSpeller.recipe`: each call makes its own speller) it was resolved against, so editing a dict
between calls is seen. Looking a 1,000-phrase list up costs ~0.05 ms (hashing it), compiling it
~0.2-0.5 ms (`word_index`, `phrases`). Lists under ``MIN_PHRASES`` are not kept (they compile in
about the time of the look-up), and the cache holds at most ``MAX_KEPT_PHRASES`` phrases in all
(~400 bytes a two-word phrase: ~80 MB), least recently used dropped first (so lists that recur only
after more than that compile every time).
The cache holds the word and token tables weakly: a list resolved against a graph that has
since been dropped (a service that reloads its graph) goes with it, not kept until evicted.
`clear_phrase_cache` empties it (benchmarks that time the compile do).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict

MIN_PHRASES = 64
MAX_KEPT_PHRASES = 200_000

_LOCK = threading.Lock()
# A child forked while another thread held it would wait on it for ever: the child's is new.
os.register_at_fork(after_in_child=_LOCK._at_fork_reinit)
_ENTRIES: OrderedDict = OrderedDict()  # key -> _Entry
_BY_RESOLVED: dict[int, object] = {}  # id(resolved mapping) -> key, for its automaton
_KEPT = [0]  # phrases held
_SOME_DIED = [False]  # a table an entry was resolved against was freed: purge at the next use


class _Key(tuple):
    """A list's key with its hash computed once (a tuple's is recomputed at every use)."""

    def __hash__(self) -> int:
        return self.hash_value


class _Entry:
    __slots__ = ("automata", "resolved", "said", "size", "tokens", "unknown", "words")

    def __init__(self, words, tokens, resolved, unknown, said, size):
        self.words = weakref.ref(words, _note_death)
        self.tokens = None if tokens is None else weakref.ref(tokens, _note_death)
        self.resolved, self.unknown = resolved, unknown
        self.said = said  # its warnings, given again with it
        self.size = size  # phrases of the list
        self.automata: dict[int, object] = {}  # slot label -> PhraseAutomaton

    def resolved_against(self, words, tokens) -> bool:
        mine = None if self.tokens is None else self.tokens()
        return self.words() is words and mine is tokens


def list_key(table, words, oov):
    """The cache key of a boosts mapping, or None when it is not kept (small, or unhashable)."""
    if not MIN_PHRASES <= len(table) <= MAX_KEPT_PHRASES:
        return None
    spelling = None if oov is None else (id(oov.tokens), oov.recipe)
    # (the table's size too: a word added to it may be one a kept list could not resolve)
    size = len(words) if words is not None else 0
    key = _Key(((id(words), size), spelling, tuple(table), tuple(table.values())))
    try:
        key.hash_value = tuple.__hash__(key)
        return key
    except TypeError:  # an unhashable key or bonus: resolving reports it if it is wrong
        return None


def resolved_list(key, words, oov):
    """``(resolved mapping, unknown words, warnings)`` of a list seen before, else None."""
    with _LOCK:
        _purge()
        entry = _ENTRIES.get(key)
        # the ids in the key may belong to new objects once the old were freed
        if entry is None or not entry.resolved_against(words, _tokens(oov)):
            return None
        _ENTRIES.move_to_end(key)
        return entry.resolved, entry.unknown, entry.said


def keep_resolved(key, words, oov, resolved, unknown: list, said: list) -> None:
    if resolved is None:
        return
    size = len(key[2])
    with _LOCK:
        _purge()
        old = _ENTRIES.pop(key, None)
        if old is not None:
            _forget(old)
        _ENTRIES[key] = _Entry(words, _tokens(oov), resolved, list(unknown), list(said), size)
        _BY_RESOLVED[id(resolved)] = key
        _KEPT[0] += size
        while _KEPT[0] > MAX_KEPT_PHRASES:
            _forget(_ENTRIES.pop(next(iter(_ENTRIES))))


def _note_death(_ref) -> None:
    # (a weakref callback may run anywhere, even inside `_LOCK`: it only raises a flag)
    _SOME_DIED[0] = True


def _purge() -> None:
    """Drop the entries whose tables were freed (`_LOCK` held)."""
    if _SOME_DIED[0]:
        _SOME_DIED[0] = False
        for key in [k for k, e in _ENTRIES.items() if e.words() is None
                    or (e.tokens is not None and e.tokens() is None)]:  # fmt: skip
            _forget(_ENTRIES.pop(key))


def _tokens(oov):
    """The token table an oov speller spells with (None without one)."""
    return None if oov is None else oov.tokens


def _forget(entry: _Entry) -> None:
    _BY_RESOLVED.pop(id(entry.resolved), None)
    _KEPT[0] -= entry.size


def automaton(resolved, slot_label: int, build):
    """The automaton of ``resolved`` for ``slot_label``: the one built before when the mapping
    is a kept list's, else ``build(resolved, slot_label)`` (kept with the list when it is)."""
    with _LOCK:
        key = _BY_RESOLVED.get(id(resolved))
        entry = _ENTRIES.get(key) if key is not None else None
        if entry is not None and entry.resolved is resolved:
            found = entry.automata.get(slot_label)
            if found is not None:
                return found
        else:
            entry = None
    made = build(resolved, slot_label)
    if entry is not None:
        with _LOCK:
            entry.automata[slot_label] = made
    return made


def clear_phrase_cache() -> None:
    """Forget every kept list."""
    with _LOCK:
        _ENTRIES.clear()
        _BY_RESOLVED.clear()
        _KEPT[0] = 0

"""Per-utterance word and phrase boosting (gpu-wfst-beam-search-ctc.txt §3.2, Fig. 5, extended
to phrases as icefall's and sherpa-onnx's hotwords are).

``boosts`` map a word or a phrase to a bonus per word (a positive bonus makes it more likely).
Each utterance's phrases compile into a `phrases.PhraseAutomaton` (Aho-Corasick over word ids);
in the search every arc with a non-epsilon output label ``w`` taken in context state ``x`` costs
``arc_cost - bonus`` and moves the token to the automaton's next state: decoding with TLG∘C
without composing. A list of single words gives a one-state automaton: the one-state boosting
acceptor of the paper, one token per graph state as without boosts.

All utterances' automata live in one set of flat arrays (`BoostTables`), the same structure the
GPU backend keeps on the device. The goto function is one open-addressing hash table per
utterance with linear probing, keyed by ``(node, word)`` (each automaton's own table, built by
`phrases.py`, copied in):

* ``key`` int64 [total]: the entry's ``(node << 32) | word``, or -1 for an empty slot (one load
  and one comparison per probe);
* ``gain`` float32 [total]: the bonus of reaching the child from the root
  (`phrases.PhraseAutomaton.gain`); ``enter`` int32 [total]: the context state it leads to;
* ``offset`` int64 [B]: where utterance b's table starts; ``mask`` int64 [B]: its capacity - 1
  (a power of two, at least twice the entries), or -1 for no table;

and per node, from ``node_offset[b]``: ``fail`` int32 (the failure link) and ``phi`` float32 (the
anticipated bonus a token in that state gives back if the match fails or the utterance ends).
``contexts[b]`` counts the context states a token of utterance b can be in (1 for words only);
``worst[b]`` is the most its phrases add to an arc's cost (the cpu search's pre-pass bound).
``bits`` int64, from ``bits_offset[b]``, ``bits_len[b]`` entries: the words of utterance b's
phrases as a bitset (`phrases.PhraseAutomaton.word_bits`); a word outside it has no goto entry
at any node, so `bundles.arc_cost` moves to the root without probing the table — most arcs with
an output word, since a list's words are a small part of the graph's.
The slot of ``(node, word)`` is ``(word * 2654435761 + node * 40503) mod 2**32 & mask``;
`bundles.arc_cost` walks the table in every backend.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

from ..errors import DecodeInputError
from . import phrase_cache
from .options import MAX_COST_TERM
from .phrases import EMPTY, NO_SLOT, PhraseAutomaton, PhraseList, has_repeat
from .word_index import phrase_ids_bulk

# per utterance: 200,000 compile in ~1 CPU s and ~130 MB (bench/ctc_phrases.md)
MAX_PHRASES = 200_000
MAX_PHRASE_WORDS = 64
MAX_LISTED = 20  # unknown-word notes a warning lists

# Each batch utterance's index in its file while `decode_npz` decodes a Kaldi table in batches
# (None: the batch is the whole input): the warnings naming ``boosts[b]`` say that index. A
# context variable, not `warnings.catch_warnings` (which swaps process-wide state: two threads'
# decodes overlapping left its recording in place, every later warning lost).
utterance_numbers: ContextVar = ContextVar("utterance_numbers", default=None)


@dataclass(frozen=True)
class BoostTables:
    """The flat hash tables and node arrays of every utterance (see the module docstring)."""

    key: np.ndarray
    gain: np.ndarray
    enter: np.ndarray
    offset: np.ndarray
    mask: np.ndarray
    fail: np.ndarray
    phi: np.ndarray
    node_offset: np.ndarray
    contexts: np.ndarray
    worst: np.ndarray  # float32 [B]: the most an utterance's phrases add to an arc's cost
    bits: np.ndarray  # int64 [total bits / 64]: each utterance's phrase words
    bits_offset: np.ndarray  # int64 [B]: where utterance b's bitset starts
    bits_len: np.ndarray  # int64 [B]: its entries
    automata: tuple  # per utterance: its PhraseAutomaton or None

    @property
    def any(self) -> bool:
        return bool((self.mask >= 0).any())

    @property
    def has_phrases(self) -> bool:
        """Whether any utterance's tokens can be in a context state other than the root."""
        return bool((self.contexts > 1).any())

    def lane(self, b: int) -> BoostTables:
        """Utterance ``b``'s tables alone, as utterance 0 (the flat arrays are shared)."""
        one = slice(b, b + 1)
        return BoostTables(self.key, self.gain, self.enter, self.offset[one], self.mask[one],
                           self.fail, self.phi, self.node_offset[one], self.contexts[one],
                           self.worst[one], self.bits, self.bits_offset[one], self.bits_len[one],
                           (self.automata[b],))  # fmt: skip

    def path_bonus(self, b: int, word_ids) -> float:
        """Utterance ``b``'s bonus for a whole word sequence (float64)."""
        automaton = self.automata[b]
        return automaton.path_bonus(word_ids) if automaton is not None else 0.0


def resolve_boosts(
    boosts, batch_size: int, words, oov=None, largest_word: int | None = None
) -> list[dict[tuple[int, ...], np.float32] | None]:
    """Normalise the ``boosts`` argument of `decode_ctc` to one ``{phrase: bonus}`` (or None) per
    utterance, a phrase being a tuple of word ids.

    ``boosts`` is None, one mapping applied to every utterance, or a sequence of ``batch_size``
    mappings / None. Keys are a word or a phrase of words separated by spaces (str, looked up in
    ``words``), a word id (int), or a tuple of words / word ids; values are bonuses per word of at
    most ``MAX_COST_TERM`` (1000) in magnitude. Phrases with a word that is not in the graph's
    word table are left out with one ``UserWarning`` listing them (the graph can never output
    them, so boosting them cannot act). An empty phrase, the same phrase twice (``"new york"``
    and ``("new", "york")``), more than ``MAX_PHRASES`` phrases or a phrase of more than
    ``MAX_PHRASE_WORDS`` words raise `DecodeInputError`. With ``oov`` (an `oov.OovSpeller`: the
    graph has an oov slot) a word absent from ``words`` is spelled through the slot instead: the
    phrase becomes label sequences (`OovSpeller.phrase_labels`) whose bonus per label pays the
    phrase's bonus per word in all. A graph without a word table knows its words by id (its
    hypotheses' text is ids): a word written in ASCII digits (``"17"``, ``"17 4"``, as files
    and the CLI give them) is that id there; ids above ``largest_word`` (its largest output
    label) are unknown words as well.
    """
    if boosts is None:
        return [None] * batch_size
    with collector_paused():
        return _resolve_boosts(boosts, batch_size, words, oov, largest_word)


@contextmanager
def collector_paused():
    """Python's cyclic garbage collector off for a while: resolving and compiling lists allocate
    a tuple or two per phrase, all alive to the end, which the collector would otherwise scan
    again and again (at 60 lists of 10,000 phrases, 2.7x the time of the work itself)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _resolve_boosts(boosts, batch_size: int, words, oov, largest_word):
    if isinstance(boosts, Mapping):
        per_utt = [boosts] * batch_size
    elif isinstance(boosts, Sequence) and not isinstance(boosts, (str, bytes)):
        if len(boosts) != batch_size:
            raise DecodeInputError(
                f"boosts must have one entry per utterance ({batch_size}); got {len(boosts)}"
            )
        per_utt = list(boosts)
    else:
        raise DecodeInputError(
            f"boosts must be None, a mapping phrase -> bonus, or a list of them; got {type(boosts)}"
        )
    unknown: list[str] = []
    done: dict[int, dict | None] = {}  # one mapping given for every utterance is resolved once
    known: dict = {}  # and a phrase several utterances boost is looked up once
    out: list[dict[tuple[int, ...], np.float32] | None] = []
    for b, table in enumerate(per_utt):
        if table is not None and not isinstance(table, Mapping):
            raise DecodeInputError(
                f"boosts[{b}] must be a mapping phrase -> bonus or None; got {type(table)}"
            )
        if table is None or len(table) == 0:
            out.append(None)
            continue
        if id(table) not in done:
            resolved = _resolve_or_recall(table, b, words, unknown, known, oov)
            if words is None and largest_word is not None and resolved is not None:
                resolved = _within(resolved, largest_word, unknown)
            done[id(table)] = resolved
        out.append(done[id(table)])
    if oov is not None:  # which word each utterance's spelled runs are: its own boosted words
        listed: dict[int, list[str]] = {}  # a mapping given for several utterances: once
        for t in per_utt:
            if isinstance(t, Mapping) and id(t) not in listed:
                listed[id(t)] = [w for key in t for w in words_of(key) if isinstance(w, str)]
        oov.name_spellings([listed.get(id(t)) for t in per_utt], words)
    if unknown:
        listed = sorted(set(unknown))
        more = f" and {len(listed) - MAX_LISTED} more" if len(listed) > MAX_LISTED else ""
        how = "" if oov is None else oov.why_unspelled()
        warnings.warn(
            f"boosts with words not in the graph's vocabulary are ignored{how}: "
            f"{', '.join(listed[:MAX_LISTED])}{more}",
            UserWarning,
            stacklevel=4,
        )
    return out


def _within(resolved: dict, largest_word: int, unknown: list) -> dict | None:
    """The phrases of ``resolved`` (word ids) whose every id is at most ``largest_word``; the
    ids beyond it noted in ``unknown`` (a graph without a word table cannot output them)."""
    kept = {}
    for ids, bonus in resolved.items():
        beyond = [w for w in ids if w > largest_word]
        if beyond:
            unknown.extend(map(str, beyond))
        else:
            kept[ids] = bonus
    return kept or None


def _resolve_or_recall(table: Mapping, b: int, words, unknown: list, known: dict, oov):
    """`_resolve_table`, or the same list's resolution from an earlier call (`phrase_cache`).
    Only lists of phrase strings and plain numbers are kept: their equality is their meaning
    (``True == 1``, and a bonus of True is refused, not recalled)."""
    plain = _plain(table, table.values())
    # (not without a word table: its digit-string words are ids, and the cache keys a list by
    # a weak reference to the table)
    keep = plain and words is not None and len(table) >= phrase_cache.MIN_PHRASES
    key = phrase_cache.list_key(table, words, oov) if keep else None
    hit = phrase_cache.resolved_list(key, words, oov) if key is not None else None
    if hit is not None:
        resolved, missing, said = hit
    else:
        missing, said = [], []
        resolved = _resolve_table(table, b, words, missing, known, oov, plain, said)
        if key is not None:
            phrase_cache.keep_resolved(key, words, oov, resolved, missing, said)
    unknown.extend(missing)
    numbers = utterance_numbers.get()
    named = b if numbers is None else int(numbers[b])
    for message in said:  # (a recalled list says them again, as resolving it would)
        warnings.warn(f"boosts[{named}]: {message}", UserWarning, stacklevel=5)
    return resolved


_NUMBERS = (int, float, np.floating, np.integer)


def as_float(value) -> float:
    try:
        return float(value)
    except OverflowError:  # an int beyond float: out of range as inf is
        return float("inf")


def _resolve_table(table: Mapping, b: int, words, unknown: list, known: dict, oov,
                   plain: bool, said: list) -> Mapping | None:  # fmt: skip
    """``table`` as ``{word ids or label sequences: bonus}`` (or a `PhraseList`); words the
    graph lacks noted in ``unknown``, what to warn of in ``said``."""
    if len(table) > MAX_PHRASES:
        raise DecodeInputError(
            f"boosts[{b}] has {len(table)} phrases; at most {MAX_PHRASES} per utterance"
        )
    keys, bonuses = list(table), list(table.values())
    if plain:
        noted = len(unknown)
        fast = _resolve_plain(keys, bonuses, words, oov, b, unknown)
        if fast is not None:
            return fast
        del unknown[noted:]  # the phrase-by-phrase path notes them again
    for key, bonus in zip(keys, bonuses, strict=True):  # checked per value, named on failure
        if isinstance(bonus, bool) or not isinstance(bonus, _NUMBERS):
            raise DecodeInputError(f"boosts[{b}][{key!r}] must be a number; got {bonus!r}")
        if isinstance(key, bool):  # True == 1: not a word id, and not to be found as one
            raise DecodeInputError(f"boosts[{b}]: a key must be a word, a phrase or a word id")
    with np.errstate(over="ignore", invalid="ignore"):
        values = np.array([as_float(v) for v in bonuses], np.float64)
    out_of_range = ~(np.abs(values) <= MAX_COST_TERM)  # NaN and inf too
    if out_of_range.any():
        k = int(np.argmax(out_of_range))
        raise DecodeInputError(
            f"boosts[{b}][{keys[k]!r}] must be in [-{MAX_COST_TERM:g}, {MAX_COST_TERM:g}]; "
            f"got {bonuses[k]}"
        )
    resolved: dict[tuple[int, ...], np.float32] = {}
    given: dict[tuple[int, ...], object] = {}
    get = words.get if words is not None else None
    for key, bonus in zip(keys, values.astype(np.float32), strict=True):
        memo = type(key) is str  # (1 == 1.0: other keys are checked each time)
        ids = known.get(key, False) if memo else False
        if ids is False and get is not None and memo:  # the common case, quickly
            ids = tuple(map(get, key.split()))
            if None in ids or 0 in ids or not 0 < len(ids) <= MAX_PHRASE_WORDS:
                ids = False  # unknown, epsilon or malformed: phrase_ids says which
        if ids is False:
            ids = resolve_phrase(key, words, oov, b, unknown)
        if memo:
            known[key] = ids
        if ids is None:
            continue
        if isinstance(ids, list):  # spelled through the oov slot: label sequences
            vocabulary = words if words is not None else {}
            new = [w for w in words_of(key) if isinstance(w, str) and not vocabulary.get(w)]
            cased = [w for w in new if w.lower() != w and vocabulary.get(w.lower())]
            if cased:  # ("Young" spelled as a new word when "young" was meant)
                said.append(f"{key!r} is spelled as a new word: {cased[0]!r} is not in the "
                            f"vocabulary but {cased[0].lower()!r} is (words are "
                            "case-sensitive)")  # fmt: skip
            words_in = len(words_of(key))
            for labels in ids:
                if labels in given and words_of(given[labels]) != words_of(key):
                    # homophones (a phone lexicon's): the first one listed names it
                    said.append(f"{key!r} is spelled as {given[labels]!r} is; only the one "
                                "listed first is boosted")  # fmt: skip
                    continue
                _add_phrase(
                    resolved, given, labels, key, np.float32(bonus * words_in / len(labels)), b
                )
            continue
        _add_phrase(resolved, given, ids, key, bonus, b)
    return resolved or None


def resolve_phrase(key, words, oov=None, b: int = 0, unknown: list | None = None):
    """A boost key as the search reads it: its word ids (`phrase_ids`), else, with ``oov`` (the
    graph's `oov.OovSpeller`), a list of label sequences spelling its unknown words through the
    slot, else None (its unknown words noted in ``unknown``)."""
    missing: list[str] = []
    ids = phrase_ids(key, words, b, missing)
    if ids is None and oov is not None:
        spelled = oov.phrase_labels(list(words_of(key)), words)
        if spelled is not None:
            return spelled
        new = [w for w in words_of(key) if isinstance(w, str) and not (words and words.get(w))]
        unspelled = [unknown_note(w, key, words) for w in new if not oov.spellings(w)]
        missing = unspelled or missing  # (the words that sank the phrase)
    if unknown is not None:
        unknown.extend(missing)
    return ids


_PLAIN_NUMBERS = frozenset((int, float, np.float32, np.float64))
_STRINGS = frozenset((str, np.str_))


def _plain(keys, bonuses) -> bool:
    """Every key a string, every bonus a plain number (not a bool)."""
    return set(map(type, keys)) <= _STRINGS and set(map(type, bonuses)) <= _PLAIN_NUMBERS


def _resolve_plain(keys: list, bonuses: list, words, oov, b: int, unknown: list):
    """`_resolve_table` for the common list (`_plain`) in one compiled call (`word_index`):
    every bonus in range, no phrase twice; keys with words the graph lacks are left out (their
    words noted in ``unknown``), as the phrase-by-phrase path leaves them out. None — that path
    then resolves or reports — for anything else: a malformed key, a phrase twice, a key an oov
    slot may spell."""
    if words is None or not keys:
        return None
    try:
        values = np.array(bonuses, np.float64)
    except OverflowError:  # an int beyond float
        return None
    if not (np.abs(values) <= MAX_COST_TERM).all():
        return None
    found = phrase_ids_bulk(keys, words, MAX_PHRASE_WORDS)
    if found is None:
        return None
    ids, lengths, ok = found
    if not ok.all():
        bad = np.flatnonzero(~ok).tolist()
        if oov is not None or not all(0 < len(keys[i].split()) <= MAX_PHRASE_WORDS for i in bad):
            return None  # a key to spell, or a malformed one (raised in the list's order there)
        for i in bad:  # words the graph lacks: the key is left out, its words noted
            phrase_ids(keys[i], words, b, unknown)
        values = values[ok]
    if has_repeat(ids, lengths):
        return None
    return PhraseList(ids, lengths, values.astype(np.float32)) if len(lengths) else None


def words_of(key) -> tuple:
    """A key's words (or word ids): its space-separated words, a tuple's parts, or an id."""
    if isinstance(key, str):
        return tuple(key.split())
    return tuple(key) if isinstance(key, tuple) else (key,)


def _add_phrase(resolved: dict, given: dict, ids: tuple, key, bonus, b: int) -> None:
    if ids in given:
        raise DecodeInputError(f"boosts[{b}]: {key!r} and {given[ids]!r} are the same phrase")
    given[ids] = key
    resolved[ids] = bonus


def phrase_ids(key, words, b: int = 0, unknown: list | None = None) -> tuple[int, ...] | None:
    """A boost key as a tuple of word ids, or None (noted in ``unknown``) when a word is not in
    ``words``; a key that is no phrase at all raises `DecodeInputError`."""
    if isinstance(key, str):
        parts = key.split()
    elif isinstance(key, tuple):
        parts = list(key)
    elif isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        parts = [key]
    else:
        raise DecodeInputError(
            f"boosts[{b}]: a key must be a word, a phrase or a word id; got {key!r}"
        )
    if not parts:
        raise DecodeInputError(f"boosts[{b}]: {key!r} is an empty phrase")
    if len(parts) > MAX_PHRASE_WORDS:
        raise DecodeInputError(
            f"boosts[{b}]: a phrase of {len(parts)} words; at most {MAX_PHRASE_WORDS}"
        )
    ids, missing = [], []
    for part in parts:
        if words is None and isinstance(part, str) and part.isascii() and part.isdigit():
            part = int(part)  # a word id as a file or the CLI writes it (as a hypothesis shows it)
        if isinstance(part, (int, np.integer)) and not isinstance(part, bool):
            wid = int(part)  # known when the word table has it (any positive id without one)
            known = wid > 0 and (words is None or words.has_id(wid))
        elif isinstance(part, str) and part and not part.isspace():
            if words is None:
                raise DecodeInputError(
                    f"boosts[{b}] names word {part!r}, but the graph has no word table; "
                    "pass word ids instead (e.g. '17', or 17)"
                )
            wid = words.get(part)
            known = wid is not None and wid != 0  # epsilon is never an output word
        else:
            raise DecodeInputError(
                f"boosts[{b}]: {key!r}: a phrase is made of words or word ids; got {part!r}"
            )
        if not known:
            missing.append(part)  # (all of them named, not the first alone)
        ids.append(wid)
    if missing:
        if unknown is not None:
            unknown.extend(unknown_note(part, key, words) for part in missing)
        return None
    return tuple(ids)


def unknown_note(part, key, words) -> str:
    """How the warning names word ``part`` of boost ``key`` that ``words`` lacks: with the
    phrase it sinks (a phrase is left out whole), and its lower case when that is a word."""
    note = str(part)
    lower = part.lower() if isinstance(part, str) else part
    if lower != part and words is not None and words.get(lower):
        note += f" ({lower!r} is a word: words are case-sensitive)"
    if len(words_of(key)) > 1:
        note += f" (in {key!r})"
    return note


def build_boost_tables(
    per_utt: list[dict[tuple[int, ...], np.float32] | None], slot_label: int = NO_SLOT
) -> BoostTables:
    """Compile resolved per-utterance boosts (`resolve_boosts`) into automata laid out as flat
    tables; utterances given the same resolved mapping share one automaton and table.
    ``slot_label``: the graph's first oov slot label (`phrases.py`)."""
    with collector_paused():
        return _build_boost_tables(per_utt, slot_label)


def _build_boost_tables(per_utt, slot_label: int) -> BoostTables:
    B = len(per_utt)
    offsets = np.zeros(B, np.int64)
    masks = np.full(B, -1, np.int64)
    node_offsets = np.zeros(B, np.int64)
    contexts = np.ones(B, np.int64)
    worst = np.zeros(B, np.float32)
    bits_offsets = np.zeros(B, np.int64)
    bits_lens = np.zeros(B, np.int64)
    per_lane = (offsets, masks, node_offsets, contexts, worst, bits_offsets, bits_lens)
    automata: list[PhraseAutomaton | None] = []
    built: dict[int, int] = {}  # id(mapping) -> the first utterance that had it
    total = total_nodes = total_bits = 0
    for b, table in enumerate(per_utt):
        if not table:
            automata.append(None)
            continue
        if id(table) in built:
            first = built[id(table)]
            automata.append(automata[first])
            for column in per_lane:
                column[b] = column[first]
            continue
        built[id(table)] = b
        automaton = phrase_cache.automaton(table, slot_label, PhraseAutomaton)
        automata.append(automaton)
        offsets[b], masks[b] = total, automaton.mask
        node_offsets[b], contexts[b] = total_nodes, automaton.num_contexts
        worst[b] = automaton.worst
        bits_offsets[b], bits_lens[b] = total_bits, len(automaton.word_bits)
        total += automaton.mask + 1
        total_nodes += automaton.num_nodes
        total_bits += len(automaton.word_bits)
    unique = [automata[b] for b in built.values()]
    if not unique:  # placeholders: no lane reads them (every mask is -1)
        key, gain, enter = (
            np.full(1, EMPTY, np.int64),
            np.zeros(1, np.float32),
            np.zeros(1, np.int32),
        )
        return BoostTables(key, gain, enter, offsets, masks, enter, gain, node_offsets, contexts,
                           worst, np.zeros(1, np.int64), bits_offsets, bits_lens,
                           tuple(automata))  # fmt: skip
    key, gain, enter = (np.concatenate(parts)
                        for parts in zip(*(a.entries() for a in unique), strict=True))  # fmt: skip
    fail = np.concatenate([a.fail for a in unique])
    phi = np.concatenate([a.phi for a in unique])
    bits = np.concatenate([a.word_bits for a in unique] + [np.zeros(1, np.int64)])
    return BoostTables(key, gain, enter, offsets, masks, fail, phi, node_offsets, contexts, worst,
                       bits, bits_offsets, bits_lens, tuple(automata))  # fmt: skip


def join_lanes(tables: Sequence[BoostTables]) -> BoostTables:
    """Lane 0 of each of ``tables`` as the lanes of one `BoostTables` (streams decoded together:
    `cuda.streams`); tables that share their flat arrays share them in the result too."""
    placed: dict[int, tuple[int, int, int]] = {}  # id(key array) -> (entry, node, bits base)
    parts, node_parts, bit_parts = [], [], []
    total = total_nodes = total_bits = 0
    offsets, node_offsets, bits_offsets = [], [], []
    for t in tables:
        base = placed.get(id(t.key))
        if base is None:
            base = placed[id(t.key)] = (total, total_nodes, total_bits)
            parts.append((t.key, t.gain, t.enter))
            node_parts.append((t.fail, t.phi))
            bit_parts.append(t.bits)
            total, total_nodes = total + len(t.key), total_nodes + len(t.fail)
            total_bits += len(t.bits)
        offsets.append(t.offset[0] + base[0])
        node_offsets.append(t.node_offset[0] + base[1])
        bits_offsets.append(t.bits_offset[0] + base[2])
    key, gain, enter = (np.concatenate(p) for p in zip(*parts, strict=True))
    fail, phi = (np.concatenate(p) for p in zip(*node_parts, strict=True))
    first = [t.mask[:1] for t in tables], [t.contexts[:1] for t in tables]
    return BoostTables(
        key, gain, enter, np.array(offsets, np.int64), np.concatenate(first[0]), fail, phi,
        np.array(node_offsets, np.int64), np.concatenate(first[1]),
        np.concatenate([t.worst[:1] for t in tables]), np.concatenate(bit_parts),
        np.array(bits_offsets, np.int64), np.concatenate([t.bits_len[:1] for t in tables]),
        tuple(t.automata[0] for t in tables),
    )  # fmt: skip

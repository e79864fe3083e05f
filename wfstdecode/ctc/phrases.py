"""The context automaton of one utterance's boosted phrases (Aho-Corasick over word ids), which
the search walks alongside each token: a token's state is (graph state, context state).

What it computes: a word sequence earns, for every occurrence of every boosted phrase in it
(occurrences may overlap, as Aho-Corasick reports them), the phrase's bonus once per word — a
single word at 2.0 earns 2.0 wherever it occurs, "new york" at 3.0 earns 6.0. Decoding with it is
decoding TLG ∘ C for the weighted acceptor C this class describes (`fst_arrays`), without
composing.

How the bonus is paid out along a path: a partial match earns its bonus word by word as it grows
and gives it back when it fails (icefall's ContextGraph), so a phrase's first words are not pruned
before the phrase completes. Formally each node ``n`` of the phrase trie has

* ``banked(n)``: the bonuses of the phrases that end at ``n`` (``n`` itself and its suffixes,
  through the failure links) — what reaching ``n`` pays for good;
* ``phi(n)``: the anticipated bonus of a match in progress at ``n`` (``depth(n)`` words of the
  best longer phrase through ``n`` — all of it where ``n`` read a slot label, below — less what
  the phrases ending on the way to ``n`` banked, never negative; where ``n`` read a slot label,
  at least ``phi(fail(n))``: the spelling's match through the failure link goes on too);

and the word ``w`` read in context state ``x`` moves to the node ``child`` the Aho-Corasick goto /
failure walk reaches (the root when none) and earns ``banked(child) + phi(enter(child)) -
phi(x)``; the end of the utterance gives ``phi`` of the last state back. The sum telescopes to
the banked bonuses: exactly the occurrence count above, whatever ``phi`` is. ``enter(n)`` is the
state kept after reaching ``n``: ``n`` itself, or, when no phrase extends ``n`` (a complete phrase
at a leaf), the state its failure link leads to — from a leaf every word fails anyway, so the two
behave alike. Hence a list of single words has one context state (the root), and the search keeps
today's one token per graph state.

The automaton is built by one compiled pass (`_build`: ~20-40 ns per word of the list) straight
into the layout the search reads: the goto function as an open-addressing hash table keyed by
``(node << 32) | word`` (linear probing from ``(word * HASH_MULT + node * NODE_MULT) mod 2**32``),
whose entries carry the child's ``gain`` and ``enter`` (`boost.BoostTables` concatenates the
utterances' tables; `bundles.arc_cost` walks them), and a bitset of the list's words, so that a
word of no phrase — most of a large vocabulary — moves to the root without probing the table.

Slot labels (a graph built with an out-of-vocabulary slot, `graph/oov_slot.py`: every label id
from ``slot_label`` up) never fail through to the root: reading one with no goto entry on the
failure walk down to the root is forbidden (bonus -inf, infinite cost), so a path through the slot
survives only when it spells one of the boosted out-of-vocabulary words, which are phrases over
those labels. As no spelling fails, a match in progress there anticipates its phrase's whole
bonus from the slot's ``<oov>`` label on (one letter's share would leave the word to be pruned
while it pays the slot's cost, up to its last letter). Without a slot ``slot_label`` is
``NO_SLOT``, above every label.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np
from numba import njit

from .word_index import fnv1a, same_run

ROOT = 0
EMPTY = -1
NO_SLOT = np.iinfo(np.int32).max
HASH_MULT = 2654435761  # Knuth's multiplicative hash
NODE_MULT = 40503


class PhraseList(Mapping):
    """Resolved phrases as flat arrays — ``words`` (int64: the phrases' word ids one after
    another), ``lengths`` (int64: words per phrase), ``bonus`` (float32 per word) — read as the
    ``{phrase (tuple of word ids): bonus}`` mapping they stand for (made on first use; a list
    resolved in bulk, `boost._resolve_plain`, compiles from the arrays without it)."""

    def __init__(self, words: np.ndarray, lengths: np.ndarray, bonus: np.ndarray):
        self.words, self.lengths, self.bonus = words, lengths, bonus
        self._mapping: dict | None = None

    def _as_dict(self) -> dict:
        if self._mapping is None:
            ids = self.words.tolist()
            ends = itertools.accumulate(self.lengths.tolist())
            phrases = [
                tuple(ids[e - n : e]) for e, n in zip(ends, self.lengths.tolist(), strict=True)
            ]
            self._mapping = dict(zip(phrases, self.bonus, strict=True))
        return self._mapping

    def __getitem__(self, phrase):
        return self._as_dict()[phrase]

    def __iter__(self):
        return iter(self._as_dict())

    def __len__(self) -> int:
        return len(self.lengths)


class PhraseAutomaton:
    """Built from ``{phrase (tuple of word ids): bonus per word}``; the root is node 0, the
    others numbered by depth, then parent, then word — the same for the same phrases in any
    order (node numbers are context states, which break the search's exact ties).

    Arrays per node: ``fail``, ``enter``, ``phi`` (float32), ``gain`` (float32);
    the goto table: ``key`` (int64, EMPTY for a free slot) and ``child`` per slot, ``mask`` its
    capacity - 1; ``word_bits`` (int64): bit ``w & 63`` of entry ``w >> 6`` set for every word
    ``w`` of some phrase (a word of none fails down to the root without a probe)."""

    def __init__(self, phrases: Mapping[tuple[int, ...], float], slot_label: int = NO_SLOT):
        if isinstance(phrases, PhraseList):
            words, lengths = phrases.words, phrases.lengths
            bonus = phrases.bonus.astype(np.float64)
        else:
            lengths = np.fromiter(map(len, phrases), np.int64, len(phrases))
            words = np.fromiter(itertools.chain.from_iterable(phrases), np.int64,
                                int(lengths.sum()))  # fmt: skip
            bonus = np.fromiter((float(v) for v in phrases.values()), np.float64, len(phrases))
        cap = 1 << max(1, (2 * len(words) - 1).bit_length())  # > twice the nodes but the root
        self.key, self.child, self.fail, self.enter, self.phi, self.gain, num_nodes = _build(
            words, lengths, bonus, cap, slot_label
        )
        self.num_nodes = int(num_nodes)
        self.mask = cap - 1
        self.phrases = phrases  # what the automaton was built from (the tests count with it)
        self.slot_label = int(slot_label)
        # whether some arc may be forbidden to a token already in a context state: one inside a
        # spelling (the search's pre-pass bound then has no finite worst case)
        self.forbids = bool(len(words)) and int(words.max()) >= self.slot_label
        self.word_bits = _word_bits(words)
        self._goto: dict | None = None

    @property
    def worst(self) -> np.float32:
        """The most reading a word can add to an arc's cost (``-bonus``, >= 0), rounded up to
        float32: a fast bound for the best cost of a frame (`cpu_steps.expand`); infinite when
        a spelling in progress can forbid an arc."""
        if self.forbids:
            return np.float32(np.inf)
        most = max(
            0.0, float(self.phi.max(initial=0.0)) - min(0.0, float(self.gain.min(initial=0.0)))
        )
        return np.nextafter(np.float32(most), np.float32(np.inf)) if most else np.float32(0.0)

    @property
    def num_contexts(self) -> int:
        """Context states a token can be in: the root and every node some phrase extends."""
        return int(np.count_nonzero(self.enter == np.arange(self.num_nodes)))

    def entries(self):
        """The goto table as the search reads it: ``(key, gain, enter)`` per slot."""
        return (self.key, *_slot_entries(self.key, self.child, self.gain, self.enter))

    def step(self, x: int, word: int) -> tuple[int, np.float32]:
        """Read ``word`` in context state ``x``: ``(next state, bonus)``, the bonus in float32
        exactly as the search computes it (`bundles.arc_cost`). Plain Python over a dict of the
        goto function (the reference backend's way; the search probes the hash table)."""
        if self._goto is None:
            used = np.flatnonzero(self.key != EMPTY)
            keys, kids = self.key[used].tolist(), self.child[used].tolist()
            self._goto = {(k >> 32, k & 0xFFFFFFFF): c for k, c in zip(keys, kids, strict=True)}
        node = x
        while True:
            child = self._goto.get((node, word))
            if child is not None:
                bonus = self.gain[child] if x == ROOT else self.gain[child] - self.phi[x]
                return int(self.enter[child]), np.float32(bonus)
            if node == ROOT:
                if word >= self.slot_label:
                    return ROOT, np.float32(-np.inf)  # forbidden: no boosted spelling goes on
                return ROOT, np.float32(-self.phi[x] if x != ROOT else 0.0)
            node = int(self.fail[node])

    def path_bonus(self, words) -> float:
        """The bonus of a whole word sequence (give-back at the end included): the float32
        bonuses of `step`, summed in float64 (compiled: hypotheses of every utterance ask)."""
        words = np.asarray(words, np.int64)
        return float(_path_bonus(self.key, self.child, self.mask, self.fail, self.enter, self.phi,
                                 self.gain, words, self.slot_label))  # fmt: skip

    def fst_arrays(self, vocabulary):
        """C as a weighted acceptor over ``vocabulary`` (word ids), one state per context state,
        costs = -bonus, final cost = the give-back: TLG ∘ C is the graph a phrase-boosted search
        decodes (used by the tests' OpenFst oracle). Forbidden moves have no arc."""
        from ..fstio import FstArrays

        states = np.flatnonzero(self.enter == np.arange(self.num_nodes))
        number = {int(s): i for i, s in enumerate(states)}
        src, dst, lab, cost = [], [], [], []
        for s in states.tolist():
            for w in vocabulary:
                nxt, bonus = self.step(s, int(w))
                if bonus == -np.inf:
                    continue
                src.append(number[s])
                dst.append(number[nxt])
                lab.append(int(w))
                cost.append(-float(bonus))
        final = self.phi[states].astype(np.float32)
        lab_arr = np.array(lab, np.int32)
        return FstArrays(0, final, np.array(src, np.int32), np.array(dst, np.int32), lab_arr,
                         lab_arr, np.array(cost, np.float32))  # fmt: skip


@njit(cache=True)
def _slot(key, mask, node, word, insert):
    """Slot of ``(node, word)`` in the goto table, or -1 (``insert``: the free slot to take)."""
    h = ((word * HASH_MULT + node * NODE_MULT) & 0xFFFFFFFF) & mask
    want = (node << 32) | word
    while True:
        if key[h] == want:
            return h
        if key[h] == EMPTY:
            return h if insert else -1
        h = (h + 1) & mask


def has_repeat(words: np.ndarray, lengths: np.ndarray) -> bool:
    """Whether a phrase (``lengths[p]`` of ``words``, one after another) occurs twice."""
    return len(lengths) > 1 and bool(_has_repeat(words, lengths))


@njit(inline="always", cache=True)
def _mixed(h):
    """``h`` with every bit stirred into the low ones (the 64-bit finalizer of MurmurHash3):
    FNV-1a over word ids, not bytes, leaves the bits a table index takes correlated (1,000
    random word bigrams: 61 probes a phrase on average instead of ~0.5)."""
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(33))


@njit(cache=True)
def _has_repeat(words, lengths):
    n = lengths.shape[0]
    cap = 2
    while cap <= 2 * n:
        cap *= 2
    mask = np.uint64(cap - 1)
    first = np.full(cap, -1, np.int64)  # a phrase of each hash seen, by linear probing
    starts = np.zeros(n + 1, np.int64)
    for p in range(n):
        starts[p + 1] = starts[p] + lengths[p]
    for p in range(n):
        slot = _mixed(fnv1a(words, starts[p], starts[p + 1])) & mask
        while first[slot] >= 0:
            q = first[slot]
            if lengths[q] == lengths[p] and same_run(
                words, starts[q], words, starts[p], lengths[p]
            ):
                return True
            slot = (slot + np.uint64(1)) & mask
        first[slot] = p
    return False


@njit(cache=True)
def _by_depth(depth):
    """Node numbers by depth, in number order within a depth (a counting sort)."""
    first = np.zeros(depth.max() + 2, np.int64)
    for d in depth:
        first[d + 1] += 1
    for d in range(first.shape[0] - 1):
        first[d + 1] += first[d]
    order = np.empty(depth.shape[0], np.int64)
    for node in range(depth.shape[0]):
        order[first[depth[node]]] = node
        first[depth[node]] += 1
    return order


@njit(cache=True)
def _canonical_numbers(parent, word_of, depth):
    """A number per trie node that depends on the trie alone, not on the order its phrases
    were inserted: the root 0, then depth by depth, by the parent's number, then the word."""
    n = depth.shape[0]
    order = _by_depth(depth)
    number = np.zeros(n, np.int64)
    lo = 1
    while lo < n:
        hi = lo
        while hi < n and depth[order[hi]] == depth[order[lo]]:
            hi += 1
        nodes = order[lo:hi]
        rank = np.empty(hi - lo, np.int64)
        for i in range(hi - lo):  # (the parents, one depth up, are numbered already)
            rank[i] = (number[parent[nodes[i]]] << 32) | word_of[nodes[i]]
        for i, k in enumerate(np.argsort(rank)):  # (keys distinct: a trie's (parent, word))
            number[nodes[k]] = lo + i
        lo = hi
    return number


@njit(cache=True)
def _slot_entries(key, child, gain, enter):
    """Per slot of the goto table: the child's ``gain`` and ``enter`` (zero where free)."""
    slot_gain = np.zeros(key.shape[0], np.float32)
    slot_enter = np.zeros(key.shape[0], np.int32)
    for h in range(key.shape[0]):
        if key[h] != EMPTY:
            slot_gain[h], slot_enter[h] = gain[child[h]], enter[child[h]]
    return slot_gain, slot_enter


@njit(cache=True)
def _word_bits(words):
    """The set of ``words`` as a bitset: bit ``w & 63`` of entry ``w >> 6``."""
    bits = np.zeros((words.max() >> 6) + 1 if words.shape[0] else 0, np.int64)
    for w in words:
        bits[w >> 6] |= np.int64(1) << (w & 63)
    return bits


@njit(cache=True)
def _path_bonus(key, child, mask, fail, enter, phi, gain, words, slot_label):
    x = 0
    total = 0.0
    for w in words:
        node = x
        while True:  # `PhraseAutomaton.step`, on the hash table
            h = _slot(key, mask, node, w, False)
            if h >= 0:
                c = child[h]
                total += gain[c] if x == 0 else gain[c] - phi[x]
                x = enter[c]
                break
            if node == 0:
                if w >= slot_label:
                    return -np.inf
                total -= phi[x]
                x = 0
                break
            node = fail[node]
    return total - phi[x]


@njit(cache=True)
def _build(words, lengths, bonus, cap, slot_label=NO_SLOT):
    """The trie of the phrases (``words`` concatenated, ``lengths`` each, ``bonus`` per word),
    its failure links in breadth-first order, and what the module docstring defines."""
    max_nodes = words.shape[0] + 1
    mask = cap - 1
    key = np.full(cap, EMPTY, np.int64)
    child = np.zeros(cap, np.int32)
    parent = np.zeros(max_nodes, np.int64)
    word_of = np.zeros(max_nodes, np.int64)
    depth = np.zeros(max_nodes, np.int64)
    own = np.zeros(max_nodes, np.float64)  # the bonus of the phrases ending exactly here
    longer = np.zeros(max_nodes, np.float64)  # best positive per-word bonus continuing past here
    whole = np.zeros(max_nodes, np.float64)  # best positive phrase bonus continuing past here
    n = 1
    pos = 0
    for p in range(lengths.shape[0]):
        node = 0
        for i in range(lengths[p]):
            w = words[pos + i]
            if bonus[p] > longer[node]:
                longer[node] = bonus[p]
            if bonus[p] * lengths[p] > whole[node]:
                whole[node] = bonus[p] * lengths[p]
            h = _slot(key, mask, node, w, True)
            if key[h] == EMPTY:
                key[h] = (node << 32) | w
                child[h] = n
                parent[n], word_of[n], depth[n] = node, w, i + 1
                n += 1
            node = child[h]
        own[node] += bonus[p] * lengths[p]
        pos += lengths[p]
    # renumbered canonically, so that the same phrases in any order give the same automaton:
    # its node numbers are the search's context states, which break exact ties
    number = _canonical_numbers(parent[:n], word_of[:n], depth[:n])
    parent[number] = number[parent[:n]]
    word_of[number] = word_of[:n].copy()
    depth[number] = depth[:n].copy()
    own[number] = own[:n].copy()
    longer[number] = longer[:n].copy()
    whole[number] = whole[:n].copy()
    key[:] = EMPTY
    child[:] = 0
    for node in range(1, n):  # (in number order: the table's layout is canonical too)
        h = _slot(key, mask, parent[node], word_of[node], True)
        key[h] = (parent[node] << 32) | word_of[node]
        child[h] = node
    order = _by_depth(depth[:n])  # breadth first: failure targets first
    fail = np.zeros(n, np.int32)
    banked = np.zeros(n, np.float64)
    prefix = np.zeros(n, np.float64)  # what the phrases ending on the way here banked
    has_child = np.zeros(n, np.bool_)
    for node in order[1:]:
        p, w = parent[node], word_of[node]
        has_child[p] = True
        f = 0
        if p != 0:
            f = fail[p]
            while True:
                h = _slot(key, mask, f, w, False)
                if h >= 0:
                    f = child[h]
                    break
                if f == 0:
                    break
                f = fail[f]
        fail[node] = f
        banked[node] = own[node] + banked[f]
        prefix[node] = own[node] + prefix[p]
    phi = np.zeros(n, np.float32)
    enter = np.zeros(n, np.int32)
    for node in order:
        if has_child[node] or node == 0:
            # inside a spelling (read a slot label) the whole phrase is anticipated: no path
            # fails out of a spelling, so its bonus pays the slot's cost from the start
            ahead = whole[node] if word_of[node] >= slot_label else depth[node] * longer[node]
            phi[node] = max(0.0, ahead - prefix[node])
            if word_of[node] >= slot_label:  # ... and so is the word's own match, which goes on
                phi[node] = max(phi[node], phi[fail[node]])  # along the failure link's branch
                # ("call Zed" boosted with "Zed": "call <oov>" anticipates Zed's bonus too)
            enter[node] = node
        else:
            enter[node] = enter[fail[node]]  # shallower: already resolved
    gain = np.zeros(n, np.float32)
    for node in range(n):
        gain[node] = banked[node] + np.float64(phi[enter[node]])
    return key, child, fail, enter, phi, gain, n

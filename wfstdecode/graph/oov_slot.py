"""The out-of-vocabulary slot of a TLG (``build-tlg --oov-slot``): a class word in G through which
words absent from the lexicon can be decoded — those an utterance boosts, and no others.

How it is built (the slot is a word of G whose pronunciation in L is a spelling loop):

* G gets the class word ``<oov>``: the ARPA's ``<unk>`` n-grams renamed, or, when the ARPA has no
  ``<unk>``, a unigram of a given log10 probability (backoff 0; the other words keep theirs, so
  the unigrams sum to 1 + 10**logprob: a slot the search can only take for a boosted word).
* L spells ``<oov>`` as ``#oov`` (a disambiguation-like input symbol: T passes it, and it becomes
  epsilon in TLG, like ``#0``). Once L ∘ G is determinized and minimized, each ``#oov`` arc is
  followed by a spelling loop: one or more tokens, each writing its spelling label
  ``<oov:TOKEN>``, then ``#oovend`` (also epsilon in TLG) writing ``</oov>`` — so the spelling
  labels never meet G, determinization never mixes the loop with the lexicon's words, and
  T ∘ LG gets the CTC topology over the loop's tokens for free.

So a path through the slot writes ``<oov> <oov:t1> … <oov:tk> </oov>``. At decode time the
utterance's context automaton (`ctc/phrases.py`) reads those labels like words: the spellings of
the boosted out-of-vocabulary words are phrases over them, and a slot label with no phrase to
follow is forbidden (infinite cost) — the slot is open exactly for the boosted spellings (Kaldi's
grammar FSTs enter a per-utterance sub-graph through a nonterminal; here the sub-graph is the
static loop composed on the fly with the per-utterance trie). `ctc/oov.py` turns the labels back
into the word.

The slot labels are the last ids of the word table, contiguous: ``<oov>``, ``</oov>``, then one
spelling label per spellable token in token-id order; everything from ``<oov>`` up is a slot label.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import GraphError
from ..fstio import FstArrays
from ..symbols import NOT_TOKENS, SymbolTable
from .grammar import UNK, ArpaModel

OPEN, CLOSE = "<oov>", "</oov>"
SPELLINGS = ("chars", "spm", "lexicon")


def spell_label(token: str) -> str:
    return f"<oov:{token}>"


def is_slot_label(word: str) -> bool:
    """Is ``word`` one of `slot_words`' labels (not a word of the language model)?"""
    return word in (OPEN, CLOSE) or (word.startswith("<oov:") and word.endswith(">"))


def spellable_tokens(tokens: SymbolTable, separator: str | None) -> list[str]:
    """Tokens a spelled word may hold: all but those that spell nothing and the separator."""
    return [s for s, _ in tokens if s not in NOT_TOKENS and s != separator]


def slot_words(tokens: SymbolTable, separator: str | None) -> list[str]:
    """The slot labels, in the order they end the word table."""
    return [OPEN, CLOSE, *(spell_label(t) for t in spellable_tokens(tokens, separator))]


@dataclass(frozen=True)
class OovSlot:
    """A graph's slot as the decoder reads it: label ids of the word table."""

    open: int  # <oov>; every label id >= open is a slot label
    close: int  # </oov>
    spell: dict[int, int]  # token id -> its spelling label
    spelling: str  # how words are spelled: "chars", "spm" or "lexicon" (a user's pronunciations)
    spm: str | None = None  # the sentencepiece model, for "spm"

    @classmethod
    def of(cls, graph) -> OovSlot | None:
        """The slot of ``graph`` (None without one); checks that the tables hold it."""
        meta = graph.metadata.get("oov_slot")
        if meta is None:
            return None
        if not isinstance(meta, dict):
            raise GraphError(f"the graph's oov_slot metadata must be an object; got {meta!r}")
        words, tokens = graph.words, graph.tokens
        if words is None or tokens is None:
            raise GraphError("the graph's oov_slot needs its word and token tables")
        spelling = meta.get("spelling")
        if spelling not in SPELLINGS:
            raise GraphError(f"oov_slot spelling must be one of {SPELLINGS}; got {spelling!r}")
        names = slot_words(tokens, graph.metadata.get("separator"))
        ids = [words.get(n) for n in names]
        first = ids[0]
        if first is None or ids != list(range(first, words.next_id)):
            raise GraphError("the word table does not end with the graph's oov_slot labels")
        spellable = spellable_tokens(tokens, graph.metadata.get("separator"))
        spell = {tokens.id(t): first + 2 + k for k, t in enumerate(spellable)}
        return cls(first, first + 1, spell, spelling, meta.get("spm"))


def with_slot_word(model: ArpaModel, unk_logprob: float | None) -> ArpaModel:
    """``model`` with the class word ``<oov>``: its ``<unk>`` n-grams renamed (``unk_logprob``
    must then be None: one source of the slot's probability), else a unigram of log10
    probability ``unk_logprob``."""
    has_unk = (UNK,) in model.ngrams[0]
    if has_unk and unk_logprob is not None:
        raise GraphError(
            "the ARPA has <unk>, which gives the slot its probability: drop --oov-logprob"
        )
    if not has_unk:
        if unk_logprob is None:
            raise GraphError(
                "the ARPA has no <unk>: give the slot's log10 probability (--oov-logprob)"
            )
        if not (math.isfinite(unk_logprob) and unk_logprob <= 0):
            raise GraphError(f"--oov-logprob must be a finite log10 probability <= 0; got "
                             f"{unk_logprob}")  # fmt: skip
        ngrams = [dict(d) for d in model.ngrams]
        ngrams[0][(OPEN,)] = (float(unk_logprob), 0.0)
        return ArpaModel(ngrams, model.path, model.dropped)
    ngrams = [{tuple(OPEN if w == UNK else w for w in k): v for k, v in d.items()}
              for d in model.ngrams]  # fmt: skip
    return ArpaModel(ngrams, model.path, model.dropped)


def insert_spelling_loops(
    lg: FstArrays, tokens: SymbolTable, words: SymbolTable, separator: str | None,
    open_in: int, close_in: int,
) -> FstArrays:  # fmt: skip
    """min(det(L ∘ G)) with the spelling loop after each ``#oov`` arc (input ``open_in``): the
    arc ``s -#oov:<oov>-> d`` is followed by ``-t:<oov:t>->`` once or more (a loop per distinct
    ``d``), then ``-#oovend:</oov>-> d``. Done after determinizing (the loop is deterministic
    already) and before label pushing (which then cannot move a later word into the loop)."""
    src, dst = np.asarray(lg.src), np.asarray(lg.dst)
    ilabel, olabel = np.asarray(lg.ilabel), np.asarray(lg.olabel)
    slot_arcs = np.flatnonzero(ilabel == open_in)
    if not len(slot_arcs) or (olabel[slot_arcs] != words.id(OPEN)).any():
        raise GraphError("internal: L ∘ G has no #oov arc writing <oov> (is <oov> in G?)")
    spell_in = np.array([tokens.id(t) + 1 for t in spellable_tokens(tokens, separator)], np.int64)
    spell_out = np.array([words.id(spell_label(t)) for t in spellable_tokens(tokens, separator)],
                         np.int64)  # fmt: skip
    ends, which = np.unique(dst[slot_arcs], return_inverse=True)
    n = lg.num_states
    loop_in = n + 2 * np.arange(len(ends))  # per distinct end: the loop's entry and its loop
    loop = loop_in + 1
    dst = dst.copy()
    dst[slot_arcs] = loop_in[which]
    k = len(spell_in)
    new_src = np.concatenate([np.repeat(loop_in, k), np.repeat(loop, k), loop])
    new_dst = np.concatenate([np.repeat(loop, k), np.repeat(loop, k), ends])
    new_il = np.concatenate([np.tile(spell_in, len(ends)), np.tile(spell_in, len(ends)),
                             np.full(len(ends), close_in)])  # fmt: skip
    new_ol = np.concatenate([np.tile(spell_out, len(ends)), np.tile(spell_out, len(ends)),
                             np.full(len(ends), words.id(CLOSE))])  # fmt: skip
    final = np.concatenate([np.asarray(lg.final, np.float32),
                            np.full(2 * len(ends), np.inf, np.float32)])  # fmt: skip
    return FstArrays(
        lg.start, final, np.concatenate([src, new_src]), np.concatenate([dst, new_dst]),
        np.concatenate([ilabel, new_il]), np.concatenate([olabel, new_ol]),
        np.concatenate([np.asarray(lg.weight, np.float32), np.zeros(len(new_src), np.float32)]),
    )  # fmt: skip

"""TLG = T ∘ min(det(L ∘ G)) with disambiguation symbols removed: the CTC decoding graph."""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..decoding_graph import DecodingGraph, Pronunciations
from ..errors import GraphError
from ..fstio import FstArrays
from ..symbols import (
    BACKOFF_DISAMBIG,
    BLANK,
    EPSILON,
    NOT_TOKENS,
    SymbolTable,
    blank_symbol,
    is_disambig,
    model_tokens,
)
from . import ops
from .grammar import BOS, EOS, UNK, ArpaModel, build_grammar, read_arpa
from .lexicon import LexiconEntry, build_lexicon_fst, check_pronunciations
from .oov_slot import SPELLINGS, OovSlot, insert_spelling_loops, slot_words, with_slot_word
from .topo import ctc_topology

log = logging.getLogger(__name__)


@dataclass
class TlgBuild:
    """What `build_tlg` made: the graph, its FST form and per-stage figures."""

    graph: DecodingGraph
    fst: FstArrays  # TLG, arcs sorted by input label, ready for `write_openfst`
    words: SymbolTable
    stages: list[dict] = field(default_factory=list)
    dropped_words: dict[str, int] = field(default_factory=dict)


def make_word_table(entries: list[LexiconEntry], slot: list[str] = ()) -> SymbolTable:
    """``<eps>`` 0, the lexicon's words in sorted order, then ``#0``, ``<s>``, ``</s>``, then the
    ``slot`` labels (`oov_slot.slot_words`)."""
    words = sorted({e.word for e in entries})
    return SymbolTable.from_list([EPSILON, *words, BACKOFF_DISAMBIG, BOS, EOS, *slot])


def build_tlg(
    tokens: SymbolTable,
    lexicon: list[LexiconEntry],
    arpa: str | ArpaModel,
    topology: str = "normal",
    separator: str | None = None,
    keep_unk: bool = False,
    push_labels: bool = True,
    progress: Callable[[dict], None] | None = None,
    oov_slot: dict | None = None,
    oov_logprob: float | None = None,
) -> TlgBuild:
    """Build TLG for a CTC model.

    tokens:   the model's token table (``<blk>`` is the blank; ids are log-prob columns).
    lexicon:  pronunciations over ``tokens`` (`read_lexicon` or a recipe).
    arpa:     path of an ARPA file (plain or .gz), or a parsed `ArpaModel`. N-grams with words
              absent from the lexicon are dropped; the count is logged and returned.
    topology: ``normal`` | ``compact`` | ``minimal`` (see `ctc_topology`).
    separator: word-separator token of a character model, required between words.
    keep_unk: keep ``<unk>`` n-grams (needs ``<unk>`` in the lexicon); dropped otherwise.
    push_labels: push output labels toward the start (word boosts then act earlier).
    progress: called with each stage's figures as it finishes.
    oov_slot: add the out-of-vocabulary slot (`oov_slot.py`): ``{"spelling": "chars" | "spm" |
              "lexicon"}`` (with ``"spm"``: the model's path), how the decoder will spell the
              boosted words the lexicon lacks. The slot's probability is the ARPA's ``<unk>``,
              else ``oov_logprob`` (log10).
    """
    blank = blank_symbol(tokens)
    if blank is None:
        raise GraphError(f"the token table has no blank symbol: name the blank's column "
                         f"{BLANK!r} (or '<blank>') in it")  # fmt: skip
    if separator is not None and separator not in tokens:
        raise GraphError(f"separator {separator!r} is not in the token table")
    if separator in NOT_TOKENS or (separator is not None and is_disambig(separator)):
        raise GraphError(f"separator {separator!r} is not a token the model emits (T never "
                         "outputs it): words could not be told apart")  # fmt: skip
    check_pronunciations(lexicon, separator)  # before the ARPA, which may take minutes to read
    tokens = model_tokens(tokens)
    slot = _check_slot(oov_slot, keep_unk, lexicon, tokens, separator)
    stages: list[dict] = []
    clock = [time.perf_counter()]

    def stage(name: str, fst, **extra) -> None:
        now = time.perf_counter()
        info = {"stage": name, **ops.size(fst), "seconds": round(now - clock[0], 3),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                **extra}  # fmt: skip
        clock[0] = now
        stages.append(info)
        log.info("%s: %s", name, info)
        if progress:
            progress(info)

    words = make_word_table(lexicon, slot)
    vocabulary = {e.word for e in lexicon} - (set() if keep_unk else {UNK}) | (
        {UNK} if slot else set()
    )
    if isinstance(arpa, ArpaModel):
        model = arpa.restricted(vocabulary)
    else:
        model = read_arpa(arpa, vocabulary)
    if slot:
        model = with_slot_word(model, oov_logprob)
    elif oov_logprob is not None:
        raise GraphError("oov_logprob is the slot's probability: it needs oov_slot")
    if model.dropped:
        log.warning("%d ARPA words are not in the lexicon; n-grams with them were dropped: %s",
                    len(model.dropped), _examples(model.dropped))  # fmt: skip
    in_lm = set(model.vocabulary)
    if keep_unk and UNK not in in_lm:  # (nothing kept: say why)
        log.warning("keep_unk: %s", "<unk> is not in the lexicon, so its n-grams were dropped"
                    if UNK in model.dropped else "the ARPA file has no <unk> n-grams")  # fmt: skip
    unreachable = sorted({e.word for e in lexicon} - in_lm - {UNK, *slot})
    if unreachable and not slot and not in_lm - {BOS, EOS, UNK}:
        raise GraphError("no lexicon word is in the ARPA file's n-grams: the graph could "
                         "output no word")  # fmt: skip
    if unreachable:  # (a word G never outputs: no path of the graph has it)
        log.warning("%d lexicon words are not in the ARPA, so no path outputs them: %s",
                    len(unreachable), _examples(dict.fromkeys(unreachable, 1)))  # fmt: skip
    g = build_grammar(model, words)
    stage("G", g, ngrams=model.counts(), dropped_words=len(model.dropped))
    # The n-gram dictionaries (GBs for a large LM) are not needed past G: not kept through
    # the determinization and the composition with T, the build's peaks.
    lm_order, dropped = model.order, dict(model.dropped)
    del model

    l_arrays, num_disambig = build_lexicon_fst(lexicon, tokens, words, separator, bool(slot))
    stage("L", l_arrays, words=len(lexicon), disambig_symbols=num_disambig)

    lg = ops.compose(ops.to_pynini(l_arrays), ops.to_pynini(g))
    del g, l_arrays
    if lg.num_states() == 0:
        raise GraphError("L ∘ G is empty: no ARPA word is spelled by the lexicon")
    stage("LG", lg)
    lg = ops.determinize_minimize(lg)
    if slot:
        open_in = tokens.next_id + num_disambig - 1  # #oov, #oovend: the last two (lexicon.py)
        lg = ops.to_pynini(insert_spelling_loops(ops.from_pynini(lg), tokens, words, separator,
                                                 open_in, open_in + 1))  # fmt: skip
    if push_labels:
        lg = ops.push_labels(lg)
    stage("min(det(LG))", lg)

    t = ctc_topology(tokens.next_id, topology, tokens.id(blank), num_disambig)
    stage(f"T ({topology})", t)
    composed = ops.compose(ops.to_pynini(t), lg)
    del lg
    tlg = ops.from_pynini(composed)
    del composed
    tlg = ops.sort_arcs(ops.relabel_inputs_above(tlg, tokens.next_id))
    meta = {"topology": topology, "blank_id": tokens.id(blank), "separator": separator,
            "lm_order": lm_order, **({"oov_slot": dict(oov_slot)} if slot else {})}  # fmt: skip
    graph = DecodingGraph.from_arrays(
        tlg,
        tokens,
        words,
        meta,
        Pronunciations.from_lexicon(lexicon, tokens, words),  # word times
    )
    if slot:
        _check_slot_arcs(graph)
    stage("TLG", tlg, epsilon_arcs=graph.num_arcs - graph.num_emitting_arcs)
    return TlgBuild(graph, tlg, words, stages, dropped)


def _check_slot(oov_slot, keep_unk, lexicon, tokens, separator) -> list[str]:
    """The slot labels to add (none without ``oov_slot``); refuses what cannot go with it."""
    if oov_slot is None:
        return []
    if not isinstance(oov_slot, dict) or oov_slot.get("spelling") not in SPELLINGS:
        raise GraphError(f"oov_slot must be {{'spelling': one of {SPELLINGS}}}; got {oov_slot!r}")
    if keep_unk:
        raise GraphError("keep_unk and oov_slot both claim <unk>: the slot takes its n-grams")
    slot = slot_words(tokens, separator)
    taken = sorted({e.word for e in lexicon} & set(slot))
    if taken:
        raise GraphError(f"the lexicon spells {taken[0]!r}, a label of the oov slot")
    return slot


def _check_slot_arcs(graph: DecodingGraph) -> None:
    """A token (emitting arc) carrying ``<oov>`` would let a search reach the slot's forbidden
    labels without reading ``<oov>`` on an epsilon arc first; L puts it on ``#oov``, so only a
    change of the build could move it."""
    open_label = OovSlot.of(graph).open
    if (graph.olabel[: graph.num_emitting_arcs] == open_label).any():
        raise GraphError("internal: the oov slot's <oov> label sits on an emitting arc")


def _examples(counts: dict[str, int], n: int = 10) -> str:
    shown = sorted(counts, key=counts.get, reverse=True)[:n]
    more = f" … and {len(counts) - n} more" if len(counts) > n else ""
    return ", ".join(shown) + more

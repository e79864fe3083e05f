"""Graph building: CTC topology T, lexicon L, grammar G from ARPA, and TLG.

Label conventions used while building (the decoders only ever see the final TLG):

* token id ``t`` (from tokens.txt, blank ``<blk>`` = 0) is label ``t + 1`` on T's input side and
  on L's input side; T's output label is ``t + 1`` for a token it emits and 0 (epsilon) for blank;
* token-level disambiguation symbol ``#j`` is label ``num_tokens + 1 + j`` (T passes it through with
  a self-loop on every state; it becomes epsilon in the final TLG);
* word labels are ids of the words table: ``<eps>`` 0, words, then ``#0``, ``<s>``, ``</s>``.

Costs are OpenFst tropical costs (lower is better). Builders return `FstArrays`; `ops` converts
to and from pynini for the OpenFst algorithms.
"""

from .grammar import ArpaModel, build_grammar, read_arpa
from .lexicon import LexiconEntry, add_disambig_symbols, build_lexicon_fst, read_lexicon
from .tlg import TlgBuild, build_tlg
from .topo import TOPOLOGIES, ctc_topology

__all__ = [
    "TOPOLOGIES",
    "ArpaModel",
    "LexiconEntry",
    "TlgBuild",
    "add_disambig_symbols",
    "build_grammar",
    "build_lexicon_fst",
    "build_tlg",
    "ctc_topology",
    "read_arpa",
    "read_lexicon",
]

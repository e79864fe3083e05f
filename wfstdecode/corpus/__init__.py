"""Corpus decoding: many ``.npz`` shards through a pool of workers (Ray actors, or local
processes), resumable, each shard's output written exactly once (``wfstdecode decode-corpus``).

Decoders: `CtcCorpusDecoder` (log-probs against a graph) and `TransducerCorpusDecoder`.
Module order (imports run one way): manifest -> shards -> transducer, ledger, pools, progress
-> run.
"""

from .manifest import Shard, read_manifest
from .run import CorpusSummary, decode_corpus, print_summary
from .shards import CtcCorpusDecoder, ShardOutput
from .transducer import TransducerCorpusDecoder

__all__ = [
    "CorpusSummary",
    "CtcCorpusDecoder",
    "Shard",
    "ShardOutput",
    "TransducerCorpusDecoder",
    "decode_corpus",
    "print_summary",
    "read_manifest",
]

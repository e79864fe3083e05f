"""Corpus decoding: many ``.npz`` shards through a pool of workers (Ray actors, or local
processes), resumable, each shard's output written exactly once (``wfstdecode decode-corpus``).

Module order (imports run one way): manifest -> shards -> ledger, pools, progress -> run.
"""

from .manifest import Shard, read_manifest
from .run import CorpusSummary, decode_corpus, print_summary
from .shards import CtcCorpusDecoder, ShardOutput

__all__ = [
    "CorpusSummary",
    "CtcCorpusDecoder",
    "Shard",
    "ShardOutput",
    "decode_corpus",
    "print_summary",
    "read_manifest",
]

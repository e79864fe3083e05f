"""The shipped speech graph: a phone TLG of hama's tokens, a 72k-word en-us lexicon and a pruned
en-us trigram (``wfstdecode/data/speech``), built once on first use into a cache directory.

The cache key is a hash of the inputs and the build settings, so a changed input builds anew
beside the old graph and a finished graph is never rebuilt. The directory appears only when
complete (`build_graph_dir`), so two processes building at once both end with a valid graph.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from importlib.resources import files
from pathlib import Path

from ..errors import WfstDecodeError
from .phone_model import WORD_BOUNDARY

DATA = Path(str(files("wfstdecode") / "data" / "speech"))
CLIPS = DATA / "clips"
SHIPPED_LM = DATA / "lm.arpa.gz"  # the shipped graph's LM: its first pass, for rescoring
TOPOLOGY = "compact"
_INPUTS = ("tokens.txt", "lexicon.txt.gz", "lm.arpa.gz")
_RECIPE = f"phones_hama/{TOPOLOGY}/separator={WORD_BOUNDARY}/v1"
# The variant with an out-of-vocabulary slot (`graph/oov_slot.py`): the LM has no <unk>, so the
# slot gets this log10 probability (the best trade-off of recall and false alarms on flite
# speech in bench/ctc_oov.md).
OOV_LOGPROB = -5.0


def cache_root() -> Path:
    """``$WFSTDECODE_CACHE``, else ``$XDG_CACHE_HOME/wfstdecode``, else ``~/.cache/wfstdecode``."""
    if os.environ.get("WFSTDECODE_CACHE"):
        return Path(os.environ["WFSTDECODE_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "wfstdecode"


def speech_graph_dir(cache: str | os.PathLike | None = None, verbose: bool = True,
                     data: Path = DATA, oov_slot: bool = False) -> Path:  # fmt: skip
    """The directory of the shipped speech graph, built first if the cache does not hold it
    (about 15-30 s and 1 GB of memory; with ``verbose``, a line per build stage). ``oov_slot``:
    the variant with a slot for boosted words the lexicon lacks (their pronunciations are given
    at decode time; `transcribe` asks hama's G2P)."""
    from ..decoding_graph import FORMAT_VERSION
    from ..graph.build_dir import build_graph_dir
    from ..graph.output import MARKER_VERSION, is_graph_dir
    from ..progress import print_stage

    # the builder's formats too: a toolkit that writes graphs differently builds a new one
    recipe = f"{_RECIPE}/oov_slot={OOV_LOGPROB:g}" if oov_slot else _RECIPE
    digest = hashlib.sha256(f"{recipe}/{MARKER_VERSION}/{FORMAT_VERSION}".encode())
    for name in _INPUTS:
        digest.update(name.encode() + b"\0" + (data / name).read_bytes())
    key = digest.hexdigest()[:16]
    name = f"speech-graph-oov-{key}" if oov_slot else f"speech-graph-{key}"
    target = Path(cache if cache is not None else cache_root()) / name
    if is_graph_dir(target):
        return target
    if target.parent.exists() and not target.parent.is_dir():
        raise WfstDecodeError(f"the graph cache {target.parent} is not a directory (set "
                              f"$WFSTDECODE_CACHE to a folder)")  # fmt: skip
    target.parent.mkdir(parents=True, exist_ok=True)
    if verbose:  # on stderr: stdout is the transcripts'
        print(f"building the speech graph once, into {target} (about 20 s, 1 GB)",
              file=sys.stderr, flush=True)  # fmt: skip
    try:
        out, _ = build_graph_dir(
            target, lambda: _read_inputs(data), data / "lm.arpa.gz", TOPOLOGY,
            separator=WORD_BOUNDARY, info={"speech_graph": key, "recipe": recipe},
            progress=functools.partial(print_stage, file=sys.stderr) if verbose else None,
            oov_slot={"spelling": "lexicon"} if oov_slot else None,
            oov_logprob=OOV_LOGPROB if oov_slot else None,
        )  # fmt: skip
    except WfstDecodeError:
        if is_graph_dir(target):  # another process finished the same build first
            return target
        raise
    return out


def _read_inputs(data: Path) -> tuple:
    from ..graph import read_lexicon
    from ..symbols import SymbolTable

    tokens = SymbolTable.read(data / "tokens.txt")
    return tokens, read_lexicon(data / "lexicon.txt.gz", tokens)


def load_speech_graph(cache: str | os.PathLike | None = None, verbose: bool = True,
                      oov_slot: bool = False):  # fmt: skip
    """The shipped speech graph as a `DecodingGraph` (built into the cache on first use);
    ``oov_slot``: its variant with an out-of-vocabulary slot."""
    from ..decoding_graph import DecodingGraph

    return DecodingGraph.load(speech_graph_dir(cache, verbose, oov_slot=oov_slot))

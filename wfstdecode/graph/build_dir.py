"""Build a TLG graph directory from its inputs: the one way the CLI, the recipes and the demo
do it, so the output check, the build and build.json cannot drift apart."""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import InputFileError
from ..symbols import SymbolTable
from .grammar import read_arpa_vocabulary
from .lexicon import LexiconEntry
from .output import check_out_dir, resolve_out_dir, write_graph_dir
from .tlg import TlgBuild

Inputs = Callable[[], tuple[SymbolTable, list[LexiconEntry]]]
ReplaceRule = Callable[[Path], bool]


def build_graph_dir(
    out: str | os.PathLike,
    read_inputs: Inputs,
    arpa: str | os.PathLike,
    topology: str = "normal",
    *,
    separator: str | None = None,
    keep_unk: bool = False,
    push_labels: bool = True,
    force: bool | ReplaceRule = False,
    info: dict | None = None,
    progress: Callable[[dict], None] | None = None,
    oov_slot: dict | None = None,
    oov_logprob: float | None = None,
) -> tuple[Path, TlgBuild]:
    """Check ``out``, build TLG, write the graph directory; returns (its resolved path, the build).

    out:         the graph directory to write (`write_graph_dir`'s rules). It is checked first,
                 so a refusal comes before any input is read or anything is built.
    read_inputs: returns (tokens, lexicon); called only after that check, because reading a
                 large lexicon or an ARPA vocabulary may itself take minutes.
    arpa, topology, separator, keep_unk, push_labels, oov_slot, oov_logprob: as in `build_tlg`.
    force:       replace a graph directory wfstdecode wrote: a bool, or a rule given the
                 resolved ``out``, asked before the build and again before the write (the
                 directory may change meanwhile). The demo's rule replaces its own earlier graph.
    info:        what else build.json should record, such as where the inputs came from
                 (``{"tokens": path}``); it also gets the command, the ARPA, topology,
                 separator, lexicon size and total seconds.
    progress:    called with each stage's figures as it finishes (e.g. `print_stage`).
    """
    from . import build_tlg  # the package's name, looked up per call so that a stub of it holds

    start = time.perf_counter()
    target = resolve_out_dir(out)
    may_replace = force if callable(force) else lambda _path: force
    target = check_out_dir(target, may_replace(target))  # refuse now, not after a long build
    tokens, lexicon = read_inputs()
    build = build_tlg(tokens, lexicon, arpa, topology, separator=separator, keep_unk=keep_unk,
                      push_labels=push_labels, progress=progress, oov_slot=oov_slot,
                      oov_logprob=oov_logprob)  # fmt: skip
    info = {"command": shlex.join(sys.argv), **(info or {}), "arpa": str(arpa),
            "topology": topology, "separator": separator, "lexicon_entries": len(lexicon),
            "total_seconds": round(time.perf_counter() - start, 2)}  # fmt: skip
    return write_graph_dir(build, target, info, force=may_replace(target)), build


def arpa_words(arpa: str | os.PathLike) -> list[str]:
    """The ARPA's words less ``<s>``, ``</s>``, ``<unk>``: what a made-up lexicon must spell.

    The build then reads the file again (the model), so a pipe is refused here, saying why: its
    second read found nothing ("not an ARPA file"), and a named FIFO's hung forever."""
    if Path(arpa).exists() and not Path(arpa).is_file():
        raise InputFileError(arpa, None, "not a regular file (a pipe?): its words are read, then "
                             "the model; give the file (gzip is read as it is)")  # fmt: skip
    return [w for w in read_arpa_vocabulary(arpa) if w not in ("<s>", "</s>", "<unk>")]

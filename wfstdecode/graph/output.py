"""Write a built TLG as a graph directory, atomically.

The directory is assembled under a hidden temporary name beside the target and renamed into
place only when every file is written, so an interrupted build leaves no directory that looks
complete (and the temporary one is removed on the way out).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from ..decoding_graph import GRAPH_FILE
from ..errors import WfstDecodeError
from ..fstio import write_openfst
from .tlg import TlgBuild

FILES = ("TLG.fst", GRAPH_FILE, "tokens.txt", "words.txt", "build.json")


def write_graph_dir(build: TlgBuild, out_dir: str | os.PathLike, info: dict | None = None,
                    force: bool = False) -> Path:  # fmt: skip
    """Write TLG.fst (OpenFst binary), TLG.npz, tokens.txt, words.txt and build.json
    (stages with sizes and timings, plus ``info``) to ``out_dir``; returns its path.

    An existing ``out_dir`` is replaced only with ``force``.
    """
    out = Path(out_dir)
    if out.exists() and not force:
        raise WfstDecodeError(f"{out} already exists (use --force to replace it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        write_openfst(build.fst, tmp / "TLG.fst")
        build.graph.save(tmp / GRAPH_FILE)
        build.graph.tokens.write(tmp / "tokens.txt")
        build.words.write(tmp / "words.txt")
        report = {
            **(info or {}),
            "graph": build.graph.summary(),
            "metadata": build.graph.metadata,
            "stages": build.stages,
            "dropped_arpa_words": len(build.dropped_words),
        }
        (tmp / "build.json").write_text(json.dumps(report, indent=2) + "\n")
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.replace(out, old / out.name)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out

"""The ``wfstdecode info`` command: a graph directory's summary, its build's stages, and
warnings for files of it that are not the ones its build wrote."""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

from .errors import InputFileError
from .progress import print_stage


def add_info_parser(sub) -> None:
    p = sub.add_parser("info", help="describe a graph directory")
    p.add_argument("dir", type=Path)
    p.set_defaults(func=info_command)


def info_command(args: argparse.Namespace) -> None:
    from .ctc import cuda_memory_bytes
    from .decoding_graph import GRAPH_FILE, DecodingGraph
    from .safe_io import read_json_file

    graph = DecodingGraph.load(args.dir)
    folder = Path(args.dir)
    # a directory's TLG.npz: its build.json (not another .npz kept there, which it describes not)
    if folder.is_file() and folder.name == GRAPH_FILE and (folder.parent / "build.json").is_file():
        folder = folder.parent
    report = folder / "build.json"
    stages = []
    if report.is_file():  # checked before anything is printed
        built = read_json_file(report, lambda m: InputFileError(report, None, m))
        if "graph" in built and built["graph"] != json.loads(json.dumps(graph.summary())):
            warnings.warn(f"{report} describes another graph than the directory's TLG.npz "
                          "(a file of it was replaced?): its stages are not this graph's",
                          stacklevel=1)  # fmt: skip
        _check_graph_files(folder, built.get("files"))
        stages = built.get("stages", [])
        numbers = ("states", "arcs", "seconds", "peak_rss_mb")
        if not isinstance(stages, list) or not all(
            isinstance(s, dict) and isinstance(s.get("stage"), str)
            and all(type(s.get(k)) in (int, float) for k in numbers)
            for s in stages
        ):  # fmt: skip
            raise InputFileError(report, None, f"'stages' must be a list of objects with a "
                                 f"'stage' name and numbers {', '.join(numbers)}")  # fmt: skip
    graph_bytes = cuda_memory_bytes(graph, batch_size=0)
    cuda = {  # with CtcBeamOptions() defaults; log-probs already on the GPU
        "graph_mb": round(graph_bytes / 2**20, 1),
        "per_utterance_mb": round((cuda_memory_bytes(graph) - graph_bytes) / 2**20, 2),
    }
    summary = {"graph": graph.summary(), "metadata": graph.metadata, "cuda_memory_default": cuda}
    print(json.dumps(summary, indent=2))
    for stage in stages:
        print_stage(stage)


def _check_graph_files(folder: Path, recorded) -> None:
    """Warn of each file of a graph directory that is not the one its build wrote (build.json's
    ``files``: sizes and SHA-256; directories built before they were recorded are not checked)."""
    if not isinstance(recorded, dict):
        return
    from .graph.output import file_record

    for name, want in recorded.items():
        path = folder / name
        if Path(name).name != name or name in (".", ".."):  # (the build writes names only)
            warnings.warn(f"build.json lists {name!r}, not a file of the directory: not "
                          "checked", stacklevel=1)  # fmt: skip
        elif not path.is_file():
            warnings.warn(f"{path} is missing (build.json lists it)", stacklevel=1)
        elif not isinstance(want, dict) or file_record(path) != want:
            warnings.warn(f"{path} is not the file this graph's build wrote (its size or "
                          "SHA-256 differs from build.json's): replaced or damaged",
                          stacklevel=1)  # fmt: skip

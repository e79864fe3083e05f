"""The ``import-graph`` command: a TLG built elsewhere (Kaldi, icefall, riva: an OpenFst binary
with its tokens.txt and words.txt) as a graph directory that ``decode``, ``info`` and the other
commands read, written as ``build-tlg`` writes its own."""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path


def add_import_parser(sub) -> None:
    p = sub.add_parser(
        "import-graph", help="a TLG.fst built elsewhere (Kaldi, icefall, riva) as a graph "
        "directory",
        description="Reads an OpenFst binary TLG whose input labels are token id + 1 (blank, "
        "token 0, is 1) and output labels word ids, and writes the graph directory decode "
        "reads (TLG.npz, TLG.fst, tokens.txt, words.txt, build.json). An OpenFst file does not "
        "say how its T was built: give --topology minimal for a T whose every non-blank frame "
        "is a token, and --separator for word times from the separator runs.",
    )  # fmt: skip
    p.add_argument("fst", type=Path, help="OpenFst binary TLG (vector or const)")
    p.add_argument("--tokens", required=True, type=Path, help="tokens.txt (<blk> 0)")
    p.add_argument("--words", required=True, type=Path, help="words.txt (<eps> 0)")
    p.add_argument("--topology", choices=("normal", "compact", "minimal"),
                   help="how T was built; minimal: a self-loop is a new token, not a CTC "
                        "repeat (default: repeats merge, as in normal and compact)")  # fmt: skip
    p.add_argument("--separator", help="word-separator token (e.g. '|')")
    p.add_argument("--lexicon", type=Path,
                   help="the build's lexicon (word tok1 tok2 ...): word times follow the "
                        "pronunciations on a graph without a separator")  # fmt: skip
    p.add_argument("--out", required=True, type=Path, help="graph directory to write")
    p.add_argument("--force", action="store_true",
                   help="replace a graph directory wfstdecode wrote")  # fmt: skip
    p.set_defaults(func=import_graph_command)


def import_graph_command(args: argparse.Namespace) -> Path:
    from .decoding_graph import DecodingGraph
    from .graph.output import check_out_dir, write_graph_dir
    from .graph.tlg import TlgBuild
    from .progress import print_stage

    check_out_dir(args.out, args.force)  # before a large graph is read
    started = time.perf_counter()
    graph = DecodingGraph.from_openfst(
        args.fst,
        args.tokens,
        args.words,
        topology=args.topology,
        separator=args.separator,
        lexicon=args.lexicon,
    )
    stage = {
        "stage": "import",
        "states": graph.num_states,
        "arcs": graph.num_arcs,
        "seconds": round(time.perf_counter() - started, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print_stage(stage)
    build = TlgBuild(graph, graph.to_arrays(), graph.words, stages=[stage])
    info = {"imported_from": str(args.fst.absolute()), "tokens": str(args.tokens),
            "words": str(args.words),
            **({"lexicon": str(args.lexicon)} if args.lexicon else {})}  # fmt: skip
    out = write_graph_dir(build, args.out, info, force=args.force)
    print(f"wrote {out}: {graph.summary()}")
    return out

"""Shared argument handling of the recipes: build TLG from a lexicon and write the directory."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from wfstdecode.cli import print_stage
from wfstdecode.graph import build_tlg
from wfstdecode.graph.grammar import read_arpa_vocabulary
from wfstdecode.graph.output import check_out_dir, write_graph_dir


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--arpa", required=True, type=Path, help="n-gram LM (ARPA, .gz ok)")
    p.add_argument("--topology", choices=("normal", "compact", "minimal"), default="compact")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument(
        "--force", action="store_true", help="replace a graph directory wfstdecode wrote there"
    )
    return p


def arpa_words(arpa: Path) -> list[str]:
    return [w for w in read_arpa_vocabulary(arpa) if w not in ("<s>", "</s>", "<unk>")]


def build_and_write(args, tokens, lexicon, skipped, separator=None, **info) -> Path:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    check_out_dir(args.out, args.force)  # refuse now, not after the build
    if skipped:
        print(
            f"{len(skipped):,} ARPA words have no lexicon entry and are left out", file=sys.stderr
        )
    start = time.perf_counter()
    build = build_tlg(tokens, lexicon, args.arpa, args.topology, separator=separator,
                      progress=print_stage)  # fmt: skip
    info = {"command": " ".join(sys.argv), "arpa": str(args.arpa), "topology": args.topology,
            "separator": separator, "lexicon_entries": len(lexicon),
            "total_seconds": round(time.perf_counter() - start, 2), **info}  # fmt: skip
    out = write_graph_dir(build, args.out, info, force=args.force)
    print(f"wrote {out}: {build.graph.summary()}")
    return out

"""Shared argument handling of the recipes: each reads its tokens and lexicon its own way, then
`build_graph_dir` checks --out, builds TLG and writes the directory as the CLI does."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from wfstdecode.graph import build_dir  # called through the module, so a stub of it holds
from wfstdecode.graph.build_dir import arpa_words
from wfstdecode.progress import print_stage

__all__ = ["arpa_words", "build_and_write", "parser"]


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--arpa", required=True, type=Path, help="n-gram LM (ARPA, .gz ok)")
    p.add_argument("--topology", choices=("normal", "compact", "minimal"), default="compact")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument(
        "--force", action="store_true", help="replace a graph directory wfstdecode wrote there"
    )
    return p


def build_and_write(args, read_inputs: Callable[[], tuple], separator=None, **info) -> Path:
    """Build the recipe's TLG into --out. ``read_inputs`` returns (tokens, lexicon, words left
    out); it runs after --out is checked, so a refusal comes before the lexicon is made."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    def inputs():
        tokens, lexicon, skipped = read_inputs()
        if skipped:
            print(
                f"{len(skipped):,} ARPA words have no lexicon entry and are left out",
                file=sys.stderr,
            )
        return tokens, lexicon

    out, build = build_dir.build_graph_dir(
        args.out, inputs, args.arpa, args.topology, separator=separator, force=args.force,
        info=info, progress=print_stage,
    )  # fmt: skip
    print(f"wrote {out}: {build.graph.summary()}")
    return out

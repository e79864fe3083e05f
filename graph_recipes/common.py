"""Shared argument handling of the recipes: each reads its tokens and lexicon its own way, then
`build_graph_dir` checks --out, builds TLG and writes the directory as the CLI does."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from wfstdecode.cli import run_reporting  # the recipes report errors as the CLI does
from wfstdecode.errors import WfstDecodeError
from wfstdecode.graph import build_dir  # called through the module, so a stub of it holds
from wfstdecode.graph.build_dir import arpa_words
from wfstdecode.progress import print_stage

__all__ = ["arpa_words", "build_and_write", "parser", "run_reporting"]


def parser(description: str) -> argparse.ArgumentParser:
    # (raw: a docstring's example commands keep their lines)
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--arpa", required=True, type=Path, help="n-gram LM (ARPA, .gz ok)")
    p.add_argument("--topology", choices=("normal", "compact", "minimal"), default="compact",
                   help="CTC topology T: normal (exact CTC), compact (fewer arcs), minimal "
                        "(default compact)")  # fmt: skip
    p.add_argument("--out", required=True, type=Path)
    p.add_argument(
        "--force", action="store_true", help="replace a graph directory wfstdecode wrote there"
    )
    p.add_argument("--oov-slot", action="store_true",
                   help="a slot for boosted words the lexicon lacks (as build-tlg's)")  # fmt: skip
    p.add_argument("--oov-logprob", type=float,
                   help="log10 probability of the slot when the ARPA has no <unk>")  # fmt: skip
    return p


# How each recipe's words are spelled, which the decoder repeats for the slot's words.
SPELLING = {"characters": "chars", "bpe": "spm", "phones_cmudict": "lexicon",
            "phones_hama": "lexicon"}  # fmt: skip


def build_and_write(args, read_inputs: Callable[[], tuple], separator=None, **info) -> Path:
    """Build the recipe's TLG into --out. ``read_inputs`` returns (tokens, lexicon, words left
    out); it runs after --out is checked, so a refusal comes before the lexicon is made."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.oov_logprob is not None and not args.oov_slot:  # (before any work, as build-tlg)
        raise WfstDecodeError("--oov-logprob is the slot's probability: it needs --oov-slot")

    def inputs():
        tokens, lexicon, skipped = read_inputs()
        if skipped:
            shown = ", ".join(skipped[:10]) + (" …" if len(skipped) > 10 else "")
            print(f"{len(skipped):,} ARPA words have no lexicon entry and are left out: {shown}",
                  file=sys.stderr)  # fmt: skip
        if not lexicon:
            raise WfstDecodeError(f"no word of {args.arpa} has a lexicon entry with these tokens")
        return tokens, lexicon

    slot = None
    if args.oov_slot:
        slot = {"spelling": SPELLING[info["recipe"]], **({"spm": info["spm"]} if "spm" in info
                                                          else {})}  # fmt: skip
    out, build = build_dir.build_graph_dir(
        args.out, inputs, args.arpa, args.topology, separator=separator, force=args.force,
        info=info, progress=print_stage, oov_slot=slot, oov_logprob=args.oov_logprob,
    )  # fmt: skip
    print(f"wrote {out}: {build.graph.summary()}")
    return out

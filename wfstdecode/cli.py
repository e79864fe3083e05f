"""The ``wfstdecode`` command: thin argument parsing over library functions."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from .errors import WfstDecodeError

log = logging.getLogger("wfstdecode")


def print_stage(info: dict) -> None:
    extra = {
        k: v
        for k, v in info.items()
        if k not in ("stage", "states", "arcs", "seconds", "peak_rss_mb")
    }
    print(f"  {info['stage']:<14} {info['states']:>10,} states {info['arcs']:>11,} arcs "
          f"{info['seconds']:8.2f} s  peak {info['peak_rss_mb']:8.1f} MB  {extra or ''}",
          flush=True)  # fmt: skip


def build_tlg_command(args: argparse.Namespace) -> Path:
    from .graph import build_tlg, read_lexicon
    from .graph.grammar import read_arpa_vocabulary
    from .graph.lexicon import sentencepiece_lexicon, spell_lexicon
    from .graph.output import check_out_dir, write_graph_dir
    from .symbols import SymbolTable

    start = time.perf_counter()
    out = check_out_dir(args.out, args.force)  # refuse now, not after a long build
    tokens = SymbolTable.read(args.tokens)
    if args.lexicon:
        lexicon = read_lexicon(args.lexicon, tokens, with_probs=args.lexicon_probs)
        source = {"lexicon": str(args.lexicon)}
    else:
        vocabulary = [
            w for w in read_arpa_vocabulary(args.arpa) if w not in ("<s>", "</s>", "<unk>")
        ]
        if args.spm:
            lexicon, skipped = sentencepiece_lexicon(
                vocabulary, args.spm, tokens, separator=args.separator
            )
            source = {"spm": str(args.spm)}
        else:
            lexicon, skipped = spell_lexicon(vocabulary, tokens, separator=args.separator)
            source = {"chars": True}
        if skipped:
            shown = ", ".join(skipped[:10]) + (" …" if len(skipped) > 10 else "")
            log.warning("%d ARPA words cannot be written with the tokens; left out: %s",
                        len(skipped), shown)  # fmt: skip
        if not lexicon:
            raise WfstDecodeError(f"no word of {args.arpa} can be written with {args.tokens}")
    print(f"building TLG ({args.topology}) from {args.arpa}: {len(lexicon):,} lexicon entries")
    build = build_tlg(tokens, lexicon, args.arpa, args.topology, separator=args.separator,
                      keep_unk=args.keep_unk, push_labels=not args.no_push_labels,
                      progress=print_stage)  # fmt: skip
    info = {"command": " ".join(sys.argv), "tokens": str(args.tokens), "arpa": str(args.arpa),
            **source, "topology": args.topology, "separator": args.separator,
            "total_seconds": round(time.perf_counter() - start, 2)}  # fmt: skip
    out = write_graph_dir(build, out, info, force=args.force)
    print(f"wrote {out}: {build.graph.summary()}")
    return out


def info_command(args: argparse.Namespace) -> None:
    from .ctc import cuda_memory_bytes
    from .decoding_graph import DecodingGraph
    from .errors import InputFileError
    from .safe_io import read_json_file

    graph = DecodingGraph.load(args.dir)
    report = Path(args.dir) / "build.json"
    stages = []
    if report.is_file():  # checked before anything is printed
        stages = read_json_file(report, lambda m: InputFileError(report, None, m)).get("stages", [])
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


def _parse_boost(text: str) -> tuple[str, float]:
    word, sep, value = text.rpartition("=")
    try:
        if not sep or not word:
            raise ValueError
        return word, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--boost expects WORD=BONUS; got {text!r}") from None


def decode_command(args: argparse.Namespace) -> None:
    import unicodedata

    from .ctc import CtcBeamOptions, decode_npz
    from .decoding_graph import DecodingGraph

    graph = DecodingGraph.load(args.graph)
    options = CtcBeamOptions(
        beam=args.beam, max_active=args.max_active, min_active=args.min_active,
        acoustic_scale=args.acoustic_scale, blank_penalty=args.blank_penalty,
        word_insertion_penalty=args.word_insertion_penalty, nbest=args.nbest,
    )  # fmt: skip
    boosts = dict(args.boost) if args.boost else None
    result = decode_npz(args.log_probs, graph, options, boosts, backend=args.backend)

    def escape(utt: str) -> str:  # one line per hypothesis whatever the id holds
        return "".join(
            c.encode("unicode_escape").decode("ascii")
            if c == "\\" or unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp")
            else c
            for c in utt
        )

    for utt, hyps in zip(result.ids, result.hypotheses, strict=True):
        for rank, hyp in enumerate(hyps):
            tag = escape(utt) if args.nbest == 1 else f"{escape(utt)}-{rank + 1}"
            print(f"{tag}\t{hyp.score:.3f}\t{hyp.text}")
    if result.wer is not None:
        print(f"WER {100 * result.wer:.2f}% (greedy CTC {100 * result.greedy_wer:.2f}%)",
              file=sys.stderr)  # fmt: skip


def demo_command(args: argparse.Namespace) -> None:
    from .demo import run_demo

    run_demo(args.out, force=args.force)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wfstdecode", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log every stage")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "build-tlg", help="build a CTC decoding graph TLG from tokens, lexicon, ARPA"
    )
    p.add_argument("--tokens", required=True, type=Path, help="tokens.txt (k2 format, <blk> 0)")
    lex = p.add_mutually_exclusive_group(required=True)
    lex.add_argument("--lexicon", type=Path, help="lexicon: 'word tok1 tok2 …' per line")
    lex.add_argument("--spm", type=Path, help="sentencepiece model: split ARPA words into pieces")
    lex.add_argument("--chars", action="store_true", help="spell ARPA words as characters")
    p.add_argument(
        "--lexicon-probs", action="store_true", help="lexicon lines are 'word prob tok…'"
    )
    p.add_argument("--separator", help="word-separator token (e.g. '|'), required between words")
    p.add_argument("--arpa", required=True, type=Path, help="n-gram LM in ARPA format (.gz ok)")
    p.add_argument("--topology", choices=("normal", "compact", "minimal"), default="normal")
    p.add_argument("--keep-unk", action="store_true", help="keep <unk> n-grams (needs it in L)")
    p.add_argument("--no-push-labels", action="store_true", help="skip output-label pushing")
    p.add_argument(
        "--out", required=True, type=Path, help="output directory (new or empty; made atomically)"
    )
    p.add_argument(
        "--force", action="store_true", help="replace a graph directory wfstdecode wrote there"
    )
    p.set_defaults(func=build_tlg_command)

    p = sub.add_parser("info", help="describe a graph directory")
    p.add_argument("dir", type=Path)
    p.set_defaults(func=info_command)

    p = sub.add_parser(
        "decode", help="decode CTC log-probs (.npz) against a graph directory",
        description="Prints one line per hypothesis: ID<tab>SCORE<tab>TEXT (ID-RANK with "
        "--nbest > 1). In IDs, backslashes and control or line-break characters are written as "
        "Python escapes (\\\\, \\t, \\n, \\x1b, \\u2028), so every hypothesis is one line.",
    )  # fmt: skip
    p.add_argument("graph", type=Path, help="directory from build-tlg (or a TLG.npz)")
    p.add_argument("log_probs", type=Path, help=".npz with log_probs (B, T, V), lengths, texts")
    p.add_argument("--beam", type=float, default=16.0)
    p.add_argument("--max-active", type=int, default=10_000)
    p.add_argument("--min-active", type=int, default=1)
    p.add_argument("--acoustic-scale", type=float, default=1.0)
    p.add_argument("--blank-penalty", type=float, default=0.0)
    p.add_argument("--word-insertion-penalty", type=float, default=0.0)
    p.add_argument("--nbest", type=int, default=1)
    p.add_argument("--boost", type=_parse_boost, action="append", metavar="WORD=BONUS",
                   help="boost a word (positive = more likely); repeatable")  # fmt: skip
    p.add_argument("--backend", default="auto", choices=("auto", "reference", "cpu", "cuda"))
    p.set_defaults(func=decode_command)

    p = sub.add_parser("demo", help="build and decode the shipped example data")
    p.add_argument(
        "--out", type=Path, default=None, help="keep the graph here (replaces an earlier demo's)"
    )
    p.add_argument(
        "--force", action="store_true", help="also replace a graph directory build-tlg wrote"
    )
    p.set_defaults(func=demo_command)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")  # fmt: skip
    try:
        args.func(args)
    except (WfstDecodeError, OSError) as exc:  # not Exception: a bug should show its traceback
        if isinstance(exc, OSError) and exc.filename is not None:
            exc = f"{exc.filename}: {exc.strerror or exc}"  # FILE: what, like the other errors
        print(f"wfstdecode: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("wfstdecode: interrupted; nothing was written", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

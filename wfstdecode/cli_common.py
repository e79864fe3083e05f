"""What the CLI's commands share: the search's options (`DECODE_OPTIONS`), the boost options, the
transducer beam options, and how utterance ids are printed (`escaped_id`)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from .errors import OptionsError, WfstDecodeError

# defaults are read from CtcBeamOptions itself so that the two cannot drift.
DECODE_OPTIONS = {
    "beam": (float, "tokens this far (log score) below the frame's best are pruned"),
    "max_active": (int, "at most this many tokens survive a frame"),
    "min_active": (int, "at least this many survive a frame when that many exist"),
    "acoustic_scale": (float, "log-probs are multiplied by this before the search"),
    "blank_penalty": (float, "cost added on every blank frame (positive: more tokens)"),
    "word_insertion_penalty": (float, "cost added per output word (positive: fewer words)"),
    "nbest": (int, "hypotheses per utterance (distinct word sequences with --lattice-beam)"),
    "lattice_beam": (float, "keep a lattice of the paths this close to the best: n-best, "
                            "word confidences, rescoring"),
    "mbr_candidates": (int, "minimum Bayes risk: rank the lattice's this many best word "
                            "sequences by expected word errors (needs --lattice-beam)"),
    "posteriors": (str, "what confidences count: 'lattice' (every path) or 'determinized' "
                        "(each word sequence once, Kaldi's)"),
    "blank_skip_threshold": (float, "leave frames whose blank probability exceeds this (e.g. "
                                    "0.95) out of the search: faster, times unchanged"),
}  # fmt: skip


def add_decode_options(p: argparse.ArgumentParser, defaults: dict, given_only: bool) -> None:
    """The search's options (`DECODE_OPTIONS`), their defaults ``defaults`` shown in the help;
    ``given_only``: left None unless given (the command applies its defaults itself)."""
    for name, (kind, what) in DECODE_OPTIONS.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=kind,
                       default=None if given_only else defaults[name],
                       help=f"{what} (default {defaults[name]})")  # fmt: skip


def ctc_options(values: dict):
    """`CtcBeamOptions` from the search's flags (``values``: `DECODE_OPTIONS` names): a value it
    refuses is said of its flag (``--max-active must be >= 1``, not the field's Python name);
    --posteriors determinized without --lattice-beam, which would change nothing, is refused."""
    from .ctc import CtcBeamOptions

    try:
        options = CtcBeamOptions(**values)
    except OptionsError as exc:
        names = "|".join(n for n in DECODE_OPTIONS if "_" in n)  # (not "beam": a plain word)
        message = re.sub(rf"CtcBeamOptions\.(\w+)|\b({names})\b",
                         lambda m: "--" + (m[1] or m[2]).replace("_", "-"), str(exc))  # fmt: skip
        raise WfstDecodeError(message) from None
    if options.posteriors != "lattice" and options.lattice_beam is None:  # (refused, not ignored)
        raise WfstDecodeError(f"--posteriors {options.posteriors} says what the lattice's "
                              "confidences and MBR count: give --lattice-beam BEAM (e.g. "
                              "8)")  # fmt: skip
    return options


def parse_boost(text: str) -> tuple[str, float]:
    from .ctc.options import MAX_COST_TERM
    from .textfiles import strict_float

    phrase, sep, value = text.rpartition("=")
    phrase = " ".join(phrase.split())  # as --boost-file reads it
    try:
        if not sep or not phrase:
            raise ValueError
        bonus = strict_float(value)  # (not 1_5 as 15, as float() reads it)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--boost expects PHRASE=BONUS; got {text!r}") from None
    if not abs(bonus) <= MAX_COST_TERM:  # also NaN
        raise argparse.ArgumentTypeError(f"the bonus of {text!r} must be in "
                                         f"[-{MAX_COST_TERM:g}, {MAX_COST_TERM:g}]")  # fmt: skip
    return phrase, bonus


def add_text_argument(p: argparse.ArgumentParser, replaced: str) -> None:
    """--text, Kaldi-style references by utterance id, as decode and decode-corpus take it."""
    p.add_argument("--text", type=Path, metavar="FILE",
                   help="reference transcripts, 'ID word word ...' per line (a Kaldi data "
                        f"directory's text), in place of {replaced}: WER")  # fmt: skip


def add_boost_arguments(p: argparse.ArgumentParser) -> None:
    """--boost and --boost-file, as decode, decode-corpus and transcribe take them."""
    p.add_argument("--boost", type=parse_boost, action="append", metavar="PHRASE=BONUS",
                   help="boost a word or a phrase of words in every utterance (bonus per word, "
                        "positive = more likely; a word the graph lacks goes through its oov "
                        "slot, if it has one); repeatable")  # fmt: skip
    p.add_argument("--boost-file", type=Path, action="append", metavar="FILE",
                   help="phrases to boost: PHRASE<TAB>BONUS per line; repeatable")  # fmt: skip


def boosts_of(args: argparse.Namespace) -> dict | None:
    """The repeated --boost-file's phrases and the repeated --boost (a phrase given twice, by
    two files, two flags or a file and a flag, is refused)."""
    from .ctc.boost_files import read_boost_file

    boosts: dict = {}
    source: dict = {}  # phrase -> the file that gave it
    for path in args.boost_file or ():
        for phrase, bonus in read_boost_file(path).items():
            if phrase in boosts:
                raise WfstDecodeError(f"{phrase!r} is boosted in {source[phrase]} and in {path}")
            boosts[phrase], source[phrase] = bonus, path
    given = set()
    for word, bonus in args.boost or ():
        if word in given:
            raise WfstDecodeError(f"{word!r} is boosted by two --boost options")
        if word in boosts:
            raise WfstDecodeError(f"{word!r} is boosted by --boost and in {source[word]}")
        boosts[word] = bonus
        given.add(word)
    return boosts or None


def oov_lexicon_of(args: argparse.Namespace, graph=None) -> dict | None:
    """--oov-lexicon's pronunciations, checked against the graph's tokens."""
    if not args.oov_lexicon:
        return None
    from .ctc.oov import read_oov_lexicon
    from .decoding_graph import DecodingGraph

    graph = graph if graph is not None else DecodingGraph.load(args.graph, mmap=True)
    if "oov_slot" not in graph.metadata:  # (said of the graph, before the log-probs are read)
        raise WfstDecodeError(f"--oov-lexicon: the graph {args.graph} has no oov slot: the "
                              "pronunciations are for a graph built with build-tlg "
                              "--oov-slot")  # fmt: skip
    if graph.tokens is None:
        raise WfstDecodeError("--oov-lexicon needs a graph with a token table")
    return read_oov_lexicon(args.oov_lexicon, graph.tokens)


def escaped_id(utt: str) -> str:
    """An utterance id as printed: control characters, line and paragraph separators and the
    backslash escaped, so that each hypothesis is one line and its fields stay apart."""
    import unicodedata

    return "".join(
        c.encode("unicode_escape").decode("ascii")
        if c == "\\" or unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp")
        else c
        for c in utt
    )


# BeamOptions' own parameters as flags: (field, type, help); each is given only when set, so the
# defaults and the refusals (a parameter of another algorithm) stay BeamOptions' own.
BEAM_PARAMETERS = {
    "window": (int, "wind: frames scored per step (default 8)"),
    "segment_size": (int, "tokenwise: frames per segment (default 3)"),
    "max_tokens": (int, "alsd, wind: no hypothesis grows longer (ALSD's u_max)"),
    "max_symbols_per_frame": (int, "labels one hypothesis may emit at one frame (default 10)"),
    "maes_steps": (int, "maes: labels per frame (default 2)"),
    "expansion_beta": (int, "maes: label expansions beyond the beam per round (default 2)"),
    "expansion_gamma": (float, "maes: labels within this of the best expansion (default 2.3)"),
}


def transducer_flags_given(args: argparse.Namespace) -> list[str]:
    """The transducer beam search's flags given (--beam-size, --beam-algorithm, its parameters):
    commands decoding with a graph refuse them rather than ignore them."""
    names = ["beam_size", "beam_algorithm", *BEAM_PARAMETERS]
    given = [n for n in names if getattr(args, n, None) is not None]
    given += ["no_length_norm"] if getattr(args, "no_length_norm", False) else []
    return [f"--{n.replace('_', '-')}" for n in given]


def transducer_beam_options(args: argparse.Namespace, nbest: int = 1):
    """`BeamOptions` from --beam-size / --beam-algorithm (default ALSD), the algorithms'
    parameters (`BEAM_PARAMETERS`, --no-length-norm) and ``nbest``, or None for greedy
    decoding; the beam search's options without --beam-size are refused."""
    if nbest < 1:
        raise WfstDecodeError(f"--nbest must be >= 1; got {nbest}")
    given = {n: v for n in BEAM_PARAMETERS if (v := getattr(args, n, None)) is not None}
    if args.beam_size is None:
        if args.beam_algorithm is not None or nbest != 1:
            raise WfstDecodeError("--nbest and --beam-algorithm need --beam-size")
        if given or getattr(args, "no_length_norm", False):
            flags = [f"--{n.replace('_', '-')}" for n in given] or ["--no-length-norm"]
            raise WfstDecodeError(f"{', '.join(flags)}: beam search options; they need "
                                  "--beam-size")  # fmt: skip
        return None
    from .transducer import BeamOptions

    return BeamOptions(args.beam_algorithm or "alsd", beam_size=args.beam_size, nbest=nbest,
                       length_norm=not getattr(args, "no_length_norm", False),
                       **given)  # fmt: skip


def add_transducer_beam_arguments(p: argparse.ArgumentParser, when: str = "") -> None:
    p.add_argument("--beam-size", type=int, default=None, metavar="K",
                   help=f"{when}beam search of K hypotheses (default: greedy)")  # fmt: skip
    p.add_argument("--beam-algorithm", default=None, metavar="NAME",
                   help=f"{when}standard, tokenwise, maes, alsd (default), wind")  # fmt: skip
    group = p.add_argument_group(
        "transducer beam search parameters",
        f"{when}with --beam-size; each belongs to the algorithms it names (another's is refused)",
    )
    for name, (kind, text) in BEAM_PARAMETERS.items():
        group.add_argument(f"--{name.replace('_', '-')}", type=kind, default=None, help=text,
                           metavar="N" if kind is int else "X")  # fmt: skip
    group.add_argument("--no-length-norm", action="store_true",
                       help="rank the final hypotheses by their whole score, not score per "
                            "token (NeMo's score_norm=False)")  # fmt: skip


def lattices_written(args: argparse.Namespace) -> str | None:
    """decode-corpus --lattices [--no-determinize-lattice]: `CtcCorpusDecoder.lattices`."""
    if not args.lattices:
        if args.determinize_lattice is not None:  # (refused, not ignored)
            raise WfstDecodeError("--determinize-lattice / --no-determinize-lattice say how "
                                  "--lattices writes the lattices: give --lattices")  # fmt: skip
        return None
    if args.lattice_beam is None:
        raise WfstDecodeError("--lattices needs --lattice-beam BEAM (e.g. 8)")
    refuse_skipping_in_lattices(args, "--lattices")
    return "state" if args.determinize_lattice is False else "determinized"


def refuse_skipping_in_lattices(args: argparse.Namespace, flag: str) -> None:
    """Lattices written count the frames searched, not the input's: not with blank skipping."""
    if getattr(args, "blank_skip_threshold", None) is not None:
        raise WfstDecodeError(f"{flag} writes lattices over the frames searched: not with "
                              "--blank-skip-threshold (its hypotheses keep the input's "
                              "frames)")  # fmt: skip

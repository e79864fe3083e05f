"""The ``wfstdecode`` command: thin argument parsing over library functions."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import os
import signal
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

from . import __version__
from .cli_common import (
    DECODE_OPTIONS,
    add_boost_arguments,
    add_decode_options,
    add_text_argument,
    add_transducer_beam_arguments,
    boosts_of,
    ctc_options,
    escaped_id,
    lattices_written,
    oov_lexicon_of,
    refuse_skipping_in_lattices,
    transducer_beam_options,
    transducer_flags_given,
)
from .cli_import import add_import_parser
from .cli_info import add_info_parser
from .cli_rescore import (
    add_rescore_parser,
    add_rescoring_arguments,
    rescoring,
    rescoring_flags_given,
)
from .cli_score import add_score_parser
from .cli_speech import decode_transducer_command, transcribe_command
from .ctc import CtcBeamOptions
from .errors import WfstDecodeError
from .interrupts import Terminated, interrupts_raised, termination_raised
from .progress import print_stage
from .safe_io import json_line

log = logging.getLogger("wfstdecode")

# The CtcBeamOptions fields that `decode` exposes (as --max-active etc.) and their types; the


def build_tlg_command(args: argparse.Namespace) -> Path:
    from .graph.build_dir import build_graph_dir

    if args.lexicon:
        source = {"lexicon": str(args.lexicon)}
    else:
        source = {"spm": str(args.spm)} if args.spm else {"chars": True}
    slot = None
    if args.oov_slot:  # how the decoder will spell boosted words the lexicon lacks
        slot = {"spelling": next(iter(source))}
        if args.spm:
            slot["spm"] = str(args.spm.absolute())
    elif args.oov_logprob is not None:
        raise WfstDecodeError("--oov-logprob is the slot's probability: it needs --oov-slot")
    if args.lexicon_probs and not args.lexicon:
        raise WfstDecodeError("--lexicon-probs reads probabilities in a --lexicon file: --spm "
                              "and --chars spell every word one way")  # fmt: skip
    out, build = build_graph_dir(
        args.out, lambda: _read_inputs(args), args.arpa, args.topology, separator=args.separator,
        keep_unk=args.keep_unk, push_labels=not args.no_push_labels, force=args.force,
        info={"tokens": str(args.tokens), **source}, progress=print_stage, oov_slot=slot,
        oov_logprob=args.oov_logprob,
    )  # fmt: skip
    print(f"wrote {out}: {build.graph.summary()}")
    return out


def _read_inputs(args: argparse.Namespace) -> tuple:
    """(tokens, lexicon) from --tokens and --lexicon, or a lexicon that spells the ARPA's words
    with --spm pieces or --chars."""
    from .graph import read_lexicon
    from .graph.build_dir import arpa_words
    from .graph.lexicon import sentencepiece_lexicon, spell_lexicon
    from .symbols import SymbolTable

    tokens = SymbolTable.read(args.tokens)
    if args.lexicon:
        lexicon = read_lexicon(args.lexicon, tokens, with_probs=args.lexicon_probs)
    else:
        if Path(args.arpa).exists() and not Path(args.arpa).is_file():
            raise WfstDecodeError(f"{args.arpa} is not a regular file (a pipe?): --chars and --spm "
                                  "read the ARPA twice, its words and then the model; give the "
                                  "file (gzip is read as it is)")  # fmt: skip
        vocabulary = arpa_words(args.arpa)
        if args.spm:
            lexicon, skipped = sentencepiece_lexicon(
                vocabulary, args.spm, tokens, separator=args.separator
            )
        else:
            lexicon, skipped = spell_lexicon(vocabulary, tokens, separator=args.separator)
        if skipped:
            shown = ", ".join(skipped[:10]) + (" …" if len(skipped) > 10 else "")
            log.warning("%d ARPA words cannot be written with the tokens; left out: %s",
                        len(skipped), shown)  # fmt: skip
        if not lexicon:
            raise WfstDecodeError(f"no word of {args.arpa} can be written with {args.tokens}")
    print(f"building TLG ({args.topology}) from {args.arpa}: {len(lexicon):,} lexicon entries")
    return tokens, lexicon


def decode_command(args: argparse.Namespace) -> None:
    from .ctc import decode_npz
    from .decoding_graph import DecodingGraph
    from .results import frame_shift_problem

    if args.frame_shift is not None and (problem := frame_shift_problem(args.frame_shift)):
        raise WfstDecodeError(f"--frame-shift {problem}")
    if args.ctm and args.frame_shift is None:
        raise WfstDecodeError("--ctm writes times in seconds: give --frame-shift SECONDS "
                              "(seconds per log-prob frame, e.g. 0.04)")  # fmt: skip
    if args.frame_shift is not None and not (args.json or args.ctm):  # (refused, not ignored)
        raise WfstDecodeError("--frame-shift gives word times in seconds, which only --json and "
                              "--ctm print: give one of them")  # fmt: skip
    graph = DecodingGraph.load(args.graph)
    if args.rescore_lm is not None:  # (before the LMs and the log-probs are read)
        from .rescore import check_rescorable

        check_rescorable(graph, f"the graph {args.graph}")
    options = ctc_options({name: getattr(args, name) for name in DECODE_OPTIONS})
    boosts = boosts_of(args)
    per_utterance = None
    if args.utterance_boosts:
        from .ctc.boost_files import read_utterance_boosts

        per_utterance, source = {}, {}
        for path in args.utterance_boosts:  # (repeatable: every file read, an id in one only)
            for utt, phrases in read_utterance_boosts(path).items():
                if utt in per_utterance:
                    raise WfstDecodeError(f"utterance {utt!r} is in {source[utt]} and in {path}")
                per_utterance[utt], source[utt] = phrases, path
    oov_lexicon = oov_lexicon_of(args, graph)
    if args.write_lattices is None and args.determinize_lattice is not None:
        raise WfstDecodeError("--determinize-lattice / --no-determinize-lattice say how "
                              "--write-lattices writes the lattices: give --write-lattices "
                              "ARK")  # fmt: skip
    if args.write_lattices is not None:
        from .lattice_io import check_archive_path

        if args.lattice_beam is None:
            raise WfstDecodeError("--write-lattices needs --lattice-beam BEAM (e.g. 8)")
        refuse_skipping_in_lattices(args, "--write-lattices")
        from .kaldi_tables import table_files

        inputs = (*table_files(args.log_probs), args.graph, *(args.boost_file or ()),
                  args.text, *(args.utterance_boosts or ()), args.oov_lexicon,
                  args.rescore_lm, args.first_pass_lm)  # fmt: skip
        check_archive_path(args.write_lattices, inputs, "--write-lattices")
    keys_check = None
    if args.write_lattices is not None:
        from .lattice_io import check_archive_keys as keys_check
    references = None
    if args.text is not None:
        from .ctc import read_reference_texts

        references = read_reference_texts(args.text)
    rescore = None if (files := rescoring(args)) is None else files.load()  # (the LMs read)
    if rescore is not None:
        rescore.check_graph(graph, f"the graph {args.graph}")
    result = decode_npz(args.log_probs, graph, options, boosts, backend=args.backend,
                        utterance_boosts=per_utterance, oov_lexicon=oov_lexicon,
                        lattices=args.write_lattices is not None, rescore=rescore,
                        references=references, check_ids=keys_check)  # fmt: skip
    if args.write_lattices is not None:
        from .lattice_io import determinized_on_words, write_kaldi_archive

        kept = {u: lat for u, lat in zip(result.ids, result.lattices, strict=True) if lat}
        if args.determinize_lattice is not False:  # (the default: determinized)
            kept = determinized_on_words(kept, args.lattice_beam)
        write_kaldi_archive(kept, args.write_lattices)
        died = len(result.ids) - len(kept)
        determinized = args.determinize_lattice is not False
        kind = "word-determinized CompactLattice" if determinized else "state-level"
        print(f"wrote {len(kept)} {kind} lattices to {args.write_lattices}"
              + (f" ({died} utterances whose search died have none)" if died else ""),
              file=sys.stderr)  # fmt: skip

    for utt, hyps in zip(result.ids, result.hypotheses, strict=True):
        for rank, hyp in enumerate(hyps):
            tag = escaped_id(utt) if args.nbest == 1 else f"{escaped_id(utt)}-{rank + 1}"
            if args.json:
                record = {"id": utt, **hyp.record(args.frame_shift)}
                if args.nbest > 1:
                    record["rank"] = rank + 1
                print(json_line(record))
            elif args.ctm:  # utterance, channel, start, duration, word (NIST CTM)
                field = "".join(  # fields are split at any whitespace (no-break spaces too)
                    "\\x20" if c == " " else c.encode("unicode_escape").decode("ascii")
                    if c.isspace() else c for c in tag
                )  # fmt: skip
                if not hyp.words and hyp.notes:  # no line in the CTM: say why, once
                    print(f"{field}: no words ({'; '.join(hyp.notes)})", file=sys.stderr)
                for word in hyp.word_entries(args.frame_shift):
                    duration = word["end"] - word["start"]
                    conf = f" {word['confidence']:.4f}" if "confidence" in word else ""
                    print(f"{field} 1 {word['start']:.3f} {duration:.3f} {word['word']}{conf}")
            else:
                if hyp.score == -math.inf and hyp.notes:  # (the line says -inf: say why)
                    print(f"{tag}: {'; '.join(hyp.notes)}", file=sys.stderr)
                print(f"{tag}\t{hyp.score:.3f}\t{hyp.text}")
    if result.wer is not None:
        greedy = (
            f"greedy CTC {100 * result.greedy_wer:.2f}%" if result.greedy_wer is not None
            else "no greedy CTC: the graph has no token table" if graph.tokens is None
            else "no greedy CTC WER: the tokens are not characters or word pieces"
        )  # fmt: skip
        print(f"WER {100 * result.wer:.2f}% ({greedy})", file=sys.stderr)


def decode_corpus_command(args: argparse.Namespace) -> int:
    from .corpus import CtcCorpusDecoder, TransducerCorpusDecoder, decode_corpus, print_summary
    from .ctc import read_reference_texts

    if (args.graph is None) == (args.transducer is None):
        raise WfstDecodeError("give --graph (CTC log-probs) or --transducer MODEL, not both")
    if args.transducer is not None:
        ctc_given = [n for n in DECODE_OPTIONS if n != "nbest" and getattr(args, n) is not None]
        if (ctc_given or args.boost or args.boost_file or args.oov_lexicon or args.backend != "cpu"
                or args.no_mmap or args.text or args.lattices or rescoring_flags_given(args)
                or args.determinize_lattice is not None):  # fmt: skip
            raise WfstDecodeError("--transducer decodes without a graph: --beam, --boost, "
                                  "--backend, --no-mmap, --text, --rescore-lm, --lattices and "
                                  "the like do not apply")  # fmt: skip
        nbest = 1 if args.nbest is None else args.nbest
        decoder = TransducerCorpusDecoder(args.transducer, transducer_beam_options(args, nbest),
                                          args.threads_per_worker, args.frame_shift)  # fmt: skip
    else:
        if flags := transducer_flags_given(args):
            raise WfstDecodeError(f"{', '.join(flags)}: the transducer beam search's (with "
                                  "--transducer); the graph search's width is --beam")  # fmt: skip
        defaults = {f.name: f.default for f in dataclasses.fields(CtcBeamOptions)}
        given = {n: v if (v := getattr(args, n)) is not None else defaults[n]
                 for n in DECODE_OPTIONS}  # fmt: skip
        decoder = CtcCorpusDecoder(
            str(args.graph), ctc_options(given), boosts_of(args),
            backend=args.backend, num_threads=args.threads_per_worker, mmap=not args.no_mmap,
            frame_shift=args.frame_shift, oov_lexicon=oov_lexicon_of(args),
            references=None if args.text is None else read_reference_texts(args.text),
            rescoring=rescoring(args), lattices=lattices_written(args),
        )  # fmt: skip
    summary = decode_corpus(
        args.manifest, args.out, decoder, workers=args.workers, executor=args.executor,
        address=args.address, max_attempts=args.max_attempts,
        shard_timeout=args.shard_timeout, force=args.force,
        verify=args.verify, progress="quiet" if args.quiet else "auto",
    )  # fmt: skip
    print_summary(summary, args.out)
    if summary.interrupted:  # 128 + the signal, as a shell reports a command it stopped
        return 128 + signal.Signals[summary.interrupted_by or "SIGINT"].value
    return 0 if summary.ok else 1


def demo_command(args: argparse.Namespace) -> None:
    if args.ocr:
        from .demo import run_demo

        run_demo(args.out, force=args.force)
        return
    if args.out is not None or args.force:
        raise WfstDecodeError("--out and --force belong to the OCR demo (--ocr); the speech "
                              "graph is kept in the cache ($WFSTDECODE_CACHE)")  # fmt: skip
    from .speech.demo import run_speech_demo

    run_speech_demo()


def _count(text: str) -> int:
    """An argparse type: a whole number >= 1 (said of its flag by argparse)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1; got {value}")
    return value


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds; got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds; got {value}")
    return value


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wfstdecode",
        description="WFST decoding for speech recognition: build CTC decoding graphs (TLG), "
        "decode CTC log-probs, audio and transducer encoder outputs, rescore lattices.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every stage")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
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
    p.add_argument("--topology", choices=("normal", "compact", "minimal"), default="normal",
                   help="CTC topology T: normal (exact CTC), compact (fewer arcs), minimal "
                        "(default normal)")  # fmt: skip
    p.add_argument("--keep-unk", action="store_true", help="keep <unk> n-grams (needs it in L)")
    p.add_argument("--no-push-labels", action="store_true", help="skip output-label pushing")
    p.add_argument(
        "--oov-slot", action="store_true",
        help="add a slot through which boosted words the lexicon lacks are decoded (spelled as "
        "the lexicon spells: --chars, --spm, or with --lexicon the pronunciations given to "
        "decode --oov-lexicon); its probability is the ARPA's <unk>, else --oov-logprob",
    )  # fmt: skip
    p.add_argument("--oov-logprob", type=float, help="log10 probability of the slot (no <unk>)")
    p.add_argument(
        "--out", required=True, type=Path, help="output directory (new or empty; made atomically)"
    )
    p.add_argument(
        "--force", action="store_true", help="replace a graph directory wfstdecode wrote there"
    )
    p.set_defaults(func=build_tlg_command)

    add_info_parser(sub)

    p = sub.add_parser(
        "decode", help="decode CTC log-probs (.npz, Kaldi .ark/.scp) against a graph directory",
        description="Prints one line per hypothesis: ID<tab>SCORE<tab>TEXT (ID-RANK with "
        "--nbest > 1). In IDs, backslashes and control or line-break characters are written as "
        "Python escapes (\\\\, \\t, \\n, \\x1b, \\u2028), so every hypothesis is one line. "
        "--json: one object per hypothesis with its words' first and last frames (and seconds "
        "with --frame-shift), scores and notes. --ctm: a line per word, ID 1 START DURATION WORD "
        "in seconds (spaces in IDs as \\x20; ID-RANK with --nbest > 1), then the word's "
        "confidence with --lattice-beam (not on a graph with an oov slot).",
    )  # fmt: skip
    p.add_argument("graph", type=Path, help="directory from build-tlg (or a TLG.npz)")
    p.add_argument("log_probs", type=Path,
                   help=".npz with log_probs (B, T, V), lengths, texts; or a Kaldi table of "
                        "(frames, tokens) log-prob matrices, keys as ids: ark:FILE, scp:FILE, "
                        "FILE.ark, FILE.ark.gz or FILE.scp (binary, text or compressed; as "
                        "nnet3-compute or copy-matrix write them)")  # fmt: skip
    add_text_argument(p, "the .npz's texts")
    defaults = {f.name: f.default for f in dataclasses.fields(CtcBeamOptions)}
    add_decode_options(p, defaults, given_only=False)
    add_boost_arguments(p)
    p.add_argument("--utterance-boosts", type=Path, action="append", metavar="FILE",
                   help='per-utterance phrases, a JSON object per line: {"id": ID, "boosts": '
                        "{PHRASE: BONUS}} (added to --boost / --boost-file for that "
                        "utterance; for a phrase in both, the utterance's bonus wins); "
                        "repeatable")  # fmt: skip
    p.add_argument("--oov-lexicon", type=Path, metavar="FILE",
                   help="pronunciations of boosted words the graph lacks, 'word tok1 tok2 …' "
                        "per line (a graph built with --oov-slot)")  # fmt: skip
    p.add_argument("--backend", default="auto", choices=("auto", "reference", "cpu", "cuda"))
    out_format = p.add_mutually_exclusive_group()
    out_format.add_argument("--json", action="store_true",
                            help="a JSON object per hypothesis: words, times, scores")  # fmt: skip
    out_format.add_argument("--ctm", action="store_true",
                            help="CTM: ID 1 START DURATION WORD (needs --frame-shift)")  # fmt: skip
    p.add_argument("--frame-shift", type=float, metavar="SECONDS",
                   help="seconds per frame: word times in seconds (--json, --ctm)")  # fmt: skip
    add_rescoring_arguments(p)
    p.add_argument("--write-lattices", metavar="ARK",
                   help="write each utterance's lattice (--lattice-beam) to a binary Kaldi "
                        "archive (FILE, ark:FILE, ark,scp:FILE,SCRIPT; FILE.gz is "
                        "gzip-compressed) of CompactLattice, determinized on words as Kaldi's "
                        "decoders write them (graph and unscaled acoustic costs; the string: "
                        "token id + 1 per frame); lattice-copy ark:ARK ark,t:- reads it. With "
                        "--rescore-lm the lattices written are the rescored ones (their graph "
                        "costs hold the new LM times --lm-scale in place of the first pass's; "
                        "boost bonuses stay in them)")  # fmt: skip
    p.add_argument("--determinize-lattice", action=argparse.BooleanOptionalAction,
                   help="--no-determinize-lattice writes the state-level Lattice instead (one "
                        "path per alignment; token id + 1 : word id arcs; default: "
                        "determinized)")  # fmt: skip
    p.set_defaults(func=decode_command)

    add_import_parser(sub)
    add_rescore_parser(sub)
    add_score_parser(sub)

    p = sub.add_parser(
        "decode-corpus", help="decode many .npz shards on Ray (or local processes), resumably",
        description="Decodes every shard MANIFEST lists (a JSONL of {\"shard\": path}, a "
        "directory of .npz (or Kaldi .ark, .ark.gz) files, a glob, or one file; shards as "
        "`decode` reads them, or with "
        "--transducer as `decode-transducer` does) into OUT/NAME.jsonl, one line per "
        "utterance: id, text, words with frames (and seconds with --frame-shift), scores, notes "
        "(tokens too with --transducer), and ref/errors when the shard has texts. Finished shards "
        "are skipped on a rerun; a shard whose worker dies is retried; a corrupt shard is "
        "reported. OUT/summary.json sums up the run. Exit status 1 if any shard failed.",
    )  # fmt: skip
    p.add_argument("manifest", help="shards: JSONL manifest, directory, glob, .npz or .ark(.gz)")
    p.add_argument("--graph", type=Path, help="graph directory (or TLG.npz): CTC log-probs")
    p.add_argument("--transducer", metavar="MODEL",
                   help="rnnt, tdt or a SpeechTransducer .npz instead of a graph")  # fmt: skip
    p.add_argument("--out", required=True, type=Path, help="output directory (new, or a run's)")
    add_decode_options(p, defaults, given_only=True)
    add_transducer_beam_arguments(p, "--transducer: ")
    add_boost_arguments(p)
    p.add_argument("--oov-lexicon", type=Path, metavar="FILE",
                   help="pronunciations of boosted words the graph lacks, 'word tok1 tok2 …' "
                        "per line (a graph built with --oov-slot)")  # fmt: skip
    add_rescoring_arguments(p)
    p.add_argument("--lattices", action="store_true",
                   help="also write each shard's lattices (--lattice-beam; rescored with "
                        "--rescore-lm) as OUT/NAME.lat.gz, a gzip-compressed Kaldi archive of "
                        "CompactLattices determinized on words, as Kaldi's lat.N.gz")  # fmt: skip
    p.add_argument("--determinize-lattice", action=argparse.BooleanOptionalAction,
                   help="--no-determinize-lattice: --lattices writes state-level Lattices "
                        "(default: determinized)")  # fmt: skip
    p.add_argument("--backend", default="cpu", choices=("cpu", "cuda", "reference"),
                   help="cuda: one GPU per worker")  # fmt: skip
    p.add_argument("--executor", default="auto", choices=("auto", "ray", "local"),
                   help="auto: Ray when installed, else local processes")  # fmt: skip
    p.add_argument("--address", help="Ray cluster to join (e.g. auto, ray://head:10001); "
                   "default: start Ray on this machine")  # fmt: skip
    p.add_argument("--workers", type=_count, help="workers (default: CPUs / threads, or GPUs)")
    p.add_argument("--threads-per-worker", type=_count, default=1,
                   help="threads per worker (Numba; torch with --transducer)")  # fmt: skip
    p.add_argument("--max-attempts", type=_count, default=3,
                   help="tries per shard if its worker dies or an error may pass")  # fmt: skip
    p.add_argument("--shard-timeout", type=_seconds, metavar="SECONDS",
                   help="stop a worker that holds a shard this long; retry the shard")  # fmt: skip
    p.add_argument("--frame-shift", type=float, help="seconds per frame: word times, RTFx")
    add_text_argument(p, "the shards' texts")
    p.add_argument("--no-mmap", action="store_true",
                   help="read the graph in each worker (default: map, share pages)")  # fmt: skip
    p.add_argument("--verify", action="store_true",
                   help="hash every input to find changed shards (else size, mtime)")  # fmt: skip
    p.add_argument("--force", action="store_true",
                   help="OUT has a run with other settings: decode all again")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no progress; problems and summary only")
    p.set_defaults(func=decode_corpus_command)

    p = sub.add_parser(
        "decode-transducer", help="decode a saved encoder output with a saved transducer",
        description="Prints ID<tab>SCORE<tab>TEXT per utterance (ID-RANK with --nbest > 1), or "
        "with --json one object per line with tokens, frames (and TDT durations). The .npz "
        "holds 'enc' (B, T, D) encoder outputs, or 'log_probs' (B, T, V) hama posteriors for "
        "the speech transducers to encode; optional 'lengths', 'ids', 'texts' (then the WER, "
        "on stderr).",
    )  # fmt: skip
    p.add_argument("model", help="rnnt or tdt (shipped), or a SpeechTransducer .npz")
    p.add_argument("npz", type=Path, help=".npz with enc or log_probs (see above)")
    add_transducer_beam_arguments(p)
    p.add_argument("--nbest", type=int, default=1,
                   help="hypotheses per utterance (with --beam-size), ranked by score per token "
                        "(the printed score is the whole hypothesis')")  # fmt: skip
    p.add_argument("--json", action="store_true", help="JSON lines")
    p.set_defaults(func=decode_transducer_command)

    p = sub.add_parser(
        "transcribe", help="audio files -> words (hama phone model + a phone TLG)",
        description="Prints PATH<tab>WORDS per file (PATH<tab>RANK<tab>WORDS with --nbest > 1), "
        "or with --json one object per line with word start/end times in seconds. Without "
        "--graph it uses the shipped speech graph, built into the cache on first use.",
    )  # fmt: skip
    p.add_argument("audio", type=Path, nargs="+", help="WAV files (FLAC/OGG with soundfile)")
    p.add_argument("--graph", type=Path, help="graph directory over hama's tokens.txt")
    p.add_argument("--transducer", choices=("rnnt", "tdt"),
                   help="the shipped character transducer instead of a graph")  # fmt: skip
    add_transducer_beam_arguments(p, "--transducer: ")
    from .speech.transcribe import SPEECH_OPTIONS  # light: hama loads on first use

    add_decode_options(p, dataclasses.asdict(SPEECH_OPTIONS), given_only=True)
    add_boost_arguments(p)
    add_rescoring_arguments(p, " (default without --graph: the shipped graph's LM)")
    p.add_argument("--json", action="store_true", help="JSON lines with word times")
    p.add_argument("--backend", default="auto", choices=("auto", "reference", "cpu", "cuda"))
    p.set_defaults(func=transcribe_command)

    p = sub.add_parser(
        "demo", help="transcribe the shipped LibriVox clips (--ocr: decode the OCR example)"
    )
    p.add_argument("--ocr", action="store_true", help="the OCR example (character TLG) instead")
    p.add_argument(
        "--out", type=Path, default=None,
        help="--ocr: keep the graph here (replaces an earlier demo's)",
    )  # fmt: skip
    p.add_argument(
        "--force", action="store_true", help="--ocr: also replace a graph directory build-tlg wrote"
    )
    p.set_defaults(func=demo_command)
    return parser


def _warning_line(message, category, filename, lineno, line=None) -> str:
    """A warning as the command's own line (not Python's, with a source line)."""
    return f"wfstdecode: warning: {message}\n"


_PRINTS_RESULTS = ("decode", "decode-transducer", "transcribe", "info")  # their output: stdout


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    if sys.stdout is None and args.command in _PRINTS_RESULTS:  # started with `>&-`: the
        print("wfstdecode: error: standard output is closed", file=sys.stderr)  # results would
        return 2  # go nowhere (commands writing files, e.g. build-tlg, still run)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")  # fmt: skip
    return run_reporting(lambda: args.func(args))


def run_reporting(command: Callable[[], object]) -> int:
    """Run ``command()`` as every command of the CLI (and the graph recipes) runs: a
    `WfstDecodeError` or `OSError` is one ``wfstdecode: error:`` line on stderr (status 2),
    warnings are ``wfstdecode: warning:`` lines, Ctrl-C and a closed pipe end quietly. Returns
    the exit status: the command's own if it returns an int, else 0."""
    formatted, warnings.formatwarning = warnings.formatwarning, _warning_line
    stdout = sys.stdout
    if stdout is not None:
        sys.stdout = _NamedOnError(stdout, "standard output")
    try:
        # (a Ctrl-C during a compiled call outside the searches' guards, a lattice's pruning
        # say, comes out of Numba's boxing as a SystemError: it is the Ctrl-C)
        with termination_raised(), interrupts_raised():
            status = command()
            if stdout is not None:
                sys.stdout.flush()  # (a full disk is reported here, named, not at exit)
    except BrokenPipeError:  # the reader left (`| head`): stop quietly, as other tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 1
    except (WfstDecodeError, OSError) as exc:  # not Exception: a bug should show its traceback
        if isinstance(exc, OSError) and exc.filename is not None:
            exc = f"{exc.filename}: {exc.strerror or exc}"  # FILE: what, like the other errors
        print(f"wfstdecode: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        what = (f"terminated ({signal.Signals(exc.signum).name})"
                if isinstance(exc, Terminated) else "interrupted")  # fmt: skip
        print(f"wfstdecode: {what}; no output file was left half-written", file=sys.stderr)
        return 128 + exc.signum if isinstance(exc, Terminated) else 130
    finally:
        warnings.formatwarning = formatted
        if stdout is not None:
            sys.stdout = stdout
    return status if isinstance(status, int) else 0  # build-tlg returns its Path


class _NamedOnError:
    """A text stream whose write errors name it (``standard output: No space left on device``,
    not a bare ``[Errno 28]``); everything else is the stream's own."""

    def __init__(self, stream, name: str):
        self._stream, self._name = stream, name

    def write(self, text: str) -> int:
        try:
            try:
                return self._stream.write(text)
            except UnicodeEncodeError:  # a path whose bytes are not UTF-8 ("wrote DIR"): its
                if not hasattr(self._stream, "buffer"):  # bytes as they are, as ls prints them
                    raise
                data = text.encode(self._stream.encoding, "surrogateescape")
                self._stream.flush()
                self._stream.buffer.write(data)
                if getattr(self._stream, "line_buffering", False):
                    self._stream.buffer.flush()
                return len(text)
        except OSError as exc:
            self._name_in(exc)
            raise

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            self._name_in(exc)
            raise

    def _name_in(self, exc: OSError) -> None:
        if exc.filename is None:
            exc.filename = self._name

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


if __name__ == "__main__":
    sys.exit(main())

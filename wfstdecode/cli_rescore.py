"""The ``wfstdecode`` command's lattice rescoring: ``decode --rescore-lm`` and the ``rescore``
command (thin argument parsing over `wfstdecode.rescore` and `wfstdecode.lattice`)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from .cli_common import escaped_id
from .errors import WfstDecodeError


def add_rescoring_arguments(p: argparse.ArgumentParser, first_pass_default: str = "") -> None:
    """``decode``'s options that rescore its lattices (``first_pass_default``: what
    --first-pass-lm's help adds, after a space)."""
    p.add_argument("--rescore-lm", type=Path, metavar="ARPA",
                   help="rescore each lattice (--lattice-beam) with this n-gram LM in place "
                        "of --first-pass-lm (the graph's); prints the rescored n-best")  # fmt: skip
    p.add_argument(
        "--first-pass-lm",
        type=Path,
        metavar="ARPA",
        help=f"the ARPA the graph was built from (its scores are taken out){first_pass_default}",
    )
    p.add_argument("--lm-scale", type=float,  # (None: given or not, `rescoring` can tell)
                   help="scale of the --rescore-lm costs (default 1)")  # fmt: skip
    p.add_argument("--rescore-beam", type=float, metavar="BEAM",
                   help="prune the rescoring composition with this beam (default: the lattice "
                        "beam; inf: exact). Pruning estimates what follows a word from the "
                        "first pass, so it may drop alternatives the exact composition ranks "
                        "higher (most at --lm-scale far below 1, but at 1 too)")  # fmt: skip


def add_lattice_arguments(p: argparse.ArgumentParser) -> None:
    """The lattice archive a command reads and its word table (``rescore``, ``score``)."""
    p.add_argument("lattices",
                   help="binary Kaldi table of CompactLattice or Lattice: FILE (gzip-compressed "
                        "too), ark:FILE or scp:FILE")  # fmt: skip
    p.add_argument("--words", type=Path, required=True,
                   help="the graph's words.txt (or its graph directory, or TLG.npz)")  # fmt: skip


def add_rescore_parser(sub) -> None:
    """The ``rescore`` command."""
    p = sub.add_parser(
        "rescore", help="rescore lattices (a Kaldi archive) with an n-gram LM",
        description="Replaces the first-pass LM's scores in each lattice of a binary Kaldi "
        "archive of CompactLattice or Lattice (decode --write-lattices, Kaldi's decoders, "
        "lattice-copy) with another n-gram LM's (Kaldi's lattice-lmrescore with the "
        "old LM at scale -1 and the new at +LM_SCALE) and prints ID<tab>SCORE<tab>TEXT of the "
        "best path (ID-RANK with --nbest > 1); --out writes the rescored lattices.",
    )  # fmt: skip
    add_lattice_arguments(p)
    p.add_argument("--new-lm", type=Path, required=True, metavar="ARPA", help="the LM to apply")
    p.add_argument("--old-lm", type=Path, required=True, metavar="ARPA",
                   help="the LM the graph was built from (its scores are taken out)")  # fmt: skip
    p.add_argument("--lm-scale", type=float, default=1.0, help="scale of the new LM (default 1)")
    p.add_argument("--beam", type=float,
                   help="prune the composition with this beam (default: exact); --out then "
                        "holds the pruned lattices. Pruning estimates what follows a word from "
                        "the first pass, so it may drop alternatives the exact composition ranks "
                        "higher (most at --lm-scale far below 1, but at 1 too)")  # fmt: skip
    p.add_argument("--max-nodes", type=int, default=2_000_000,
                   help="refuse a lattice whose rescoring splits it into more nodes than this "
                        "(default 2000000; --beam keeps them fewer)")  # fmt: skip
    p.add_argument(
        "--acoustic-scale",
        type=float,
        default=1.0,
        help="what paths rank by (the archive keeps acoustic costs unscaled)",
    )
    p.add_argument("--word-insertion-penalty", type=float, default=0.0, metavar="COST",
                   help="added to each word's graph cost after rescoring, in the printed paths "
                        "and --out (Kaldi's lattice-add-penalty; positive = fewer words; on top "
                        "of any the first pass had)")  # fmt: skip
    p.add_argument("--nbest", type=int, default=1, help="hypotheses printed per lattice")
    p.add_argument("--text", type=Path, metavar="FILE",
                   help="reference transcripts, 'ID word word ...' per line (a Kaldi data "
                        "directory's text): the WER of the rescored best paths")  # fmt: skip
    p.add_argument("--out", metavar="ARK",
                   help="write the rescored lattices here, as CompactLattices determinized on "
                        "words (as Kaldi's lattice-lmrescore pipelines keep them): FILE, "
                        "ark:FILE, ark,scp:FILE,SCRIPT; FILE.gz is gzip-compressed")  # fmt: skip
    p.add_argument(
        "--determinize-lattice",
        action=argparse.BooleanOptionalAction,
        help="--no-determinize-lattice writes --out as state-level Lattices (default: "
        "determinized)",
    )
    p.set_defaults(func=rescore_command)


def rescoring_flags_given(args: argparse.Namespace) -> list[str]:
    """The rescoring options given (decode's, decode-corpus', transcribe's)."""
    values = (("--rescore-lm", args.rescore_lm), ("--first-pass-lm", args.first_pass_lm),
              ("--lm-scale", args.lm_scale), ("--rescore-beam", args.rescore_beam))  # fmt: skip
    return [flag for flag, value in values if value is not None]


def rescoring(args: argparse.Namespace):
    """`RescoringFiles` from --rescore-lm / --first-pass-lm / --lm-scale / --rescore-beam (as
    decode and decode-corpus take them), or None."""
    if args.rescore_lm is None:  # (the options of rescoring are refused, not ignored)
        if given := rescoring_flags_given(args):
            raise WfstDecodeError(
                f"{', '.join(given)} {'goes' if len(given) == 1 else 'go'} with --rescore-lm"
            )
        return None
    if args.lattice_beam is None:
        raise WfstDecodeError("--rescore-lm rescores lattices: give --lattice-beam BEAM (e.g. 8)")
    if args.first_pass_lm is None:
        raise WfstDecodeError("--rescore-lm needs --first-pass-lm ARPA: the LM compiled into "
                              "the graph, whose scores it replaces")  # fmt: skip
    from .rescore import RescoringFiles

    beam = args.rescore_beam if args.rescore_beam is not None else args.lattice_beam
    lm_scale = 1.0 if args.lm_scale is None else args.lm_scale
    _check_lm_scale(lm_scale)  # (named here, as rescore names them)
    if args.rescore_beam is not None and not args.rescore_beam > 0:  # also NaN
        raise WfstDecodeError(f"--rescore-beam must be > 0 (inf: exact); got {args.rescore_beam}")
    return RescoringFiles(args.rescore_lm, args.first_pass_lm, lm_scale,
                          None if math.isinf(beam) else beam)  # fmt: skip


def words_table(path: Path):
    """``--words``: a words.txt, or a graph directory or TLG.npz (the table it holds)."""
    from .symbols import SymbolTable

    if path.is_dir() or path.suffix == ".npz":
        from .decoding_graph import DecodingGraph

        words = DecodingGraph.load(path, mmap=True).words
        if words is None:
            raise WfstDecodeError(f"{path}: the graph has no word table")
        return words
    return SymbolTable.read(path)


def _check_lm_scale(lm_scale: float) -> None:
    from .rescore import MAX_LM_SCALE

    if not abs(lm_scale) <= MAX_LM_SCALE:  # also NaN; a huge scale made every path's cost inf
        raise WfstDecodeError(f"--lm-scale must be in [-{MAX_LM_SCALE:g}, {MAX_LM_SCALE:g}]; "
                              f"got {lm_scale}")  # fmt: skip


def rescore_command(args: argparse.Namespace) -> None:
    from .ctc.options import ACOUSTIC_SCALE_RANGE, MAX_COST_TERM, MAX_COUNT
    from .lattice_io import (
        check_archive_keys,
        check_archive_path,
        determinized_on_words,
        read_kaldi_archive,
        write_kaldi_archive,
    )
    from .rescore import MISSING_WORD_LOG10, NgramLm, rescore

    if args.max_nodes < 1:
        raise WfstDecodeError(f"--max-nodes must be >= 1; got {args.max_nodes}")
    if not 1 <= args.nbest <= MAX_COUNT:
        raise WfstDecodeError(f"--nbest must be in [1, {MAX_COUNT}]; got {args.nbest}")
    lo, hi = ACOUSTIC_SCALE_RANGE
    if not lo <= args.acoustic_scale <= hi:  # also NaN
        raise WfstDecodeError(f"--acoustic-scale must be in [{lo:g}, {hi:g}]; got "
                              f"{args.acoustic_scale}")  # fmt: skip
    _check_lm_scale(args.lm_scale)  # (checked here, not blamed on the first lattice)
    if args.beam is not None and not args.beam > 0:
        raise WfstDecodeError(f"--beam must be > 0 (inf: exact); got {args.beam}")
    if not abs(args.word_insertion_penalty) <= MAX_COST_TERM:  # also NaN
        raise WfstDecodeError(f"--word-insertion-penalty must be in [-{MAX_COST_TERM:g}, "
                              f"{MAX_COST_TERM:g}]; got {args.word_insertion_penalty}")  # fmt: skip
    if args.out is None and args.determinize_lattice is not None:  # (refused, not ignored)
        raise WfstDecodeError("--determinize-lattice / --no-determinize-lattice say how --out "
                              "writes the rescored lattices: give --out ARK")  # fmt: skip
    if args.out is not None:
        from .kaldi_tables import table_files

        inputs = (*table_files(args.lattices), args.words, args.new_lm, args.old_lm, args.text)
        check_archive_path(args.out, inputs, "--out")
    words = words_table(args.words)
    references = None
    if args.text is not None:
        from .ctc import read_reference_texts

        references = read_reference_texts(args.text)
    lattices = read_kaldi_archive(args.lattices, args.acoustic_scale)
    if args.out is not None:  # (before the work: keys --out could not hold)
        check_archive_keys(lattices)
    if references is not None and (missing := [k for k in lattices if k not in references]):
        raise WfstDecodeError(f"{args.text} has no reference for lattice {missing[0]!r} of "
                              f"{args.lattices} ({len(missing)} of {len(lattices)} "
                              "missing)")  # fmt: skip
    new_lm, old_lm = NgramLm(args.new_lm), NgramLm(args.old_lm)
    beam = None if args.beam is None or math.isinf(args.beam) else args.beam
    if not lattices:
        print(f"warning: {args.lattices} holds no lattices", file=sys.stderr)
    out, best_words, reader_left = {}, {}, False
    for key, lat in lattices.items():
        try:
            rescored = rescore(lat, words, new_lm, old_lm, args.lm_scale, beam, args.max_nodes)
        except WfstDecodeError as exc:
            hint = ": raise --max-nodes, or prune (--beam 8)" if "max_nodes" in str(exc) else ""
            raise WfstDecodeError(f"{args.lattices}, lattice {key!r}: {exc}{hint}") from None
        rescored = rescored.with_word_penalty(args.word_insertion_penalty)
        out[key] = rescored
        best = rescored.nbest(args.nbest)
        if references is not None:  # (no path: every reference word deleted)
            labels = rescored.olabel[best[0][0]].tolist() if best else []
            best_words[key] = [words.symbol(w) for w in labels if w]
        if not best:
            print(f"warning: {args.lattices}, lattice {key!r}: no complete path (no final state "
                  "is reached): no hypothesis", file=sys.stderr)  # fmt: skip
        for rank, (arcs, cost) in enumerate(best):
            text = " ".join(words.symbol(w) for w in rescored.olabel[arcs].tolist() if w)
            tag = escaped_id(key) if args.nbest == 1 else f"{escaped_id(key)}-{rank + 1}"
            try:
                if not reader_left:
                    print(f"{tag}\t{-cost:.3f}\t{text}")
            except BrokenPipeError:  # (`| head`): --out is still written whole, then status 1
                if args.out is None:
                    raise
                reader_left = True
    for lm, option in ((new_lm, "--new-lm"), (old_lm, "--old-lm")):
        if lm.missing:  # (scored as KenLM scores them: the n-best order may change)
            listed = ", ".join(map(repr, list(lm.missing)[:10]))
            more = f" and {len(lm.missing) - 10} more" if len(lm.missing) > 10 else ""
            how = "as <unk>" if lm.has_unk else f"log10 {MISSING_WORD_LOG10:g} each, as KenLM does"
            print(f"warning: {option} lacks {len(lm.missing)} word(s) of the lattices, scored "
                  f"{how}: {listed}{more}", file=sys.stderr)  # fmt: skip
    if references is not None:
        from .metrics import word_error_rate

        refs = [references[k].split() for k in best_words]
        if sum(map(len, refs)):
            wer = word_error_rate(refs, list(best_words.values()))
            print(f"WER {100 * wer:.2f}% ({len(refs)} utterances, {sum(map(len, refs))} "
                  "reference words)", file=sys.stderr)  # fmt: skip
        else:
            print(f"warning: no WER: {args.text} has no words for the lattices' utterances",
                  file=sys.stderr)  # fmt: skip
    if args.out is not None:
        if args.determinize_lattice is not False:  # (the default: determinized)
            out = determinized_on_words(out, math.inf if beam is None else beam)
        write_kaldi_archive(out, args.out)
        print(f"wrote {len(out)} rescored lattices to {args.out}", file=sys.stderr)
    if reader_left:
        raise BrokenPipeError  # (`run_reporting` ends quietly, status 1, as decode does)

"""The ``wfstdecode score`` command: lattices against reference transcripts over a grid of LM
weights and word insertion penalties (`wfstdecode.scoring`, Kaldi's ``local/score.sh``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .cli_rescore import add_lattice_arguments
from .errors import WfstDecodeError
from .textfiles import strict_float

DEFAULT_LM_WEIGHTS = "0.5:2:0.1"  # around a CTC decode's acoustic scale 1 (LMWT 1)
DEFAULT_WORD_PENALTIES = "0,0.5,1"  # Kaldi's score.sh default
MAX_SETTINGS = 10_000


def add_score_parser(sub) -> None:
    p = sub.add_parser(
        "score", help="WER of lattices over a grid of LM weights and word insertion penalties",
        description="Scores each lattice of a binary Kaldi archive (decode --write-lattices, "
        "rescore --out, Kaldi's decoders) against reference transcripts at every LM weight "
        "LMWT and word insertion penalty WIP, as Kaldi's local/score.sh does: the best path "
        "of graph + WIP * words + acoustic / LMWT (the archive keeps acoustic costs unscaled: "
        "LMWT is the inverse of a decode's --acoustic-scale). Prints compute-wer's line for "
        "each setting, then the best. A lattice without a complete path is scored as no words "
        "(all its reference words deleted); references without a lattice are not scored (the "
        "lines then say [PARTIAL], as compute-wer --mode=present does).",
    )  # fmt: skip
    add_lattice_arguments(p)
    p.add_argument("--text", type=Path, required=True, metavar="FILE",
                   help="reference transcripts, 'ID word word ...' per line (a Kaldi data "
                        "directory's text); every lattice needs one")  # fmt: skip
    p.add_argument("--lm-weights", default=DEFAULT_LM_WEIGHTS, metavar="LIST",
                   help="LMWT values: numbers and FIRST:LAST[:STEP] ranges (step 1 by "
                        "default, as Kaldi's 7:17), comma-separated (default "
                        f"{DEFAULT_LM_WEIGHTS})")  # fmt: skip
    p.add_argument("--word-insertion-penalties", default=DEFAULT_WORD_PENALTIES, metavar="LIST",
                   help="WIP values, the same way (positive = fewer words; a list starting "
                        "with a minus sign after '=': --word-insertion-penalties=-1:1:0.5; "
                        f"default {DEFAULT_WORD_PENALTIES})")  # fmt: skip
    p.add_argument(
        "--best-text",
        metavar="FILE",
        help="write the best setting's transcripts here, 'ID word word ...' per line",
    )
    p.set_defaults(func=score_command)


def number_list(text: str, option: str) -> list[float]:
    """``--lm-weights``-style values: comma-separated numbers and FIRST:LAST[:STEP] ranges
    (LAST included when the steps reach it), in the order given, repeats dropped."""
    values: list[float] = []
    for item in text.split(","):
        parts = item.strip().split(":")
        try:
            numbers = [strict_float(x) for x in parts]  # (not 1_5 as 15)
        except ValueError:
            raise WfstDecodeError(f"{option}: {item.strip()!r} is not a number or a "
                                  "FIRST:LAST[:STEP] range") from None  # fmt: skip
        if len(numbers) == 1:
            values.append(numbers[0])
            continue
        if len(numbers) > 3:
            raise WfstDecodeError(f"{option}: {item.strip()!r} has more than FIRST:LAST:STEP")
        first, last, step = (*numbers, 1.0) if len(numbers) == 2 else numbers
        if not step > 0 or not first <= last or not (last - first) / step < MAX_SETTINGS:
            raise WfstDecodeError(f"{option}: {item.strip()!r} must have FIRST <= LAST and a "
                                  f"positive STEP, at most {MAX_SETTINGS} values")  # fmt: skip
        count = int((last - first) / step + 1e-9) + 1
        values += [round(first + k * step, 10) for k in range(count)]
    return list(dict.fromkeys(values))


def score_command(args: argparse.Namespace) -> None:
    from .cli_rescore import words_table
    from .ctc import read_reference_texts
    from .errors import OptionsError
    from .kaldi_tables import table_files
    from .lattice_io import check_output_file, read_kaldi_archive
    from .safe_io import replacing
    from .scoring import (
        best_setting,
        checked_lm_weights,
        checked_word_penalties,
        score_lattices,
    )

    grid = []
    for values, option, checked in (
        (args.lm_weights, "--lm-weights", checked_lm_weights),
        (args.word_insertion_penalties, "--word-insertion-penalties", checked_word_penalties),
    ):
        try:
            grid.append(checked(number_list(values, option)))
        except OptionsError as exc:
            raise WfstDecodeError(f"{option}: {exc}") from None
    weights, penalties = grid
    if len(weights) * len(penalties) > MAX_SETTINGS:
        raise WfstDecodeError(f"{len(weights)} LM weights x {len(penalties)} penalties: at most "
                              f"{MAX_SETTINGS} settings")  # fmt: skip
    if args.best_text is not None:
        check_output_file(args.best_text, (*table_files(args.lattices), args.words, args.text),
                          "--best-text")  # fmt: skip
    words = words_table(args.words)
    references = read_reference_texts(args.text)
    lattices = read_kaldi_archive(args.lattices)
    if not lattices:
        raise WfstDecodeError(f"{args.lattices} holds no lattices: nothing to score")
    if missing := [key for key in lattices if key not in references]:
        raise WfstDecodeError(f"{args.text} has no reference for lattice {missing[0]!r} of "
                              f"{args.lattices} ({len(missing)} of {len(lattices)} "
                              "missing)")  # fmt: skip
    settings = score_lattices(lattices, words, references, weights, penalties)
    if not settings[0].counts.words:
        raise WfstDecodeError(f"{args.text} has no words for the lattices' utterances: no WER")
    unscored = len(set(references) - set(lattices))
    if unscored:  # (as compute-wer --mode=present: what has no lattice is not counted)
        print(f"note: {unscored} utterances of {args.text} have no lattice in {args.lattices}; "
              "not scored", file=sys.stderr)  # fmt: skip
    partial = " [PARTIAL]" if unscored else ""  # (compute-wer's mark for the same)
    for s in settings:
        print(f"{s.counts.kaldi()}{partial} LMWT {s.lm_weight:g} WIP {s.word_penalty:g}")
    best = best_setting(settings)
    print(f"best: {best.counts.kaldi()}{partial} LMWT {best.lm_weight:g} WIP "
          f"{best.word_penalty:g}")  # fmt: skip
    for value, tried, what in ((best.lm_weight, weights, "LMWT"),
                               (best.word_penalty, penalties, "WIP")):  # fmt: skip
        tied = all(s.counts.errors == best.counts.errors for s in settings)
        if len(tried) > 1 and value in (min(tried), max(tried)) and not tied:
            edge = "smallest" if value == min(tried) else "largest"
            print(f"note: the best {what} is the {edge} tried: the best setting may lie beyond "
                  "the grid", file=sys.stderr)  # fmt: skip
    if best.pathless:
        print(f"warning: {len(best.pathless)} lattices have no complete path (scored as no "
              f"words), e.g. {best.pathless[0]!r}", file=sys.stderr)  # fmt: skip
    if args.best_text is not None:
        with replacing(args.best_text) as f:
            for key, hyp in best.hypotheses.items():  # (ids as read: they are --text's ids)
                f.write(" ".join([key, *hyp]).encode("utf-8") + b"\n")
        print(f"wrote the transcripts of LMWT {best.lm_weight:g} WIP {best.word_penalty:g} to "
              f"{args.best_text}", file=sys.stderr)  # fmt: skip

"""The CLI's speech and transducer commands: ``transcribe`` (audio through hama's phone model and
a graph, or a shipped transducer) and ``decode-transducer`` (a saved encoder output)."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from .cli_common import (
    DECODE_OPTIONS,
    boosts_of,
    ctc_options,
    escaped_id,
    transducer_beam_options,
    transducer_flags_given,
)
from .cli_rescore import rescoring_flags_given
from .errors import InputFileError, WfstDecodeError
from .results import finite_or_none
from .safe_io import json_line


def decode_transducer_command(args: argparse.Namespace) -> None:
    from .transducer import GreedyOptions
    from .transducer.files import decode_transducer_npz, load_transducer_model

    model = load_transducer_model(args.model)
    options = transducer_beam_options(args, args.nbest) or GreedyOptions()
    result = decode_transducer_npz(model, args.npz, options)
    for utt, hyps in zip(result.ids, result.hypotheses, strict=True):
        for rank, hyp in enumerate(hyps):
            text = model.text(hyp.tokens) if hasattr(model, "text") else ""
            if args.json:
                record = {"id": utt, "tokens": list(hyp.tokens), "timestamps": list(hyp.timestamps),
                          "score": finite_or_none(round(hyp.score, 4)), "text": text}  # fmt: skip
                if getattr(model, "durations", ()):  # a TDT model's: even with no tokens
                    record["durations"] = list(hyp.durations)
                if hyp.notes:
                    record["notes"] = list(hyp.notes)
                if args.nbest > 1:  # as decode: every record ranked, one hypothesis or several
                    record["rank"] = rank + 1
                print(json_line(record), flush=True)
            else:
                tag = escaped_id(utt) if args.nbest == 1 else f"{escaped_id(utt)}-{rank + 1}"
                print(f"{tag}\t{hyp.score:.3f}\t{text}", flush=True)
    if result.wer is not None:
        print(f"WER {100 * result.wer:.2f}%", file=sys.stderr)


def transcribe_command(args: argparse.Namespace) -> int:
    from .decoding_graph import DecodingGraph
    from .models.speech_transducer import FRAME_SECONDS as TRANSDUCER_FRAME_SECONDS
    from .speech.phone_model import HamaPhoneModel
    from .speech.transcribe import SPEECH_OPTIONS, iter_transcribe

    defaults = dataclasses.asdict(SPEECH_OPTIONS)
    given = {n: v for n in DECODE_OPTIONS if (v := getattr(args, n)) is not None}
    if args.transducer:  # (refused before the phone model loads)
        ctc_given = [n for n in DECODE_OPTIONS if n != "nbest" and getattr(args, n) is not None]
        if (
            args.graph
            or args.boost
            or args.boost_file  # (even one with no phrases: given, so refused)
            or ctc_given
            or args.backend != "auto"
            or rescoring_flags_given(args)
        ):  # (refused, not ignored)
            raise WfstDecodeError("--transducer decodes without a graph: --graph, --boost, "
                                  "--backend, --rescore-lm and the CTC search options do not "
                                  "apply")  # fmt: skip
        beam = transducer_beam_options(args, 1 if args.nbest is None else args.nbest)
    elif flags := transducer_flags_given(args):
        raise WfstDecodeError(f"{', '.join(flags)}: the transducer beam search's (with "
                              "--transducer); the graph search's width is --beam / "
                              "--max-active")  # fmt: skip
    else:  # (the graph search's options: not built for --transducer, whose --nbest is its own)
        options = ctc_options({**defaults, **given})
        boosts = boosts_of(args)
    rescore = graph = None
    if not args.transducer:
        from .cli_rescore import rescoring
        from .rescore import check_rescorable
        from .speech.graph import SHIPPED_LM

        graph = DecodingGraph.load(args.graph) if args.graph else None
        if args.rescore_lm is not None and graph is not None:  # (before the LMs, the model)
            check_rescorable(graph, f"the graph {args.graph}")
        if args.rescore_lm is not None and args.first_pass_lm is None and not args.graph:
            args.first_pass_lm = SHIPPED_LM  # the shipped graph's own
        # (LMs read; iter_transcribe checks the first-pass one against the graph)
        rescore = None if (files := rescoring(args)) is None else files.load()
    model = HamaPhoneModel()
    unreadable: list[InputFileError] = []  # files left out, said as they come and counted

    def report(error: InputFileError) -> None:
        print(f"wfstdecode: error: {error}", file=sys.stderr, flush=True)
        unreadable.append(error)

    if args.transducer:
        frame_seconds = TRANSDUCER_FRAME_SECONDS
        results = iter_transcribe(args.audio, model=model, kind=args.transducer, beam=beam,
                                  on_error=report)  # fmt: skip
    else:
        frame_seconds = model.frame_seconds
        results = iter_transcribe(args.audio, graph, options, backend=args.backend, model=model,
                                  boosts=boosts, on_error=report, rescore=rescore)  # fmt: skip
    ranked = (args.nbest or 1) > 1  # as decode: every line ranked, one hypothesis or several
    for path, hyps in results:
        for rank, hyp in enumerate(hyps):
            if args.json:
                record = {"path": str(path), "text": hyp.text,
                          "score": finite_or_none(round(hyp.score, 3)),
                          "words": hyp.word_entries(frame_seconds)}  # fmt: skip
                if ranked:
                    record["rank"] = rank + 1
                print(json_line(record), flush=True)
            else:
                rank_field = f"{rank + 1}\t" if ranked else ""
                print(f"{escaped_id(str(path))}\t{rank_field}{hyp.text}", flush=True)
    if unreadable:
        rest = "; the others are transcribed" if len(unreadable) < len(args.audio) else ""
        print(f"wfstdecode: {len(unreadable)} of {len(args.audio)} files could not be read "
              f"(above){rest}", file=sys.stderr)  # fmt: skip
        return 1
    return 0

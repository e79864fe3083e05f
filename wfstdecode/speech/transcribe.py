"""Audio files -> words: hama phone log-probs decoded with a TLG (the shipped speech graph unless
another is given), and the figures the demo and the benchmark print."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

from ..ctc import CtcBeamOptions, decode_ctc
from ..decoding_graph import DecodingGraph
from ..errors import DecodeInputError, InputFileError
from ..results import Hypothesis
from .phone_model import HamaPhoneModel, pad_log_probs

# Defaults for hama's posteriors with the shipped graph: acoustic scale 1.25 (LM weight 0.8) is
# the best on held-out synthetic speech (flite, bench/speech_ctc.md); not tuned on the real clips.
SPEECH_OPTIONS = CtcBeamOptions(beam=16.0, max_active=4000, acoustic_scale=1.25)
BATCH = 16  # utterances per decode call: bounds the padded log-prob array


def transcribe(
    paths: Sequence[str | os.PathLike],
    graph=None,
    options: CtcBeamOptions | None = None,
    *,
    backend: str = "auto",
    model: HamaPhoneModel | None = None,
    boosts=None,
    rescore=None,
) -> list[list[Hypothesis]]:
    """Decode audio files; one list of hypotheses (best first, ``options.nbest``) per file.

    graph:  a `DecodingGraph` over the model's tokens (e.g. built by
            ``graph_recipes/phones_hama.py``); None: the shipped speech graph, built on first use.
    boosts: one ``phrase -> bonus`` mapping (per word) for every file, as `decode_ctc` takes it
            (hotwords: contact names, jargon). Words the graph lacks are pronounced by hama's
            G2P and decoded through its oov slot: with the shipped graph, through its variant
            with a slot (built on first use, `speech_graph_dir`).
    rescore: `wfstdecode.rescore.LmRescoring` of each lattice (``options.lattice_beam``) with a
            larger LM, as `decode_ctc` takes it (the shipped graph's first-pass LM:
            `wfstdecode.speech.graph.SHIPPED_LM`); not with boosted words the graph lacks
            (their oov slot is no n-gram word).
    A file that cannot be read raises `InputFileError` naming it.
    """
    found = iter_transcribe(paths, graph, options, backend=backend, model=model, boosts=boosts,
                            rescore=rescore)  # fmt: skip
    return [hyps for _, hyps in found]


def iter_transcribe(
    paths, graph=None, options=None, *, backend="auto", model=None, kind=None, beam=None,
    boosts=None, on_error=None, rescore=None,
):  # fmt: skip
    """``(path, hypotheses)`` per file as each batch of `BATCH` files is decoded, so memory
    holds one batch's log-probs; ``boosts``: one ``phrase -> bonus`` mapping for every file
    (`decode_ctc`); ``kind`` ``"rnnt"`` / ``"tdt"``: the shipped transducer instead of a graph,
    greedy or with ``beam`` (`transcribe_transducer`). A file that cannot be read raises its
    `InputFileError`, or with ``on_error`` is passed to it (``on_error(error)``) and left out
    while the others are decoded."""
    from .graph import load_speech_graph

    if isinstance(paths, (str, bytes, os.PathLike)):  # (a str would be read as its letters)
        raise DecodeInputError(f"paths must be a list of audio files; got one path {paths!r}: "
                               "pass [path]")  # fmt: skip
    if kind is not None and (boosts or rescore is not None):
        raise DecodeInputError("boosts and rescoring apply to the graph search, not to the "
                               "transducer")  # fmt: skip
    if kind is None and graph is not None and not isinstance(graph, DecodingGraph):
        raise DecodeInputError(f"graph must be a DecodingGraph (DecodingGraph.load(directory)); "
                               f"got {type(graph).__name__}")  # fmt: skip
    model = model or HamaPhoneModel()
    oov_lexicon = None
    if kind is None:
        if shipped := graph is None:
            graph = load_speech_graph()
            if (unknown := _unknown_words(boosts, graph)) and rescore is not None:
                raise DecodeInputError(f"{', '.join(unknown)}: boosted words the shipped graph "
                                       "lacks are spelled through an oov slot, which rescoring "
                                       "cannot score; leave out the rescoring or those "
                                       "boosts")  # fmt: skip
            if unknown:
                graph = load_speech_graph(oov_slot=True)
        if rescore is not None:  # (once, before any audio: not per lattice, after its search)
            rescore.check_graph(graph, "the shipped speech graph" if shipped else "the graph")
        oov_lexicon = _pronounced(_unknown_words(boosts, graph), graph)
    paths = list(paths)
    for lo in range(0, len(paths), BATCH):
        batch, rows = [], []
        for path in paths[lo : lo + BATCH]:
            try:
                rows.append(model.log_probs_of_file(path))
            except InputFileError as exc:
                if on_error is None:
                    raise
                on_error(exc)
                continue
            batch.append(path)
        if not batch:
            continue
        if kind is None:
            results = decode_log_probs(rows, graph, options, backend=backend, model=model,
                                       boosts=boosts, oov_lexicon=oov_lexicon,
                                       rescore=rescore)  # fmt: skip
        else:
            results = _decode_transducer(rows, kind, len(model.tokens), beam)
        yield from zip(batch, results, strict=True)


def _unknown_words(boosts, graph) -> list[str]:
    """The words of the boosted phrases that ``graph`` lacks."""
    if not boosts or graph.words is None:
        return []
    from ..ctc.boost import words_of
    from ..ctc.search import output_words

    known = output_words(graph)  # (a word of words.txt on no arc is one the graph lacks)
    # (a phrase as decode_ctc takes it: a string of words, or a tuple of words / word ids)
    words = {w for key in boosts for w in words_of(key) if isinstance(w, str)}
    return sorted(w for w in words if w not in known)


def _pronounced(words: list[str], graph) -> dict | None:
    """hama's G2P pronunciations of ``words``, for a graph with an oov slot (else None: the
    words stay unknown, and `decode_ctc` warns of them)."""
    if not words or "oov_slot" not in graph.metadata:
        return None
    from .lexicon import g2p

    return {w: p for w, p in zip(words, g2p(words), strict=True) if p}


def decode_log_probs(rows, graph, options=None, *, backend="auto", model=None, boosts=None,
                     oov_lexicon=None, rescore=None):  # fmt: skip
    """`transcribe` after the phone model: a list of (T, V) log-prob arrays; ``boosts`` one
    ``phrase -> bonus`` mapping for all (`decode_ctc`), ``oov_lexicon`` the pronunciations of
    boosted words the graph lacks, ``rescore`` an `LmRescoring` of the lattices."""
    if not rows:
        return []
    num_tokens = len(model.tokens) if model is not None else rows[0].shape[1]
    if graph.tokens is not None and graph.num_tokens != num_tokens:
        raise DecodeInputError(
            f"the graph has {graph.num_tokens} tokens but the phone model {num_tokens}: "
            "build the graph over the model's tokens.txt (graph_recipes/phones_hama.py)"
        )
    out: list[list[Hypothesis]] = []
    for lo in range(0, len(rows), BATCH):
        log_probs, lengths = pad_log_probs(rows[lo : lo + BATCH], num_tokens)
        out += decode_ctc(log_probs, lengths, graph, options or SPEECH_OPTIONS, boosts,
                          backend=backend, oov_lexicon=oov_lexicon, rescore=rescore)  # fmt: skip
    return out


def transcribe_transducer(
    paths: Sequence[str | os.PathLike],
    kind: str = "rnnt",
    beam=None,
    *,
    model: HamaPhoneModel | None = None,
) -> list[list[Hypothesis]]:
    """Decode audio files with a shipped character transducer (``"rnnt"`` or ``"tdt"``) over
    hama's posteriors: greedily, or with ``beam`` (`BeamOptions`; its durations are the
    model's) the beam search's ``nbest``; each `Hypothesis` gets the words its characters
    spell, each word's frames from its first character's to its last's (40 ms frames; a TDT
    character's frames are those its duration covers: `spelled_words`)."""
    return [hyps for _, hyps in iter_transcribe(paths, model=model, kind=kind, beam=beam)]


def _decode_transducer(rows, kind: str, num_tokens: int, beam=None) -> list[list[Hypothesis]]:

    import torch

    from ..transducer import GreedyOptions, beam_decode, greedy_decode

    transducer = _shipped_transducer(kind)
    durations = transducer.durations or None
    log_probs, lengths = pad_log_probs(rows, num_tokens)
    with torch.inference_mode():
        enc, enc_lengths = transducer.encode(torch.from_numpy(log_probs), torch.from_numpy(lengths))
        if beam is None:
            hyps = greedy_decode(transducer, enc, enc_lengths, GreedyOptions(durations=durations))
            nbests = [[h] for h in hyps]
        else:
            nbests = beam_decode(transducer, enc, enc_lengths, beam.for_model(durations))
    return [[spelled_words(h, transducer.tokens, frames=int(n)) for h in hyps]
            for hyps, n in zip(nbests, enc_lengths.tolist(), strict=True)]  # fmt: skip


@functools.cache
def _shipped_transducer(kind: str):
    from ..models import load_speech_transducer

    return load_speech_transducer(kind)  # loaded once per process


def spelled_words(hyp: Hypothesis, tokens, separator: str = "|",
                  frames: int | None = None) -> Hypothesis:  # fmt: skip
    """``hyp`` with the words its character tokens spell (split at ``separator``) and each
    word's frames: its first character's to its last character's last — a TDT token emitted at
    frame t with duration d covers frames t .. t + d - 1 (NeMo's offsets; an RNN-T token its
    own frame), within the utterance's ``frames`` where given."""
    import dataclasses

    durations = hyp.durations or (1,) * len(hyp.tokens)
    words, spans, chars, first, last = [], [], [], None, None
    for token, frame, d in [*zip(hyp.tokens, hyp.timestamps, durations, strict=True),
                            (None, None, None)]:  # fmt: skip
        symbol = tokens.symbol(int(token)) if token is not None else separator
        if symbol == separator:
            if chars:
                words.append("".join(chars))
                spans.append((first, last))
            chars, first = [], None
            continue
        chars.append(symbol)
        first = frame if first is None else first
        last = frame + max(int(d), 1) - 1
        if frames is not None:
            last = max(frame, min(last, frames - 1))
    return dataclasses.replace(hyp, words=tuple(words), word_timestamps=tuple(spans))


def read_transcripts(path: str | os.PathLike) -> dict[str, list[str]]:
    """``utterance-id<TAB>words`` lines -> {id: words}; an id on two lines raises
    `InputFileError` naming both lines (a dict would keep the last and drop the first
    unseen)."""
    from ..errors import InputFileError
    from ..textfiles import text_lines

    out = {}
    where: dict[str, int] = {}
    for line_no, line in text_lines(path, "transcripts"):
        utt, sep, text = line.partition("\t")
        if not sep or not utt:
            raise InputFileError(path, line_no, "expected 'ID<TAB>words'")
        if utt in out:
            raise InputFileError(path, line_no, f"utterance {utt!r} is already on line "
                                 f"{where[utt]}")  # fmt: skip
        out[utt], where[utt] = text.split(), line_no
    return out

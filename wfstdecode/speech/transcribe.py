"""Audio files -> words: hama phone log-probs decoded with a TLG (the shipped speech graph unless
another is given), and the figures the demo and the benchmark print."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..ctc import CtcBeamOptions, decode_ctc
from ..errors import DecodeInputError
from ..results import Hypothesis
from .phone_model import HamaPhoneModel, pad_log_probs

# Defaults for hama's posteriors: they are peaky and well calibrated, so acoustic scale 1 with
# the LM at full weight (tuned on held-out synthetic speech, bench/speech_ctc.md).
SPEECH_OPTIONS = CtcBeamOptions(beam=16.0, max_active=4000, acoustic_scale=1.0)
BATCH = 16  # utterances per decode call: bounds the padded log-prob array


def transcribe(
    paths: Sequence[str | os.PathLike],
    graph=None,
    options: CtcBeamOptions | None = None,
    *,
    backend: str = "auto",
    model: HamaPhoneModel | None = None,
) -> list[list[Hypothesis]]:
    """Decode audio files; one list of hypotheses (best first, ``options.nbest``) per file.

    graph:  a `DecodingGraph` over the model's tokens (e.g. built by
            ``graph_recipes/phones_hama.py``); None: the shipped speech graph, built on first use.
    Every file is read and run through the phone model before the search, so a bad file is
    reported (by `InputFileError`, naming it) before any decoding.
    """
    from .graph import load_speech_graph

    model = model or HamaPhoneModel()
    rows = [model.log_probs_of_file(p) for p in paths]
    graph = graph if graph is not None else load_speech_graph()
    return decode_log_probs(rows, graph, options, backend=backend, model=model)


def decode_log_probs(rows, graph, options=None, *, backend="auto", model=None):
    """`transcribe` after the phone model: a list of (T, V) log-prob arrays."""
    num_tokens = len(model.tokens) if model is not None else rows[0].shape[1] if rows else 0
    if graph.tokens is not None and graph.num_tokens != num_tokens:
        raise DecodeInputError(
            f"the graph has {graph.num_tokens} tokens but the phone model {num_tokens}: "
            "build the graph over the model's tokens.txt (graph_recipes/phones_hama.py)"
        )
    out: list[list[Hypothesis]] = []
    for lo in range(0, len(rows), BATCH):
        log_probs, lengths = pad_log_probs(rows[lo : lo + BATCH], num_tokens)
        out += decode_ctc(log_probs, lengths, graph, options or SPEECH_OPTIONS, backend=backend)
    return out


def word_times(hyp: Hypothesis, frame_seconds: float) -> list[dict]:
    """``[{"word", "start", "end"}]`` in seconds: from the first frame of a word to the end of its
    last frame, as `Hypothesis.word_timestamps` gives them."""
    return [
        {"word": w, "start": round(s * frame_seconds, 3), "end": round((e + 1) * frame_seconds, 3)}
        for w, (s, e) in zip(hyp.words, hyp.word_timestamps, strict=True)
    ]


def read_transcripts(path: str | os.PathLike) -> dict[str, list[str]]:
    """``utterance-id<TAB>words`` lines -> {id: words}."""
    from ..errors import InputFileError
    from ..textfiles import text_lines

    out = {}
    for line_no, line in text_lines(path, "transcripts"):
        utt, sep, text = line.partition("\t")
        if not sep or not utt:
            raise InputFileError(path, line_no, "expected 'ID<TAB>words'")
        out[utt] = text.split()
    return out

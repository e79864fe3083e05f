"""Decode a saved ``.npz`` with a saved transducer — the library side of
``wfstdecode decode-transducer``.

File format (``np.load`` without pickle): either ``enc`` float (B, T, D), the encoder output,
or ``log_probs`` float (B, T, V), the hama phone posteriors the shipped speech transducers
encode themselves (`wfstdecode.models.SpeechTransducer.encode`); optional ``lengths`` int (B,)
(default: all T), ``ids`` (B,) utterance names, ``texts`` (B,) references (then WER).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..errors import DecodeInputError, InputFileError
from ..results import Hypothesis
from ..safe_io import NpzArchive

__all__ = ["TransducerFileResult", "decode_transducer_npz", "load_transducer_model"]


@dataclass(frozen=True)
class TransducerFileResult:
    """ids, hypotheses (per utterance, best first), texts of the best, references or None, the
    corpus WER (None without references) and each utterance's encoder frames (what the
    hypotheses' timestamps count)."""

    ids: list[str]
    hypotheses: list[list[Hypothesis]]
    texts: list[str]
    references: list[str] | None
    wer: float | None
    lengths: list[int]


def load_transducer_model(name: str | os.PathLike):
    """``"rnnt"`` / ``"tdt"``: a shipped speech transducer; else a `SpeechTransducer` ``.npz``
    saved with ``SpeechTransducer.save``."""
    from ..models import SpeechTransducer, load_speech_transducer

    if str(name) in ("rnnt", "tdt"):
        return load_speech_transducer(str(name))
    if str(name).lower() in ("rnnt", "tdt") and not os.path.exists(name):
        raise InputFileError(name, None, "no such file; the shipped models are 'rnnt' and "
                             "'tdt' (lower case)")  # fmt: skip
    return SpeechTransducer.load(name)


def decode_transducer_npz(model, path: str | os.PathLike, options=None) -> TransducerFileResult:
    """Decode every utterance of ``path``: greedily (``options`` None or `GreedyOptions`) or
    with `BeamOptions`; the durations are the model's (``model.durations``: TDT). Arrays the
    model cannot take raise `InputFileError` naming the file."""
    arrays = _read(path)
    try:
        return _decode(model, path, arrays, options)
    except DecodeInputError as exc:  # the arrays do not fit the model: say which file
        raise InputFileError(path, None, str(exc)) from None


def _decode(model, path, arrays: dict, options) -> TransducerFileResult:
    import dataclasses

    import torch

    from ..metrics import word_error_rate
    from . import BeamOptions, GreedyOptions, beam_decode, greedy_decode

    durations = tuple(getattr(model, "durations", ()) or ()) or None
    with torch.inference_mode():
        if "enc" in arrays:
            enc, lengths = torch.from_numpy(arrays["enc"]), torch.from_numpy(arrays["lengths"])
        else:
            if not callable(getattr(model, "encode", None)):
                raise InputFileError(path, None, "holds log_probs, but the model has no encoder: "
                                     "save the encoder output as 'enc'")  # fmt: skip
            enc, lengths = model.encode(
                torch.from_numpy(arrays["log_probs"]), torch.from_numpy(arrays["lengths"])
            )
        if isinstance(options, BeamOptions):
            options = options.for_model(durations)
            hyps = beam_decode(model, enc, lengths.long(), options)
        else:
            options = dataclasses.replace(options or GreedyOptions(), durations=durations)
            hyps = [[h] for h in greedy_decode(model, enc, lengths.long(), options)]
    spell = getattr(model, "text", None)
    texts = [spell(h[0].tokens) if spell else " ".join(map(str, h[0].tokens)) for h in hyps]
    refs = arrays.get("texts")
    wer = None
    if refs is not None and any(r.split() for r in refs):  # (no reference word: no rate)
        wer = word_error_rate([r.split() for r in refs], [t.split() for t in texts])
    return TransducerFileResult(arrays["ids"], hyps, texts, refs, wer, lengths.tolist())


def _read(path) -> dict:
    def fail(message: str) -> InputFileError:
        return InputFileError(path, None, message)

    with NpzArchive(path, ("enc", "log_probs", "lengths", "ids", "texts"), fail) as z:
        name = "enc" if "enc" in z.names else "log_probs" if "log_probs" in z.names else None
        if name is None:
            raise fail(f"no 'enc' or 'log_probs' array (has {', '.join(z.others) or 'none'})")
        if {"enc", "log_probs"} <= z.names:  # which one is meant? neither is dropped unsaid
            raise fail("holds both 'enc' (encoder output) and 'log_probs' (the model's input): "
                       "keep the one to decode")  # fmt: skip
        data = z.read(name, "f", ndim=3)
        B, T, _ = data.shape
        with np.errstate(over="ignore"):  # (a float64 value beyond float32's range: said below)
            out = {name: data.astype("float32", copy=False), "lengths": z.read_lengths(B, T)}
        # said here, by position: past the encoder a NaN is anywhere (it runs both ways)
        got = out[name]
        bad = np.isnan(got) | (got == np.inf) if name == "log_probs" else ~np.isfinite(got)
        within = np.arange(T)[None, :] < out["lengths"][:, None]
        hit = np.argwhere(bad.any(axis=-1) & within)
        if len(hit):
            b, t = hit[0].tolist()
            beyond = np.flatnonzero(np.isfinite(data[b, t]) & bad[b, t])
            if len(beyond):
                v = int(beyond[0])
                raise fail(f"{name}[{b}, {t}, {v}] = {data[b, t, v]:g} is beyond float32's "
                           f"range, the model's (a frame within lengths[{b}])")  # fmt: skip
            what = "NaN" if np.isnan(data[b, t]).any() else "inf"
            raise fail(f"{name}[{b}, {t}] contains {what} (a frame within lengths[{b}])")
        out["texts"] = z.read_texts("texts", B)
        out["ids"] = z.read_ids(B) or [f"utt{b:04d}" for b in range(B)]
        z.say_misspelled(stacklevel=3)
    return out

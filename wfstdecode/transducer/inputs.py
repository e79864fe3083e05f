"""Checks of a transducer decode's inputs shared by greedy and beam search: shapes, lengths,
devices, NaN / inf in valid frames, and one probe of the model for the joint's width."""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from ..array_checks import refuse_misread
from ..errors import DecodeInputError
from .model import ModelAdapter

__all__ = ["check_inputs", "check_joint"]


def check_inputs(model, enc, enc_lengths):
    for name in ("blank_id", "init_state", "predict", "joint"):
        if not hasattr(model, name):
            raise DecodeInputError(f"model lacks {name!r}; see wfstdecode.transducer.model")
    if isinstance(enc, torch.Tensor) and (enc.is_nested or enc.layout != torch.strided):
        raise DecodeInputError(f"enc must be a dense (B, T, D) tensor; got a "
                               f"{'nested' if enc.is_nested else str(enc.layout)} one: pad it "
                               f"and give enc_lengths")  # fmt: skip
    if not isinstance(enc, torch.Tensor) or enc.dim() != 3:
        shape = tuple(enc.shape) if isinstance(enc, torch.Tensor) else type(enc).__name__
        raise DecodeInputError(f"enc must be a tensor (B, T, D); got {shape}")
    if not enc.is_floating_point():
        raise DecodeInputError(f"enc must be a float tensor; got {enc.dtype}")
    B, T, _ = enc.shape
    if not isinstance(enc_lengths, torch.Tensor):
        enc_lengths = torch.as_tensor(_host_lengths(enc_lengths, B), device=enc.device)
    elif enc_lengths.is_nested or enc_lengths.layout != torch.strided:
        raise DecodeInputError(f"enc_lengths must be a dense (B,) = ({B},) tensor; got layout "
                               f"{enc_lengths.layout}")  # fmt: skip
    if enc_lengths.shape != (B,):
        raise DecodeInputError(
            f"enc_lengths must be (B,) = ({B},) for enc {tuple(enc.shape)}; "
            f"got {tuple(enc_lengths.shape)}"
        )
    if (enc_lengths.is_floating_point() or enc_lengths.is_complex()
            or enc_lengths.dtype == torch.bool):  # fmt: skip
        raise DecodeInputError(f"enc_lengths must be an integer tensor; got {enc_lengths.dtype}")
    if enc_lengths.device != enc.device:
        raise DecodeInputError(
            f"enc_lengths is on {enc_lengths.device} but enc is on {enc.device}; "
            "put both on the model's device"
        )
    params = getattr(model, "parameters", None)
    param = next(iter(params()), None) if callable(params) else None
    if param is not None and param.device != enc.device:
        raise DecodeInputError(f"enc is on {enc.device} but the model is on {param.device}")
    lengths = enc_lengths.long()
    bad_lengths = (lengths < 0) | (lengths > T)
    # NaN / inf only in valid frames: padding beyond a length may hold anything. aminmax
    # propagates NaN and, unlike isfinite(enc), allocates (B, T), not (B, T, D).
    if enc.shape[2]:
        low, high = torch.aminmax(enc.detach(), dim=-1)
        valid = torch.arange(T, device=enc.device) < lengths.unsqueeze(1)
        bad_frames = ~(low.isfinite() & high.isfinite()) & valid
    else:  # no features: nothing to check (aminmax needs a non-empty dim)
        bad_frames = torch.zeros((B, T), dtype=torch.bool, device=enc.device)
    # The one host sync before the search (the loops have none).
    any_bad_lengths, any_bad_frames = torch.stack([bad_lengths.any(), bad_frames.any()]).tolist()
    if any_bad_lengths:
        b = int(bad_lengths.nonzero()[0])
        raise DecodeInputError(
            f"enc_lengths must lie in [0, T={T}] for enc {tuple(enc.shape)}; "
            f"got enc_lengths[{b}] = {int(lengths[b])}"
        )
    if any_bad_frames:
        b, t = bad_frames.nonzero()[0].tolist()
        raise DecodeInputError(
            f"enc holds NaN or inf in frame {t} of utterance {b} (enc[{b}, {t}], within "
            f"enc_lengths[{b}] = {int(lengths[b])}); non-finite valid frames in all: "
            f"{int(bad_frames.sum())}, in {int(bad_frames.any(1).sum())} utterance(s)"
        )
    return enc, lengths


def _host_lengths(given, B: int) -> np.ndarray:
    """Lengths given as a list or array (integers, or whole numbers as `decode_ctc` takes them),
    as native int64 (torch takes no other byte order)."""
    shown = repr(given)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    refuse_misread(given, "enc_lengths", integers=True)
    try:
        arr = np.asarray(given)
    except (TypeError, ValueError, RuntimeError, OverflowError):
        arr = None
    if arr is not None and arr.size == 0:
        return np.zeros(arr.shape, np.int64)  # ([] reads as floats)
    if arr is not None and arr.dtype.kind == "O":  # (Python ints beyond int64 make objects)
        with contextlib.suppress(TypeError, ValueError, OverflowError):
            arr = arr.astype(np.float64)
    if arr is not None and arr.dtype.kind == "f" and not (
            np.isfinite(arr).all() and (arr == np.round(arr)).all()):  # fmt: skip
        arr = None
    if arr is None or arr.dtype.kind not in "iuf":
        raise DecodeInputError(f"enc_lengths must be (B,) = ({B},) integers; got {shown}")
    flat = arr.ravel()
    beyond = np.flatnonzero(np.abs(flat.astype(np.float64)) >= 2.0**63)  # (int64's range)
    if len(beyond):
        b = int(beyond[0])
        raise DecodeInputError(f"enc_lengths[{b}] = {int(flat[b])} is beyond any T")
    return arr.astype(np.int64)


def check_joint(adapter: ModelAdapter, enc, durations) -> int:
    """Probe the model once and return the token vocabulary size (blank included)."""
    model, B = adapter.model, enc.shape[0]
    n_dur = len(durations or ())
    labels = torch.full((B,), adapter.blank_id, dtype=torch.long, device=enc.device)
    try:
        pred, _ = model.predict(labels, model.init_state(B, enc.device))
    except IndexError as exc:  # (torch's embedding: "index out of range in self")
        raise DecodeInputError(
            f"model.predict failed on the blank label, blank_id {adapter.blank_id}: is it "
            f"within the model's vocabulary? ({exc})"
        ) from exc
    if pred.dim() != 2 or pred.shape[0] != B:
        raise DecodeInputError(
            f"model.predict must return pred (B={B}, H); got {tuple(pred.shape)}"
        )
    if enc.shape[1] == 0:  # nothing to decode, but enc must still be the model's
        try:
            adapter.encoder(enc)
        except RuntimeError as exc:
            raise _probe_failed(model, enc, exc) from exc
        return adapter.blank_id + 1 if adapter.vocab_size is None else adapter.vocab_size
    try:
        enc_p = adapter.encoder(enc[:, :1])[:, 0]
        logits = adapter.joint(enc_p, adapter.prediction(pred))
    except RuntimeError as exc:
        raise _probe_failed(model, enc, exc) from exc
    if logits.dim() != 2 or logits.shape[0] != B:
        raise DecodeInputError(
            f"model.joint must return (B={B}, V + len(durations)); got {tuple(logits.shape)}"
        )
    width = logits.shape[1]
    vocab = width - n_dur if adapter.vocab_size is None else adapter.vocab_size
    if width != vocab + n_dur:
        own = getattr(model, "durations", None)
        own = () if own is None else tuple(int(d) for d in own)  # (a tensor or array too)
        hint = f": a TDT model's, pass durations={own}" if own and not n_dur else ""
        raise DecodeInputError(
            f"joint width {width} != vocab_size {vocab} + len(durations) {n_dur} "
            f"(durations={durations}); logits shape {tuple(logits.shape)}{hint}"
        )
    if not 0 <= adapter.blank_id < vocab:
        raise DecodeInputError(
            f"blank_id {adapter.blank_id} is outside the vocabulary [0, {vocab})"
        )
    return vocab


def _probe_failed(model, enc, exc) -> Exception:
    """The joint failed on the first frame: a clear error when a usual cause shows (enc in
    another float type than the model's weights, e.g. float64 from NumPy; enc of another
    width than the model's encoder output); else ``exc``."""
    params = getattr(model, "parameters", None)
    param = next(iter(params()), None) if callable(params) else None
    if param is not None and param.is_floating_point() and param.dtype != enc.dtype:
        return DecodeInputError(
            f"enc is {enc.dtype} but the model's weights are {param.dtype}: pass "
            f"enc.to({param.dtype}) (the model's joint failed on it: {exc})"
        )
    if "shape" in str(exc) or "size" in str(exc):  # e.g. "mat1 and mat2 shapes cannot be ..."
        return DecodeInputError(
            f"the model's joint failed on enc of shape {tuple(enc.shape)}: is D = "
            f"{enc.shape[2]} this model's encoder width? ({exc})"
        )
    return exc

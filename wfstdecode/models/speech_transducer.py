"""A small character RNN-T / TDT over hama's phone posteriors, trained by tools/train_transducer.py.

Encoder: hama's per-frame posteriors (191 classes, 20 ms), two frames stacked into one 40 ms frame,
a linear layer and an LSTM (bidirectional in the shipped models: offline decoding). Predictor and
joint: `LstmTransducer` (an LSTM layer; ReLU of the summed projections, then tokens and TDT
durations), which satisfies `TransducerModel` with the projection methods.
"""

from __future__ import annotations

import json
import os
import re
from importlib.resources import files
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..errors import DecodeInputError, InputFileError, OptionsError
from ..safe_io import NpzArchive, json_object, replacing
from ..symbols import SymbolTable
from .transducer import LstmTransducer

WEIGHTS = Path(str(files("wfstdecode") / "data" / "transducer"))
STACK = 2  # hama frames per encoder frame
FRAME_SECONDS = 0.02 * STACK
# Character targets: blank, word separator, apostrophe, a-z (the OCR model's token set).
CHARS = ("<blk>", "|", "'", *"abcdefghijklmnopqrstuvwxyz")


class SpeechTransducer(LstmTransducer):
    def __init__(
        self, in_dim: int = 191, enc_dim: int = 256, pred_dim: int = 192, joint_dim: int = 256,
        durations: tuple[int, ...] = (), enc_layers: int = 2, bidirectional: bool = False,
        dropout: float = 0.0,
    ):  # fmt: skip
        super().__init__(len(CHARS), enc_dim, pred_dim, joint_dim, len(durations), blank_id=0)
        self.config = {"in_dim": in_dim, "enc_dim": enc_dim, "pred_dim": pred_dim,
                       "joint_dim": joint_dim, "durations": list(durations),
                       "enc_layers": enc_layers, "bidirectional": bidirectional,
                       "dropout": dropout}  # fmt: skip
        self.tokens = SymbolTable.from_list(CHARS)
        self.durations = tuple(durations)
        self.frame_seconds = FRAME_SECONDS
        self.enc_in = nn.Linear(in_dim * STACK, enc_dim)
        hidden = enc_dim // 2 if bidirectional else enc_dim  # the directions are concatenated
        self.encoder = nn.LSTM(enc_dim, hidden, num_layers=enc_layers, batch_first=True,
                               bidirectional=bidirectional, dropout=dropout)  # fmt: skip
        self.dropout = nn.Dropout(dropout)  # training only (eval() turns it off)

    def encode(self, log_probs: torch.Tensor, lengths: torch.Tensor):
        """hama log-probs [B, T, 191] -> (encoder output [B, T', enc_dim], lengths T')."""
        B, T, V = log_probs.shape
        width = self.config["in_dim"]
        if width != V:
            raise DecodeInputError(f"log_probs has V = {V} columns; the model reads {width} "
                                   "(hama's phone posteriors)")  # fmt: skip
        if (not isinstance(lengths, torch.Tensor) or lengths.shape != (B,)
                or lengths.is_floating_point() or lengths.is_complex()
                or lengths.dtype == torch.bool):  # fmt: skip
            shown = tuple(lengths.shape) if isinstance(lengths, torch.Tensor) else lengths
            raise DecodeInputError(f"lengths must be an integer tensor (B,) = ({B},); got "
                                   f"{getattr(lengths, 'dtype', type(lengths).__name__)} "
                                   f"{shown}")  # fmt: skip
        outside = (lengths < 0) | (lengths > T)
        if bool(outside.any()):
            b = int(outside.nonzero()[0])
            raise DecodeInputError(f"lengths must lie in [0, T={T}] for log_probs "
                                   f"{tuple(log_probs.shape)}; got lengths[{b}] = "
                                   f"{int(lengths[b])}")  # fmt: skip
        T2 = (T + STACK - 1) // STACK
        # Posteriors, not log-probs: the unlikely classes' log-probs (-10 to -100) are mostly
        # noise that swamps the few classes that matter, and saturate the LSTM.
        valid = (
            torch.arange(T, device=log_probs.device)[None, :]
            < lengths.to(log_probs.device)[:, None]
        )
        x = log_probs.exp().to(self.enc_in.weight.dtype)  # (float64 from NumPy, say)
        bad = valid[..., None] & (x.isnan() | x.isinf())  # NaN, or too large for exp
        if bool(bad.any()):
            b, t, v = (int(i) for i in bad.nonzero()[0])
            value = float(log_probs[b, t, v])
            raise DecodeInputError(f"log_probs[{b}, {t}, {v}] = {value} (frame within "
                                   f"lengths[{b}]) is not a log-probability")  # fmt: skip
        # frames past an utterance's end read as zeros, whatever they hold (a select: NaN * 0
        # is NaN, and an odd length stacks the first padded frame with the last real one)
        x = torch.where(valid[..., None], x, 0.0)
        x = torch.nn.functional.pad(x, (0, 0, 0, T2 * STACK - T), value=0.0)
        x = self.dropout(torch.relu(self.enc_in(x.reshape(B, T2, V * STACK))))
        out_lengths = (lengths + STACK - 1) // STACK
        if B == 0 or T2 == 0:  # (nothing to pack)
            directions = 2 if self.encoder.bidirectional else 1
            return x.new_zeros(B, T2, directions * self.encoder.hidden_size), out_lengths
        # Packed, so that the backward direction starts at each utterance's own last frame:
        # padding would otherwise change the output, and with it the batch's composition.
        packed = nn.utils.rnn.pack_padded_sequence(
            x, out_lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False
        )
        enc, _ = nn.utils.rnn.pad_packed_sequence(
            self.encoder(packed)[0], batch_first=True, total_length=T2
        )
        return self.dropout(enc), out_lengths

    def predict_sequence(self, labels: torch.Tensor) -> torch.Tensor:
        """Training: predictor outputs [B, U+1, H] for blank followed by ``labels`` [B, U]."""
        start = torch.full((labels.shape[0], 1), self.blank_id, dtype=labels.dtype)
        x = self.embedding(torch.cat([start.to(labels.device), labels], 1))
        out, _ = self.lstm(x.transpose(0, 1))
        return out.transpose(0, 1)

    def text(self, labels) -> str:
        return "".join(self.tokens.symbol(int(k)) for k in labels).replace("|", " ").strip()

    # ----- weights ------------------------------------------------------------------------
    def save(self, path: str | os.PathLike, extra: dict | None = None) -> None:
        """Weights as float16 arrays in an .npz (no pickle), the configuration as JSON; a weight
        with a value beyond float16's range as float32 (float16 would make it inf, a file
        `load` refuses). A weight holding NaN or inf raises `OptionsError` naming it."""
        arrays = {}
        for k, v in self.state_dict().items():
            weight = v.detach().cpu().float().numpy()
            if not np.isfinite(weight).all():
                raise OptionsError(f"weight {k} holds NaN or inf: not saved (load refuses it)")
            with np.errstate(over="ignore"):
                half = weight.astype(np.float16)
            arrays[k] = half if np.isfinite(half).all() else weight
        meta = json.dumps({"config": self.config, **(extra or {})})
        with replacing(path) as f:
            np.savez_compressed(f, __meta__=np.array(meta), **arrays)

    @classmethod
    def load(cls, path: str | os.PathLike) -> SpeechTransducer:
        """A model `save` wrote. Anything else — not an .npz, no or a malformed configuration,
        a weight missing, of another shape, not a float or not finite — raises `InputFileError`
        naming ``path`` and what is wrong. The shapes are checked before any weight is made (a
        configuration's sizes could ask for any amount of memory)."""

        def fail(message: str) -> InputFileError:
            return InputFileError(path, None, f"not a speech transducer weights file: {message}")

        with NpzArchive(path, ("__meta__",), fail) as z:
            if "__meta__" not in z.names:
                raise fail("no '__meta__' member (the model's configuration)")
            meta = json_object(str(z.read("__meta__", "U", shape=())), "'__meta__'", fail)
        config = cls._checked_config(meta.get("config"), fail)
        layers = config.get("enc_layers", 2)  # (a model of 20,000 layers takes long to make)
        with NpzArchive(path, (), fail) as z:
            held = sum(1 for n in z.others if re.fullmatch(r"encoder\.weight_ih_l\d+", n))
        if held != layers:
            raise fail(f"its enc_layers is {layers}; it holds {held} encoder layers")
        with torch.device("meta"):  # the weights' shapes, without their memory
            want = cls._configured(config, fail).state_dict()
        with NpzArchive(path, want, fail) as z:
            missing = sorted(set(want) - z.names)
            if missing:
                raise fail(f"weights missing: {', '.join(missing)}")
            state = {}
            for k, v in want.items():
                weight = z.read(k, "f", shape=tuple(v.shape)).astype(np.float32)
                if not np.isfinite(weight).all():
                    raise fail(f"weight {k} holds NaN or inf")
                state[k] = torch.from_numpy(weight)
        model = cls._configured(config, fail)
        model.load_state_dict(state)
        model.meta = meta
        return model.eval()

    @staticmethod
    def _checked_config(config, fail) -> dict:
        """``config`` (the ``__init__`` arguments as `save` wrote them), its values' types and
        ranges checked."""
        if not isinstance(config, dict):
            raise fail(f"'__meta__' has no 'config' object (got {config!r})")
        durations = config.get("durations", [])
        if not isinstance(durations, list) or any(
            type(d) is not int or d < 0 for d in durations
        ) or len(set(durations)) != len(durations):  # fmt: skip
            raise fail(f"its durations {durations!r} are not distinct non-negative ints")
        if durations:  # what a decode takes: one positive, none beyond MAX_COUNT
            from ..transducer.options import check_durations

            try:
                check_durations(durations)
            except OptionsError as exc:
                raise fail(f"its {exc}") from None
        for key in ("in_dim", "enc_dim", "pred_dim", "joint_dim", "enc_layers"):
            if key in config and (type(config[key]) is not int or config[key] < 1):
                raise fail(f"its {key} {config[key]!r} is not an int >= 1")
        if type(config.get("bidirectional", False)) is not bool:
            raise fail(f"its bidirectional {config['bidirectional']!r} is not true or false")
        if config.get("bidirectional") and config.get("enc_dim", 256) % 2:
            raise fail("a bidirectional encoder needs an even enc_dim (its directions' halves)")
        dropout = config.get("dropout", 0.0)
        if type(dropout) not in (int, float) or not 0 <= dropout < 1:
            raise fail(f"its dropout {dropout!r} is not in [0, 1)")
        return {**config, "durations": tuple(durations)}

    @classmethod
    def _configured(cls, config: dict, fail) -> SpeechTransducer:
        """An untrained model of a checked ``config`` (on the current default device)."""
        try:
            return cls(**config)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise fail(f"its configuration {config!r} is not a model's ({exc})") from None


def load_speech_transducer(kind: str = "rnnt") -> SpeechTransducer:
    """The shipped trained model: ``"rnnt"`` or ``"tdt"`` (durations 0-4)."""
    if kind not in ("rnnt", "tdt"):
        raise ValueError(f"kind must be 'rnnt' or 'tdt'; got {kind!r}")
    return SpeechTransducer.load(WEIGHTS / f"{kind}.npz")

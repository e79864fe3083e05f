"""hama's waveform -> phone CTC model (PyPI ``hama``, Apache-2.0) behind the toolkit's conventions:
log-prob column ``t`` is ``tokens.txt`` id ``t`` with the blank first, as `decode_ctc` expects.

hama 1.7.0's model: 16 kHz mono input, one output frame per 320 samples (20 ms), 191 classes —
189 IPA phones and markers of its G2P vocabulary, the word boundary ``<wb>`` and the blank.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cached_property

import numpy as np

from ..errors import BackendUnavailableError, DecodeInputError, InputFileError
from ..symbols import BLANK, SymbolTable
from .audio import load_audio

WORD_BOUNDARY = "<wb>"
HAMA_VERSION = "1.7.0"
# hama's vocabulary has a space class; tokens.txt cannot hold whitespace.
_RENAMED = {" ": "<space>"}
# hama 1.7.0's engine returns at most 1500 frames (30 s) and silently drops the rest of a longer
# waveform: longer audio goes through in windows of 20 s, each frame kept from a window that
# gives it at least 1 s of context on both sides.
MAX_FRAMES = 1500
WINDOW_FRAMES, OVERLAP_FRAMES = 1000, 50


def hama_token_names(classes: Sequence[str], blank: str = "<blank>") -> list[str]:
    """tokens.txt names for hama's output classes: the blank first as ``<blk>``, then the others
    in hama's order (renamed where tokens.txt cannot hold them)."""
    return [BLANK] + [_RENAMED.get(c, c) for c in classes if c != blank]


def _import_hama():
    try:
        import hama
    except ImportError:
        raise BackendUnavailableError(
            "speech input needs PyPI hama (the phone CTC model): pip install 'wfstdecode[speech]'"
        ) from None
    return hama


class HamaPhoneModel:
    """Audio -> per-frame phone log-probabilities (natural log, each frame sums to one)."""

    sample_rate = 16000
    frame_seconds = 0.02
    hop = 320  # samples per output frame: sample_rate * frame_seconds

    def __init__(self):
        hama = _import_hama()
        self._model = hama.ASRModel()
        classes = list(self._model.decoder_tokens)
        self._blank = self._model.blank_id
        # Column order that puts the blank first; the rest keep hama's order.
        self._columns = np.array(
            [self._blank] + [i for i in range(len(classes)) if i != self._blank]
        )
        self.tokens = SymbolTable.from_list(hama_token_names(classes, classes[self._blank]))

    @cached_property
    def word_boundary_id(self) -> int:
        return self.tokens.id(WORD_BOUNDARY)

    def log_probs_of(self, samples: np.ndarray) -> np.ndarray:
        """(T, V) float32 log-probs of one utterance of mono samples at `sample_rate`."""
        samples = np.asarray(samples, np.float32)
        if sum(n > 1 for n in samples.shape) > 1:  # (flattened, channels would interleave)
            raise DecodeInputError(f"audio must be mono samples (N,); got shape "
                                   f"{samples.shape}: mix the channels down first (e.g. "
                                   "samples.mean(axis=1), as read_audio does)")  # fmt: skip
        samples = samples.reshape(-1)
        if samples.size < 2 * self.hop:  # the model's convolutions need a few frames of input
            raise DecodeInputError(
                f"audio of {samples.size} samples is too short for the phone model "
                f"(at least 640 samples, 40 ms at {self.sample_rate} Hz)"
            )
        hop = self.hop
        total = samples.size // hop + 1
        if total <= MAX_FRAMES:
            return self._run(samples)
        out = np.empty((total, len(self.tokens)), np.float32)
        start = 0  # the window's first frame
        while True:
            last = (start + WINDOW_FRAMES) * hop >= samples.size
            window = self._run(samples[start * hop : (start + WINDOW_FRAMES) * hop])
            lo = 0 if start == 0 else OVERLAP_FRAMES
            hi = len(window) if last else WINDOW_FRAMES - OVERLAP_FRAMES
            out[start + lo : start + hi] = window[lo:hi]
            if last:
                return out
            start += WINDOW_FRAMES - 2 * OVERLAP_FRAMES

    def _run(self, samples: np.ndarray) -> np.ndarray:
        """One call of hama's engine: (T, V) log-probs, T = one frame per hop and one more."""
        session = self._model.session
        log_probs, lengths = session.run(
            ["log_probs", "out_lengths"],
            {"waveform": samples[None], "waveform_lengths": np.array([samples.size], np.int64)},
        )
        length = int(np.asarray(lengths).reshape(-1)[0])
        expected = samples.size // self.hop + 1
        if min(length, len(log_probs[0])) != expected:  # (an engine that cut the audio short)
            raise BackendUnavailableError(f"hama's phone model gave {length} frames for "
                                          f"{samples.size} samples, not {expected}: a hama "
                                          f"other than {HAMA_VERSION}?")  # fmt: skip
        return np.ascontiguousarray(log_probs[0, :length][:, self._columns], dtype=np.float32)

    def log_probs(self, utterances: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Padded ``(log_probs[B, T, V], lengths[B])`` of several utterances (one model call each:
        hama's engine runs one waveform at a time). Padding frames are certain blanks."""
        rows = [self.log_probs_of(u) for u in utterances]
        return pad_log_probs(rows, len(self.tokens))

    def log_probs_of_file(self, path: str | os.PathLike) -> np.ndarray:
        """`log_probs_of` an audio file; what is wrong with its audio names the file."""
        try:
            return self.log_probs_of(load_audio(path, self.sample_rate))
        except DecodeInputError as exc:
            raise InputFileError(path, None, str(exc)) from None

    def greedy_phones(self, log_probs: np.ndarray) -> list[list[str]]:
        """Best-path phones of one utterance's (T, V) log-probs, grouped into words at ``<wb>``."""
        from ..ctc.npz import ctc_collapse

        words: list[list[str]] = [[]]
        for token in ctc_collapse(np.argmax(log_probs, axis=1)):
            if token == self.word_boundary_id:
                words.append([])
            else:
                words[-1].append(self.tokens.symbol(int(token)))
        return [w for w in words if w]


def pad_log_probs(rows: Sequence[np.ndarray], vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """Stack (T_b, V) arrays into (B, T_max, V) with blank-certain padding, and their lengths."""
    lengths = np.array([len(r) for r in rows], np.int64)
    out = np.full((len(rows), int(lengths.max(initial=1)), vocab), -1e30, np.float32)
    out[:, :, 0] = 0.0
    for b, r in enumerate(rows):
        out[b, : len(r)] = r
    return out, lengths

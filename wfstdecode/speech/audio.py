"""Audio in: WAV through the standard library (FLAC, OGG and the rest through soundfile, when it is
installed), mixed down to mono float32 in [-1, 1], resampled with a windowed-sinc filter."""

from __future__ import annotations

import io
import math
import os
import warnings
import wave

import numpy as np
from numba import njit

from ..errors import InputFileError

# Taps on each side of the interpolation point: enough for a stop band well below the 16-bit
# noise floor's effect on a phone model (a minute of 44.1 kHz audio: ~0.1 CPU s polyphase).
_SINC_HALF_WIDTH = 24
_MAX_TAPS_TABLE = 1 << 22  # taps of every phase kept up to this many (32 MB)
# Sample rates read: from below telephony's 8 kHz to the highest studio rates.
MIN_RATE, MAX_RATE = 1_000, 768_000


def read_audio(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """``(samples, sample_rate)`` of an audio file, mono float32 in [-1, 1]."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError as exc:
        raise InputFileError(path, None, f"cannot read the audio file: {exc.strerror}") from None
    what = "cannot decode the audio"
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        try:
            return _read_wav(path)
        except (wave.Error, RuntimeError) as exc:  # float samples, WAVE_FORMAT_EXTENSIBLE:
            # soundfile's; RuntimeError: wave's chunk walk ran past the RIFF chunk (Python 3.11)
            exc = exc if str(exc) else "its chunks run past the RIFF chunk"
            what = f"not a readable PCM WAV file ({exc}), nor a WAV soundfile reads"
            soundfile = _soundfile(path, f"this WAV ({exc}) needs soundfile")
    else:
        soundfile = _soundfile(path, "not a WAV file; other formats (FLAC, OGG, …) need soundfile")
    try:
        samples, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
        if not len(samples) and head[:4] == b"RIFF" and (tail := _unpatched_samples(path)):
            # a float or WAVE_FORMAT_EXTENSIBLE WAV whose writer never wrote the sizes
            samples, rate = soundfile.read(io.BytesIO(_with_data_size(path, len(tail))),
                                           dtype="float32", always_2d=True)  # fmt: skip
            _said_unpatched(path, len(tail), stacklevel=3)
    except RuntimeError as exc:  # soundfile's error for an unreadable or unknown format
        raise InputFileError(path, None, f"{what}: {exc}") from None
    return _checked(path, samples.mean(axis=1), rate)


def _soundfile(path, why: str):
    try:
        import soundfile
    except ImportError:
        raise InputFileError(
            path, None, f"{why}: pip install 'wfstdecode[speech]' or pip install soundfile"
        ) from None
    return soundfile


def _read_wav(path) -> tuple[np.ndarray, int]:
    """A PCM WAV through the standard library; `wave.Error` for the WAVs it does not read."""
    with open(path, "rb") as f:
        head = f.read(8)
    # a writer stopped before it wrote the sizes may leave the RIFF size 0 too, which wave
    # refuses: read it with the size the file has
    source = str(path) if head[4:8] != bytes(4) else io.BytesIO(_with_riff_size(path))
    try:
        with wave.open(source, "rb") as w:
            rate, channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
            declared = w.getnframes()
            raw = w.readframes(declared)
    except EOFError as exc:
        why = str(exc) or "it ends inside its header"
        raise InputFileError(path, None, f"not a readable PCM WAV file: {why}") from None
    if declared == 0 and (tail := _unpatched_samples(path)):  # a writer stopped before it
        raw = tail  # wrote the sizes (a recorder killed, a pipe): the samples are there
        _said_unpatched(path, len(tail), stacklevel=4)
    frames = len(raw) // (width * channels)
    streamed = declared == 0xFFFFFFFF // (width * channels)  # a writer that could not seek back
    if frames < declared and not streamed:  # cut short (a copy that did not finish): said
        warnings.warn(f"{path}: truncated WAV: its header declares {declared:,} frames, the "
                      f"file holds {frames:,}", UserWarning, stacklevel=3)  # fmt: skip
    raw = raw[: frames * width * channels]
    if width == 1:
        pcm = (np.frombuffer(raw, np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width == 2:
        pcm = np.frombuffer(raw, "<i2").astype(np.float32) / 32768.0
    elif width == 3:
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        pcm = ((b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)) << 8 >> 8) / float(1 << 23)
    elif width == 4:
        pcm = np.frombuffer(raw, "<i4").astype(np.float32) / float(1 << 31)
    else:
        raise InputFileError(path, None, f"unsupported WAV sample width {width} bytes")
    return _checked(path, pcm.reshape(-1, channels).mean(axis=1), rate)


def _with_riff_size(path) -> bytes:
    """The file's bytes with its RIFF chunk size set to what follows the size field."""
    with open(path, "rb") as f:
        blob = bytearray(f.read())
    blob[4:8] = min(len(blob) - 8, 0xFFFFFFFF).to_bytes(4, "little")
    return bytes(blob)


def _said_unpatched(path, size: int, stacklevel: int) -> None:
    """Warn (at ``read_audio``'s caller: ``stacklevel`` from here) of samples read past a data
    size of 0."""
    warnings.warn(f"{path}: its WAV header declares no samples but {size:,} bytes of them "
                  "follow (a writer that never wrote the sizes): read them",
                  UserWarning, stacklevel=stacklevel)  # fmt: skip


def _with_data_size(path, size: int) -> bytes:
    """The file's bytes with its RIFF size and its (first) data chunk's size set: ``size``."""
    blob = bytearray(_with_riff_size(path))
    at = _data_chunk_at(blob)
    blob[at + 4 : at + 8] = size.to_bytes(4, "little")
    return bytes(blob)


def _data_chunk_at(blob) -> int | None:
    """The offset of the first ``data`` chunk of a RIFF file's bytes; None if none."""
    at = 12
    while at + 8 <= len(blob):
        if blob[at : at + 4] == b"data":
            return at
        size = int.from_bytes(blob[at + 4 : at + 8], "little")
        at += 8 + size + (size & 1)
    return None


def _unpatched_samples(path) -> bytes | None:
    """The bytes after a ``data`` chunk whose size says 0, when they are not further chunks
    (ids of printable ASCII whose sizes end the file exactly): samples whose size was never
    written. None when the data chunk is empty indeed."""
    with open(path, "rb") as f:
        blob = f.read()
    if (at := _data_chunk_at(blob)) is None:
        return None
    tail, pos = blob[at + 8 :], 0
    while pos + 8 <= len(tail) and all(32 <= c < 127 for c in tail[pos : pos + 4]):
        size = int.from_bytes(tail[pos + 4 : pos + 8], "little")
        pos += 8 + size + (size & 1)
    return None if pos in (len(tail), len(tail) + 1) else tail  # (+ 1: the last pad left out)


def _checked(path, samples: np.ndarray, rate: int) -> tuple[np.ndarray, int]:
    if not MIN_RATE <= rate <= MAX_RATE:  # a corrupt header (1 Hz would resample 16,000x)
        raise InputFileError(
            path, None, f"sample rate {rate} Hz is outside {MIN_RATE:,}..{MAX_RATE:,} Hz"
        )
    samples = np.asarray(samples, np.float32)
    if not np.isfinite(samples).all():
        raise InputFileError(path, None, "the audio holds NaN or infinite samples")
    return np.clip(samples, -1.0, 1.0), int(rate)


def resample(samples: np.ndarray, rate: int, new_rate: int) -> np.ndarray:
    """Band-limited resampling: a Hann-windowed sinc with its cutoff at the lower Nyquist rate.

    Output sample ``j`` sits at input time ``j * rate / new_rate``; the signal outside the
    input is taken as zero. Rates are whole numbers, so ``j``'s position between input samples
    is one of ``new_rate / gcd(rate, new_rate)`` phases (160 from 44.1 kHz to 16 kHz): their
    taps are made once (polyphase), where that table is of a sensible size.
    """
    samples = np.asarray(samples, np.float32)
    if samples.ndim != 1:
        raise ValueError(f"resample takes mono samples (N,); got shape {samples.shape}")
    if not all(float(r) == int(r) > 0 for r in (rate, new_rate)):
        raise ValueError(f"sample rates are whole numbers of Hz > 0; got {rate} and {new_rate}")
    if rate == new_rate or samples.size == 0:
        return samples.copy()  # (never the caller's array)
    rate, new_rate = int(rate), int(new_rate)  # (44100.0, a NumPy int: the same rate)
    ratio = new_rate / rate
    cutoff = min(1.0, ratio)  # in units of the input Nyquist rate
    half = math.ceil(_SINC_HALF_WIDTH / cutoff)
    n_out = max(1, round(samples.size * ratio))
    g = math.gcd(rate, new_rate)
    up, down = new_rate // g, rate // g  # output j at input time j * down / up
    padded = np.concatenate([np.zeros(half, np.float32), samples, np.zeros(half + 1, np.float32)])
    table = np.empty((up if up * 2 * half <= _MAX_TAPS_TABLE else 0, 2 * half))
    for phase in range(table.shape[0]):
        _fill_taps(table[phase], phase / up, cutoff, half)
    return _polyphase(padded, n_out, up, down, cutoff, half, table)


@njit(nogil=True, cache=True)
def _fill_taps(row, frac, cutoff, half):
    """The taps of input samples ``base - half + 1 .. base + half`` for an output at input
    time ``base + frac``."""
    for m in range(2 * half):
        x = frac - (m - half + 1)  # distance in input samples
        window = 0.5 + 0.5 * math.cos(math.pi * min(1.0, abs(x) / (half + 1)))
        y = math.pi * cutoff * x
        row[m] = cutoff * (math.sin(y) / y if y != 0.0 else 1.0) * window


@njit(nogil=True, cache=True)
def _polyphase(padded, n_out, up, down, cutoff, half, table):
    out = np.empty(n_out, np.float32)
    row = np.empty(2 * half)
    for j in range(n_out):
        base, phase = divmod(j * down, up)
        if table.shape[0]:
            taps = table[phase]
        else:  # (a table of every phase would be too large: this output's alone)
            _fill_taps(row, phase / up, cutoff, half)
            taps = row
        acc = 0.0
        for m in range(2 * half):
            acc += taps[m] * padded[base + m + 1]  # (padded: `half` zeros before the input)
        out[j] = acc
    return out


def load_audio(path: str | os.PathLike, sample_rate: int) -> np.ndarray:
    """Mono float32 samples of ``path`` at ``sample_rate``."""
    samples, rate = read_audio(path)
    return resample(samples, rate, sample_rate)

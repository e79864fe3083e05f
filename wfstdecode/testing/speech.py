"""Synthetic speech for tests, benchmarks and training data: Debian flite and espeak-ng voices,
with the perturbations a training recipe uses (speed by resampling, additive noise at a given
SNR). Callers skip when `missing_synthesizers` names what they need."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from ..speech.audio import read_audio, resample

FLITE_VOICES = ("kal", "kal16", "awb", "rms", "slt")
ESPEAK_VOICES = ("en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-029")


def missing_synthesizers(*programs: str) -> list[str]:
    return [p for p in programs if shutil.which(p) is None]


def synthesize(text: str, voice: str, rate: int = 16000, words_per_minute: int = 0) -> np.ndarray:
    """Mono float32 samples at ``rate`` of ``text`` spoken by a voice: a flite voice name
    (`FLITE_VOICES`) or ``espeak:NAME`` (espeak-ng; ``words_per_minute`` 0 is its default)."""
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "s.wav"
        if voice.startswith("espeak:"):
            cmd = ["espeak-ng", "-v", voice.split(":", 1)[1], "-w", str(wav)]
            cmd += ["-s", str(words_per_minute)] if words_per_minute else []
            cmd.append(text)
        else:
            cmd = ["flite", "-voice", voice, "-t", text, "-o", str(wav)]
        subprocess.run(cmd, check=True, capture_output=True)
        samples, source_rate = read_audio(wav)
    return resample(samples, source_rate, rate)


def perturb(samples: np.ndarray, rng: np.random.Generator, speed: float = 1.0,
            snr_db: float | None = None) -> np.ndarray:  # fmt: skip
    """Speed perturbation (``speed`` > 1 is faster: tempo and pitch, as Kaldi's resampling
    recipe) and white noise at ``snr_db`` relative to the signal's power."""
    out = resample(samples, 16000, round(16000 / speed)) if speed != 1.0 else samples
    if snr_db is not None:
        power = float(np.mean(out**2)) or 1e-8
        noise = rng.standard_normal(out.size) * np.sqrt(power / 10 ** (snr_db / 10))
        out = np.clip(out + noise, -1.0, 1.0).astype(np.float32)
    return out


def tiny_speech_data(data: Path) -> str:
    """A copy of the shipped speech data with a 5-word LM, so that a build takes a second;
    returns the ARPA text."""
    from ..speech.graph import DATA

    data.mkdir()
    shutil.copy(DATA / "tokens.txt", data)
    words = ["he", "was", "not", "a", "man"]
    with gzip.open(DATA / "lexicon.txt.gz", "rt", encoding="utf-8") as f:
        lex = [line for line in f if line.split()[0] in words]
    (data / "lexicon.txt.gz").write_bytes(gzip.compress("".join(lex).encode()))
    uni = "\n".join(f"-1.0\t{w}" for w in [*words, "</s>"])
    arpa = f"\\data\\\nngram 1={len(words) + 2}\n\n\\1-grams:\n-99\t<s>\n{uni}\n\n\\end\\\n"
    (data / "lm.arpa.gz").write_bytes(gzip.compress(arpa.encode()))
    return arpa

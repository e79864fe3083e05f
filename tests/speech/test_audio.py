"""Audio reading and resampling (no model needed): every PCM width and channel count the standard
library writes, soundfile formats, clear errors, and a band-limited resampler."""

import wave

import numpy as np
import pytest

from wfstdecode.errors import InputFileError
from wfstdecode.speech.audio import load_audio, read_audio, resample


def write_wav(path, pcm: np.ndarray, rate: int, width: int, channels: int) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())


@pytest.mark.parametrize("width", [1, 2, 3, 4])
@pytest.mark.parametrize("channels", [1, 2])
def test_pcm_widths_and_channels(tmp_path, width, channels):
    rng = np.random.default_rng(width * 10 + channels)
    x = rng.uniform(-0.9, 0.9, (500, channels))
    scale = {1: 127, 2: 32767, 3: 2**23 - 1, 4: 2**31 - 1}[width]
    ints = np.round(x * scale).astype(np.int64)
    if width == 1:
        raw = (ints + 128).astype(np.uint8)
    elif width == 3:  # little-endian 24-bit
        b = (ints & 0xFFFFFF).astype("<u4").view(np.uint8).reshape(*ints.shape, 4)[..., :3]
        raw = np.ascontiguousarray(b)
    else:
        raw = ints.astype({2: "<i2", 4: "<i4"}[width])
    write_wav(tmp_path / "a.wav", raw, 8000, width, channels)
    samples, rate = read_audio(tmp_path / "a.wav")
    assert rate == 8000 and samples.dtype == np.float32 and samples.shape == (500,)
    np.testing.assert_allclose(samples, x.mean(axis=1), atol=2.0 / scale + 1e-6)


def test_errors_name_the_file(tmp_path):
    with pytest.raises(InputFileError, match="missing.wav"):
        read_audio(tmp_path / "missing.wav")
    bad = tmp_path / "header.wav"
    bad.write_bytes(b"RIFF\x10\x00\x00\x00WAVEjunk")
    with pytest.raises(InputFileError, match="header.wav.*not a readable PCM WAV"):
        read_audio(bad)
    text = tmp_path / "notes.txt"
    text.write_text("not audio at all")
    with pytest.raises(InputFileError, match="notes.txt"):
        read_audio(text)


def test_soundfile_formats(tmp_path):
    soundfile = pytest.importorskip("soundfile", reason="soundfile (the speech extra) reads FLAC")
    x = (0.5 * np.sin(np.arange(4000) / 7.0)).astype(np.float32)
    soundfile.write(tmp_path / "a.flac", x, 22050)
    samples, rate = read_audio(tmp_path / "a.flac")
    assert rate == 22050
    np.testing.assert_allclose(samples, x, atol=1e-4)  # FLAC at 16 bits
    assert load_audio(tmp_path / "a.flac", 16000).shape == (round(4000 * 16000 / 22050),)


@pytest.mark.parametrize("rate,new_rate", [(8000, 16000), (22050, 16000), (44100, 16000),
                                           (16000, 8000)])  # fmt: skip
def test_resample_keeps_a_tone_in_band_and_removes_one_above(rate, new_rate):
    t = np.arange(rate) / rate
    tone = np.sin(2 * np.pi * 440 * t).astype(np.float32)
    out = resample(tone, rate, new_rate)
    assert out.shape == (new_rate,)
    ref = np.sin(2 * np.pi * 440 * np.arange(new_rate) / new_rate)
    inner = slice(100, -100)  # the edges see the zeros outside the signal
    assert np.abs(out[inner] - ref[inner]).max() < 1e-3
    if new_rate < rate:  # a tone above the new Nyquist frequency must not alias into the band
        high = np.sin(2 * np.pi * 0.45 * rate * t).astype(np.float32)
        assert np.sqrt(np.mean(resample(high, rate, new_rate)[inner] ** 2)) < 1e-3


def test_resample_identity_and_empty():
    x = np.arange(10, dtype=np.float32)
    assert resample(x, 16000, 16000) is x or np.array_equal(resample(x, 16000, 16000), x)
    assert resample(np.zeros(0, np.float32), 8000, 16000).shape == (0,)


def test_wavs_the_standard_library_does_not_read_go_to_soundfile(tmp_path):
    """Float samples and WAVE_FORMAT_EXTENSIBLE (what sox, ffmpeg and DAWs write) are read
    through soundfile, not refused."""
    soundfile = pytest.importorskip("soundfile", reason="soundfile (the speech extra)")
    x = (0.5 * np.sin(np.arange(4000) / 7.0)).astype(np.float32)
    for name, kind in (("float.wav", dict(subtype="FLOAT")), ("ext.wav", dict(format="WAVEX"))):
        soundfile.write(tmp_path / name, x, 16000, **kind)
        samples, rate = read_audio(tmp_path / name)
        assert rate == 16000
        np.testing.assert_allclose(samples, x, atol=1e-4)


def test_a_truncated_wav_is_read_and_said_and_a_corrupt_rate_refused(tmp_path):
    pcm = np.arange(1000, dtype="<i2")
    write_wav(tmp_path / "a.wav", pcm, 16000, 2, 1)
    data = (tmp_path / "a.wav").read_bytes()
    (tmp_path / "cut.wav").write_bytes(data[:-500])  # 250 frames short
    with pytest.warns(UserWarning, match="cut.wav: truncated WAV: .*1,000 frames.*750"):
        samples, _ = read_audio(tmp_path / "cut.wav")
    assert samples.shape == (750,)
    for rate in (1, 999, 800_000):
        write_wav(tmp_path / "r.wav", pcm, rate, 2, 1)
        with pytest.raises(InputFileError, match=f"r.wav: sample rate {rate} Hz is outside"):
            read_audio(tmp_path / "r.wav")

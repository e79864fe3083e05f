"""Audio reading and resampling (no model needed): every PCM width and channel count the standard
library writes, soundfile formats, clear errors, and a band-limited resampler."""

import math
import wave

import numpy as np
import pytest

from wfstdecode.errors import InputFileError
from wfstdecode.speech.audio import MAX_RATE, MIN_RATE, load_audio, read_audio, resample


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


def test_resample_takes_rates_of_any_number_type():
    """The polyphase table is indexed by whole numbers: 44100.0 (a float rate) failed in the
    compiled loop; a rate that is no whole number is refused by name."""
    x = np.random.default_rng(0).uniform(-0.5, 0.5, 500).astype(np.float32)
    want = resample(x, 44100, 16000)
    assert np.array_equal(resample(x, 44100.0, np.float32(16000)), want)
    assert np.array_equal(resample(x, np.int64(44100), 16000), want)
    with pytest.raises(ValueError, match="whole numbers of Hz > 0; got 22050.5"):
        resample(x, 22050.5, 16000)


def test_resample_identity_and_empty():
    """The same rate gives the samples back as a new array (the caller's was returned: writing
    to the result wrote to it); rates are checked there too; several channels are refused (they
    were joined into one signal)."""
    x = np.arange(10, dtype=np.float32)
    same = resample(x, 16000, 16000)
    assert np.array_equal(same, x) and not np.shares_memory(same, x)
    assert resample(np.zeros(0, np.float32), 8000, 16000).shape == (0,)
    with pytest.raises(ValueError, match="got -1 and -1"):
        resample(x, -1, -1)
    with pytest.raises(ValueError, match=r"mono samples \(N,\); got shape \(5, 2\)"):
        resample(np.zeros((5, 2)), 44100, 16000)


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


def test_the_rate_bounds_themselves_are_read(tmp_path):
    """The limits are inclusive, as the error message ("outside 1,000..768,000 Hz") says."""
    pcm = np.arange(-50, 50, dtype="<i2")
    for rate in (MIN_RATE, MAX_RATE):
        write_wav(tmp_path / "a.wav", pcm, rate, 2, 1)
        samples, got = read_audio(tmp_path / "a.wav")
        assert got == rate and samples.shape == (100,)


def test_a_truncated_wav_is_said_even_one_frame_short(tmp_path):
    write_wav(tmp_path / "a.wav", np.arange(100, dtype="<i2"), 16000, 2, 1)
    data = (tmp_path / "a.wav").read_bytes()
    (tmp_path / "cut.wav").write_bytes(data[:-2])  # one 16-bit frame short
    with pytest.warns(UserWarning, match="truncated WAV: .*100 frames.*99"):
        samples, _ = read_audio(tmp_path / "cut.wav")
    assert samples.shape == (99,)


def test_float_audio_is_clipped_and_nan_refused(tmp_path):
    soundfile = pytest.importorskip("soundfile", reason="soundfile (the speech extra)")
    x = np.array([0.0, 1.5, -2.0, 0.25] * 50, np.float32)
    soundfile.write(tmp_path / "loud.wav", x, 16000, subtype="FLOAT")
    samples, _ = read_audio(tmp_path / "loud.wav")
    np.testing.assert_array_equal(samples, np.clip(x, -1.0, 1.0))
    x[7] = np.nan
    soundfile.write(tmp_path / "nan.wav", x, 16000, subtype="FLOAT")
    with pytest.raises(InputFileError, match="nan.wav: the audio holds NaN or infinite"):
        read_audio(tmp_path / "nan.wav")


def test_a_stereo_soundfile_is_mixed_down(tmp_path):
    soundfile = pytest.importorskip("soundfile", reason="soundfile (the speech extra) reads FLAC")
    left = (0.5 * np.sin(np.arange(4000) / 7.0)).astype(np.float32)
    right = (0.25 * np.cos(np.arange(4000) / 3.0)).astype(np.float32)
    soundfile.write(tmp_path / "st.flac", np.stack([left, right], 1), 16000)
    samples, _ = read_audio(tmp_path / "st.flac")
    np.testing.assert_allclose(samples, (left + right) / 2, atol=1e-4)


def _reference_resample(x: np.ndarray, rate: int, new_rate: int) -> np.ndarray:
    """The documented resampler, written plainly (one output sample at a time, float64): a
    Hann-windowed sinc at the lower Nyquist rate, the signal outside the input zero."""
    ratio = new_rate / rate
    cutoff = min(1.0, ratio)
    half = math.ceil(24 / cutoff)
    n_out = max(1, round(len(x) * ratio))
    out = np.zeros(n_out)
    for j in range(n_out):
        t = j / ratio
        for i in range(math.floor(t) - half + 1, math.floor(t) + half + 1):
            if 0 <= i < len(x):
                d = t - i
                w = 0.5 + 0.5 * math.cos(math.pi * min(1.0, abs(d) / (half + 1)))
                out[j] += x[i] * cutoff * np.sinc(cutoff * d) * w
    return out


@pytest.mark.parametrize("rate,new_rate,n", [(8000, 16000, 301), (22050, 16000, 339),
                                             (16000, 8000, 257), (44100, 16000, 500)])  # fmt: skip
def test_resample_matches_the_formula_to_the_last_sample(rate, new_rate, n):
    """Every output sample (the edges too, which the tone test leaves out), and the length
    rounded (not truncated) from n * new_rate / rate."""
    x = np.random.default_rng(n).uniform(-0.5, 0.5, n).astype(np.float32)
    out = resample(x, rate, new_rate)
    assert out.shape == (round(n * new_rate / rate),)
    np.testing.assert_allclose(out, _reference_resample(x, rate, new_rate), atol=2e-5)


@pytest.mark.parametrize("rate,new_rate,n", [(44100, 16000, 500), (15999, 16000, 300)])
def test_resample_without_a_table_of_phases_matches_the_formula(monkeypatch, rate, new_rate, n):
    """Rates whose phases would make too large a table (15999 -> 16000: 16,000 phases) take
    each output's taps as they come; the same formula either way."""
    from wfstdecode.speech import audio

    x = np.random.default_rng(n).uniform(-0.5, 0.5, n).astype(np.float32)
    with_table = resample(x, rate, new_rate)
    monkeypatch.setattr(audio, "_MAX_TAPS_TABLE", 0)
    np.testing.assert_allclose(resample(x, rate, new_rate), with_table, atol=1e-7)
    np.testing.assert_allclose(with_table, _reference_resample(x, rate, new_rate), atol=2e-5)

"""WAVs of odd forms: one whose chunks the standard library's wave cannot walk (an odd-sized
chunk before `data` without its pad byte) is an InputFileError naming the file (a bare
RuntimeError ended a whole `transcribe` run, which skips only unreadable files); one streamed
with an unknown length is read whole; one whose sizes were never written (data size 0) has its
samples read and said; one cut inside its header says so."""

import struct

import numpy as np
import pytest

from wfstdecode.errors import InputFileError
from wfstdecode.speech.audio import read_audio


def _wav_with_unpadded_odd_chunk(path):
    pcm = (np.sin(np.arange(8000) / 5) * 8000).astype("<i2").tobytes()
    fmt = struct.pack("<HHIIHH", 1, 1, 16000, 32000, 2, 16)
    body = (b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
            + b"LIST" + struct.pack("<I", 5) + b"abcde"  # odd size, no pad byte
            + b"data" + struct.pack("<I", len(pcm)) + pcm)  # fmt: skip
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return path


def test_a_wav_whose_chunks_wave_cannot_walk_is_an_input_file_error(tmp_path):
    path = _wav_with_unpadded_odd_chunk(tmp_path / "odd.wav")
    try:
        samples, rate = read_audio(path)  # (a reader that copes with the missing pad byte...
    except InputFileError as exc:
        assert "odd.wav" in str(exc)
    except Exception as exc:
        pytest.fail(f"{type(exc).__name__} {exc!r} escaped read_audio, not naming the file")
    else:  # ... is fine too, if it reads every sample: not a silently short or empty clip
        want = (np.sin(np.arange(8000) / 5) * 8000).astype("<i2") / 32768.0
        assert rate == 16000 and np.allclose(samples, want, atol=1e-4)


def test_a_streamed_wav_of_unknown_length_is_read_without_a_false_warning(tmp_path):
    """A writer that cannot seek back (a pipe) leaves the data size at 0xFFFFFFFF: the samples
    are all read, with no "truncated WAV" warning (there is nothing cut short)."""
    import warnings

    pcm = (np.sin(np.arange(8000) / 5) * 8000).astype("<i2")
    fmt = struct.pack("<HHIIHH", 1, 1, 16000, 32000, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + b"\xff" * 4
    path = tmp_path / "streamed.wav"
    path.write_bytes(b"RIFF" + b"\xff" * 4 + body + pcm.tobytes())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        samples, rate = read_audio(path)
    assert rate == 16000 and np.array_equal(samples, pcm / np.float32(32768))


def test_a_wav_cut_inside_its_header_says_so(tmp_path):
    path = tmp_path / "cut.wav"
    path.write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00")
    with pytest.raises(InputFileError, match=r"cut.wav.*not a readable PCM WAV file: \S"):
        read_audio(path)


def _wav(data_size, after_header: bytes, riff_size=None):
    fmt = struct.pack("<HHIIHH", 1, 1, 16000, 32000, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data"
    body += struct.pack("<I", data_size) + after_header
    riff = len(body) if riff_size is None else riff_size
    return b"RIFF" + struct.pack("<I", riff) + body


@pytest.mark.parametrize("riff_size", [36, 0])
def test_samples_after_a_header_never_patched_are_read_and_said(tmp_path, riff_size):
    """A recorder killed (or a writer on a pipe) before it wrote the sizes leaves data size 0
    with the samples after it: they were read as no audio at all, silently (an empty
    transcript). They are read, with a warning. With the RIFF size 0 as well the standard
    library refused the file and soundfile read no samples."""
    pcm = (np.sin(np.arange(8000) / 5) * 8000).astype("<i2")
    path = tmp_path / "unpatched.wav"
    path.write_bytes(_wav(0, pcm.tobytes(), riff_size))
    with pytest.warns(UserWarning, match="unpatched.wav: its WAV header declares no samples but "
                      "16,000 bytes"):  # fmt: skip
        samples, rate = read_audio(path)
    assert rate == 16000 and np.array_equal(samples, pcm / np.float32(32768))


@pytest.mark.parametrize("after", [b"", b"LIST" + struct.pack("<I", 5) + b"abcde\x00",
                                   b"LIST" + struct.pack("<I", 5) + b"abcde"])  # fmt: skip
def test_an_empty_data_chunk_stays_empty(tmp_path, after):
    import warnings

    path = tmp_path / "empty.wav"
    path.write_bytes(_wav(0, after))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        samples, _ = read_audio(path)
    assert samples.size == 0


@pytest.mark.parametrize("riff_size", [None, 0])
def test_float_samples_after_a_header_never_patched_are_read_and_said(tmp_path, riff_size):
    """The same for a float WAV (soundfile's, not the standard library's): libsndfile read a data
    size of 0 as no samples, so the file was refused as too short a recording."""
    pytest.importorskip("soundfile", reason="soundfile (the speech extra) reads float WAVs")
    x = (0.5 * np.sin(np.arange(4000) / 5)).astype("<f4")
    fmt = struct.pack("<HHIIHH", 3, 1, 16000, 64000, 4, 32)
    fact = b"fact" + struct.pack("<I", 4) + struct.pack("<I", 0)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + fact + b"data"
    body += struct.pack("<I", 0) + x.tobytes()
    path = tmp_path / "unpatched.wav"
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body) if riff_size is None else 0) + body)
    with pytest.warns(UserWarning, match="unpatched.wav: its WAV header declares no samples but "
                      "16,000 bytes"):  # fmt: skip
        samples, rate = read_audio(path)
    assert rate == 16000 and np.array_equal(samples, x)

"""Audio longer than the phone model's 30 s: hama 1.7.0's engine returns at most 1500 frames and
drops the rest of a longer waveform without a word, so longer audio goes through in windows."""

import numpy as np
import pytest

pytest.importorskip("hama", reason="the speech tests need PyPI hama (pip install '.[speech]')")

from wfstdecode.metrics import edit_distance
from wfstdecode.speech import HamaPhoneModel, load_audio, phone_model
from wfstdecode.speech.graph import CLIPS

CLIP = CLIPS / "sense_and_sensibility_01_austen_64kb-0870.wav"


@pytest.fixture(scope="module")
def model():
    return HamaPhoneModel()


def phones(model, log_probs) -> list[str]:
    return [p for word in model.greedy_phones(log_probs) for p in [*word, "|"]]


def test_speech_after_the_first_30_s_is_transcribed(model):
    clip = load_audio(CLIP, model.sample_rate)
    quiet = np.random.default_rng(0).uniform(-1e-3, 1e-3, 24 * model.sample_rate)
    audio = np.concatenate([quiet.astype(np.float32), clip])  # the clip ends at 31.1 s
    log_probs = model.log_probs_of(audio)
    assert len(log_probs) == audio.size // 320 + 1  # one frame per 20 ms, none dropped
    alone, found = phones(model, model.log_probs_of(clip)), phones(model, log_probs)
    assert edit_distance(alone, found) <= 0.1 * len(alone), (alone, found)


def test_windows_join_where_the_frames_belong(model, monkeypatch):
    clip = load_audio(CLIP, model.sample_rate)  # 7.1 s: 356 frames
    whole = model.log_probs_of(clip)
    monkeypatch.setattr(phone_model, "MAX_FRAMES", 120)
    monkeypatch.setattr(phone_model, "WINDOW_FRAMES", 120)
    monkeypatch.setattr(phone_model, "OVERLAP_FRAMES", 20)
    windowed = model.log_probs_of(clip)
    assert windowed.shape == whole.shape
    np.testing.assert_allclose(np.exp(windowed).sum(1), 1.0, atol=1e-3)
    # windows of 2.4 s lose a little context; a frame one place off would agree about half
    assert (windowed.argmax(1) == whole.argmax(1)).mean() > 0.85
    alone = phones(model, whole)
    assert edit_distance(phones(model, windowed), alone) <= 0.15 * len(alone)
    for n in (120 * 320 - 1, 120 * 320, 120 * 320 + 1, 200 * 320 + 7, 201 * 320 - 1):
        assert len(model.log_probs_of(clip[:n])) == n // 320 + 1

"""Transducer .npz and model files with a mistake a decode would not show: said or refused."""

import json

import numpy as np
import pytest
import torch

from wfstdecode.corpus.transducer import TransducerCorpusDecoder
from wfstdecode.errors import InputFileError
from wfstdecode.models import SpeechTransducer, load_speech_transducer
from wfstdecode.transducer.files import decode_transducer_npz, load_transducer_model


@pytest.mark.parametrize("name", ["enc", "log_probs"])
def test_a_misspelled_lengths_array_is_said(tmp_path, name):
    """'lens' is not read, so every utterance's padding is decoded: as the CTC reader does,
    say so (and name the file) instead of decoding the padding silently."""
    model = load_speech_transducer("rnnt")
    width = model.config["enc_dim"] if name == "enc" else 191
    data = np.random.default_rng(0).normal(size=(2, 6, width)).astype(np.float32)
    if name == "log_probs":
        data = data - np.log(np.exp(data).sum(-1, keepdims=True))
    path = tmp_path / "lens.npz"
    np.savez(path, **{name: data}, lens=np.array([2, 1]))
    with pytest.warns(UserWarning, match=r"lens.npz.*array 'lens' is not read.*'lengths'"):
        decode_transducer_npz(model, path)


@pytest.mark.parametrize("durations", [(0,), (1, 2**40)])
def test_a_saved_model_whose_durations_cannot_decode_is_refused_naming_it(tmp_path, durations):
    """Durations no decode takes (none positive, beyond MAX_COUNT) were loaded, then every
    decode failed with an OptionsError naming no file, and decode-corpus (greedy) started its
    workers and failed each shard instead of refusing the model in the driver."""
    torch.manual_seed(0)
    path = tmp_path / "model.npz"
    SpeechTransducer(enc_dim=16, pred_dim=8, joint_dim=8, durations=durations,
                     enc_layers=1).save(path)  # fmt: skip
    with pytest.raises(InputFileError, match=r"model.npz.*durations"):
        load_transducer_model(path)
    with pytest.raises(InputFileError, match=r"model.npz.*durations"):
        TransducerCorpusDecoder(str(path))


def test_a_tdt_corpus_line_has_durations_even_without_tokens(tmp_path):
    """decode-transducer --json gives every TDT record 'durations' (an empty list for an empty
    hypothesis); decode-corpus --transducer tdt left the key out of empty hypotheses' lines."""
    model = load_speech_transducer("tdt")
    enc = np.zeros((2, 3, model.config["enc_dim"]), np.float32)
    np.savez(tmp_path / "enc.npz", enc=enc, lengths=np.array([0, 3]))
    decoder = TransducerCorpusDecoder("tdt")
    out = decoder.load()(tmp_path / "enc.npz", "enc")
    records = [json.loads(line) for line in out.text.splitlines()]
    assert records[0]["tokens"] == []
    assert all("durations" in r for r in records), records

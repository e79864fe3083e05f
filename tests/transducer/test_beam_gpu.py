"""Beam searches on CUDA give the CPU's hypotheses (the CPU proof that their step bodies never
read a tensor on the host is in test_beam_errors.py). Run on a GPU machine with
``pytest -m gpu tests/transducer``; skipped without CUDA."""

import pytest
import torch

from wfstdecode.testing.transducer_models import planted_batch, planted_transducer
from wfstdecode.transducer import BeamOptions, beam_decode

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none found)"),
]
TDT = (0, 1, 2, 3, 4)
SEARCHES = [
    BeamOptions("standard", beam_size=4, nbest=2),
    BeamOptions("tokenwise", beam_size=4, nbest=2, segment_size=3),
    BeamOptions("maes", beam_size=4, nbest=2),
    BeamOptions("alsd", beam_size=4, nbest=2),
    BeamOptions("wind", beam_size=4, nbest=2, window=4),
    BeamOptions("alsd", beam_size=4, nbest=2, durations=TDT),
    BeamOptions("standard", beam_size=4, nbest=2, durations=TDT),
    BeamOptions("maes", beam_size=4, nbest=2, durations=TDT),
]


@pytest.mark.parametrize(
    "options",
    SEARCHES,
    ids=["standard", "tokenwise", "maes", "alsd", "wind", "tdt", "tdt-standard", "tdt-maes"],
)
def test_cuda_equals_cpu(options):
    model = planted_transducer(129, 256, 256, 256, durations=options.durations, seed=3)
    pb = planted_batch(model, 8, 80, min_frames=0, seed=3)
    want = beam_decode(model, pb.enc, pb.lengths, options)
    got = beam_decode(model.cuda(), pb.enc.cuda(), pb.lengths.cuda(), options)
    assert [[h.tokens for h in hyps] for hyps in got] == [[h.tokens for h in hyps] for hyps in want]
    assert [[h.timestamps for h in hyps] for hyps in got] == [
        [h.timestamps for h in hyps] for hyps in want
    ]
    scores = [h.score for hyps in got for h in hyps]
    assert scores == pytest.approx([h.score for hyps in want for h in hyps], abs=1e-3)

"""The planted reference models behave like trained ones (the workload the benchmarks time)."""

import torch

from wfstdecode.testing.transducer_models import (
    label_statistics,
    planted_batch,
    planted_transducer,
    random_transducer,
)
from wfstdecode.transducer import GreedyOptions, TransducerModel, greedy_decode


def _recall(hyps, planted):
    hit = total = 0
    for hyp, frames in zip(hyps, planted, strict=True):
        got = set(zip(hyp.timestamps, hyp.tokens, strict=True))
        want = {(t, k) for t, labels in enumerate(frames) for k in labels}
        hit, total = hit + len(got & want), total + len(want)
    return hit / total


def test_protocol():
    assert isinstance(random_transducer(), TransducerModel)
    assert isinstance(planted_transducer(20, 64, 64, 64), TransducerModel)


def test_planted_rnnt_statistics_are_trained_like():
    torch.set_num_threads(1)
    model = planted_transducer(64, 128, 128, 128, seed=3)
    pb = planted_batch(model, 6, 100, seed=3)
    hyps = greedy_decode(model, pb.enc, pb.lengths, GreedyOptions("wind"))
    stats = label_statistics(hyps, pb.lengths)
    assert 0.5 < 1 - stats["frames_with_labels"] < 0.9  # mostly blank frames
    assert stats["labels_in_frame"][2] > 0  # sometimes several labels in one frame
    assert stats["max_labels_in_frame"] < 10  # never runs to max_symbols_per_frame
    assert len({len(h.tokens) for h in hyps}) > 1
    assert _recall(hyps, pb.labels) > 0.7


def test_planted_tdt_statistics():
    durations = (0, 1, 2, 3, 4)
    model = planted_transducer(64, 128, 128, 128, durations=durations, seed=4)
    pb = planted_batch(model, 6, 100, seed=4)
    hyps = greedy_decode(model, pb.enc, pb.lengths, GreedyOptions(durations=durations))
    stats = label_statistics(hyps, pb.lengths)
    assert set(stats["durations"]) == set(durations)
    assert _recall(hyps, pb.labels) > 0.7


def test_label_statistics_counts():
    from wfstdecode.results import Hypothesis

    hyps = [Hypothesis(tokens=(1, 2, 3), timestamps=(0, 0, 2), score=0.0)]
    stats = label_statistics(hyps, [4])
    assert stats["labels_in_frame"] == {0: 2, 1: 1, 2: 1, "3+": 0}
    assert stats["labels_per_frame"] == 0.75 and stats["max_labels_in_frame"] == 2


def test_predict_step_equals_nn_lstm():
    model = random_transducer(vocab_size=9, pred_dim=16)
    labels = torch.tensor([3, 0, 5])
    state = tuple(torch.randn(1, 3, 16) for _ in range(2))
    with torch.no_grad():
        pred, (h, c) = model.predict(labels, state)
        out, (h2, c2) = model.lstm(model.embedding(labels).unsqueeze(0), state)
    torch.testing.assert_close(pred, out[0])
    torch.testing.assert_close((h, c), (h2, c2))

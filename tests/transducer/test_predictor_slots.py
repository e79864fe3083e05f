"""`PredictorSlots` against the predictor run from scratch on each row's label history, over
random sequences of the compiled searches' moves (rows taking other rows, rows appending
labels), with and without the slot indirection."""

import numpy as np
import pytest
import torch

from wfstdecode.testing.transducer_models import BareProtocol, random_transducer
from wfstdecode.transducer.beam.predictor_slots import PredictorSlots
from wfstdecode.transducer.model import ModelAdapter


class OwnRows(BareProtocol):
    """The same model, picking its state rows itself: no indirection."""

    def index_state(self, state, rows):
        return tuple(s.index_select(1, rows) for s in state)

    def select_state(self, mask, new, old):
        return tuple(torch.where(mask.view(1, -1, 1), n, o) for n, o in zip(new, old, strict=True))


def from_scratch(adapter, history):
    """The predictor output after the start-of-sequence blank and then ``history``."""
    state = adapter.model.init_state(1, torch.device("cpu"))
    pred, state = adapter.predict(torch.tensor([adapter.blank_id]), state)
    for label in history:
        pred, state = adapter.predict(torch.tensor([label]), state)
    return pred[0]


@pytest.mark.parametrize("own_rows", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_slots_hold_each_rows_predictor(seed, own_rows):
    inner = random_transducer(4, 6, 5, 7, seed=seed)
    model = OwnRows(inner) if own_rows else inner
    adapter = ModelAdapter(model)
    rng = np.random.default_rng(seed)
    n = 6
    slots = PredictorSlots(adapter, n)
    assert slots.indirect != own_rows
    history = [()] * n
    for _ in range(12):
        parent = rng.integers(0, n, n)  # any row may take any row, several the same one
        slots.take(parent)
        history = [history[p] for p in parent]
        fed = np.flatnonzero(rng.random(n) < 0.7)  # often most rows: slots must not run out
        labels = rng.integers(1, 4, fed.size)
        slots.feed(fed, labels)
        for r, label in zip(fed.tolist(), labels.tolist(), strict=True):
            history[r] = (*history[r], label)
        rows = np.arange(n)
        got = slots.output(rows)
        for r in rows.tolist():
            want = from_scratch(adapter, history[r])
            torch.testing.assert_close(got[r], want, rtol=1e-5, atol=1e-5)

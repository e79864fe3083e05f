"""A joint may make a move impossible (a -inf log-probability, e.g. a constraint that forbids the
blank right after some label): the beam searches then find the best of the paths that remain,
as the exhaustive enumeration does — no NaN from the token-wise search's blank sums."""

import math

import pytest
import torch

import wfstdecode.transducer.beam as beam
from wfstdecode.errors import DecodeInputError
from wfstdecode.testing.transducer_models import BareProtocol, random_transducer
from wfstdecode.testing.transducer_oracles import exhaustive_sequences
from wfstdecode.transducer import BeamOptions, beam_decode, beam_reference


class BlankForbiddenAfter(BareProtocol):
    """``inner`` with the blank impossible (-inf) right after label ``label``: the predictor's
    output carries one more column, 1 after that label."""

    def __init__(self, inner, label: int):
        super().__init__(inner)
        self.label = label

    def predict(self, labels, state):
        pred, state = self.inner.predict(labels, state)
        return torch.cat([pred, (labels == self.label).to(pred.dtype)[:, None]], 1), state

    def joint(self, enc, pred):
        logits = self.inner.joint(enc, pred[:, :-1]).clone()
        logits[pred[:, -1] > 0.5, self.blank_id] = -math.inf
        return logits


@pytest.mark.parametrize("segment_size", [2, 3])
@pytest.mark.parametrize("search", ["compiled", "tensor", "reference"])
def test_tokenwise_search_with_an_impossible_blank_finds_the_exhaustive_best(
    search, segment_size, monkeypatch
):
    model = BlankForbiddenAfter(random_transducer(3, 6, 5, 7, seed=0), label=2)
    enc = torch.randn(1, 3, 6, generator=torch.Generator().manual_seed(1000)) * 3
    options = BeamOptions("tokenwise", beam_size=600, nbest=6, length_norm=False,
                          max_symbols_per_frame=2, segment_size=segment_size)  # fmt: skip
    exact = exhaustive_sequences(model, enc[0], None, options.rounds, segment_size, "sum")
    want = sorted(((y, s) for y, s in exact.items() if s > -math.inf), key=lambda i: -i[1])[:6]
    assert any(2 in y for y, _ in want)  # paths through the constraint are among them
    monkeypatch.setattr(beam, "COMPILED_ON_CPU", search == "compiled")
    decode = beam_reference if search == "reference" else beam_decode
    got = decode(model, enc, torch.tensor([3]), options)[0]
    assert [h.tokens for h in got] == [y for y, _ in want]
    assert [h.score for h in got] == pytest.approx([s for _, s in want], abs=1e-5)


class BlankImpossibleAt(BareProtocol):
    """``inner`` with the blank impossible (-inf) at the frames whose encoder output's first
    feature is above ``above`` (whatever the label history): no path gets past them."""

    def __init__(self, inner, above: float):
        super().__init__(inner)
        self.above = above

    def joint(self, enc, pred):
        logits = self.inner.joint(enc, pred).clone()
        logits[enc[:, 0] > self.above, self.blank_id] = -math.inf
        return logits


@pytest.mark.parametrize("algorithm", ["standard", "tokenwise", "maes", "alsd", "wind"])
@pytest.mark.parametrize("compiled", [True, False])
def test_an_utterance_without_a_possible_path_is_named_as_such(algorithm, compiled, monkeypatch):
    """Finite logits whose -inf blank leaves an utterance no path to its end: the error says
    so, not that the joint returned NaN / +inf / all -inf logits (which it did not)."""
    monkeypatch.setattr(beam, "COMPILED_ON_CPU", compiled)
    enc = torch.randn(2, 5, 6, generator=torch.Generator().manual_seed(0))
    enc[:, :, 0] = 0.0
    enc[1, 2, 0] = 1.0  # utterance 1, frame 2: no blank
    model = BlankImpossibleAt(random_transducer(4, 6, 5, 7, seed=0), above=0.5)
    options = BeamOptions(algorithm, beam_size=3, max_symbols_per_frame=2)
    assert beam_reference(model, enc, torch.tensor([5, 5]), options)[1] == []
    with pytest.raises(DecodeInputError, match=r"utterance 1 reached its last frame: every path"):
        beam_decode(model, enc, torch.tensor([5, 5]), options)
    assert beam_decode(model, enc, torch.tensor([5, 2]), options)[1]  # (frame 2 not reached)

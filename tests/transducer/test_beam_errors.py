"""Beam search options that cannot work, bad inputs and bad model outputs raise clear errors;
the per-step bodies never read a tensor on the host (CPU proof, as for greedy)."""

import math

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import _disable_current_modes

import wfstdecode.transducer.beam as beam
from wfstdecode.errors import DecodeInputError, DeviceMemoryError, OptionsError
from wfstdecode.testing.host_sync import NoHostSync
from wfstdecode.testing.transducer_models import (
    planted_batch,
    planted_transducer,
    random_transducer,
)
from wfstdecode.transducer import BeamOptions, beam_decode, beam_reference
from wfstdecode.transducer.beam import alignment, rows, segment, window

ALL = [
    BeamOptions("standard", beam_size=3),
    BeamOptions("maes", beam_size=3),
    BeamOptions("tokenwise", beam_size=3, segment_size=2),
    BeamOptions("alsd", beam_size=3),
    BeamOptions("wind", beam_size=3, window=3),
    BeamOptions("alsd", beam_size=3, durations=(0, 1, 2)),
    BeamOptions("standard", beam_size=3, durations=(0, 1, 2)),
    BeamOptions("maes", beam_size=3, durations=(1, 2)),
]
ALL_IDS = ["standard", "maes", "tokenwise", "alsd", "wind", "tdt", "tdt-standard", "tdt-maes-no0"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"algorithm": "beam"}, "algorithm must be one of"),
        ({"beam_size": 0}, "beam_size"),
        ({"beam_size": True}, "beam_size"),
        ({"nbest": 5, "beam_size": 4}, "nbest=5 exceeds beam_size=4"),
        ({"length_norm": 1}, "length_norm"),
        ({"max_symbols_per_frame": 0}, "max_symbols_per_frame"),
        ({"algorithm": "alsd", "window": 4}, "window=4 is only used by algorithm 'wind'"),
        ({"algorithm": "wind", "window": 0}, "window"),
        ({"algorithm": "standard", "segment_size": 2}, "segment_size.*'tokenwise'"),
        ({"algorithm": "tokenwise", "segment_size": 1.5}, "segment_size"),
        ({"algorithm": "standard", "max_tokens": 3}, "max_tokens.*'alsd' or 'wind'"),
        ({"algorithm": "alsd", "maes_steps": 2}, "maes_steps.*'maes'"),
        ({"algorithm": "maes", "expansion_gamma": -1.0}, "expansion_gamma"),
        ({"algorithm": "maes", "expansion_gamma": math.nan}, "expansion_gamma"),
        ({"algorithm": "maes", "expansion_beta": -1}, "expansion_beta"),
        ({"algorithm": "wind", "durations": (0, 1)}, "durations.*'standard' or 'maes' or 'alsd'"),
        ({"algorithm": "tokenwise", "durations": (0, 1)}, "durations.*'alsd'"),
        ({"algorithm": "alsd", "durations": (0, 0)}, "distinct"),
        ({"algorithm": "alsd", "durations": (0,)}, "positive"),
    ],
)
def test_impossible_options_raise(kwargs, match):
    with pytest.raises(OptionsError, match=match):
        BeamOptions(**kwargs)


def test_options_are_frozen_and_derived_values():
    options = BeamOptions("maes", beam_size=4, durations=None)
    with pytest.raises(AttributeError):
        options.beam_size = 3
    assert (options.rounds, options.expansions, options.gamma) == (2, 6, 2.3)
    assert BeamOptions("tokenwise", segment_size=4, max_symbols_per_frame=2).rounds == 8
    assert BeamOptions("alsd", durations=[0, 1]).durations == (0, 1)
    assert BeamOptions("wind").effective_window == 8
    assert not BeamOptions("alsd").sums_alignments and BeamOptions("standard").sums_alignments


def test_numpy_integers_are_taken_as_ints():
    """Options read from an array (np.int64 beam, durations as an np.array) are Python ints."""
    options = BeamOptions("alsd", beam_size=np.int64(3), nbest=np.int32(2),
                          durations=np.array([0, 1, 2]))  # fmt: skip
    assert (options.beam_size, options.nbest, options.durations) == (3, 2, (0, 1, 2))
    assert all(type(x) is int for x in (options.beam_size, *options.durations))
    with pytest.raises(OptionsError, match="beam_size"):
        BeamOptions(beam_size=np.bool_(True))
    with pytest.raises(OptionsError, match="durations"):
        BeamOptions(durations=np.array([0.0, 1.0]))
    gamma = BeamOptions("maes", expansion_gamma=np.float32(1.5)).expansion_gamma
    assert gamma == 1.5 and type(gamma) is float  # (np.float32 was refused, np.float64 taken)
    with pytest.raises(OptionsError, match="expansion_gamma"):
        BeamOptions("maes", expansion_gamma=np.bool_(True))


def test_a_blank_outside_the_model_and_a_tdt_model_without_durations_are_named():
    from wfstdecode.models import load_speech_transducer

    model, enc = random_transducer(4, 6, 5, 7, seed=0), torch.randn(1, 4, 6)
    model.blank_id = 40  # beyond its embedding: torch's bare IndexError before
    with pytest.raises(DecodeInputError, match="blank label, blank_id 40"):
        beam_decode(model, enc, [4], BeamOptions("alsd"))
    tdt = load_speech_transducer("tdt")
    enc = torch.zeros(1, 4, tdt.encode(torch.zeros(1, 4, 191), torch.tensor([4]))[0].shape[-1])
    with pytest.raises(DecodeInputError, match=r"pass durations=\(0, 1, 2, 3, 4\)"):
        beam_decode(tdt, enc, [4], BeamOptions("alsd"))


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (BeamOptions("alsd", beam_size=2**31 - 1), "lower beam_size"),
        (BeamOptions("maes", expansion_beta=2**31 - 1), "lower beam_size or expansion_beta"),
        (BeamOptions("wind", beam_size=2**30, window=4), "lower beam_size or window"),
    ],
)
def test_a_search_bigger_than_memory_is_refused_by_name(options, named):
    """Options no machine holds raise before anything is allocated, naming what to lower."""
    model = random_transducer(vocab_size=5, enc_dim=6, n_durations=len(options.durations or ()))
    with pytest.raises(DeviceMemoryError, match=f"beam search's buffers.*{named}"):
        beam_decode(model, torch.randn(2, 5, 6), torch.tensor([5, 3]), options)


def test_an_alsd_tdt_search_with_a_long_duration_runs():
    """ALSD holds no landing buffer: a duration past every frame costs it nothing."""
    model = random_transducer(vocab_size=5, enc_dim=6, n_durations=3)
    options = BeamOptions("alsd", durations=(0, 1, 2**31 - 1))
    assert len(beam_decode(model, torch.randn(2, 5, 6), torch.tensor([5, 3]), options)) == 2


@pytest.mark.parametrize("algorithm", ["standard", "maes"])
def test_a_summing_tdt_search_with_a_duration_past_every_frame_runs(algorithm, monkeypatch):
    """A duration of T frames or more lands past the end from any frame: the summing searches
    hold landing mass at most T frames ahead, so 2**31 - 1 decodes as T does (it was refused
    as a buffer of 2**31 frames, and 10**6 frames took minutes), the compiled search, the tensor
    search and the reference alike; only the durations reported differ."""
    model = random_transducer(vocab_size=5, enc_dim=6, n_durations=3, seed=3)
    enc, lengths = torch.randn(3, 5, 6, generator=torch.Generator().manual_seed(3)) * 3, [5, 2, 4]
    far, at_t = (0, 2**31 - 1, 1), (0, 5, 1)  # (the far one first: not the last index)
    want = beam_reference(model, enc, lengths, BeamOptions(algorithm, beam_size=3, nbest=3,
                                                           durations=at_t))  # fmt: skip
    options = BeamOptions(algorithm, beam_size=3, nbest=3, durations=far)
    for compiled in (True, False, None):
        monkeypatch.setattr(beam, "COMPILED_ON_CPU", bool(compiled))
        search = beam_reference if compiled is None else beam_decode
        got = search(model, enc, torch.tensor(lengths), options)
        for g, w in zip(got, want, strict=True):
            assert [(h.tokens, h.timestamps) for h in g] == [(h.tokens, h.timestamps) for h in w]
            assert [h.score for h in g] == pytest.approx([h.score for h in w], abs=1e-5)
            assert [[at_t[far.index(d)] for d in h.durations] for h in g] == [
                list(h.durations) for h in w
            ]


def test_notes_say_the_segment_and_window_run():
    model = random_transducer(vocab_size=5, enc_dim=6)
    enc, lengths = torch.randn(1, 5, 6), torch.tensor([5])
    tokenwise = beam_decode(model, enc, lengths, BeamOptions("tokenwise", segment_size=100))
    wind = beam_decode(model, enc, lengths, BeamOptions("wind", window=100))
    assert "segment_size=5" in tokenwise[0][0].notes and "window=5" in wind[0][0].notes


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("options", [BeamOptions("tokenwise", beam_size=2, nbest=2, segment_size=4),
                                     BeamOptions("wind", beam_size=2, nbest=2, window=4)],
                         ids=["tokenwise", "wind"])  # fmt: skip
def test_notes_of_an_utterance_do_not_depend_on_its_batch(options, compiled, monkeypatch):
    """An utterance's hypotheses, notes included, are those it gets alone: the segment or
    window noted is the one its own frames cut it to, not the batch's longest (they said
    segment_size=4 in a batch of 8 frames, segment_size=2 alone)."""
    monkeypatch.setattr(beam, "COMPILED_ON_CPU", compiled)
    model = random_transducer(vocab_size=5, enc_dim=6, seed=3)
    enc, lengths = torch.randn(3, 8, 6, generator=torch.Generator().manual_seed(3)), [8, 2, 0]
    batched = beam_decode(model, enc, torch.tensor(lengths), options)
    for b, n in enumerate(lengths):
        alone = beam_decode(model, enc[b : b + 1, :n], torch.tensor([n]), options)[0]
        assert [(h.tokens, h.notes) for h in batched[b]] == [(h.tokens, h.notes) for h in alone]
    assert batched[0][0].notes[-1].endswith("=4") and batched[1][0].notes[-1].endswith("=2")


@pytest.fixture(scope="module")
def model():
    return random_transducer(vocab_size=12, enc_dim=24)


def test_bad_inputs_raise_as_for_greedy(model):
    enc, lengths = torch.randn(2, 7, 24), torch.full((2,), 7)
    with pytest.raises(DecodeInputError, match=r"enc must be a tensor \(B, T, D\)"):
        beam_decode(model, enc[0], lengths)
    with pytest.raises(DecodeInputError, match="enc_lengths must lie in"):
        beam_decode(model, enc, torch.tensor([7, 8]))
    bad = enc.clone()
    bad[1, 3, 5] = math.nan
    with pytest.raises(DecodeInputError, match=r"frame 3 of utterance 1"):
        beam_decode(model, bad, lengths)
    with pytest.raises(OptionsError, match="options must be BeamOptions"):
        beam_decode(model, enc, lengths, {"beam_size": 4})
    with pytest.raises(DecodeInputError, match="joint width"):
        beam_decode(model, enc, lengths, BeamOptions("alsd", durations=(0, 1, 2)))
    assert beam_decode(model, enc[:0], lengths[:0]) == []


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_unusual_enc_and_lengths_decode_or_are_named(model):
    """Every decoder, the reference ones too, takes lengths as lists and NumPy arrays of any
    integer type and byte order (and whole numbers, as decode_ctc does), and names what it
    cannot take (nested or sparse enc, masked,
    complex or bool lengths) instead of failing inside torch or decoding the wrong frames."""
    from wfstdecode.transducer import greedy_decode, greedy_reference

    enc, lengths = torch.randn(2, 7, 24), torch.tensor([7, 5])
    decoders = [greedy_decode, greedy_reference,
                lambda m, e, n: beam_decode(m, e, n, BeamOptions(beam_size=2)),
                lambda m, e, n: beam_reference(m, e, n, BeamOptions(beam_size=2))]  # fmt: skip
    for decode in decoders:
        want = decode(model, enc, lengths)
        for given in ([7, 5], np.array([7, 5], ">i8"), np.array([7, 5], np.uint8), [7.0, 5.0]):
            assert decode(model, enc, given) == want
        assert decode(model, enc[:0], []) == []
        for bad, says in [([-1, 5], r"enc_lengths must lie in \[0, T=7\]"),
                          ([7, True], "integers, not bools"),
                          (np.ma.masked_array([7, 5], [False, True]), "masked array"),
                          (torch.tensor([7 + 0j, 5 + 0j]), "integer tensor; got torch.complex"),
                          (np.array([2**64 - 1, 5], np.uint64), r"enc_lengths\[0\] = 18446"),
                          ([2**64, 5], r"= 18446744073709551616 is beyond any T"),
                          ([7.5, 5], "integers"),
                          (torch.tensor([7, 5]).to_sparse(), "dense")]:  # fmt: skip
            with pytest.raises(DecodeInputError, match=says):
                decode(model, enc, bad)
        with pytest.raises(DecodeInputError, match="dense .* got a nested one"):
            decode(model, torch.nested.nested_tensor([enc[0], enc[1, :5]]), lengths)
        with pytest.raises(DecodeInputError, match="got a torch.sparse_coo one"):
            decode(model, enc.to_sparse(), lengths)


class Poisoned(torch.nn.Module):
    """The model, with NaN in one logit of the joint from its n-th call on."""

    def __init__(self, inner, from_call):
        super().__init__()
        self.inner, self.from_call, self.calls = inner, from_call, 0
        self.blank_id, self.vocab_size = inner.blank_id, inner.vocab_size
        self.state_batch_dim = inner.state_batch_dim

    def init_state(self, batch_size, device):
        return self.inner.init_state(batch_size, device)

    def predict(self, labels, state):
        return self.inner.predict(labels, state)

    def joint(self, enc, pred):
        self.calls += 1
        logits = self.inner.joint(enc, pred)
        if self.calls >= self.from_call:
            logits = logits.clone()
            logits[:, 1] = math.nan
        return logits


@pytest.mark.parametrize("options", ALL, ids=ALL_IDS)
def test_non_finite_logits_raise(options):
    inner = random_transducer(vocab_size=6, enc_dim=24, n_durations=len(options.durations or ()))
    enc, lengths = torch.randn(2, 6, 24), torch.tensor([6, 4])
    with pytest.raises(DecodeInputError, match="non-finite logits.*beam search of utterance"):
        beam_decode(Poisoned(inner, from_call=3), enc, lengths, options)


class Reshaping(Poisoned):
    """The model, whose predictor returns a state of another width from its n-th call on."""

    def __init__(self, inner, from_call):
        super().__init__(inner, from_call)
        self.predicts = 0

    def predict(self, labels, state):
        self.predicts += 1
        out, (h, c) = self.inner.predict(labels, state)
        if self.predicts >= self.from_call:
            h = h[..., :-1]
        return out, (h, c)

    def joint(self, enc, pred):
        return self.inner.joint(enc, pred)


@pytest.mark.parametrize("from_call", [1, 2, 3])
@pytest.mark.parametrize("options", ALL, ids=ALL_IDS)
def test_a_predictor_state_of_another_shape_raises(options, from_call):
    """Every search, on the CPU (the compiled forms write predictor rows in place) and in the
    tensor form, names the state shapes instead of failing inside torch."""
    inner = random_transducer(vocab_size=6, enc_dim=24, n_durations=len(options.durations or ()))
    enc, lengths = torch.randn(2, 6, 24), torch.tensor([6, 4])
    for compiled in (True, False):
        beam.COMPILED_ON_CPU = compiled
        try:
            with pytest.raises(DecodeInputError, match="state tensor of shape .* must keep"):
                beam_decode(Reshaping(inner, from_call), enc, lengths, options)
        finally:
            beam.COMPILED_ON_CPU = True


@pytest.mark.parametrize("options", ALL, ids=ALL_IDS)
def test_search_bodies_never_sync(options, monkeypatch):
    """Everything between the loop flags runs under a mode that raises on host syncs (the
    predictor runs on all rows, as it does on CUDA)."""

    def flag(value):
        with _disable_current_modes():
            return bool(value)

    for module in (alignment, segment, window):
        monkeypatch.setattr(module, "host_flag", flag)
    monkeypatch.setattr(rows, "COMPACT_ON_CPU", False)
    monkeypatch.setattr(beam, "COMPILED_ON_CPU", False)  # the tensor search, as on CUDA
    results = rows.BeamRows.results

    def unchecked_results(self, *args, **kwargs):
        with _disable_current_modes():
            return results(self, *args, **kwargs)

    monkeypatch.setattr(rows.BeamRows, "results", unchecked_results)
    model = planted_transducer(30, 64, 64, 64, durations=options.durations, seed=5)
    pb = planted_batch(model, 4, 30, min_frames=0, seed=5)
    with NoHostSync():
        got = beam_decode(model, pb.enc, pb.lengths, options)
    want = beam_reference(model, pb.enc, pb.lengths, options)
    assert [[h.tokens for h in hyps] for hyps in got] == [[h.tokens for h in hyps] for hyps in want]


@pytest.mark.parametrize("algorithm", ["tokenwise", "wind"])
def test_for_model_names_searches_that_do_not_decode_tdt(algorithm):
    with pytest.raises(OptionsError, match="does not decode TDT models"):
        BeamOptions(algorithm).for_model((0, 1, 2))
    assert BeamOptions(algorithm).for_model(()).durations is None


def test_a_blank_id_naming_a_duration_column_is_refused():
    """A TDT joint is vocab + len(durations) wide: blank_id == vocab passes a width check but
    names the first duration column."""
    model = random_transducer(5, 6, 5, 7, n_durations=2, seed=0, blank_id=4)  # joint width 7
    model.vocab_size = None  # (the width decides the vocabulary: 7 - 3 durations = 4)
    with pytest.raises(DecodeInputError, match=r"blank_id 4 is outside the vocabulary \[0, 4\)"):
        beam_decode(model, torch.randn(1, 4, 6), [4], BeamOptions("alsd", durations=(0, 1, 2)))


@pytest.mark.parametrize("search", [beam_decode, beam_reference])
def test_bool_length_tensors_are_refused(search):
    """True would read as 1 frame (bool lists are refused by refuse_misread; tensors here)."""
    model = random_transducer(5, 6, 5, 7, seed=0)
    with pytest.raises(DecodeInputError, match="enc_lengths must be an integer tensor"):
        search(model, torch.randn(2, 7, 6), torch.tensor([True, True]),
               BeamOptions("alsd", beam_size=2))  # fmt: skip

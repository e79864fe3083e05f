"""Bad input gives a clear DecodeInputError; edge cases give the documented result."""

import math

import numpy as np
import pytest

from wfstdecode import DecodeInputError, OptionsError
from wfstdecode.ctc import decode_ctc
from wfstdecode.decoding_graph import DecodingGraph
from wfstdecode.fstio import FstArrays
from wfstdecode.testing import lexicon_graph, random_graph, random_log_probs

BACKENDS = ["reference", "cpu"]


@pytest.fixture(scope="module")
def graph():
    return random_graph(3)


@pytest.fixture(scope="module")
def lp(graph):
    return random_log_probs(0, 2, 6, graph.num_tokens)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda lp: lp[0], r"\(B, T, V\); got shape \(6, 6\)"),
        (lambda lp: lp[None], r"got shape \(1, 2, 6, 6\)"),
        (lambda lp: lp.astype(np.int32), "floating point.*int32"),
        (lambda lp: lp[:, :, :-1], "V=5 columns but the graph's token table has 6"),
        (lambda lp: np.concatenate([lp, lp[:, :, :1]], 2), "V=7"),
        (lambda lp: "abc", "floating point"),
    ],
)
def test_bad_log_probs(graph, lp, make, match):
    with pytest.raises(DecodeInputError, match=match):
        decode_ctc(make(lp), None, graph)


@pytest.mark.parametrize(
    ("lengths", "match"),
    [
        ([7, 6], r"lengths\[0\] = 7 is outside 0..T=6"),
        ([3, -1], r"lengths\[1\] = -1"),
        ([3], r"lengths must have shape \(2,\)"),
        ([[3, 3]], "shape"),
        ([2.5, 3], "integers"),
    ],
)
def test_bad_lengths(graph, lp, lengths, match):
    with pytest.raises(DecodeInputError, match=match):
        decode_ctc(lp, np.array(lengths), graph)


@pytest.mark.parametrize(("value", "what"), [(np.nan, "NaN"), (np.inf, r"\+inf")])
def test_nan_and_inf_rows_named(graph, lp, value, what):
    bad = lp.copy()
    bad[1, 4, 2] = value
    with pytest.raises(DecodeInputError, match=rf"log_probs\[1, 4\] contains {what}"):
        decode_ctc(bad, None, graph)
    # beyond the utterance's length the values are never read
    decode_ctc(bad, [6, 4], graph)


def test_float64_beyond_float32_named(graph, lp):
    """The search reads float32: a finite float64 log-prob above its range is named as such
    (not as the +inf it would become); below it, it is a probability of zero, and past the
    utterance's length nothing is read."""
    wide = lp.astype(np.float64)
    wide[1, 3, 2] = 1e300
    with pytest.raises(DecodeInputError, match=r"log_probs\[1, 3, 2\] = 1e\+300 is beyond float32"):
        decode_ctc(wide, None, graph)
    decode_ctc(wide, [6, 3], graph)
    wide[1, 3, 2] = -1e300
    assert decode_ctc(wide, None, graph) == decode_ctc(
        np.where(wide < -1e300 / 2, -np.inf, wide).astype(np.float32), None, graph
    )
    wide[1, 3] = -1e300  # a whole frame below: named as such, not as "-inf in every column"
    with pytest.raises(DecodeInputError, match=r"log_probs\[1, 3, 0\] = -1e\+300 is beyond"):
        decode_ctc(wide, None, graph)


def test_all_minus_inf_row(graph, lp):
    bad = lp.copy()
    bad[0, 2] = -np.inf
    with pytest.raises(DecodeInputError, match=r"log_probs\[0, 2\] is -inf in every column"):
        decode_ctc(bad, None, graph)


def test_partial_minus_inf_is_fine(graph, lp):
    ok = lp.copy()
    ok[:, :, 3] = -np.inf
    for backend in BACKENDS:
        hyps = decode_ctc(ok, None, graph, backend=backend)
        assert all(3 not in h[0].tokens for h in hyps)


def test_bad_options_and_graph(graph, lp):
    with pytest.raises(OptionsError):
        decode_ctc(lp, None, graph, options={"beam": 3})
    with pytest.raises(DecodeInputError, match="DecodingGraph"):
        decode_ctc(lp, None, "TLG.fst")


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_batch_returns_empty_list(graph, backend):
    assert decode_ctc(np.zeros((0, 5, graph.num_tokens), np.float32), None, graph,
                      backend=backend) == []  # fmt: skip
    assert decode_ctc(np.zeros((0, 0, graph.num_tokens)), np.zeros(0, np.int64), graph,
                      backend=backend) == []  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_length_utterance(backend):
    g = lexicon_graph(["ab", "ba"])
    lp = random_log_probs(1, 2, 4, g.num_tokens)
    hyps = decode_ctc(lp, [0, 4], g, backend=backend)
    h = hyps[0][0]
    assert h.tokens == () and h.words == () and h.score == 0.0 and h.notes == ()
    assert hyps[1][0].tokens


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_final_state_falls_back_with_a_note(backend):
    g = lexicon_graph(["ab", "ba"])
    lp = np.full((1, 3, g.num_tokens), -20.0, np.float32)
    a = g.tokens.id("a")
    lp[0, :, a] = 0.0  # "a" throughout: the graph is mid-word at the end
    (h,) = decode_ctc(lp, None, g, backend=backend)[0]
    assert h.words == ("ab",) and h.tokens == (a,)
    assert "no final state" in h.notes[0]
    assert math.isfinite(h.score)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dead_search_returns_minus_inf_with_a_note(backend):
    # a graph that can only read token 1; the log-probs make token 1 impossible at frame 1
    fst = FstArrays(0, np.array([0.0], np.float32), np.array([0]), np.array([0]),
                    np.array([2]), np.array([0]), np.array([0.0]))  # fmt: skip
    g = DecodingGraph.from_arrays(fst)
    lp = np.zeros((1, 3, 2), np.float32)
    lp[0, 1, 1] = -np.inf
    (h,) = decode_ctc(lp, None, g, backend=backend)[0]
    assert h.score == -math.inf and h.tokens == ()
    assert "died at frame 1" in h.notes[0]


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_torch_input_matches_numpy(graph, lp):
    torch = pytest.importorskip("torch")
    want = decode_ctc(lp, [6, 3], graph, backend="cpu")
    got = decode_ctc(torch.from_numpy(lp).double(), torch.tensor([6, 3]), graph, backend="cpu")
    assert got == want
    got16 = decode_ctc(torch.from_numpy(lp).to(torch.bfloat16), None, graph, backend="cpu")
    assert len(got16) == 2
    with pytest.raises(DecodeInputError, match="floating point"):
        decode_ctc(torch.zeros(2, 6, 6, dtype=torch.int64), None, graph)
    # a negated view (the neg bit NumPy cannot take) decodes as its values do
    negated = torch.complex(torch.zeros(2, 6, 6), -torch.from_numpy(lp)).conj().imag
    assert negated.is_neg() and decode_ctc(negated, [6, 3], graph, backend="cpu") == want
    with pytest.raises(DecodeInputError, match="nested tensor: pad it"):
        decode_ctc(torch.nested.nested_tensor([torch.from_numpy(lp[0]), torch.from_numpy(lp[1])]),
                   None, graph)  # fmt: skip


def test_masked_arrays_and_bool_lengths_are_refused(graph, lp):
    """A mask the search would ignore, a bool NumPy would read as 1: named, not decoded."""
    with pytest.raises(DecodeInputError, match="log_probs is a masked array"):
        decode_ctc(np.ma.masked_array(lp, np.isnan(lp)), None, graph)
    with pytest.raises(DecodeInputError, match="lengths is a masked array"):
        decode_ctc(lp, np.ma.masked_array([6, 4], [False, True]), graph)
    with pytest.raises(DecodeInputError, match=r"lengths\[1\] = True"):
        decode_ctc(lp, [6, True], graph)

"""T accepts exactly the CTC alignments (normal), the compact superset, or the minimal rules —
checked by enumerating every frame sequence over tiny alphabets."""

import itertools

import pynini
import pytest

from wfstdecode.errors import GraphError
from wfstdecode.graph import ctc_topology
from wfstdecode.graph.ops import to_pynini
from wfstdecode.testing.oracles import linear_acceptor, paths


def ctc_collapse(frames, blank):
    out, prev = [], None
    for f in frames:
        if f != blank and f != prev:
            out.append(f)
        prev = f
    return tuple(out)


def compact_outputs(frames, blank):
    """Every run of k identical tokens (no blank between) may read as 1..k tokens."""
    outs = {()}
    for token, run in itertools.groupby(frames):
        if token == blank:
            continue
        k = len(list(run))
        outs = {o + (token,) * m for o in outs for m in range(1, k + 1)}
    return outs


def outputs_of(t, frames):
    """All output label sequences T gives for this input sequence."""
    result = pynini.compose(linear_acceptor(frames), t).project("output").rmepsilon()
    if result.start() == pynini.NO_STATE_ID:
        return set()
    return {tuple(olabels) for _, olabels, _ in paths(result)}


@pytest.mark.parametrize("num_tokens,blank_id", [(3, 0), (4, 0), (3, 2)])
@pytest.mark.parametrize("kind", ["normal", "compact", "minimal"])
def test_topology_transduces_exactly_the_ctc_rules(kind, num_tokens, blank_id):
    t = to_pynini(ctc_topology(num_tokens, kind, blank_id)).arcsort("ilabel")
    labels = range(1, num_tokens + 1)  # token id + 1
    blank = blank_id + 1
    checked = 0
    for length in range(1, 6):
        for frames in itertools.product(labels, repeat=length):
            got = outputs_of(t, frames)
            if kind == "normal":
                expected = {ctc_collapse(frames, blank)}
            elif kind == "compact":
                expected = compact_outputs(frames, blank)
            else:
                expected = {tuple(f for f in frames if f != blank)}
            assert got == expected, (kind, frames)
            checked += 1
    assert checked == sum(num_tokens**n for n in range(1, 6))


def test_normal_topology_is_a_function_and_compact_is_a_strict_superset():
    normal = to_pynini(ctc_topology(3, "normal")).arcsort("ilabel")
    compact = to_pynini(ctc_topology(3, "compact")).arcsort("ilabel")
    frames = (2, 2, 3, 3)  # tokens a a b b without blanks
    assert outputs_of(normal, frames) == {(2, 3)}
    assert outputs_of(compact, frames) == {(2, 3), (2, 2, 3), (2, 3, 3), (2, 2, 3, 3)}


def test_disambiguation_self_loops_on_every_state():
    for kind in ("normal", "compact", "minimal"):
        t = ctc_topology(5, kind, num_disambig=3)
        disambig = t.ilabel > 5
        assert (t.src[disambig] == t.dst[disambig]).all()
        assert (t.ilabel[disambig] == t.olabel[disambig]).all()
        assert disambig.sum() == 3 * t.num_states


def test_sizes_follow_the_topology():
    v = 30
    assert ctc_topology(v, "normal").num_arcs == 1 + (v - 1) + (v - 1) + (v - 1) + (v - 1) * (v - 2)
    assert ctc_topology(v, "compact").num_arcs == 1 + 3 * (v - 1)
    assert ctc_topology(v, "minimal").num_arcs == v


def test_bad_topology_arguments():
    with pytest.raises(GraphError, match="topology must be one of"):
        ctc_topology(3, "fancy")
    with pytest.raises(GraphError, match="blank id"):
        ctc_topology(3, "normal", blank_id=3)

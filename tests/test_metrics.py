"""The alignment behind the benchmarks' error splits: one minimum-edit alignment, as many
edits as `edit_distance` counts, and both sequences read back in order."""

import numpy as np
import pytest

from wfstdecode.metrics import alignment, edit_distance


@pytest.mark.parametrize("seed", range(20))
def test_alignment_is_a_minimum_edit_alignment(seed):
    rng = np.random.default_rng(seed)
    ref = rng.choice(list("abcd"), size=int(rng.integers(0, 9))).tolist()
    hyp = rng.choice(list("abcd"), size=int(rng.integers(0, 9))).tolist()
    pairs = alignment(ref, hyp)
    assert [r for r, _ in pairs if r is not None] == ref
    assert [h for _, h in pairs if h is not None] == hyp
    assert sum(r != h for r, h in pairs) == edit_distance(ref, hyp)


def test_alignment_prefers_a_substitution_to_an_insertion_and_a_deletion():
    assert alignment(["a", "b"], ["a", "c"]) == [("a", "a"), ("b", "c")]
    assert alignment([], ["x"]) == [(None, "x")] and alignment(["x"], []) == [("x", None)]

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


def test_word_error_rate_is_over_the_reference_words_and_pairs_every_utterance():
    from wfstdecode.metrics import word_error_rate

    assert word_error_rate([["a", "b", "c", "d"]], [["a"]]) == 0.75  # 3 deletions of 4
    assert word_error_rate([["a"]], [["a", "x", "y"]]) == 2.0  # insertions count too
    assert word_error_rate([["a"], ["b", "c"]], [["a"], ["b", "x"]]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError):  # a missing hypothesis: not a shorter corpus
        word_error_rate([["a"], ["b"]], [["a"]])


def test_alignment_ties_put_the_insertion_first():
    """Of the minimum-edit alignments, always the same one (the benchmarks' error splits do
    not move between runs): here the insertion before the matches, the deletion after."""
    assert alignment(list("aba"), list("bab")) == [(None, "b"), ("a", "a"), ("b", "b"),
                                                   ("a", None)]  # fmt: skip

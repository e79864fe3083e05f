"""The alignment behind the benchmarks' error splits: one minimum-edit alignment, as many
edits as `edit_distance` counts, and both sequences read back in order."""

import numpy as np
import pytest

from wfstdecode.metrics import alignment, edit_distance
from wfstdecode.results import Hypothesis


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


def test_hypothesis_refuses_durations_not_aligned_with_tokens():
    """results.py:283 the durations check dropped."""
    with pytest.raises(ValueError, match="2 tokens but 2 timestamps and 1 durations"):
        Hypothesis((1, 2), (0, 1), 0.0, durations=(1,))
    assert Hypothesis((1, 2), (0, 1), 0.0, durations=(1, 0)).durations == (1, 0)


def test_hypothesis_refuses_a_word_ending_one_frame_before_it_starts():
    """results.py:291 `start > end` -> `start > end + 1`."""
    with pytest.raises(ValueError, match="start <= end"):
        Hypothesis((), (), 0.0, words=("a",), word_timestamps=((3, 2),))
    Hypothesis((), (), 0.0, words=("a",), word_timestamps=((3, 3),))


def test_word_times_end_at_the_end_of_the_last_frame():
    """results.py:313 `(end + 1) * frame_shift` -> `end * frame_shift`."""
    hyp = Hypothesis((), (), 0.0, words=("a", "b"), word_timestamps=((0, 0), (2, 4)))
    assert hyp.record(0.04)["words"] == [
        {"word": "a", "start_frame": 0, "end_frame": 0, "start": 0.0, "end": 0.04},
        {"word": "b", "start_frame": 2, "end_frame": 4, "start": 0.08, "end": 0.2},
    ]


def test_json_scores_write_no_negative_zero():
    """An all-blank hypothesis scores -1e-5, rounded to -0.0: `transcribe --json` printed
    "score": -0.0 where the text outputs print 0.000 (`finite_or_none`)."""
    import json
    import math

    from wfstdecode.results import finite_or_none

    assert json.dumps(finite_or_none(round(-1e-5, 3))) == "0.0"
    assert finite_or_none(-1.5) == -1.5 and finite_or_none(math.inf) is None
    assert finite_or_none(None) is None

"""tools/fuzz_transducer_beam.py (a script: imported from its folder) fails a campaign on a
wrong hypothesis, and counts as a tie only what the n-best shows is one."""

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import fuzz_transducer_beam as fuzz

from wfstdecode.results import Hypothesis


def _hyps():
    return [[Hypothesis((1, 2), (0, 1), -1.0), Hypothesis((2,), (1,), -2.0)]]


def test_a_wrong_time_or_duration_with_the_right_score_is_a_difference():
    want = _hyps()
    moved = [[replace(want[0][0], timestamps=(0, 2)), want[0][1]]]
    assert fuzz.differ(moved, want)[0] == "difference"
    other = [[want[0][0], replace(want[0][1], tokens=(1,))]]
    assert fuzz.differ(other, want)[0] == "difference"
    assert fuzz.differ(want, _hyps()) is None


def test_hypotheses_of_equal_scores_in_another_order_are_a_tie():
    a, b = Hypothesis((1, 2), (0, 1), -1.0), Hypothesis((2,), (1,), -1.0)
    assert fuzz.differ([[b, a]], [[a, b]])[0] == "tie"


def test_a_campaign_with_wrong_times_fails(monkeypatch, capsys):
    real = fuzz.beam_decode

    def shifted(model, enc, lengths, options):  # the compiled form (the first call) is wrong
        out = real(model, enc, lengths, options)
        if not fuzz.beam_package.COMPILED_ON_CPU:
            return out
        return [[replace(h, timestamps=tuple(t + 1 for t in h.timestamps)) for h in hs]
                for hs in out]  # fmt: skip

    monkeypatch.setattr(fuzz, "beam_decode", shifted)
    assert fuzz.main(["--seconds", "1"]) == 1
    assert "compiled vs reference" in capsys.readouterr().out


def test_a_wrong_hypothesis_inside_a_whole_tie_is_a_difference():
    """A tie of two hypotheses followed by a worse one is whole in the list: a search that
    returns one of the two with a wrong time is wrong, though a tie is in the list."""
    a, b = Hypothesis((1, 2), (0, 1), -1.0), Hypothesis((2,), (1,), -1.0)
    c = Hypothesis((3,), (2,), -2.0)
    moved = replace(a, timestamps=(0, 2))
    assert fuzz.differ([[b, moved, c]], [[a, b, c]])[0] == "difference"
    assert fuzz.differ([[b, a, c]], [[a, b, c]])[0] == "tie"
    # at the list's end the tie may go on past the n-best cut: another of that score is a tie
    d = Hypothesis((4,), (0,), -2.0)
    assert fuzz.differ([[a, c, d]], [[a, d, c]])[0] == "tie"
    assert fuzz.differ([[b, a, replace(c, tokens=(5,))]], [[a, b, c]])[0] == "difference"

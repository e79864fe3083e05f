"""The cpu backend's record collection (`CpuTuning.collect_records_at`): backpointer records no
surviving token traces back through are dropped and the prefix all survivors share is moved out
of the store, as the search goes. It must never change a result: collecting after every frame
gives exactly the reference decoder's hypotheses (paths, frames, scores)."""

import numpy as np
import pytest

from wfstdecode.ctc import CpuTuning, CtcBeamOptions, decode_ctc
from wfstdecode.testing import lexicon_graph, random_graph, random_log_probs, simulate_ctc

OPTIONS = [
    CtcBeamOptions(beam=8.0, nbest=4),
    CtcBeamOptions(beam=5.0, max_active=4, min_active=2, nbest=3),
    CtcBeamOptions(beam=float("inf"), nbest=2),
]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("opts", OPTIONS, ids=["beam8", "max_active4", "beam_inf"])
def test_collecting_after_every_frame_equals_the_reference(seed, opts):
    g = random_graph(seed, num_states=30, eps_arcs_per_state=1.5, word_prob=0.5)
    lp = random_log_probs(seed, 3, 30, g.num_tokens)
    want = decode_ctc(lp, None, g, opts, backend="reference")
    for at in (1, 2, 7):
        got = decode_ctc(lp, None, g, opts, backend="cpu", tuning=CpuTuning(collect_records_at=at))
        assert got == want, (seed, at)


def test_a_long_utterance_collected_often_decodes_as_without_collection():
    """5,000 frames of a lexicon graph, with its word-end epsilon arcs: collected at 64 records
    (hundreds of times) and never collected give the same hypotheses, paths included."""
    words = ["cat", "cap", "act", "tact", "pat", "apt", "tapa"]
    g = lexicon_graph(words, word_cost=[1.0, 1.2, 2.0, 2.5, 1.1, 2.2, 2.4])
    rng = np.random.default_rng(0)
    text = "".join(words[i] for i in rng.integers(len(words), size=900))
    lp, lengths = simulate_ctc([[g.tokens.id(c) for c in text]], g.num_tokens, seed=0,
                               confusion_prob=0.2, noise=1.0)  # fmt: skip
    assert lengths[0] > 5000
    opts = CtcBeamOptions(beam=10.0, nbest=3)
    never = decode_ctc(lp, lengths, g, opts, backend="cpu",
                       tuning=CpuTuning(collect_records_at=2**62))  # fmt: skip
    often = decode_ctc(lp, lengths, g, opts, backend="cpu", tuning=CpuTuning(collect_records_at=64))
    assert often == never
    assert len(never[0][0].words) > 500


@pytest.mark.parametrize("bad", [0, -5, 1.5, None, True])
def test_collect_records_at_must_be_a_positive_int(bad):
    from wfstdecode.errors import OptionsError

    with pytest.raises(OptionsError, match="collect_records_at must be an int >= 1"):
        CpuTuning(collect_records_at=bad)

"""CUDA paths: graph modes equal eager decoding, and the hot loops never sync with the host.

Run on a GPU machine with ``pytest -m gpu tests/transducer``; skipped without CUDA.
"""

import pytest
import torch

from wfstdecode.errors import DecodeInputError
from wfstdecode.testing.transducer_models import (
    BareProtocol,
    greedy_variants,
    planted_batch,
    planted_transducer,
)
from wfstdecode.transducer import GreedyOptions, graphs, greedy_decode, greedy_reference

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none found)"),
]
TDT = (0, 1, 2, 3, 4)


def _modes():
    modes = ["off", "loop_bodies"]
    if torch.cuda.is_available() and graphs.conditional_nodes_unavailable_reason() is None:
        modes.append("full")
    return modes


def _case(durations, size=8, frames=120, seed=0):
    model = planted_transducer(129, 256, 256, 256, durations=durations, seed=seed).cuda()
    pb = planted_batch(model, size, frames, min_frames=0, seed=seed, device="cuda")
    return model, pb.enc, pb.lengths


def _same(a, b):
    assert [h.tokens for h in a] == [h.tokens for h in b]
    assert [h.timestamps for h in a] == [h.timestamps for h in b]
    assert [h.durations for h in a] == [h.durations for h in b]
    assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-4)


ALGORITHMS, ALGORITHM_IDS = greedy_variants(TDT)


@pytest.mark.parametrize("mode", _modes())
@pytest.mark.parametrize("opts", ALGORITHMS, ids=ALGORITHM_IDS)
def test_cuda_modes_equal_reference(mode, opts):
    model, enc, lengths = _case(opts.durations)
    ref = greedy_reference(model, enc, lengths, opts.durations, opts.max_symbols_per_frame)
    options = GreedyOptions(**{**opts.__dict__, "cuda_graphs": mode})
    for _ in range(2):  # the second call replays the cached graphs
        hyps = greedy_decode(model, enc, lengths, options)
        _same(hyps, ref)
        assert f"cuda_graphs={mode}" in hyps[0].notes
    # New inputs of the same shape reuse the captured program.
    _, enc2, len2 = _case(opts.durations, seed=1)
    _same(
        greedy_decode(model, enc2, len2, options),
        greedy_reference(model, enc2, len2, opts.durations),
    )


def test_auto_picks_a_graph_mode():
    model, enc, lengths = _case(None, size=2, frames=20)
    hyp = greedy_decode(model, enc, lengths, GreedyOptions(cuda_graphs="auto"))[0]
    assert any(
        n.startswith("cuda_graphs=loop_bodies") or n.startswith("cuda_graphs=full")
        for n in hyp.notes
    )


@pytest.mark.parametrize("mode", _modes())
@pytest.mark.parametrize("algorithm", ["frame_looping", "label_looping", "wind"])
def test_no_host_sync_in_hot_loops(mode, algorithm):
    """Under sync debug mode 2 any sync raises. The loop conditions of the eager and
    loop_bodies drivers are the deliberate, exempted syncs (greedy.host_flag); "full" has none."""
    from wfstdecode.transducer.greedy import make_program, run_eager
    from wfstdecode.transducer.model import ModelAdapter

    model, enc, lengths = _case(None, size=4, frames=40)
    opts = GreedyOptions(algorithm)
    greedy_decode(model, enc, lengths, GreedyOptions(algorithm, cuda_graphs=mode))  # warm / capture
    adapter = ModelAdapter(model)
    with torch.inference_mode():
        if mode == "off":
            program = make_program(adapter, enc, lengths, opts, model.vocab_size, fixed=False)
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode(2)
            try:
                run_eager(program)
            finally:
                torch.cuda.set_sync_debug_mode(0)
        else:
            program = graphs.run(mode, adapter, enc, lengths, opts, model.vocab_size)
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode(2)
            try:
                graphs.run(mode, adapter, enc, lengths, opts, model.vocab_size)
            finally:
                torch.cuda.set_sync_debug_mode(0)
    _same(program.hypotheses(), greedy_reference(model, enc, lengths))


class _MarkerPoisonedJoint(BareProtocol):
    """A model whose joint returns NaN on encoder rows marked by a large (finite) feature 0:
    data-dependent, so the NaN also appears in graph replays, where Python does not run."""

    def joint(self, enc, pred):
        return torch.where(enc[:, :1] > 1e3, float("nan"), self.inner.joint(enc, pred))


@pytest.mark.parametrize("mode", _modes())
@pytest.mark.parametrize("opts", ALGORITHMS, ids=ALGORITHM_IDS)
def test_non_finite_logits_raise_in_every_mode(mode, opts):
    model, enc, lengths = _case(opts.durations, size=4, frames=40)
    options = GreedyOptions(**{**opts.__dict__, "cuda_graphs": mode})
    poisoned = _MarkerPoisonedJoint(model)
    greedy_decode(poisoned, enc, lengths, options)  # unmarked: decodes (and captures)
    enc = enc.clone()
    enc[0, 5:15, 0] = 1e4  # utterance 0 has every frame; TDT cannot skip ten in a row
    with pytest.raises(DecodeInputError, match="utterance 0"):
        greedy_decode(poisoned, enc, lengths, options)  # the graph modes replay


@pytest.mark.parametrize("mode", _modes())
def test_huge_wind_window_in_every_mode(mode):
    model, enc, lengths = _case(None, size=2, frames=20)
    opts = GreedyOptions("wind", window=10**6, cuda_graphs=mode)
    hyps = greedy_decode(model, enc, lengths, opts)
    assert "window=20" in hyps[0].notes
    _same(hyps, greedy_reference(model, enc, lengths))

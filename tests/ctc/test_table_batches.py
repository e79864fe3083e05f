"""A Kaldi table is decoded in batches of similar lengths, each padded to its own longest
(`npz._batches`): padding the whole table to its longest utterance took B x T_max x V floats,
many times the table itself. The batches change nothing but memory: hypotheses, greedy texts,
lattices, per-utterance boosts and the errors' utterance indices are the whole table's."""

import numpy as np
import pytest

from wfstdecode.ctc import CtcBeamOptions, decode_npz
from wfstdecode.ctc import npz as npz_module
from wfstdecode.errors import DecodeInputError
from wfstdecode.testing import random_graph, random_log_probs

kaldiio = pytest.importorskip("kaldiio", reason="writes the Kaldi tables: pip install kaldiio")

LENGTHS = [1, 9, 3, 0, 6, 2, 8, 5]


@pytest.fixture
def table(tmp_path):
    g = random_graph(11)
    lp = random_log_probs(12, len(LENGTHS), max(LENGTHS), g.num_tokens, peaky=2.0)
    ids = [f"spk-{i}" for i in range(len(LENGTHS))]
    ark = tmp_path / "e.ark"
    kaldiio.save_ark(
        str(ark), {u: lp[b, :n] for b, (u, n) in enumerate(zip(ids, LENGTHS, strict=True))}
    )
    return g, ark, lp, ids


def _small_batches(monkeypatch, g, utterances=3):
    """Batches of at most ``utterances`` of the longest length (so several, sorted)."""
    monkeypatch.setattr(npz_module, "_BATCH_FLOATS", utterances * max(LENGTHS) * g.num_tokens)


def test_batches_are_bounded_and_cover_every_utterance_once(table):
    g, ark, lp, _ = table
    data = npz_module._emissions(ark)
    budget = 2 * 6 * g.num_tokens
    seen = []
    for batch, log_probs, lengths in npz_module._batches(data, budget):
        assert log_probs.size <= budget or len(batch) == 1
        assert log_probs.shape[1] == lengths.max()  # padded to its own longest only
        for i, b in enumerate(batch):
            assert lengths[i] == LENGTHS[b]
            assert np.array_equal(log_probs[i, : LENGTHS[b]], lp[b, : LENGTHS[b]])
        seen += batch.tolist()
    assert sorted(seen) == list(range(len(LENGTHS))) and seen != sorted(seen)
    # fits: one batch, in the table's order (nothing to renumber)
    ((batch, log_probs, _),) = npz_module._batches(data, 10**9)
    assert batch.tolist() == list(range(len(LENGTHS))) and log_probs.shape[1] == max(LENGTHS)


@pytest.mark.parametrize("lattice", [False, True])
def test_batched_decoding_equals_the_whole_table(table, monkeypatch, lattice):
    g, ark, _, ids = table
    options = CtcBeamOptions(beam=8.0, nbest=3, lattice_beam=4.0 if lattice else None)
    boosts = {ids[4]: {g.words.symbol(1): 3.0}, ids[1]: {g.words.symbol(2): -2.0}}
    refs = {u: g.words.symbol(1 + b % 3) for b, u in enumerate(ids)}
    args = dict(backend="cpu", utterance_boosts=boosts, lattices=lattice, references=refs)
    whole = decode_npz(ark, g, options, **args)
    _small_batches(monkeypatch, g)
    batched = decode_npz(ark, g, options, **args)
    assert batched.ids == whole.ids == ids
    assert batched.hypotheses == whole.hypotheses
    assert batched.greedy_texts == whole.greedy_texts and batched.texts == whole.texts
    assert batched.lengths == whole.lengths == LENGTHS
    assert batched.wer == whole.wer and batched.greedy_wer == whole.greedy_wer
    if lattice:
        for a, b in zip(batched.lattices, whole.lattices, strict=True):
            assert (a is None) == (b is None)
            if a is not None:
                assert np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst)
                assert np.array_equal(a.graph_cost, b.graph_cost)
    # a boost list per utterance goes with its utterance into its batch
    per_utt = [{g.words.symbol(1): 4.0} if b % 2 else None for b in range(len(ids))]
    monkeypatch.setattr(npz_module, "_BATCH_FLOATS", 10**9)
    want = decode_npz(ark, g, options, per_utt, backend="cpu", lattices=lattice)
    _small_batches(monkeypatch, g)
    assert decode_npz(ark, g, options, per_utt, backend="cpu", lattices=lattice).hypotheses == (
        want.hypotheses)  # fmt: skip
    unknown = [{"no-such-word": 1.0}] + [None] * (len(ids) - 1)  # warned of from its batch
    with pytest.warns(UserWarning, match="not in the graph's vocabulary are ignored: no-such"):
        decode_npz(ark, g, options, unknown, backend="cpu", lattices=lattice)
    with pytest.raises(DecodeInputError, match=r"one entry per utterance of .*e.ark \(8\); got 3"):
        decode_npz(ark, g, options, per_utt[:3], backend="cpu")


def test_an_error_in_a_later_batch_names_the_utterance_by_its_index_in_the_file(
    table, monkeypatch, tmp_path
):
    g, good, lp, ids = table
    bad = lp.copy()
    bad[6, 4, 1] = np.nan  # the longest but two: not in the first (shortest) batch
    ark = tmp_path / "bad.ark"
    kaldiio.save_ark(
        str(ark), {u: bad[b, :n] for b, (u, n) in enumerate(zip(ids, LENGTHS, strict=True))}
    )
    _small_batches(monkeypatch, g)
    with pytest.raises(DecodeInputError) as err:
        decode_npz(ark, g, CtcBeamOptions(beam=8.0), backend="cpu")
    assert "bad.ark: utterance 'spk-6': log_probs[6, 4] contains NaN" in str(err.value)
    assert err.value.utterance == 6
    # so does an error naming an utterance's boosts
    boosts = [None] * len(ids)
    w = g.words.symbol(1)
    boosts[6] = {w: 2.0, (w,): 3.0}  # the same phrase twice: refused, named
    with pytest.raises(DecodeInputError, match=r"e.ark: boosts\[6\]: .* the same phrase"):
        decode_npz(good, g, CtcBeamOptions(beam=8.0), boosts, backend="cpu")

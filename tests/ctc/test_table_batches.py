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


def _forced_batches(monkeypatch, g, utterances=3):
    """`_small_batches` by `_batches`'s own argument (whatever the module's budget)."""
    batches = npz_module._batches
    budget = utterances * max(LENGTHS) * g.num_tokens
    monkeypatch.setattr(npz_module, "_batches", lambda data: batches(data, budget))


def test_decode_npz_reads_the_budget_when_it_decodes(table, monkeypatch):
    """`_batches`'s default was `_BATCH_FLOATS` as imported: setting the module's budget (as
    the tests above do) changed nothing, and every table was decoded as one batch."""
    g, ark, _, _ = table
    padded = []
    real = npz_module._padded

    def spy(matrices, width):
        padded.append(len(matrices))
        return real(matrices, width)

    monkeypatch.setattr(npz_module, "_padded", spy)
    _small_batches(monkeypatch, g)
    decode_npz(ark, g, CtcBeamOptions(beam=8.0), backend="cpu")
    assert len(padded) > 1 and sum(padded) == len(LENGTHS)


def test_lattices_of_a_table_in_batches_with_num_threads(table, monkeypatch):
    """The lattice path kept the first batch's resolved tuning as ``tuning``: the next batch got
    it and ``num_threads`` both ("give num_threads or tuning, not both"): decode-corpus
    --lattices, whose workers pass num_threads=1, failed every shard of more than one batch."""
    g, ark, _, _ = table
    options = CtcBeamOptions(beam=8.0, nbest=2, lattice_beam=4.0)
    whole = decode_npz(ark, g, options, backend="cpu", lattices=True, num_threads=1)
    _forced_batches(monkeypatch, g)
    batched = decode_npz(ark, g, options, backend="cpu", lattices=True, num_threads=1)
    assert batched.hypotheses == whole.hypotheses


def test_two_threads_decoding_tables_in_batches_lose_no_later_warning(table, monkeypatch, recwarn):
    """Each batch's warnings were caught by `warnings.catch_warnings`, which swaps process-wide
    state: two threads' batches overlapping (A in, B in, A out, B out) left A's recording and an
    "always" filter in place for good, every later warning of the process appended to a list
    nobody reads."""
    import threading
    import warnings

    g, ark, _, _ = table
    _forced_batches(monkeypatch, g)
    real = npz_module.decode_ctc
    inside = {name: threading.Event() for name in "AB"}
    go = {name: threading.Event() for name in "AB"}

    def gated(*args, **kwargs):  # each thread's first batch waits, inside its batch, for go
        name = threading.current_thread().name
        if name in go and not inside[name].is_set():
            inside[name].set()
            assert go[name].wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(npz_module, "decode_ctc", gated)
    filters = list(warnings.filters)
    args = (ark, g, CtcBeamOptions(beam=8.0))
    threads = {
        name: threading.Thread(target=decode_npz, args=args, kwargs={"backend": "cpu"}, name=name)
        for name in "AB"
    }
    threads["A"].start()
    assert inside["A"].wait(60)
    threads["B"].start()
    assert inside["B"].wait(60)
    go["A"].set()
    threads["A"].join(60)
    go["B"].set()
    threads["B"].join(60)
    assert warnings.filters == filters
    warnings.warn("said after both decodes", UserWarning, stacklevel=1)
    assert any("said after both decodes" in str(w.message) for w in recwarn)


def test_a_boost_warning_from_a_later_batch_names_the_utterance_by_its_index_in_the_file(
    table, monkeypatch, tmp_path
):
    """The warnings of an utterance's boosts (``boosts[b]: ...``) say its index in the file."""
    pytest.importorskip("pynini")
    from wfstdecode.graph import build_tlg
    from wfstdecode.graph.lexicon import spell_lexicon
    from wfstdecode.symbols import SymbolTable
    from wfstdecode.testing.lm import random_arpa

    tokens = SymbolTable.from_list(["<blk>", "|", *"abcde"])
    words = ["ab", "cd", "e"]
    lexicon, _ = spell_lexicon(words, tokens, separator="|")
    (tmp_path / "lm.arpa").write_text(random_arpa(words, order=2, seed=1, unk=True))
    g = build_tlg(tokens, lexicon, tmp_path / "lm.arpa", "compact", separator="|",
                  oov_slot={"spelling": "chars"}).graph  # fmt: skip
    lp = random_log_probs(3, len(LENGTHS), max(LENGTHS), g.num_tokens, peaky=1.0)
    ids = [f"spk-{i}" for i in range(len(LENGTHS))]
    ark = tmp_path / "slot.ark"
    kaldiio.save_ark(
        str(ark), {u: lp[b, :n] for b, (u, n) in enumerate(zip(ids, LENGTHS, strict=True))}
    )
    boosts = [None] * len(ids)
    boosts[6] = {"Xa": 1.0, "Xb": 1.0}  # homophones: said of the utterance's boosts
    lexicon = {"Xa": "a b", "Xb": "a b"}
    _forced_batches(monkeypatch, g)
    with pytest.warns(UserWarning, match=r"^boosts\[6\]: 'Xb' is spelled as 'Xa' is"):
        decode_npz(ark, g, CtcBeamOptions(beam=8.0), boosts, backend="cpu", oov_lexicon=lexicon)


def test_bad_values_are_found_before_any_batch_is_decoded(table, monkeypatch, tmp_path):
    """Batched, the search checked each batch when it came to it: a NaN in a late batch was
    reported after the earlier ones were decoded, and of two bad utterances the shorter (its
    batch came first), not the first in the file."""
    g, _, lp, ids = table
    bad = lp.copy()
    bad[1, 8, 0] = np.nan  # spk-1, the longest: the last batch
    bad[7, 0, 2] = np.inf  # spk-7, shorter: an earlier batch
    bad[2, :, 0] = -np.inf  # a masked column: finite elsewhere, fine
    ark = tmp_path / "bad.ark"
    kaldiio.save_ark(
        str(ark), {u: bad[b, :n] for b, (u, n) in enumerate(zip(ids, LENGTHS, strict=True))}
    )
    _small_batches(monkeypatch, g)
    searched = []
    real = npz_module.decode_ctc
    monkeypatch.setattr(
        npz_module, "decode_ctc", lambda *a, **k: searched.append(1) or real(*a, **k)
    )
    with pytest.raises(DecodeInputError) as err:
        decode_npz(ark, g, CtcBeamOptions(beam=8.0), backend="cpu")
    assert "bad.ark: utterance 'spk-1': log_probs[1, 8] contains NaN" in str(err.value)
    assert err.value.utterance == 1 and not searched
    bad[1, 8, 0] = bad[7, 0, 2] = 0.0  # the masked column alone decodes
    kaldiio.save_ark(
        str(ark), {u: bad[b, :n] for b, (u, n) in enumerate(zip(ids, LENGTHS, strict=True))}
    )
    assert len(decode_npz(ark, g, CtcBeamOptions(beam=8.0), backend="cpu").hypotheses) == 8


def test_one_boosts_mapping_for_all_is_named_as_given_in_every_batch(table, monkeypatch):
    """Only a list of boosts per utterance is renumbered by file index: one mapping for every
    utterance is ``boosts[0]``, batched or not."""
    g, ark, _, _ = table
    w = g.words.symbol(1)
    _small_batches(monkeypatch, g)
    with pytest.raises(DecodeInputError, match=r"e.ark: boosts\[0\]: .* the same phrase"):
        decode_npz(ark, g, CtcBeamOptions(beam=8.0), {w: 2.0, (w,): 3.0}, backend="cpu")

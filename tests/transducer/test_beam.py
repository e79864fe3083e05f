"""Transducer beam searches against exhaustive enumeration, the per-utterance reference,
greedy decoding, and themselves (batch against each utterance alone; the CPU form of "alsd"
against its tensor form)."""

import math

import numpy as np
import pytest
import torch

import wfstdecode.transducer.beam as beam
from wfstdecode.testing.transducer_models import (
    planted_batch,
    planted_transducer,
    random_transducer,
)
from wfstdecode.testing.transducer_oracles import exhaustive_sequences
from wfstdecode.transducer import (
    BeamOptions,
    GreedyOptions,
    beam_decode,
    beam_reference,
    greedy_decode,
)
from wfstdecode.transducer.beam import alsd_step, segment_step, wind_step

TDT = (0, 1, 2)
# (algorithm, its own options) covering every search and its parameters
SEARCHES = [
    ("standard", {}),
    ("maes", {}),
    ("maes", {"maes_steps": 3, "expansion_beta": 0, "expansion_gamma": 1.0}),
    ("tokenwise", {"segment_size": 1}),
    ("tokenwise", {"segment_size": 3}),
    ("alsd", {}),
    ("alsd", {"max_tokens": 2}),
    ("wind", {"window": 1}),
    ("wind", {"window": 3}),
    ("alsd", {"durations": TDT}),
    ("standard", {"durations": TDT}),
    ("maes", {"durations": TDT}),
    ("standard", {"durations": (1, 3)}),  # no duration 0, a blank may jump 3
]
IDS = ["-".join([a, *(f"{k}{v}" for k, v in kw.items())]) for a, kw in SEARCHES]


def tiny(seed, vocab=3, frames=4, durations=None, batch=1):
    model = random_transducer(vocab, 6, 5, 7, n_durations=len(durations or ()), seed=seed)
    gen = torch.Generator().manual_seed(seed + 1000)
    return model, torch.randn(batch, frames, 6, generator=gen) * 3


def key(h):
    return h.tokens, h.timestamps, h.durations


def assert_same(got, want, tol=1e-4):
    assert len(got) == len(want)
    for b, (g, w) in enumerate(zip(got, want, strict=True)):
        assert [key(h) for h in g] == [key(h) for h in w], f"utterance {b}"
        for hg, hw in zip(g, w, strict=True):
            assert hg.score == pytest.approx(hw.score, abs=tol), f"utterance {b}"


def oracle_frames(options) -> int:
    """Frames that keep the enumeration small (2 labels, up to 2 per frame: 511 prefixes)."""
    if options.algorithm == "wind" or (options.rounds > 2 and options.sums_alignments):
        return 3  # 127 prefixes
    return 4


def oracle(model, enc, options):
    """Every label sequence's exact score under the search's own scoring and bounds."""
    S = options.effective_segment
    per_block = options.rounds if options.sums_alignments else options.max_symbols_per_frame
    merge = "sum" if options.sums_alignments else "max"
    scores = exhaustive_sequences(model, enc, options.durations, per_block, S, merge)
    if options.max_tokens is not None:
        scores = {y: s for y, s in scores.items() if len(y) <= options.max_tokens}
    return scores


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("algorithm", "own"), SEARCHES, ids=IDS)
def test_a_wide_beam_finds_the_exhaustive_best(algorithm, own, seed):
    """With room for every sequence, the n best equal the enumeration's n best, exactly."""
    own = dict(own)
    if algorithm == "maes":  # no expansion pruning, so that nothing is lost
        own.update(expansion_gamma=math.inf, expansion_beta=0)
    beam = 150 if algorithm == "wind" else 600  # room for every prefix (wind: per frame)
    options = BeamOptions(
        algorithm, beam_size=beam, nbest=6, length_norm=False, max_symbols_per_frame=2, **own
    )
    model, enc = tiny(seed, frames=oracle_frames(options), durations=options.durations)
    exact = oracle(model, enc[0], options)
    want = sorted(exact.items(), key=lambda item: -item[1])[:6]
    for search in (beam_decode, beam_reference):
        got = search(model, enc, torch.tensor([enc.shape[1]]), options)[0]
        assert [h.tokens for h in got] == [y for y, _ in want]
        assert [h.score for h in got] == pytest.approx([s for _, s in want], abs=1e-5)


@pytest.mark.parametrize("beam", [1, 2, 3])
@pytest.mark.parametrize(("algorithm", "own"), SEARCHES, ids=IDS)
def test_a_score_never_exceeds_its_sequence_exact_score(algorithm, own, beam):
    """A pruned search sums fewer alignments, or keeps one: never more than the exact score."""
    options = BeamOptions(algorithm, beam_size=beam, nbest=beam, max_symbols_per_frame=2, **own)
    frames = oracle_frames(options)
    model, enc = tiny(7, frames=frames, durations=options.durations)
    exact = oracle(model, enc[0], options)
    for h in beam_decode(model, enc, torch.tensor([frames]), options)[0]:
        assert h.score <= exact[h.tokens] + 1e-5


@pytest.mark.parametrize("beam", [1, 2, 4])
@pytest.mark.parametrize(("algorithm", "own"), SEARCHES, ids=IDS)
def test_batched_equals_reference(algorithm, own, beam):
    """The batched search and the per-utterance specification agree hypothesis for
    hypothesis (tokens, timestamps, durations, scores), empty utterances included."""
    for seed in range(3):
        model, enc = tiny(seed, vocab=6, frames=9, durations=own.get("durations"), batch=4)
        lengths = torch.tensor([9, 0, 5, 7])
        options = BeamOptions(algorithm, beam_size=beam, nbest=beam, max_symbols_per_frame=2, **own)
        assert_same(
            beam_decode(model, enc, lengths, options), beam_reference(model, enc, lengths, options)
        )


@pytest.mark.parametrize(("algorithm", "own"), SEARCHES, ids=IDS)
def test_a_batch_without_frames_gives_empty_hypotheses(algorithm, own):
    """Encoder output with no frames at all (T = 0): each utterance's empty hypothesis, from
    the compiled CPU form and the tensor form alike (the compiled forms once failed on
    reshaping their zero rows)."""
    model, enc = tiny(0, frames=0, durations=own.get("durations"), batch=2)
    lengths = torch.zeros(2, dtype=torch.long)
    options = BeamOptions(algorithm, beam_size=2, **own)
    want = beam_reference(model, enc, lengths, options)
    assert [[h.tokens for h in utt] for utt in want] == [[()], [()]]
    assert_same(beam_decode(model, enc, lengths, options), want)
    beam.COMPILED_ON_CPU = False
    try:
        assert_same(beam_decode(model, enc, lengths, options), want)
    finally:
        beam.COMPILED_ON_CPU = True


@pytest.fixture(scope="module")
def planted():
    model = planted_transducer(40, 64, 64, 64, seed=1)
    pb = planted_batch(model, 6, 40, seed=3)
    return model, pb.enc, pb.lengths


@pytest.fixture(scope="module")
def planted_tdt():
    model = planted_transducer(40, 64, 64, 64, durations=(0, 1, 2, 3, 4), seed=2)
    pb = planted_batch(model, 6, 40, seed=4)
    return model, pb.enc, pb.lengths


@pytest.mark.parametrize(("algorithm", "own"), SEARCHES, ids=IDS)
def test_planted_batch_equals_reference_and_each_utterance_alone(
    algorithm, own, planted, planted_tdt
):
    model, enc, lengths = planted_tdt if own.get("durations") else planted
    own = {**own, "durations": (0, 1, 2, 3, 4)} if own.get("durations") else own
    options = BeamOptions(algorithm, beam_size=4, nbest=3, **own)
    batched = beam_decode(model, enc, lengths, options)
    assert_same(batched, beam_reference(model, enc, lengths, options))
    alone = [
        beam_decode(model, enc[b : b + 1], lengths[b : b + 1], options)[0]
        for b in range(len(lengths))
    ]
    assert_same(batched, alone)
    if "max_tokens" not in own:
        assert sum(len(h[0].tokens) for h in batched) > 20  # the planted labels come out


def test_tokenwise_segment_one_is_standard():
    """Keren: segment size 1 is the standard breadth-first search (written separately in the
    reference as Eq. 1; the batched search runs the token-wise equations)."""
    for seed in range(3):
        model, enc = tiny(seed, vocab=6, frames=9, batch=3)
        lengths = torch.tensor([9, 6, 8])
        standard = BeamOptions("standard", beam_size=3, nbest=3)
        tokenwise = BeamOptions("tokenwise", beam_size=3, nbest=3, segment_size=1)
        assert_same(
            beam_decode(model, enc, lengths, tokenwise),
            beam_reference(model, enc, lengths, standard),
        )


def same_label_bound(algorithm, own):
    """Greedy allows 10 labels per frame (its default); MAES gets as many rounds, so that the
    greedy path lies in its search space."""
    return {**own, "maes_steps": 10} if algorithm == "maes" else own


@pytest.mark.parametrize(("algorithm", "own"), SEARCHES, ids=IDS)
def test_beam_one_is_greedy(algorithm, own, planted, planted_tdt):
    """With one hypothesis every search takes the best move each time: on a trained-like
    (planted) model that is the greedy path. (WIND compares a label now with blanks and a
    label later, so on a flat untrained model its one-best move can differ from greedy.)"""
    tdt = bool(own.get("durations"))
    model, enc, lengths = planted_tdt if tdt else planted
    if algorithm == "tokenwise" and own.get("segment_size", 3) > 1:
        pytest.skip("a segment sums over emission frames: not one path")
    if "max_tokens" in own:
        pytest.skip("max_tokens cuts the path")
    own = {**own, "durations": (0, 1, 2, 3, 4)} if tdt else own
    greedy = greedy_decode(model, enc, lengths, GreedyOptions(durations=own.get("durations")))
    options = BeamOptions(algorithm, beam_size=1, **same_label_bound(algorithm, own))
    beam = beam_decode(model, enc, lengths, options)
    assert_same([[h] for h in greedy], beam)


@pytest.mark.parametrize(("algorithm", "own"), SEARCHES, ids=IDS)
def test_beam_best_is_not_below_greedy(algorithm, own, planted, planted_tdt):
    """By the search's own scoring (the greedy path's score, exact for the summing searches),
    the beam's best is at least as good as greedy's."""
    tdt = bool(own.get("durations"))
    model, enc, lengths = planted_tdt if tdt else planted
    own = {**own, "durations": (0, 1, 2, 3, 4)} if tdt else own
    greedy = greedy_decode(model, enc, lengths, GreedyOptions(durations=own.get("durations")))
    options = BeamOptions(
        algorithm, beam_size=4, length_norm=False, **same_label_bound(algorithm, own)
    )
    for g, hyps in zip(greedy, beam_decode(model, enc, lengths, options), strict=True):
        if options.max_tokens is not None and len(g.tokens) > options.max_tokens:
            continue
        assert hyps[0].score >= g.score - 1e-6


@pytest.mark.parametrize("window", [2, 3, 6])
@pytest.mark.parametrize("width", [1, 4, 8])
def test_wind_on_flat_models_is_not_below_greedy(window, width, monkeypatch):
    """On untrained (flat) models WIND's K best window moves often leave out the all-blank
    move, whose W blank log-probs lose to a label's one; each hypothesis' greedy move is
    offered too, so the greedy path stays in the search (its best fell below greedy in 12-20
    of 22 such utterances without it). The compiled, tensor and reference searches agree."""
    options = BeamOptions("wind", beam_size=width, length_norm=False, window=window)
    for seed in range(8):
        model = random_transducer(5, 6, 5, 7, seed=seed)
        enc = torch.randn(2, 6, 6, generator=torch.Generator().manual_seed(seed)) * 3
        lengths = torch.tensor([6, 4])
        greedy = greedy_decode(model, enc, lengths)
        compiled, tensor = compiled_and_tensor(model, enc, lengths, options, monkeypatch)
        assert_same(compiled, tensor)
        assert_same(compiled, beam_reference(model, enc, lengths, options))
        for g, hyps in zip(greedy, compiled, strict=True):
            if max(map(g.timestamps.count, g.timestamps), default=0) == 10:
                continue  # greedy left a frame at the label cap without its blank: no path
            assert hyps[0].score >= g.score - 1e-6, f"seed {seed}"


def test_nbest_distinct_best_first_and_length_norm():
    model, enc = tiny(3, vocab=5, frames=8, batch=2)
    lengths = torch.tensor([8, 6])
    for algorithm in ("standard", "alsd"):
        for norm in (False, True):
            options = BeamOptions(algorithm, beam_size=6, nbest=6, length_norm=norm)
            for hyps in beam_decode(model, enc, lengths, options):
                assert len({h.tokens for h in hyps}) == len(hyps) > 1
                rank = [h.score / max(len(h.tokens), 1) if norm else h.score for h in hyps]
                assert rank == sorted(rank, reverse=True)
                assert all(h.notes[0] == f"algorithm={algorithm}" for h in hyps)


# The compiled CPU forms ("alsd": `alignment_cpu`; "standard" / "tokenwise" / "maes":
# `segment_cpu`; "wind": `wind_cpu`) against the tensor searches CUDA runs and the reference.
COMPILED = [
    ("alsd", {}),
    ("alsd", {"max_symbols_per_frame": 1}),
    ("alsd", {"max_tokens": 3}),
    ("alsd", {"durations": (0, 1, 2)}),
    ("alsd", {"durations": (1, 3)}),
    ("alsd", {"durations": (0, 1, 2, 3, 4), "max_symbols_per_frame": 1}),
    ("standard", {}),
    ("standard", {"max_symbols_per_frame": 1}),
    ("maes", {}),
    ("maes", {"maes_steps": 3, "expansion_beta": 0, "expansion_gamma": 0.5}),
    ("tokenwise", {"segment_size": 3}),
    ("tokenwise", {"segment_size": 4, "max_symbols_per_frame": 1}),
    ("standard", {"durations": (0, 1, 2)}),
    ("standard", {"durations": (1, 3)}),
    ("maes", {"durations": (0, 1, 2, 3, 4)}),
    ("maes", {"durations": (0, 2), "maes_steps": 3, "expansion_gamma": 0.5}),
    ("wind", {}),
    ("wind", {"window": 1}),
    ("wind", {"window": 3}),
    ("wind", {"window": 2, "max_symbols_per_frame": 1}),
    ("wind", {"window": 4, "max_tokens": 3}),
]
COMPILED_IDS = ["-".join([a, *(f"{k}{v}" for k, v in kw.items())]) for a, kw in COMPILED]


def compiled_and_tensor(model, enc, lengths, options, monkeypatch):
    """(compiled, tensor search) hypotheses of one batch, both on the CPU."""
    compiled = beam_decode(model, enc, lengths, options)
    with monkeypatch.context() as m:
        m.setattr(beam, "COMPILED_ON_CPU", False)
        tensor = beam_decode(model, enc, lengths, options)
    return compiled, tensor


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(("algorithm", "own"), SEARCHES, ids=IDS)
def test_non_finite_padding_decodes_as_clean_padding(algorithm, own, value, monkeypatch):
    """Padding beyond a length may hold anything (`check_inputs`): NaN / inf there decodes as
    clean padding in the compiled CPU forms and the tensor searches CUDA runs alike (the tensor
    TDT searches once read the padding frame's duration log-probs: NaN into the done rows'
    mass, a "non-finite logits" error)."""
    model, enc = tiny(4, vocab=4, frames=6, durations=own.get("durations"), batch=3)
    lengths = torch.tensor([6, 3, 0])
    options = BeamOptions(algorithm, beam_size=2, nbest=2, max_symbols_per_frame=2, **own)
    want = beam_reference(model, enc, lengths, options)
    dirty = enc.clone()
    for b, n in enumerate(lengths.tolist()):
        dirty[b, n:] = value
    compiled, tensor = compiled_and_tensor(model, dirty, lengths, options, monkeypatch)
    assert_same(compiled, want)
    assert_same(tensor, want)


@pytest.mark.parametrize(
    ("algorithm", "module", "step"),
    [
        ("alsd", alsd_step, "alsd_step"),
        ("maes", segment_step, "segment_round"),
        ("wind", wind_step, "wind_step"),
    ],
)
def test_the_cpu_runs_the_compiled_step(algorithm, module, step, monkeypatch):
    calls = []
    compiled = getattr(module, step)

    def counted(*args):
        calls.append(1)
        return compiled(*args)

    monkeypatch.setattr(module, step, counted)
    model, enc = tiny(0, vocab=4, frames=5, batch=2)
    beam_decode(model, enc, torch.tensor([5, 3]), BeamOptions(algorithm, beam_size=2))
    assert len(calls) >= 5  # at least one per frame
    monkeypatch.setattr(beam, "COMPILED_ON_CPU", False)
    calls.clear()
    beam_decode(model, enc, torch.tensor([5, 3]), BeamOptions(algorithm, beam_size=2))
    assert not calls


def test_a_compiled_searchs_first_call_loads_it_on_the_worker(monkeypatch):
    """A Ctrl-C landing in LLVM's loading of a compiled search on the main thread was swallowed
    by a ctypes callback (the call went on, the interrupt was lost): the first call of each
    compiled search per dtype first searches a 2-frame utterance on the worker thread, where
    no signal handler runs; later calls go straight on."""
    import threading

    threads = []
    compiled = alsd_step.alsd_step

    def noted(*args):
        threads.append(threading.current_thread().name)
        return compiled(*args)

    monkeypatch.setattr(alsd_step, "alsd_step", noted)
    monkeypatch.setattr(beam, "_LOADED", set())
    model, enc = tiny(0, vocab=4, frames=5, batch=2)
    beam_decode(model, enc, torch.tensor([5, 3]), BeamOptions("alsd", beam_size=2))
    first = threads.index("MainThread")
    assert first >= 2 and set(threads[:first]) == {"wfstdecode-worker"}  # the 2 frames
    threads.clear()
    beam_decode(model, enc, torch.tensor([5, 3]), BeamOptions("alsd", beam_size=3))
    assert threads and set(threads) == {"MainThread"}
    assert len(beam._LOADED) == 1
    for algorithm in ("maes", "standard", "wind", "tokenwise"):
        beam_decode(model, enc, torch.tensor([5, 3]), BeamOptions(algorithm, beam_size=2))
    assert len(beam._LOADED) == 3  # and the frame-synchronous ones share one search


@pytest.mark.parametrize(("algorithm", "own"), COMPILED, ids=COMPILED_IDS)
@pytest.mark.parametrize("width", [1, 2, 3, 5])
def test_random_models_equal_the_tensor_search_and_the_reference(
    algorithm, own, width, monkeypatch
):
    for seed in range(4):
        model, enc = tiny(seed, vocab=6, frames=9, durations=own.get("durations"), batch=5)
        lengths = torch.tensor([9, 0, 5, 7, 1])
        options = BeamOptions(algorithm, beam_size=width, nbest=width, **own)
        compiled, tensor = compiled_and_tensor(model, enc, lengths, options, monkeypatch)
        assert_same(compiled, tensor)
        assert_same(compiled, beam_reference(model, enc, lengths, options))


@pytest.mark.parametrize(
    ("algorithm", "own"), [("alsd", {"durations": (0, 1, 2)}), ("wind", {"window": 3})]
)
def test_wide_beams_pick_by_sorting_as_by_scanning(algorithm, own, monkeypatch):
    """Past `alsd_step.SCAN_LIMIT` comparisons the compiled steps keep their best distinct
    candidates in the order of one stable sort, not by a scan per pick (a WIND beam of 200 took
    10 s for 40 frames): the same hypotheses as the tensor search and the reference."""
    width = 32
    # wind: a pool of 32 x 4 rows picked from at least 32 x 33 moves; alsd's second pass: 32 of
    # up to 32 x 32 x 3
    assert width * 4 * width * (width + 1) > alsd_step.SCAN_LIMIT
    for seed in range(2):
        model, enc = tiny(seed, vocab=6, frames=8, durations=own.get("durations"), batch=3)
        lengths = torch.tensor([8, 5, 7])
        options = BeamOptions(algorithm, beam_size=width, nbest=4, **own)
        compiled, tensor = compiled_and_tensor(model, enc, lengths, options, monkeypatch)
        assert_same(compiled, tensor)
        assert_same(compiled, beam_reference(model, enc, lengths, options))


@pytest.mark.parametrize(
    ("algorithm", "durations"),
    [
        ("alsd", None),
        ("alsd", (0, 1, 2, 3, 4)),
        ("standard", None),
        ("maes", (0, 1, 2, 3, 4)),
        ("wind", None),
    ],
)
@pytest.mark.parametrize("width", [4, 8])
def test_planted_batches_equal_the_tensor_search(algorithm, durations, width, monkeypatch):
    model = planted_transducer(40, 64, 64, 64, durations=durations, seed=1)
    pb = planted_batch(model, 7, 40, min_frames=0, seed=3)
    options = BeamOptions(algorithm, beam_size=width, nbest=3, durations=durations)
    compiled, tensor = compiled_and_tensor(model, pb.enc, pb.lengths, options, monkeypatch)
    assert_same(compiled, tensor)
    assert sum(len(h[0].tokens) for h in compiled) > 20  # the planted labels come out


@pytest.mark.parametrize(
    ("algorithm", "own"), [("standard", {}), ("tokenwise", {"segment_size": 2}), ("maes", {})]
)
def test_rounds_with_more_nodes_than_twice_the_traceback_grow_it(algorithm, own, monkeypatch):
    """One round of a frame-synchronous search adds up to E traceback nodes an utterance: at
    B x E = 64 x 34 it outgrew the first 1,024 by more than a doubling, and the compiled round
    wrote past the end (glibc aborted the process). Now the table grows to what a round needs;
    the results are the tensor search's."""
    model, enc = tiny(1, vocab=64, frames=2, batch=64)
    options = BeamOptions(algorithm, beam_size=34 if algorithm != "maes" else 32, **own)
    lengths = torch.full((64,), 2)
    compiled, tensor = compiled_and_tensor(model, enc, lengths, options, monkeypatch)
    assert_same(compiled, tensor)


def test_a_model_with_its_own_state_layout():
    """A state the generic row selection does not understand (a dict keyed by layer, with
    the model's own ``index_state`` / ``select_state``): the predictor runs on every row."""
    inner, enc = tiny(2, vocab=5, frames=8, batch=3)

    class OwnState(torch.nn.Module):
        blank_id, vocab_size = inner.blank_id, inner.vocab_size

        def init_state(self, n, device):
            h, c = inner.init_state(n, device)
            return {"h": h.transpose(0, 1), "c": c.transpose(0, 1)}  # batch first

        def predict(self, labels, state):
            pred, (h, c) = inner.predict(
                labels, (state["h"].transpose(0, 1), state["c"].transpose(0, 1))
            )
            return pred, {"h": h.transpose(0, 1), "c": c.transpose(0, 1)}

        def joint(self, enc, pred):
            return inner.joint(enc, pred)

        def index_state(self, state, rows):
            return {k: v.index_select(0, rows) for k, v in state.items()}

        def select_state(self, mask, new, old):
            return {k: torch.where(mask.view(-1, 1, 1), new[k], old[k]) for k in new}

    lengths = torch.tensor([8, 6, 3])
    for algorithm in ("alsd", "maes", "wind", "standard"):
        options = BeamOptions(algorithm, beam_size=3, nbest=3)
        got = beam_decode(OwnState(), enc, lengths, options)
        assert_same(got, beam_decode(inner, enc, lengths, options))


def test_the_second_pass_finds_keys_the_first_dropped():
    """The first pass keeps 2K candidates of each kind. TDT, K = 2: two beam rows with the
    same labels at the same frame (counts 0 and 1), whose best moves are blanks of duration 0
    and 1 — four moves, one key (the labels, the next frame, count 0) — so the first pass finds
    one distinct key and the step must look again with the full bound for the second."""
    K, blank = 2, 0
    live = np.array([0, 1])
    score = np.array([-1.0, -1.0, -np.inf, -np.inf])
    hash_, size = np.array([7, 7, 0, 0]), np.array([1, 1, 0, 0])
    frame, count = np.array([3, 3, 0, 0]), np.array([0, 1, 0, 0])
    lp = np.log(np.array([[0.9, 0.04, 0.03, 0.01, 0.01, 0.01]] * 2))
    lpd = np.log(np.array([[0.45, 0.45, 0.1]] * 2))
    back = np.empty((4, 2 * K), np.int64)
    out = [np.empty(K, np.int64) for _ in range(3)]
    alsd_step.alsd_step(
        lp, lpd, live, K, blank, 10, -1, np.array([0, 1, 2]), True, np.array([10]),
        score, hash_, size, frame, count, back, *out,
    )  # fmt: skip
    assert list(back[0, :K]) == [0, 0]  # both from row 0 (the earlier of the ties)
    assert list(back[1, :K]) == [-1, -1]  # blanks
    assert list(back[3, :K]) == [0, 2]  # of durations 0 and 2
    assert list(frame[:K]) == [4, 5] and list(count[:K]) == [0, 0]
    np.testing.assert_allclose(score[:K], [-1 + np.log(0.9 * 0.45), -1 + np.log(0.9 * 0.1)])


def test_the_first_call_warms_up_on_the_users_frames(monkeypatch):
    """The warm-up searched zero frames: a joint that normalises its encoder rows gave NaN
    there and every call raised "non-finite logits ... from finite encoder output"."""
    V, D, H = 6, 8, 8
    gen = torch.Generator().manual_seed(0)

    class CosineJoint:
        blank_id, vocab_size = 0, V
        emb, weight = torch.randn(V, H, generator=gen), torch.randn(D + H, V, generator=gen)

        def init_state(self, B, device):
            return torch.zeros(B, H, device=device)

        def predict(self, labels, state):
            return self.emb[labels] + state, state

        def joint(self, enc, pred):
            enc = enc / enc.norm(dim=-1, keepdim=True)  # NaN for an all-zero frame
            return torch.log_softmax(torch.cat([enc, pred], -1) @ self.weight, -1)

    monkeypatch.setattr(beam, "_LOADED", set())
    model, enc = CosineJoint(), torch.randn(2, 10, D, generator=gen)
    lengths = torch.tensor([10, 7])
    for algorithm in ("alsd", "wind", "standard"):
        options = BeamOptions(algorithm, beam_size=4)
        got = beam_decode(model, enc, lengths, options)
        assert_same(got, beam_reference(model, enc, lengths, options))


@pytest.mark.parametrize("algorithm", ["alsd", "wind"])
def test_max_tokens_zero_decodes_only_the_empty_hypothesis(algorithm):
    """max_tokens=0 is a valid bound: only the empty hypothesis may come out."""
    options = BeamOptions(algorithm, beam_size=2, max_tokens=0)
    model, enc = tiny(0, vocab=5, frames=7, batch=3)
    lengths = torch.tensor([7, 4, 0])
    got = beam_decode(model, enc, lengths, options)
    assert [[h.tokens for h in u] for u in got] == [[()], [()], [()]]
    assert_same(got, beam_reference(model, enc, lengths, options))


def test_expansion_gamma_zero_searches():
    """expansion_gamma=0 is allowed (">= 0"): MAES keeps only labels at least as probable as
    the best expansion."""
    options = BeamOptions("maes", beam_size=3, nbest=2, expansion_gamma=0)
    model, enc = tiny(1, vocab=5, frames=7, batch=3)
    lengths = torch.tensor([7, 5, 6])
    assert_same(beam_decode(model, enc, lengths, options),
                beam_reference(model, enc, lengths, options))  # fmt: skip


def test_standard_is_maes_without_its_extras():
    """ "standard" and "tokenwise" extend by the beam_size best labels (expansion_beta is
    MAES's): MAES with beta 0, no gamma pruning and maes_steps = max_symbols_per_frame is
    "standard"."""
    assert BeamOptions("standard", beam_size=4).expansions == 4
    assert BeamOptions("tokenwise", beam_size=4).expansions == 4
    assert BeamOptions("maes", beam_size=4).expansions == 6
    for seed in range(4):
        model, enc = tiny(seed, vocab=6, frames=9, batch=4)
        lengths = torch.tensor([9, 6, 8, 3])
        for size in (1, 2, 3):
            standard = BeamOptions("standard", beam_size=size, nbest=size,
                                   max_symbols_per_frame=2, length_norm=False)  # fmt: skip
            maes = BeamOptions("maes", beam_size=size, nbest=size, maes_steps=2,
                               expansion_beta=0, expansion_gamma=math.inf,
                               length_norm=False)  # fmt: skip
            assert_same(beam_decode(model, enc, lengths, standard),
                        beam_decode(model, enc, lengths, maes))  # fmt: skip


@pytest.mark.parametrize("durations", [None, TDT])
def test_maes_keeps_to_max_symbols_per_frame(durations):
    """MAES's label rounds per frame were maes_steps whatever max_symbols_per_frame said (both
    given by the CLI too): max_symbols_per_frame=1 emitted two labels at one frame. Now the
    smaller bound holds: max_symbols_per_frame=1 is maes_steps=1, in the search and the
    reference."""
    assert BeamOptions("maes", max_symbols_per_frame=1).rounds == 1
    assert BeamOptions("maes", maes_steps=3).rounds == 3
    model, enc = tiny(2, vocab=5, frames=8, durations=durations, batch=3)
    lengths = torch.tensor([8, 6, 7])
    capped = BeamOptions("maes", beam_size=3, nbest=3, max_symbols_per_frame=1,
                         durations=durations)  # fmt: skip
    one_step = BeamOptions("maes", beam_size=3, nbest=3, maes_steps=1, durations=durations)
    got = beam_decode(model, enc, lengths, capped)
    assert_same(got, beam_decode(model, enc, lengths, one_step))
    assert_same(got, beam_reference(model, enc, lengths, capped))
    if durations is None:  # (TDT: a duration-0 label and the next share a frame by design)
        for hyps in got:
            for h in hyps:
                assert len(set(h.timestamps)) == len(h.timestamps), h


def test_the_wind_reference_applies_graves_rule_as_the_search_does():
    """Graves' rule (an earliest-frame hypothesis goes on only while fewer than beam_size at
    later frames beat it) decides this n-best; no other wind case here reaches it (found by
    fuzzing the reference without the rule)."""
    model = random_transducer(3, 6, 5, 7, seed=27936)
    enc = torch.randn(1, 8, 6, generator=torch.Generator().manual_seed(27936))
    options = BeamOptions("wind", beam_size=4, nbest=4, window=2, length_norm=False)
    lengths = torch.tensor([8])
    assert_same(beam_decode(model, enc, lengths, options),
                beam_reference(model, enc, lengths, options))  # fmt: skip


def test_a_dropped_model_is_freed_after_a_beam_search(monkeypatch):
    """The first search of a process loads its compiled code on the worker thread
    (`_load_compiled`), which then held that job — the model and the batch's encoder output
    (the job's slice is a view of it) — until another job came: a service that reloaded its
    model kept the old one for good."""
    import gc
    import threading
    import weakref

    assert threading.current_thread() is threading.main_thread()  # (else no worker is used)
    monkeypatch.setattr(beam, "_LOADED", set())  # (a first search, whatever ran before)
    model = random_transducer(vocab_size=8, enc_dim=8, pred_dim=8, joint_dim=8)
    enc = torch.randn(2, 6, 8)
    beam_decode(model, enc, torch.tensor([6, 4]), BeamOptions(beam_size=2))
    refs = [weakref.ref(model), weakref.ref(enc)]
    del model, enc
    gc.collect()
    assert [r() for r in refs] == [None, None]

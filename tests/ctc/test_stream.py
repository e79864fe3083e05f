"""Streaming CTC decoding (`CtcStreamDecoder`): every stream's final result is exactly what
`decode_ctc` (the reference backend, an independent whole-utterance search) gives on the whole
input, for random chunkings and interleavings, more streams than lanes, per-stream boosts; partial
results' stable words never change; endpointing; bad input."""

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from wfstdecode import DecodeInputError, DecodingGraph
from wfstdecode.backends import available_ctc_backends
from wfstdecode.ctc import CpuTuning, CtcBeamOptions, CudaTuning, decode_ctc
from wfstdecode.ctc.stream import CtcStreamDecoder, EndpointRule, EndpointRules
from wfstdecode.errors import OptionsError
from wfstdecode.testing import (
    fast_backends,
    lexicon_graph,
    random_graph,
    random_log_probs,
    simulate_ctc,
)

# cuda: on a GPU or Numba's CUDA simulator (skipped, with the reason, where neither runs)
BACKENDS = ["reference", *fast_backends()]
DATA = Path(__file__).resolve().parents[2] / "wfstdecode" / "data"


def _chunked(rng, T):
    """Random chunk boundaries of 0..T: single frames, empty chunks and long runs alike."""
    cuts, t = [], 0
    while t < T:
        step = int(rng.choice([0, 1, 1, 2, 3, 7, T]))
        cuts.append((t, min(T, t + step)))
        t = min(T, t + step)
    return cuts


def _stream_all(decoder, lp, lengths, boosts, rng, check_partials=None):
    """Open a stream per utterance, feed random chunks in a random interleaving (several
    streams per advance call), finish them all; returns the finals per utterance."""
    sids = [decoder.open(boosts[b] if boosts else None) for b in range(len(lengths))]
    pending = {b: _chunked(rng, int(lengths[b])) for b in range(len(lengths))}
    while any(pending.values()):
        ready = [b for b in pending if pending[b]]
        pick = rng.choice(ready, size=int(rng.integers(1, len(ready) + 1)), replace=False)
        chunks = {}
        for b in pick:
            t0, t1 = pending[b].pop(0)
            chunks[sids[b]] = lp[b, t0:t1]
        decoder.advance(chunks)
        if check_partials is not None:
            for b in pick:
                check_partials(b, decoder.partial(sids[b]))
    return [decoder.finish(s) for s in sids]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", range(8))
def test_streams_equal_the_offline_reference(backend, seed):
    rng = np.random.default_rng(seed)
    g = random_graph(seed, num_states=20, eps_arcs_per_state=1.0, word_prob=0.5)
    B, T = 5, 14
    lp = random_log_probs(seed, B, T, g.num_tokens)
    lengths = rng.integers(0, T + 1, size=B)
    boosts = [None, {1: 2.0}, None, {2: -1.0, 3: 1.5}, {1: 0.5}]
    opts = CtcBeamOptions(beam=6.0, nbest=3, min_active=2 if seed % 2 else 1)
    want = decode_ctc(lp, lengths, g, opts, boosts, backend="reference")
    # records collected often (cpu: after every frame or two; cuda: after every chunk)
    tuning = {"cpu": CpuTuning(collect_records_at=1 + seed % 3),
              "cuda": CudaTuning(collect_records_at=1 + seed % 3)}.get(backend)  # fmt: skip
    decoder = CtcStreamDecoder(g, opts, backend, max_lanes=2, tuning=tuning)
    assert _stream_all(decoder, lp, lengths, boosts, rng) == want


# the simulator runs the cuda kernels in Python: two seeds of it
LATTICE_CASES = [(name, seed) for name in ("reference", "cpu") for seed in range(6)] + [
    pytest.param("cuda", seed, marks=fast_backends()[1].marks) for seed in range(2)
]


@pytest.mark.parametrize(("backend", "seed"), LATTICE_CASES)
def test_lattice_streams_equal_the_offline_reference(backend, seed):
    """With a lattice beam, a finished stream's n-best, MBR ranking and word confidences (from
    the lattice of the survivors it kept chunk by chunk) are `decode_ctc`'s, bit for bit;
    partial results go on as without lattices."""
    rng = np.random.default_rng(seed)
    g = random_graph(seed, num_states=20, eps_arcs_per_state=1.0, word_prob=0.5)
    B, T = 4, 14
    lp = random_log_probs(seed, B, T, g.num_tokens)
    lengths = rng.integers(0, T + 1, size=B)
    lengths[0] = T
    boosts = [None, {"w1": 2.0}, {"w2 w3": 1.5, "w1": -0.5}, None]
    opts = CtcBeamOptions(beam=6.0, nbest=4, lattice_beam=(2.0, 5.0)[seed % 2],
                          mbr_candidates=5 if seed % 3 == 1 else 0,
                          posteriors="determinized" if seed == 2 else "lattice")  # fmt: skip
    want = decode_ctc(lp, lengths, g, opts, boosts, backend="reference")
    assert any(len(h) > 1 for h in want) and any(h[0].word_confidences for h in want)
    last_partial = {}
    decoder = CtcStreamDecoder(g, opts, backend, max_lanes=2)
    got = _stream_all(decoder, lp, lengths, boosts, rng, last_partial.__setitem__)
    assert got == want
    # partial results are the best path alone, as a stream without a lattice beam gives them
    plain = CtcStreamDecoder(g, replace(opts, lattice_beam=None, mbr_candidates=0), backend)
    assert last_partial
    for b, partial in last_partial.items():
        sid = plain.open(boosts[b])
        plain.advance({sid: lp[b, : lengths[b]]})
        assert plain.partial(sid) == partial


@pytest.mark.parametrize("backend", fast_backends()[1:])  # cuda
def test_cuda_streams_carry_the_tightened_beam_across_chunks(backend):
    """A crowded token table (more than half full) halves the beam; the beam tightened in one
    chunk goes on into the next (saved with the stream), so the result and its note equal the
    whole-utterance search's. (Tables of 32 slots: crowded, never full — which candidates a
    full table drops depends on the order the threads run in, on a GPU too.)"""
    words = ["cat", "cap", "act", "tact", "pat", "apt", "tapa", "tap", "pact"]
    g = lexicon_graph(words)
    seqs = [[g.tokens.id(c) for c in "catpacttap"], [g.tokens.id(c) for c in "apt"]]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=1, confusion_prob=0.3, noise=2.0)
    small = CtcBeamOptions(beam=30.0, max_active=1000, max_candidates=12)
    want = decode_ctc(lp, lengths, g, small, backend=backend)
    assert all("token table full" in h[0].notes[0] for h in want)
    decoder = CtcStreamDecoder(g, small, backend, max_lanes=2)
    assert _stream_all(decoder, lp, lengths, None, np.random.default_rng(3)) == want


@pytest.mark.parametrize("backend", fast_backends())
def test_shipped_tlg_streams_equal_decode_ctc(backend):
    graph_mod = pytest.importorskip("wfstdecode.graph")
    from wfstdecode.symbols import SymbolTable

    tokens = SymbolTable.read(DATA / "tokens.txt")
    lexicon = graph_mod.read_lexicon(DATA / "lexicon.txt", tokens)
    g = graph_mod.build_tlg(tokens, lexicon, str(DATA / "lm.arpa.gz"), topology="compact",
                            separator="|").graph  # fmt: skip
    n, opts, tuning = 12, CtcBeamOptions(beam=12.0, nbest=2), CpuTuning(num_threads=2)
    if backend == "cuda":  # the simulator runs 8 threads a block in Python: 3 short searches
        n, opts, tuning = 3, CtcBeamOptions(beam=8.0, max_active=100, nbest=2), None
    with np.load(DATA / "ocr_emissions.npz") as z:
        lp, lengths = z["log_probs"][:n], z["lengths"][:n]
    want = decode_ctc(lp, lengths, g, opts, backend="cpu")
    decoder = CtcStreamDecoder(g, opts, backend, max_lanes=min(n, 5), tuning=tuning)
    got = _stream_all(decoder, lp, lengths, None, np.random.default_rng(0))
    assert got == want
    assert sum(len(h[0].words) for h in got) > 2.5 * n
    if backend == "cpu":  # and from the lattices: 3-best with word confidences
        opts = CtcBeamOptions(beam=10.0, nbest=3, lattice_beam=6.0)
        want = decode_ctc(lp, lengths, g, opts, backend="cpu")
        decoder = CtcStreamDecoder(g, opts, backend, max_lanes=5, tuning=tuning)
        assert _stream_all(decoder, lp, lengths, None, np.random.default_rng(1)) == want
        assert sum(len(h) for h in want) > 2 * n and all(h[0].word_confidences for h in want)


@pytest.mark.parametrize("seed", range(6))
def test_stable_words_never_change_and_backends_agree(seed):
    """After every chunk, the partial result's first ``stable_words`` words are a prefix of
    every later partial and of the final best path; every backend gives the same partials."""
    words = ["cat", "cap", "act", "tact", "pat", "apt", "tapa"]
    g = lexicon_graph(words, word_cost=[1.0, 1.2, 2.0, 2.5, 1.1, 2.2, 2.4])
    rng = np.random.default_rng(seed)
    text = "".join(words[i] for i in rng.integers(len(words), size=8))
    lp, lengths = simulate_ctc([[g.tokens.id(c) for c in text]], g.num_tokens, seed=seed,
                               confusion_prob=0.3, noise=1.5)  # fmt: skip
    opts = CtcBeamOptions(beam=8.0)
    names = ["reference", "cpu", *(["cuda"] if "cuda" in available_ctc_backends() else [])]
    streams = {b: CtcStreamDecoder(g, opts, b) for b in names}
    sid = {b: d.open() for b, d in streams.items()}
    stable_so_far: list = []
    grew = False
    for t0, t1 in _chunked(rng, int(lengths[0])):
        partials = {}
        for b, d in streams.items():
            d.advance({sid[b]: lp[0, t0:t1]})
            partials[b] = d.partial(sid[b])
        assert all(partials[b] == partials["reference"] for b in names)
        p = partials["cpu"]
        assert p.words[: len(stable_so_far)] == tuple(stable_so_far)
        grew |= p.stable_words > len(stable_so_far)
        stable_so_far = list(p.words[: max(p.stable_words, len(stable_so_far))])
    final = streams["cpu"].finish(sid["cpu"])[0]
    assert final.words[: len(stable_so_far)] == tuple(stable_so_far)
    assert final == decode_ctc(lp, lengths, g, opts, backend="reference")[0][0]
    assert grew  # words did become stable along the way


def _speech_then_blank(g, text, blank_frames, seed=0):
    lp, lengths = simulate_ctc([[g.tokens.id(c) for c in text]], g.num_tokens, seed=seed)
    speech = lp[0, : lengths[0]] if text else np.zeros((0, g.num_tokens), np.float32)
    if text:  # end on the last token: the silence below is all the trailing silence
        speech = speech[: np.flatnonzero(speech.argmax(axis=1) != 0)[-1] + 1]
    silence = np.full((blank_frames, g.num_tokens), -30.0, np.float32)
    silence[:, 0] = 0.0  # blank (token 0) certain
    return np.concatenate([speech, silence])


@pytest.mark.parametrize("backend", BACKENDS)
def test_endpoint_rules(backend):
    g = lexicon_graph(["cat", "tact"], word_cost=1.0)
    rules = EndpointRules(frame_shift=0.1)  # rule1: 2.4 s silence, rule2: 1.2 s after speech
    d = CtcStreamDecoder(g, backend=backend, endpoint=rules)
    speech = _speech_then_blank(g, "cattact", 0)
    a = d.open()
    assert d.advance({a: speech}) == {} and d.endpoint(a) is None
    assert d.advance({a: _speech_then_blank(g, "", 11)}) == {}  # 1.1 s of silence
    assert d.advance({a: _speech_then_blank(g, "", 1)}) == {a: "rule2"}  # 1.2 s
    assert d.advance({a: _speech_then_blank(g, "", 30)}) == {}  # (reached in that call only)
    assert d.endpoint(a) == "rule2" and d.finish(a)[0].words == ("cat", "tact")
    quiet = d.open()  # no speech: only rule1's 2.4 s end it
    assert d.advance({quiet: _speech_then_blank(g, "", 23)}) == {}
    assert d.advance({quiet: _speech_then_blank(g, "", 1)}) == {quiet: "rule1"}
    long = CtcStreamDecoder(g, backend=backend, endpoint=EndpointRules(
        frame_shift=0.1, rules=(EndpointRule(False, 0.0, 2.0),)))  # fmt: skip
    s = long.open()
    assert long.advance({s: speech[:19]}) == {}
    assert long.advance({s: speech[19:21]}) == {s: "rule1"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_trailing_silence_counts_from_the_last_of_the_tokens_settled_together(backend):
    """A chunk whose tokens all settle at once (a beam narrow enough for one survivor), then
    silence frame by frame: the rule fires on the 10th frame after the last token, not counted
    from an earlier token of the chunk."""
    g = lexicon_graph(["cat", "tact"], word_cost=1.0)
    d = CtcStreamDecoder(g, CtcBeamOptions(beam=0.5), backend=backend,
                         endpoint=EndpointRules(0.1, (EndpointRule(True, 1.0),)))  # fmt: skip
    a = d.open()
    assert d.advance({a: _speech_then_blank(g, "cattact", 3)}) == {}
    for _ in range(6):
        assert d.advance({a: _speech_then_blank(g, "", 1)}) == {}
    assert d.advance({a: _speech_then_blank(g, "", 1)}) == {a: "rule1"}  # the 10th frame


def _checked_endpoint_detects(monkeypatch):
    """Record what each endpoint check gives the rules; `check(d, sid, t1, g)` asserts the last
    advance's record equals the silence after the last token of the whole best path, traced
    anew."""
    seen = []
    detect = EndpointRules.detect
    monkeypatch.setattr(EndpointRules, "detect", lambda self, *args: seen.append(args) or
                        detect(self, *args))  # fmt: skip

    def check(d, sid, t1, g, what):
        stream = d._get(sid)
        stream.state, arcs, frames, _ = d._search.partial(stream.problem, stream.state)
        blank = stream.problem.blank_ilabel
        tokens = (arcs < g.num_emitting_arcs) & (g.ilabel[arcs] != blank)
        spoken_until = int(frames[tokens][-1]) + 1 if tokens.any() else 0
        assert seen == [(t1, t1 - spoken_until, bool(tokens.any()))], what
        seen.clear()

    return seen, check


NEVER = EndpointRules(0.1, (EndpointRule(True, math.inf),))


@pytest.mark.parametrize("backend", BACKENDS)
def test_endpoint_checks_see_the_trailing_silence_of_the_whole_best_path(backend, monkeypatch):
    """A check reads only the best path's arcs since its stable ones last read: what it gives
    the rules equals the silence after the last token of the whole path, traced anew."""
    seen, check = _checked_endpoint_detects(monkeypatch)
    words = lexicon_graph(["cat", "tact"], word_cost=1.0)
    for seed in range(8):
        rng = np.random.default_rng(seed)
        if seed % 2:  # random paths, survivors everywhere
            g = random_graph(seed)
            lp = random_log_probs(seed, 1, 60, g.num_tokens, peaky=4.0)
        else:  # words, silences: the last token moves into the stable prefix
            g = words
            lp = np.concatenate([_speech_then_blank(g, "cattact", 15, seed),
                                 _speech_then_blank(g, "cat", 30, seed)])[None]  # fmt: skip
        T = lp.shape[1]
        opts = CtcBeamOptions(beam=float(rng.choice([3.0, 6.0])))
        d = CtcStreamDecoder(g, opts, backend=backend, endpoint=NEVER)
        sid = d.open({"w1 w2": 2.0} if seed % 4 == 1 else None)
        for t0, t1 in _chunked(rng, T):
            seen.clear()
            d.advance({sid: lp[0, t0:t1]})
            if seen:  # (else an empty chunk, or the search died)
                check(d, sid, t1, g, (seed, t1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unsettled_token_the_best_path_drops_later_does_not_end_its_silence(
    backend, monkeypatch
):
    """``a`` settles; ``b`` then leads but is unsettled (a blank there survives), and the
    silence after ``b`` costs 2 a frame, so the next frame's best path has no ``b``: the silence
    counts from ``a`` again, not from the dropped ``b``."""
    from wfstdecode.fstio import FstArrays
    from wfstdecode.symbols import SymbolTable

    blank, a, b = 1, 2, 3  # token ids + 1 (0: epsilon)
    src, dst, ilabel, olabel, cost = zip(
        (0, 0, blank, 0, 0.0), (0, 1, a, 1, 0.0), (1, 1, blank, 0, 0.0), (1, 1, a, 0, 0.0),
        (1, 2, b, 2, 0.0), (2, 2, blank, 0, 2.0), (2, 2, b, 0, 0.0), strict=True,
    )  # fmt: skip
    fst = FstArrays(0, np.array([np.inf, 0.0, 0.0]), *map(np.array, (src, dst, ilabel, olabel)),
                    np.array(cost))  # fmt: skip
    g = DecodingGraph.from_arrays(fst, SymbolTable.from_list(["<blk>", "a", "b"]),
                                  SymbolTable.from_list(["<eps>", "a", "b"]))  # fmt: skip

    def frames(*probs):
        return np.log(np.maximum(np.array(probs, np.float32), 1e-13)).astype(np.float32)

    seen, check = _checked_endpoint_detects(monkeypatch)
    d = CtcStreamDecoder(g, CtcBeamOptions(beam=8.0), backend=backend, endpoint=NEVER)
    sid = d.open()
    chunks = [frames([0, 1, 0], [1, 0, 0], [1, 0, 0]), frames([0.3, 0, 0.7]), frames([1, 0, 0])]
    t1 = 0
    for chunk in chunks:
        t1 += len(chunk)
        d.advance({sid: chunk})
        check(d, sid, t1, g, t1)
    assert seen == [] and d.finish(sid)[0].words == ("a",)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_input_names_the_stream_and_leaves_the_others_alone(backend):
    g = random_graph(1)
    lp = random_log_probs(1, 2, 10, g.num_tokens)
    d = CtcStreamDecoder(g, backend=backend)
    a, b = d.open(), d.open()
    d.advance({a: lp[0, :4], b: lp[1, :4]})
    nan = lp[1, 4:8].copy()
    nan[2, 1] = np.nan
    big = lp[1, 4:8].astype(np.float64)
    big[1, 2] = 1e39
    cases = [
        (
            {b: big},
            rf"stream {b}: chunk\[1, 2\] = 1e\+39 is beyond float32's range, the "
            r"search's \(frame 5 of the stream\)",
        ),
        ({a: lp[0, 4:], 99: lp[1, 4:]}, r"stream 99 is unknown"),
        (
            {a: lp[0, 4:], b: nan},
            rf"stream {b}: chunk frame 2 \(frame 6 of the stream\) contains NaN",
        ),
        ({a: lp[0, 4:, :3]}, rf"stream {a}: a chunk must be \(frames, {g.num_tokens}\)"),
        ({a: lp[:1, 4:]}, r"a chunk must be .* got shape \(1, 6, "),  # (frames, V) only
        ({a: lp[0, 4:].astype(np.int64)}, rf"stream {a}: a chunk must be floating point"),
        ({b: None}, rf"stream {b}: a chunk must be floating point"),
        ([lp[0]], r"advance takes a mapping"),
    ]
    for chunks, match in cases:
        with pytest.raises(DecodeInputError, match=match):
            d.advance(chunks)
    d.advance({a: lp[0, 4:], b: lp[1, 4:]})  # nothing moved on the failed calls
    want = decode_ctc(lp, None, g, backend="reference")
    assert [d.finish(a), d.finish(b)] == want
    with pytest.raises(DecodeInputError, match=rf"stream {a} is finished"):
        d.advance({a: lp[0, :1]})
    d.close(a)
    with pytest.raises(DecodeInputError, match=rf"stream {a} is closed"):
        d.partial(a)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lattice_beam", [None, 4.0])
def test_a_negative_epsilon_cycle_fails_the_stream_where_every_backend_does(backend, lattice_beam):
    """A graph whose closure never converges (a negative-cost epsilon cycle at the start): the
    stream opens, a bad chunk is still refused as bad input, and the graph's error comes at
    `partial` and `finish`, in every backend (the reference raised it at `open`, so a stream
    fed a bad chunk failed differently there: fuzz_ctc streams seed 2904190)."""
    from wfstdecode import GraphError
    from wfstdecode.decoding_graph import DecodingGraph
    from wfstdecode.fstio import FstArrays

    final = np.array([0.0, 0.0], np.float32)
    src, dst, ilabel = np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([1, 0, 0])
    fst = FstArrays(0, final, src, dst, ilabel, np.zeros(3), np.array([0.0, -1.0, 0.5]))
    g = DecodingGraph.from_arrays(fst)
    d = CtcStreamDecoder(g, CtcBeamOptions(beam=5.0, lattice_beam=lattice_beam), backend)
    s = d.open()
    with pytest.raises(
        DecodeInputError, match=rf"stream {s}: chunk frame 0 \(frame 0 of the stream\) contains"
    ):
        d.advance({s: np.full((1, 1), -np.inf, np.float32)})
    d.advance({s: np.zeros((2, 1), np.float32)})
    for call in (d.partial, d.finish):
        with pytest.raises(GraphError, match="negative-cost epsilon cycle"):
            call(s)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_graph_without_a_token_table_streams_any_width_it_can_read(backend):
    """As `decode_ctc`, a graph without a token table takes chunks of any width from the
    columns it reads (a model with a token the graph never reads); the first chunk fixes the
    width for the decoder's streams. A graph with no arcs streams too (it decodes nothing)."""
    g = replace(random_graph(4), tokens=None)
    lp = random_log_probs(4, 2, 7, g.num_tokens + 2)  # two columns the graph never reads
    d = CtcStreamDecoder(g, CtcBeamOptions(beam=6.0), backend)
    a, b = d.open(), d.open()
    with pytest.raises(DecodeInputError, match=rf"must be \(frames, >= {g.num_tokens}\)"):
        d.advance({a: lp[0, :3, : g.num_tokens - 1]})
    nan = lp[0, :3, : g.num_tokens].copy()
    nan[1, 0] = np.nan
    with pytest.raises(DecodeInputError, match="NaN"):  # a refused chunk fixes no width
        d.advance({a: nan})
    with pytest.raises(DecodeInputError, match=rf"stream {b}: .* \(frames, {g.num_tokens + 2}\)"):
        d.advance({a: lp[0, :3], b: lp[1, :3, : g.num_tokens]})  # nor do a call's mixed widths
    d.advance({a: lp[0, :3]})
    with pytest.raises(DecodeInputError, match=rf"must be \(frames, {g.num_tokens + 2}\)"):
        d.advance({b: lp[1, :3, : g.num_tokens]})
    d.advance({a: lp[0, 3:], b: lp[1]})
    want = decode_ctc(lp, None, g, CtcBeamOptions(beam=6.0), backend="reference")
    assert [d.finish(a), d.finish(b)] == want
    from wfstdecode.decoding_graph import DecodingGraph
    from wfstdecode.fstio import FstArrays

    none = np.zeros(0, np.int64)
    empty = DecodingGraph.from_arrays(
        FstArrays(0, np.array([0.0], np.float32), none, none, none, none, np.zeros(0))
    )
    e = CtcStreamDecoder(empty, backend=backend)
    s = e.open()
    e.advance({s: lp[0, :2]})
    assert e.finish(s) == decode_ctc(lp[:1, :2], None, empty, backend="reference")[0]


def test_a_streams_bad_boosts_are_named_as_its_own():
    g = random_graph(2)
    d = CtcStreamDecoder(g)
    with pytest.raises(DecodeInputError, match=r"^boosts\['w1'\] must be in"):
        d.open({"w1": float("nan")})
    assert d.streams == [] and d.open() == 0


def test_stream_ids_are_integers_of_any_kind_but_bool():
    g = random_graph(2)
    lp = random_log_probs(2, 1, 3, g.num_tokens)
    d = CtcStreamDecoder(g)
    ids = np.array([d.open(), d.open()])
    d.advance({ids[1]: lp[0]})
    assert d.frames(ids[1]) == 3 and d.partial(ids[1]) is not None
    assert d.finish(ids[1]) == decode_ctc(lp, None, g)[0]
    with pytest.raises(DecodeInputError, match="stream True is unknown"):
        d.frames(True)


def test_a_float64_chunk_beyond_float32_is_named_as_such():
    g = random_graph(2)
    lp = random_log_probs(2, 1, 3, g.num_tokens).astype(np.float64)
    lp[0, 1, 2] = 1e300
    d = CtcStreamDecoder(g)
    s = d.open()
    with pytest.raises(DecodeInputError, match=r"stream 0: chunk\[1, 2\] = 1e\+300 is beyond"):
        d.advance({s: lp[0]})
    lp[0, 1, 2] = -1e300  # below the range: -inf, as decode_ctc reads it
    d.advance({s: lp[0]})
    assert d.finish(s) == decode_ctc(lp, None, g)[0]
    s = d.open()
    lp[0, 1] = -1e300  # a whole frame below
    with pytest.raises(DecodeInputError, match=r"stream 1: chunk\[1, 0\] = -1e\+300 is beyond"):
        d.advance({s: lp[0]})


def test_a_finish_that_raised_raises_again_and_leaves_the_stream_open():
    """`finish` marks a stream finished only once it returns: a second call says what the first
    said (it said "stream is finished", hiding the graph's error)."""
    from wfstdecode import GraphError
    from wfstdecode.decoding_graph import DecodingGraph
    from wfstdecode.fstio import FstArrays

    final = np.array([0.0, 0.0], np.float32)
    src, dst, ilabel = np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([1, 0, 0])
    fst = FstArrays(0, final, src, dst, ilabel, np.zeros(3), np.array([0.0, -1.0, 0.5]))
    d = CtcStreamDecoder(DecodingGraph.from_arrays(fst), CtcBeamOptions(lattice_beam=4.0))
    s = d.open()
    d.advance({s: np.zeros((2, 1), np.float32)})
    for _ in range(2):
        with pytest.raises(GraphError, match="negative-cost epsilon cycle"):
            d.finish(s)
    assert s in d.streams


def test_endpoints_fire_at_whole_frame_counts_despite_rounding():
    """30 frames of 0.03 s are 0.9 s (``30 * 0.03`` is 0.8999999999999999 in floats)."""
    for shift, seconds, frames in ((0.03, 0.9, 30), (0.03, 1.8, 60), (0.1, 0.3, 3)):
        rules = EndpointRules(shift, (EndpointRule(False, seconds),))
        assert rules.detect(frames, frames, False) == "rule1"
        assert rules.detect(frames - 1, frames - 1, False) is None


def test_cpu_streams_forget_their_bundles_with_their_problems():
    """The cpu backend makes a stream's argument bundles once and drops them when the stream's
    problem goes."""
    import gc

    g = random_graph(3)
    lp = random_log_probs(3, 2, 6, g.num_tokens)
    decoder = CtcStreamDecoder(g, CtcBeamOptions(beam=4.0), "cpu")
    sids = [decoder.open({"w1": 1.0} if b else None) for b in range(2)]
    for t in range(0, 6, 2):
        decoder.advance({sid: lp[b, t : t + 2] for b, sid in enumerate(sids)})
    assert len(decoder._search._made) == 2
    got = [decoder.finish(sid) for sid in sids]
    assert got == decode_ctc(lp, None, g, CtcBeamOptions(beam=4.0), [None, {"w1": 1.0}])
    for sid in sids:
        decoder.close(sid)
    gc.collect()
    assert decoder._search._made == {}


def test_options_are_checked():
    g = random_graph(0)
    with pytest.raises(OptionsError, match="max_lanes must be an int >= 1"):
        CtcStreamDecoder(g, max_lanes=0)
    with pytest.raises(OptionsError, match="backend must be 'auto', 'reference', 'cpu' or 'cuda'"):
        CtcStreamDecoder(g, backend="gpu")
    with pytest.raises(OptionsError, match="frame_shift must be in"):
        EndpointRules(frame_shift=0)
    for bad in (True, "0.04", math.nan):
        with pytest.raises(OptionsError, match="frame_shift must be in"):
            EndpointRules(frame_shift=bad)
    for rule in (EndpointRule(False, math.nan), EndpointRule(False, 0.0, math.nan),
                 EndpointRule(False, "1"), EndpointRule(False, -1.0)):  # fmt: skip
        with pytest.raises(OptionsError, match=r"rules\[0\] must be an EndpointRule with"):
            EndpointRules(0.04, (rule,))  # NaN: a rule that never fires, said so now
    for rules in (None, EndpointRule(False, 1.0)):
        with pytest.raises(OptionsError, match="rules must be a tuple of EndpointRule"):
            EndpointRules(0.04, rules)
    assert EndpointRules(np.float32(0.04)).frame_shift == np.float32(0.04)


def test_a_stream_decoder_is_not_pickled_or_copied():
    """It holds live searches: a copy would share them (finishing a stream on the copy finished
    it on the original) and a pickle failed on a lock with no word on why."""
    import copy
    import pickle

    d = CtcStreamDecoder(random_graph(0))
    for make in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match="holds live searches"):
            make(d)


def test_threads_sharing_a_stream_take_turns():
    """One thread feeding a stream frame by frame while another polls its partial result (a
    server's audio and display threads) corrupted the search's arrays: wrong finals at once,
    then a segfault or a malloc abort. A stream now takes one call at a time; the final equals
    decode_ctc's, and calls on other streams are not held up by it."""
    import threading

    g = random_graph(7, num_states=40, num_tokens=8, num_words=12, arcs_per_state=6)
    opts = CtcBeamOptions(beam=30.0, max_active=400)
    T = 120
    lp = random_log_probs(7, 1, T, 8, peaky=0.5)
    want = decode_ctc(lp, [T], g, opts, backend="cpu")[0]
    decoder = CtcStreamDecoder(g, opts, "cpu")
    errors: list[BaseException] = []

    def guarded(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # (reported by the main thread)
                errors.append(exc)

        return run

    for _ in range(6):
        sid = decoder.open()
        fed = threading.Event()

        def feed(sid=sid, fed=fed):
            for t in range(T):
                decoder.advance({sid: lp[0, t : t + 1]})
            fed.set()

        def poll(sid=sid, fed=fed):
            while not fed.is_set():
                decoder.partial(sid)

        threads = [threading.Thread(target=guarded(f)) for f in (feed, poll)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors, errors
        assert decoder.finish(sid) == want
        decoder.close(sid)

    # two threads advancing one stream: each call whole, in some order; the final is
    # decode_ctc's on the frames as the stream received them (each frame twice)
    sid = decoder.open()
    both = threading.Barrier(2)

    def feed_one():
        both.wait()
        for t in range(T):
            decoder.advance({sid: lp[0, t : t + 1]})

    threads = [threading.Thread(target=guarded(feed_one)) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert decoder.frames(sid) == 2 * T
    received = decoder._streams[sid].log_probs[: 2 * T].copy()
    assert sorted(map(bytes, received)) == sorted(map(bytes, np.repeat(lp[0], 2, axis=0)))
    assert decoder.finish(sid) == decode_ctc(received[None], [2 * T], g, opts, backend="cpu")[0]


def test_a_call_back_into_a_stream_from_its_own_call_raises():
    """A chunk whose conversion calls the decoder back on the same stream (an array-like with a
    live display, say) waited on the stream's own lock for good, deaf to Ctrl-C. It raises now,
    naming the stream, and the stream goes on as if the call had not been made."""
    g = random_graph(3, num_states=20, num_tokens=6, num_words=8, arcs_per_state=4)
    lp = random_log_probs(3, 1, 10, 6, peaky=0.5)[0]
    decoder = CtcStreamDecoder(g, CtcBeamOptions(beam=20.0), "cpu")
    sid, other = decoder.open(), decoder.open()

    class Peeking:
        def __init__(self, frames, peek):
            self.frames, self.peek = frames, peek

        def __array__(self, dtype=None, copy=None):
            self.peek()
            return self.frames

    with pytest.raises(DecodeInputError, match=f"stream {sid} is in use by a call this thread"):
        decoder.advance({sid: Peeking(lp[:5], lambda: decoder.partial(sid))})
    assert decoder.frames(sid) == 0
    # another stream may be called back; the stream itself once the call returned
    decoder.advance({sid: Peeking(lp[:5], lambda: decoder.advance({other: lp[:3]}))})
    decoder.advance({sid: lp[5:]})
    assert decoder.frames(other) == 3
    want = decode_ctc(lp[None], [10], g, CtcBeamOptions(beam=20.0), backend="cpu")[0]
    assert decoder.finish(sid) == want


@pytest.mark.parametrize("shift", [0.01, 0.03, 0.04, 0.1])
def test_endpoints_fire_at_whole_frame_counts_with_a_float32_frame_shift(shift):
    """A frame shift given as np.float32 (accepted: test_options_are_checked) is the same frame
    shift: n frames of it last n * shift seconds, as with a Python float (0.01 as float32 is
    0.0099999998: 10 frames were 0.099999998 s, short of a 0.1 s rule by more than the 1e-9
    tolerance, and the endpoint came a frame late)."""
    for frames in range(1, 200):
        seconds = round(frames * shift, 6)
        for rule in (EndpointRule(False, seconds), EndpointRule(False, 0.0, seconds)):
            rules = EndpointRules(np.float32(shift), (rule,))
            assert rules.detect(frames, frames, False) == "rule1", (shift, frames, rule)
            assert rules.detect(frames - 1, frames - 1, False) is None, (shift, frames, rule)
    # end to end, with the default rules' 1.2 s after speech at 0.04 s a frame: 30 frames
    g = lexicon_graph(["cat"])
    silence = np.full((30, g.num_tokens), -30.0, np.float32)
    silence[:, 0] = 0.0
    d = CtcStreamDecoder(g, endpoint=EndpointRules(np.float32(0.04),
                                                   (EndpointRule(False, 1.2),)))  # fmt: skip
    s = d.open()
    assert d.advance({s: silence[:29]}) == {}
    assert d.advance({s: silence[29:]}) == {s: "rule1"}


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_a_zero_width_chunk_is_refused_as_decode_ctc_refuses_it(backend):
    """A graph with no arcs and no token table reads no column: decode_ctc refuses (1, T, 0)
    log-probs (every column of a frame is -inf, vacuously); a stream took the same frames and
    its finish said the search died."""
    from wfstdecode.fstio import FstArrays

    none = np.zeros(0, np.int64)
    empty = DecodingGraph.from_arrays(
        FstArrays(0, np.array([0.0], np.float32), none, none, none, none, np.zeros(0))
    )
    lp = np.zeros((2, 0), np.float32)
    with pytest.raises(DecodeInputError, match="-inf in every column"):
        decode_ctc(lp[None], None, empty, backend="reference")
    d = CtcStreamDecoder(empty, backend=backend)
    s = d.open()
    with pytest.raises(
        DecodeInputError,
        match=rf"stream {s}: chunk frame 0 \(frame 0 of the stream\) contains -inf",
    ):
        d.advance({s: lp})
    assert d.frames(s) == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stream_whose_search_died_still_reaches_its_endpoints(backend):
    """A search that dies (every token of infinite cost: here "c" then "t", which "cat" cannot
    read) has no path; endpoint checks then see an utterance of silence, so the length rule (a
    service's safety net) and the silence rule still end the stream instead of never firing."""
    g = lexicon_graph(["cat"], word_cost=1.0)

    def only(token):
        frame = np.full((1, g.num_tokens), -np.inf, np.float32)
        frame[0, g.tokens.id(token)] = 0.0
        return frame

    blank = g.tokens.symbol(0)
    for rule, fires_at in ((EndpointRule(False, 0.0, 1.0), 10), (EndpointRule(True, 0.5), None),
                           (EndpointRule(False, 0.8), 8)):  # fmt: skip
        d = CtcStreamDecoder(g, backend=backend, endpoint=EndpointRules(0.1, (rule,)))
        sid = d.open()
        reached_at = None
        for t, token in enumerate(["c", "t", *[blank] * 10]):
            if d.advance({sid: only(token)}) and reached_at is None:
                reached_at = t + 1
        assert reached_at == fires_at, rule
        assert d.endpoint(sid) == (None if fires_at is None else "rule1")
        assert d.finish(sid)[0].notes[0].startswith("search died at frame 1")


def _stable_word_times_checked(g, lp, lengths) -> int:
    """Stream each utterance in random chunks of 1-5 frames; every partial's stable words must
    be the final's, each starting where the final's does and ending no later; how many were."""
    checked = 0
    for b in range(len(lengths)):
        rng = np.random.default_rng(b)
        d = CtcStreamDecoder(g, CtcBeamOptions(beam=10.0), "cpu")
        sid = d.open()
        partials, t, T = [], 0, int(lengths[b])
        while t < T:
            step = int(rng.integers(1, 6))
            d.advance({sid: lp[b, t : t + step]})
            t = min(T, t + step)
            partials.append(d.partial(sid))
        final = d.finish(sid)[0]
        for p in partials:
            assert p.words[: p.stable_words] == final.words[: p.stable_words]
            for i in range(p.stable_words):  # the start fixed, the end may still grow
                start, end = p.word_timestamps[i]
                assert start == final.word_timestamps[i][0], (b, p, final)
                assert end <= final.word_timestamps[i][1], (b, p, final)
                checked += 1
    return checked


def test_partial_word_times_on_a_separator_graph_are_the_final_ones():
    """On a TLG with a word separator, a partial path usually ends inside a word whose output
    label is still to come (determinization delays it until the word is told apart), so it has
    one more run of tokens between separators than words. Its words took their times from the
    crude fallback (``might`` at the separator after it, (15, 15) for (5, 14)): a stable word's
    start moved later, and ends shrank. The runs before the unlabelled one are the words'."""
    graph_mod = pytest.importorskip("wfstdecode.graph")
    from wfstdecode.symbols import SymbolTable

    tokens = SymbolTable.read(DATA / "tokens.txt")
    lexicon = graph_mod.read_lexicon(DATA / "lexicon.txt", tokens)
    g = graph_mod.build_tlg(tokens, lexicon, str(DATA / "lm.arpa.gz"), topology="compact",
                            separator="|").graph  # fmt: skip
    with np.load(DATA / "ocr_emissions.npz") as z:
        lp, lengths = z["log_probs"][22:30], z["lengths"][22:30]
    assert _stable_word_times_checked(g, lp, lengths) > 100


def test_partial_word_times_on_a_pronunciation_graph_are_the_final_ones():
    """The same on a TLG without a separator, whose words are told apart by their pronunciations
    (a phone or sentencepiece graph): a partial path usually ends in tokens of a word whose label
    is still to come, after the last word's. No split of all the path's tokens fitted, so its
    words took their times from the crude fallback (the shipped speech graph built without
    ``<wb>``: 2127 of 5922 stable words' starts moved on 180 flite utterances). The split of the
    path's first tokens is the words'; the tokens left are words to come."""
    graph_mod = pytest.importorskip("wfstdecode.graph")
    from wfstdecode.symbols import SymbolTable

    tokens = SymbolTable.read(DATA / "tokens.txt")
    lexicon = graph_mod.read_lexicon(DATA / "lexicon.txt", tokens)
    g = graph_mod.build_tlg(tokens, lexicon, str(DATA / "lm.arpa.gz"), topology="compact").graph
    assert g.metadata.get("separator") is None and g.pronunciations is not None
    with np.load(DATA / "ocr_emissions.npz") as z:
        lp, lengths = z["log_probs"][22:30].copy(), z["lengths"][22:30]
    sep = tokens.id("|")  # the graph reads no separator: its frames are blanks
    lp[..., 0] = np.logaddexp(lp[..., 0], lp[..., sep])
    lp[..., sep] = -1e4
    assert _stable_word_times_checked(g, lp, lengths) > 100

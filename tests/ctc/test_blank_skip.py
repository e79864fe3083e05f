"""`CtcBeamOptions.blank_skip_threshold`: frames whose blank probability exceeds it are left out
of the search. Checked against its definition, built here with NumPy: decoding the frames kept
as the whole input, then numbering times as the input does and adding the skipped blanks'
scores."""

import math

import numpy as np
import pytest

from wfstdecode.ctc import (
    CtcBeamOptions,
    CtcStreamDecoder,
    EndpointRule,
    EndpointRules,
    ctc_lattices,
    decode_ctc,
)
from wfstdecode.errors import DecodeInputError, OptionsError
from wfstdecode.testing import (
    assert_hypotheses_equal,
    fast_backends,
    lexicon_graph,
    random_graph,
    random_log_probs,
)

BACKENDS = ["reference", *fast_backends()]
BLANK = 0  # the test graphs' blank token id


def _with_blank_frames(lp, rng, share=0.5, blank_prob=0.995):
    """``lp`` with about ``share`` of its frames made blank-dominated (blank ``blank_prob``, the
    rest of the mass spread as it was)."""
    lp = lp.copy()
    B, T = lp.shape[:2]
    picked = rng.random((B, T)) < share
    rest = np.exp(lp[..., 1:])
    rest = rest / rest.sum(-1, keepdims=True) * (1 - blank_prob)
    lp[..., 1:] = np.where(picked[..., None], np.log(rest), lp[..., 1:])
    lp[..., BLANK] = np.where(picked, np.log(blank_prob), lp[..., BLANK])
    return lp.astype(np.float32)


def _kept(lp_b, length, th):
    """The definition's frames kept of one utterance: all but those whose blank is above log(th)
    — except a run of such frames between two kept frames whose best column (the first largest)
    is one and the same, not the blank (left out, the run would join them)."""
    skippable = [float(lp_b[t, BLANK]) > math.log(th) for t in range(length)]
    neighbours = [t for t in range(length) if not skippable[t]]
    kept = list(neighbours)
    for t in range(length):
        if skippable[t]:
            before = [u for u in neighbours if u < t]
            after = [u for u in neighbours if u > t]
            if before and after:
                left, right = np.argmax(lp_b[before[-1]]), np.argmax(lp_b[after[0]])
                if left == right != BLANK:
                    kept.append(t)
    return sorted(kept)


def _expected(lp, lengths, graph, options, backend):
    """The definition: the frames `_kept` leaves out removed, the rest decoded as the input;
    times mapped back, the skipped blanks' scaled log-probs added."""
    th = options.blank_skip_threshold
    B, V = lp.shape[0], lp.shape[2]
    kept = [_kept(lp[b], int(lengths[b]), th) for b in range(B)]
    width = max(1, max(map(len, kept), default=1))
    short = np.zeros((B, width, V), np.float32)
    for b, frames in enumerate(kept):
        short[b, : len(frames)] = lp[b, frames]
    plain = CtcBeamOptions(**{**options.__dict__, "blank_skip_threshold": None})
    got = decode_ctc(short, np.array([len(k) for k in kept]), graph, plain, backend=backend)
    out = []
    for b, utt in enumerate(got):
        skipped = [t for t in range(int(lengths[b])) if t not in set(kept[b])]
        extra = options.acoustic_scale * float(np.sum(lp[b, skipped, BLANK], dtype=np.float64))

        def at(t, k=kept[b]):
            return k[t] if 0 <= t < len(k) else t

        out.append([h if h.score == -math.inf else type(h)(**{
            **h.__dict__, "timestamps": tuple(map(at, h.timestamps)),
            "word_timestamps": tuple((at(s), at(e)) for s, e in h.word_timestamps),
            "acoustic_score": h.acoustic_score + extra, "score": h.score + extra,
        }) for h in utt])  # fmt: skip
    return out


def _assert_same(got, want, what):
    assert_hypotheses_equal(got, want, what=what)
    for gu, wu in zip(got, want, strict=True):
        for g, w in zip(gu, wu, strict=True):
            if g.score != -math.inf:
                assert g.acoustic_score == pytest.approx(w.acoustic_score, rel=1e-5, abs=1e-4)
                assert g.graph_score == pytest.approx(w.graph_score, rel=1e-5, abs=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", range(4))
def test_skipping_equals_decoding_the_frames_kept(backend, seed):
    rng = np.random.default_rng(seed)
    g = random_graph(seed, num_states=10, num_tokens=5, num_words=4)
    lp = _with_blank_frames(random_log_probs(seed, 4, 14, g.num_tokens), rng)
    lengths = np.array([14, 9, 0, 5])
    lp[1, 9:] = np.nan  # beyond its length: never read, never skipped
    lp[3, :5, BLANK] = math.log(0.999)  # every frame of utterance 3 skipped
    for th, nbest in ((0.99, 1), (0.9, 3), (1.0, 2)):
        options = CtcBeamOptions(beam=8.0, nbest=nbest, acoustic_scale=1.5, blank_penalty=0.3,
                                 blank_skip_threshold=th)  # fmt: skip
        got = decode_ctc(lp, lengths, g, options, backend=backend)
        _assert_same(got, _expected(lp, lengths, g, options, backend), f"{backend} th={th}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_skipping_keeps_the_words_and_their_input_times(backend):
    """On a lexicon graph with blank-dominated frames between the letters, the words come out
    with the frames of the input, as without skipping."""
    g = lexicon_graph(["cat", "act", "tact"], word_cost=[1.0, 1.2, 2.0])
    blank, (c, a, t) = 1e-4, (g.tokens.id(x) for x in "cat")
    frames = [c, BLANK, BLANK, a, BLANK, t, BLANK, BLANK, BLANK]
    lp = np.full((1, len(frames), g.num_tokens), math.log(blank), np.float32)
    for i, k in enumerate(frames):
        lp[0, i, k] = math.log(1 - blank * (g.num_tokens - 1))
    plain = decode_ctc(lp, None, g, CtcBeamOptions(beam=10.0), backend=backend)
    skipping = decode_ctc(lp, None, g, CtcBeamOptions(beam=10.0, blank_skip_threshold=0.99),
                          backend=backend)  # fmt: skip
    assert skipping[0][0].words == plain[0][0].words == ("cat",)
    assert skipping[0][0].timestamps == plain[0][0].timestamps == (0, 3, 5)
    assert skipping[0][0].word_timestamps == plain[0][0].word_timestamps == ((0, 5),)
    assert skipping[0][0].score == pytest.approx(plain[0][0].score, abs=1e-3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_blank_between_two_equal_tokens_is_kept(backend):
    """On the normal topology a doubled letter needs its blank: skipped, ``t <blk> <blk> t``
    would read as one ``t``; the blanks lie between two kept frames whose best is ``t``, so they
    stay, where those between ``c`` and ``a`` go."""
    g = lexicon_graph(["catt", "cat"], word_cost=[2.0, 0.5])
    blank, (c, a, t) = 1e-4, (g.tokens.id(x) for x in "cat")
    frames = [BLANK, c, BLANK, a, BLANK, BLANK, t, BLANK, BLANK, t, BLANK]
    lp = np.full((1, len(frames), g.num_tokens), math.log(blank), np.float32)
    for i, k in enumerate(frames):
        lp[0, i, k] = math.log(1 - blank * (g.num_tokens - 1))
    options = CtcBeamOptions(beam=10.0, blank_skip_threshold=0.99)
    got = decode_ctc(lp, None, g, options, backend=backend)[0][0]
    assert got.words == ("catt",) and got.timestamps == (1, 3, 6, 9)
    assert got == _expected(lp, np.array([len(frames)]), g, options, backend)[0][0]


def test_lattice_hypotheses_with_skipping_equal_the_definition():
    rng = np.random.default_rng(7)
    g = random_graph(7, num_states=10, num_tokens=5, num_words=4)
    lp = _with_blank_frames(random_log_probs(7, 3, 12, g.num_tokens), rng)
    lengths = np.array([12, 10, 7])
    options = CtcBeamOptions(beam=8.0, lattice_beam=4.0, nbest=3, blank_skip_threshold=0.99)
    got = decode_ctc(lp, lengths, g, options, backend="cpu")
    want = _expected(lp, lengths, g, options, "cpu")
    _assert_same(got, want, "lattice")
    for gu, wu in zip(got, want, strict=True):
        for g_hyp, w_hyp in zip(gu, wu, strict=True):
            assert g_hyp.word_confidences == pytest.approx(w_hyp.word_confidences)


@pytest.mark.parametrize("bad_column", [BLANK, 2])
@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_a_bad_value_in_a_frame_to_skip_is_reported_at_its_input_frame(bad_column, value):
    g = random_graph(1, num_states=8, num_tokens=5, num_words=3)
    lp = _with_blank_frames(random_log_probs(1, 2, 10, g.num_tokens), np.random.default_rng(1),
                            share=1.0)  # fmt: skip
    lp[1, 6, bad_column] = value
    what = "NaN" if np.isnan(value) else r"\+inf"
    with pytest.raises(DecodeInputError, match=rf"log_probs\[1, 6\] contains {what}"):
        decode_ctc(lp, None, g, CtcBeamOptions(blank_skip_threshold=0.9), backend="cpu")


@pytest.mark.parametrize("bad", [0, -0.5, 1.01, math.nan, "0.9", True])
def test_threshold_is_a_probability(bad):
    with pytest.raises(OptionsError, match="blank_skip_threshold"):
        CtcBeamOptions(blank_skip_threshold=bad)
    assert CtcBeamOptions(blank_skip_threshold=np.float32(0.5)).blank_skip_threshold == 0.5


def test_ctc_lattices_refuses_it():
    g = random_graph(2)
    options = CtcBeamOptions(lattice_beam=4.0, blank_skip_threshold=0.9)
    lp = random_log_probs(2, 1, 5, g.num_tokens)
    with pytest.raises(OptionsError, match="ctc_lattices keeps lattices.*blank_skip_threshold"):
        ctc_lattices(lp, None, g, options)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lattice", [False, True])
def test_streams_skip_as_decode_ctc_does(backend, lattice):
    """Chunk by chunk, a stream skips the frames decode_ctc skips in the whole input: the same
    hypotheses bit for bit (times in the input's frames), partial results in the input's
    frames, and `frames` counting what was received."""
    rng = np.random.default_rng(11)
    g = random_graph(11, num_states=10, num_tokens=5, num_words=4)
    lp = _with_blank_frames(random_log_probs(11, 3, 16, g.num_tokens), rng, share=0.6)
    lengths = np.array([16, 11, 7])
    options = CtcBeamOptions(beam=8.0, acoustic_scale=1.3, blank_skip_threshold=0.99,
                             lattice_beam=4.0 if lattice else None, nbest=2)  # fmt: skip
    want = decode_ctc(lp, lengths, g, options, backend=backend)
    d = CtcStreamDecoder(g, options, backend)
    sids = [d.open() for _ in range(3)]
    fed = [0, 0, 0]
    while any(fed[b] < lengths[b] for b in range(3)):
        chunks = {}
        for b in range(3):
            if fed[b] < lengths[b]:
                end = min(fed[b] + int(rng.integers(1, 5)), int(lengths[b]))
                chunks[sids[b]], fed[b] = lp[b, fed[b] : end], end
        d.advance(chunks)
        for b in range(3):
            assert d.frames(sids[b]) == fed[b]
            partial = d.partial(sids[b])
            assert all(t < fed[b] for t in partial.timestamps)
    got = [d.finish(sid) for sid in sids]
    assert got == want


def test_a_streams_endpoint_counts_skipped_frames_as_silence():
    """Trailing silence is counted in the input's frames: skipped blank frames are silence."""
    g = lexicon_graph(["cat", "act", "tact"], word_cost=[1.0, 1.2, 2.0])
    blank, (c, a, t) = 1e-4, (g.tokens.id(x) for x in "cat")
    frames = [c, BLANK, a, BLANK, t, *[BLANK] * 30]
    lp = np.full((len(frames), g.num_tokens), math.log(blank), np.float32)
    for i, k in enumerate(frames):
        lp[i, k] = math.log(1 - blank * (g.num_tokens - 1))
    rules = EndpointRules(0.1, (EndpointRule(True, 2.0),))  # 20 frames of silence after speech
    reached = []
    for skip in (None, 0.99):
        d = CtcStreamDecoder(g, CtcBeamOptions(beam=10.0, blank_skip_threshold=skip),
                             endpoint=rules)  # fmt: skip
        sid = d.open()
        for i in range(len(frames)):
            if d.advance({sid: lp[i : i + 1]}):
                reached.append(i)
                break
    assert reached == [24, 24]  # the token at frame 4, then 20 frames


def test_a_corpus_decoder_writing_lattices_refuses_it_before_any_shard(tmp_path):
    """As decode_npz(lattices=True) refuses it in each worker: refused in the driver, not by
    every shard failing."""
    from wfstdecode.corpus.shards import CtcCorpusDecoder

    random_graph(2).save(tmp_path / "TLG.npz")
    options = CtcBeamOptions(lattice_beam=4.0, blank_skip_threshold=0.9)
    with pytest.raises(OptionsError, match="blank_skip_threshold"):
        CtcCorpusDecoder(str(tmp_path / "TLG.npz"), options, lattices="determinized")
    CtcCorpusDecoder(str(tmp_path / "TLG.npz"), options)  # (without lattices: taken)


@pytest.mark.parametrize("lattice_beam", [None, 4.0])
def test_the_cuda_overflow_note_names_the_input_frame(lattice_beam):
    """The note of a crowded token table names the first crowded token frame: with blank frames
    skipped, as the input numbers it (it named the frame among those searched)."""
    import re

    from wfstdecode.backends import available_ctc_backends
    from wfstdecode.testing import simulate_ctc

    if "cuda" not in available_ctc_backends():
        pytest.skip("no CUDA GPU, and NUMBA_ENABLE_CUDASIM is off")
    g = lexicon_graph(["cat", "cap", "act", "tact", "pat", "apt", "tapa", "tap", "pact"])
    lp, lengths = simulate_ctc([[g.tokens.id(c) for c in "catpact"]], g.num_tokens, seed=1,
                               confusion_prob=0.3, noise=2.0)  # fmt: skip
    blank = math.log(1 - 1e-4 * (g.num_tokens - 1))
    pad = np.full((1, 10, g.num_tokens), math.log(1e-4), np.float32)
    pad[..., BLANK] = blank
    lp, lengths = np.concatenate([pad, lp], 1), lengths + 10  # 10 frames to skip first
    options = CtcBeamOptions(beam=30.0, max_active=1000, max_candidates=12,
                             lattice_beam=lattice_beam, blank_skip_threshold=0.99)  # fmt: skip
    kept = [t for t in range(int(lengths[0])) if not lp[0, t, BLANK] > math.log(0.99)]
    plain = CtcBeamOptions(**{**options.__dict__, "blank_skip_threshold": None})
    first = re.compile(r"token table full on \d+ frame\(s\), first at frame (\d+):")
    (searched,) = decode_ctc(lp[:, kept], None, g, plain, backend="cuda")
    (got,) = decode_ctc(lp, lengths, g, options, backend="cuda")
    f = int(first.match(searched[0].notes[0])[1])
    assert int(first.match(got[0].notes[0])[1]) == kept[f - 1] + 1 > 10

"""Lattice rescoring: `NgramLm` scores sentences as KenLM does (real and random ARPA models,
unknown words, backoff weights on n-grams that are no context); rescoring a lattice moves every
word sequence's cost by exactly ``lm_scale * new - old`` (KenLM's sentence costs) with the best
alignment kept; the pruned composition keeps the best path; `decode_ctc(rescore=)` and
`wfstdecode decode --rescore-lm` give the rescored lattice's n best; bad requests are refused."""

import argparse
import math
import os

import numpy as np
import pytest

from wfstdecode import OptionsError
from wfstdecode.cli import main
from wfstdecode.ctc import CtcBeamOptions, ctc_lattices, decode_ctc
from wfstdecode.lattice_io import read_kaldi_archive, write_kaldi_archive
from wfstdecode.rescore import LmRescoring, NgramLm, rescore
from wfstdecode.testing import fast_backends, simulate_ctc
from wfstdecode.testing.lm import random_arpa

kenlm = pytest.importorskip("kenlm")
PACKAGE_LM = "wfstdecode/data/lm.arpa.gz"
LN10 = math.log(10.0)


def _kenlm_cost(model, words) -> float:
    return -LN10 * model.score(" ".join(words), bos=True, eos=True)


def _sentences(vocab, rng, n, unknown=0.2):
    out = []
    for _ in range(n):
        words = [str(w) for w in rng.choice(vocab, size=int(rng.integers(0, 7)))]
        if words and rng.random() < unknown:
            words[int(rng.integers(len(words)))] = "zzunknownzz"
        out.append(words)
    return out


def test_sentence_costs_equal_kenlm_on_the_shipped_lm_and_real_sentences():
    from importlib.resources import files

    text = files("wfstdecode").joinpath("data/test_sentences.txt").read_text()
    sentences = [line.lower().split() for line in text.splitlines()[:200]]
    lm, model = NgramLm(PACKAGE_LM), kenlm.Model(PACKAGE_LM)
    sentences += _sentences(lm.model.vocabulary[2:], np.random.default_rng(0), 200)
    for words in sentences:
        assert lm.sentence_cost(words) == pytest.approx(_kenlm_cost(model, words), abs=1e-4)
    assert "zzunknownzz" in lm.missing


@pytest.mark.parametrize("seed", range(6))
def test_sentence_costs_equal_kenlm_on_random_models(tmp_path, seed):
    words = ["a", "ab", "ba", "bab", "c"]
    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(words, order=2 + seed % 3, seed=seed, unk=seed % 2 == 1))
    lm, model = NgramLm(path), kenlm.Model(str(path))
    for sentence in _sentences(words, np.random.default_rng(seed), 300, unknown=0.1):
        assert lm.sentence_cost(sentence) == pytest.approx(_kenlm_cost(model, sentence),
                                                           abs=1e-4)  # fmt: skip


def _first_pass(tmp_path, seed, old_order=2, new_order=3):
    """A TLG of a random old LM, emissions of random sentences, both LMs' files."""
    from wfstdecode import SymbolTable
    from wfstdecode.graph import LexiconEntry, build_tlg

    words = ["a", "ab", "ba", "bab", "c", "ca"]
    old, new = tmp_path / "old.arpa", tmp_path / "new.arpa"
    old.write_text(random_arpa(words, order=old_order, seed=seed, density=0.6))
    new.write_text(random_arpa(words, order=new_order, seed=seed + 50, density=0.6))
    tokens = SymbolTable.from_list(["<blk>", "a", "b", "c", "|"])
    lexicon = [LexiconEntry(w, tuple(w)) for w in words]
    g = build_tlg(tokens, lexicon, str(old), "compact", separator="|").graph
    rng = np.random.default_rng(seed)
    refs = [list(rng.choice(words, size=2)) for _ in range(2)]
    seqs = [[tokens.id(c) for c in "|".join(r)] for r in refs]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=seed, confusion_prob=0.3, noise=1.5)
    return g, lp, lengths, old, new


def _costs_by_words(lattice):
    out = {}
    for arcs, cost in lattice.nbest(100_000):
        labels = lattice.olabel[arcs]
        out[tuple(labels[labels != 0].tolist())] = cost
    return out


@pytest.mark.parametrize("seed", range(4))
def test_rescoring_moves_each_word_sequence_by_the_lm_difference(tmp_path, seed):
    g, lp, lengths, old, new = _first_pass(tmp_path, seed)
    # rescoring is exact on whatever lattice it gets: 4 to 160 word sequences each here
    options = CtcBeamOptions(beam=math.inf, lattice_beam=12.0, max_active=1_000_000)
    lattices = ctc_lattices(lp, lengths, g, options)
    old_k, new_k = kenlm.Model(str(old)), kenlm.Model(str(new))
    scale = 0.5 + seed / 2
    for lat in lattices:
        before = _costs_by_words(lat)
        after = rescore(lat, g.words, NgramLm(new), NgramLm(old), lm_scale=scale)
        assert (after.src < after.dst).all() and (np.diff(after.src) >= 0).all()
        got = _costs_by_words(after)
        assert got.keys() == before.keys()
        for ids, cost in before.items():
            words = [g.words.symbol(w) for w in ids]
            want = cost - _kenlm_cost(old_k, words) + scale * _kenlm_cost(new_k, words)
            assert got[ids] == pytest.approx(want, rel=1e-5, abs=1e-3), words
        # pruned composition: a subset of the paths (a sequence may keep only a worse alignment),
        # never worse than the first pass's best path rescored; a wide beam finds the best
        pruned = rescore(lat, g.words, NgramLm(new), NgramLm(old), lm_scale=scale, beam=2.0)
        first_best = next(iter(before.items()))
        first_words = [g.words.symbol(w) for w in first_best[0]]
        first_rescored = (first_best[1] - _kenlm_cost(old_k, first_words)
                          + scale * _kenlm_cost(new_k, first_words))  # fmt: skip
        assert after.best_cost - 1e-6 <= pruned.best_cost <= first_rescored + 1e-3
        for ids, cost in _costs_by_words(pruned).items():
            assert cost >= got[ids] - 1e-3
        wide = rescore(lat, g.words, NgramLm(new), NgramLm(old), lm_scale=scale, beam=60.0)
        assert wide.best_cost == pytest.approx(after.best_cost, rel=1e-6)


def test_rescoring_with_the_first_pass_lm_itself_changes_nothing(tmp_path):
    g, lp, lengths, old, _ = _first_pass(tmp_path, 7)
    options = CtcBeamOptions(lattice_beam=8.0, nbest=3)
    same = LmRescoring(NgramLm(old), NgramLm(old))
    plain = decode_ctc(lp, lengths, g, options)
    rescored = decode_ctc(lp, lengths, g, options, rescore=same)
    for a, b in zip(plain, rescored, strict=True):
        assert [h.word_ids for h in a] == [h.word_ids for h in b]
        assert [h.score for h in b] == pytest.approx([h.score for h in a], rel=1e-5, abs=1e-3)
        assert "rescored with old.arpa" in b[0].notes[-1]


@pytest.mark.parametrize("backend", fast_backends())
def test_decode_with_rescoring_is_the_rescored_lattice_nbest(tmp_path, backend):
    """On the cpu and cuda backends alike."""
    g, lp, lengths, old, new = _first_pass(tmp_path, 3)
    options = CtcBeamOptions(lattice_beam=8.0, nbest=4)
    job = LmRescoring(NgramLm(new), NgramLm(old), lm_scale=0.8)
    hyps = decode_ctc(lp, lengths, g, options, rescore=job, backend=backend)
    for b, lat in enumerate(ctc_lattices(lp, lengths, g, options, backend="reference")):
        want = rescore(lat, g.words, job.new_lm, job.old_lm, 0.8).nbest(4)
        assert len(hyps[b]) == len(want)
        for h, (_, cost) in zip(hyps[b], want, strict=True):
            assert -h.score == pytest.approx(cost, rel=1e-5, abs=1e-3)
            assert h.graph_score + h.acoustic_score == pytest.approx(h.score)


def test_streams_rescore_as_decode_ctc(tmp_path):
    """A stream's lattice, rescored when it finishes, gives `decode_ctc`'s rescored n-best."""
    from wfstdecode.ctc import CtcStreamDecoder

    g, lp, lengths, old, new = _first_pass(tmp_path, 4)
    options = CtcBeamOptions(lattice_beam=8.0, nbest=3)
    job = LmRescoring(NgramLm(new), NgramLm(old), lm_scale=0.8)
    want = decode_ctc(lp, lengths, g, options, rescore=job, backend="cpu")
    assert any("rescored with new.arpa" in h[0].notes[-1] for h in want)
    decoder = CtcStreamDecoder(g, options, rescore=job)
    got = []
    for b in range(len(lp)):
        sid = decoder.open()
        for t in range(0, int(lengths[b]), 3):
            decoder.advance({sid: lp[b, t : min(t + 3, lengths[b])]})
        got.append(decoder.finish(sid))
    assert got == want


def test_decode_command_rescores(tmp_path, capsys):
    from wfstdecode.cli import main

    g, lp, lengths, old, new = _first_pass(tmp_path, 5)
    g.save(tmp_path / "TLG.npz")
    np.savez(tmp_path / "e.npz", log_probs=lp, lengths=lengths, ids=np.array(["u1", "u2"]))
    args = ["decode", str(tmp_path / "TLG.npz"), str(tmp_path / "e.npz"), "--backend", "cpu"]
    assert main([*args, "--lattice-beam", "8", "--rescore-lm", str(new), "--first-pass-lm",
                 str(old), "--lm-scale", "0.8"]) == 0  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    options = CtcBeamOptions(lattice_beam=8.0)
    job = LmRescoring(NgramLm(new), NgramLm(old), lm_scale=0.8, beam=8.0)
    hyps = decode_ctc(lp, lengths, g, options, rescore=job)
    assert lines == [f"u{b + 1}\t{h[0].score:.3f}\t{h[0].text}" for b, h in enumerate(hyps)]
    assert main([*args, "--rescore-lm", str(new), "--first-pass-lm", str(old)]) == 2
    assert "--lattice-beam" in capsys.readouterr().err
    assert main([*args, "--lattice-beam", "8", "--rescore-lm", str(new)]) == 2
    assert "--first-pass-lm" in capsys.readouterr().err


def test_decode_rescores_with_lms_read_from_pipes(tmp_path, capsys):
    """decode --rescore-lm <(zcat lm.arpa.gz): the up-front check that the LMs are readable read
    a pipe's first block, and the LM then read from it lacked its header ("no \\data\\
    section"); a pipe is not read before the LM is."""
    import os

    g, lp, lengths, old, new = _first_pass(tmp_path, 5)
    g.save(tmp_path / "TLG.npz")
    np.savez(tmp_path / "e.npz", log_probs=lp, lengths=lengths, ids=np.array(["u1", "u2"]))
    args = ["decode", str(tmp_path / "TLG.npz"), str(tmp_path / "e.npz"), "--backend", "cpu",
            "--lattice-beam", "8", "--lm-scale", "0.8"]  # fmt: skip
    assert main([*args, "--rescore-lm", str(new), "--first-pass-lm", str(old)]) == 0
    want = capsys.readouterr().out
    pipes = []
    for lm in (new, old):  # (each small enough for the pipe's buffer: written, then closed)
        r, w = os.pipe()
        os.write(w, lm.read_bytes())
        os.close(w)
        pipes.append(r)
    try:
        assert main([*args, "--rescore-lm", f"/dev/fd/{pipes[0]}",
                     "--first-pass-lm", f"/dev/fd/{pipes[1]}"]) == 0  # fmt: skip
    finally:
        for r in pipes:
            os.close(r)
    assert capsys.readouterr().out == want


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--lm-scale", "nan"),
        ("--lm-scale", "inf"),
        ("--rescore-beam", "0"),
        ("--rescore-beam", "nan"),
    ],
)
def test_decode_names_the_rescoring_option_it_refuses(tmp_path, capsys, flag, value):
    """decode --lm-scale nan / --rescore-beam 0 were refused as 'lm_scale must be a finite
    number' / 'rescoring beam must be a number > 0 or None' (the Python names), where rescore
    names --lm-scale and --beam; decode-corpus and transcribe share the check."""
    g, lp, lengths, old, new = _first_pass(tmp_path, 1)
    g.save(tmp_path / "TLG.npz")
    np.savez(tmp_path / "e.npz", log_probs=lp, lengths=lengths)
    assert main(["decode", str(tmp_path / "TLG.npz"), str(tmp_path / "e.npz"), "--lattice-beam",
                 "8", "--rescore-lm", str(new), "--first-pass-lm", str(old), flag,
                 value]) == 2  # fmt: skip
    assert f"{flag} must be" in capsys.readouterr().err


def test_bad_rescoring_requests_are_refused(tmp_path):
    g, lp, lengths, old, new = _first_pass(tmp_path, 1)
    lm = NgramLm(old)
    with pytest.raises(OptionsError, match="lattice_beam"):
        decode_ctc(lp, lengths, g, CtcBeamOptions(), rescore=LmRescoring(lm, lm))
    from wfstdecode.ctc import CtcStreamDecoder

    with pytest.raises(OptionsError, match="lattice_beam"):
        CtcStreamDecoder(g, CtcBeamOptions(), rescore=LmRescoring(lm, lm))
    with pytest.raises(OptionsError, match="an LmRescoring"):
        CtcStreamDecoder(g, CtcBeamOptions(lattice_beam=4.0), rescore=lm)
    for bad in (math.nan, math.inf, "1"):
        with pytest.raises(OptionsError, match="lm_scale"):
            LmRescoring(lm, lm, lm_scale=bad)
    with pytest.raises(OptionsError, match="NgramLm or an ARPA path"):
        LmRescoring(3, lm)
    assert LmRescoring(str(old), old).old_lm.order == lm.order  # paths are read
    (lat,) = ctc_lattices(lp[:1], lengths[:1], g, CtcBeamOptions(lattice_beam=8.0))
    with pytest.raises(OptionsError, match="max_nodes"):
        rescore(lat, g.words, NgramLm(new), lm, max_nodes=3)
    with pytest.raises(OptionsError, match="beam"):
        rescore(lat, g.words, NgramLm(new), lm, beam=0.0)
    # NumPy numbers are numbers (they were refused as "not a finite number" / "not an int")
    plain = rescore(lat, g.words, NgramLm(new), lm, lm_scale=0.5, beam=4.0, max_nodes=10**6)
    numpy = rescore(lat, g.words, NgramLm(new), lm, lm_scale=np.float32(0.5),
                    beam=np.float32(4.0), max_nodes=np.int64(10**6))  # fmt: skip
    assert numpy.best_cost == plain.best_cost


def test_rescore_command_reads_the_archive_decode_wrote(tmp_path, capsys):
    from wfstdecode.cli import main
    from wfstdecode.lattice_io import read_kaldi_archive

    g, lp, lengths, old, new = _first_pass(tmp_path, 6)
    g.save(tmp_path / "TLG.npz")
    g.words.write(tmp_path / "words.txt")
    np.savez(tmp_path / "e.npz", log_probs=lp, lengths=lengths, ids=np.array(["u1", "u2"]))
    ark, out = tmp_path / "lat.ark", tmp_path / "rescored.ark"
    decode = ["decode", str(tmp_path / "TLG.npz"), str(tmp_path / "e.npz"), "--backend", "cpu",
              "--lattice-beam", "8", "--write-lattices"]  # fmt: skip
    assert main([*decode, str(ark), "--no-determinize-lattice"]) == 0
    lattices = ctc_lattices(lp, lengths, g, CtcBeamOptions(lattice_beam=8.0))
    back = read_kaldi_archive(ark)
    for key, lat in zip(["u1", "u2"], lattices, strict=True):  # the file keeps everything
        for name in ("node_frame", "final", "src", "dst", "ilabel", "olabel", "frame",
                     "graph_cost", "acoustic_cost"):  # fmt: skip
            np.testing.assert_array_equal(getattr(back[key], name), getattr(lat, name))
    capsys.readouterr()
    assert main(["rescore", str(ark), "--words", str(tmp_path / "words.txt"), "--new-lm",
                 str(new), "--old-lm", str(old), "--lm-scale", "0.7", "--nbest", "2", "--out",
                 str(out)]) == 0  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    want = []
    for key, lat in zip(["u1", "u2"], lattices, strict=True):
        rescored = rescore(lat, g.words, NgramLm(new), NgramLm(old), 0.7)
        for r, (arcs, cost) in enumerate(rescored.nbest(2)):
            text = " ".join(g.words.symbol(w) for w in rescored.olabel[arcs] if w)
            want.append(f"{key}-{r + 1}\t{-cost:.3f}\t{text}")
    assert lines == want
    compact_ark = tmp_path / "compact.ark"  # decode's default: word-determinized
    assert main([*decode, str(compact_ark)]) == 0
    capsys.readouterr()
    assert main(["rescore", str(compact_ark), "--words", str(tmp_path / "words.txt"),
                 "--new-lm", str(new), "--old-lm", str(old), "--lm-scale", "0.7", "--nbest",
                 "2"]) == 0  # fmt: skip
    from_compact = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [(k, t) for k, _, t in from_compact] == [tuple(w.split("\t")[::2]) for w in want]
    assert [float(c) for _, c, _ in from_compact] == pytest.approx(
        [float(w.split("\t")[1]) for w in want], abs=2e-3
    )  # the same sequences, their best alignments' costs (float32 sums in the file)
    again = read_kaldi_archive(out)
    assert set(again) == {"u1", "u2"}
    assert again["u1"].best_cost == pytest.approx(
        rescore(lattices[0], g.words, NgramLm(new), NgramLm(old), 0.7).best_cost, rel=1e-5
    )
    from wfstdecode.compact_lattice import CompactLattice, determinize

    compact = read_kaldi_archive(out, keep_compact=True)  # --out: word-determinized
    for key, lat in zip(["u1", "u2"], lattices, strict=True):
        rescored = rescore(lat, g.words, NgramLm(new), NgramLm(old), 0.7)
        assert isinstance(compact[key], CompactLattice)
        want = {w for w, *_ in determinize(rescored).paths()}
        assert {w for w, *_ in compact[key].paths()} == want
    state_out = tmp_path / "rescored_state.ark"
    assert main(["rescore", str(ark), "--words", str(tmp_path / "words.txt"), "--new-lm",
                 str(new), "--old-lm", str(old), "--lm-scale", "0.7", "--out", str(state_out),
                 "--no-determinize-lattice"]) == 0  # fmt: skip
    state = read_kaldi_archive(state_out, keep_compact=True)
    assert not isinstance(state["u1"], CompactLattice)
    assert state["u1"].best_cost == pytest.approx(again["u1"].best_cost, rel=1e-5)
    (tmp_path / "bad.ark").write_bytes(b"u1 \0Bnot a lattice")
    assert main(["rescore", str(tmp_path / "bad.ark"), "--words", str(tmp_path / "words.txt"),
                 "--new-lm", str(new), "--old-lm", str(old)]) == 2  # fmt: skip
    assert "entry 'u1'" in capsys.readouterr().err


def test_rescore_out_is_written_whole_when_the_reader_of_stdout_leaves(tmp_path, monkeypatch):
    """`wfstdecode rescore ... --out r.ark | head -1` ended at the first broken write and left
    no archive (decode's --write-lattices was written): the archive is written whole now, and
    the status is 1, as decode's."""
    import io
    import os
    import sys

    from wfstdecode.cli import main
    from wfstdecode.lattice_io import read_kaldi_archive

    g, lp, lengths, old, new = _first_pass(tmp_path, 6)
    g.words.write(tmp_path / "words.txt")
    ark, out = tmp_path / "lat.ark", tmp_path / "r.ark"
    from wfstdecode.lattice_io import write_kaldi_archive

    lattices = ctc_lattices(lp, lengths, g, CtcBeamOptions(lattice_beam=8.0))
    write_kaldi_archive(dict(zip(["u1", "u2"], lattices, strict=True)), ark)
    argv = ["rescore", str(ark), "--words", str(tmp_path / "words.txt"), "--new-lm", str(new),
            "--old-lm", str(old)]  # fmt: skip
    for extra in (["--out", str(out)], []):  # (without --out: it just stops)
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader has left
        with io.TextIOWrapper(io.FileIO(write_end, "w"), line_buffering=True) as gone:
            monkeypatch.setattr(sys, "stdout", gone)
            assert main([*argv, *extra]) == 1
            monkeypatch.undo()
    assert set(read_kaldi_archive(out)) == {"u1", "u2"}


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("beam", [None, 1.0, 4.0])
def test_compiled_composition_equals_the_plain_loop(tmp_path, monkeypatch, seed, beam):
    """`rescore_compose.compose` (compiled, resumed wherever it lacks LM steps or room) gives
    the plain loop's split nodes, states, arcs and costs, in the same order; tiny first
    buffers make it grow and resume many times."""
    from wfstdecode import rescore_compose as rc
    from wfstdecode.rescore import _rescored_best

    g, lp, lengths, old, new = _first_pass(tmp_path, seed, old_order=2, new_order=4)
    options = CtcBeamOptions(beam=math.inf, lattice_beam=12.0, max_active=1_000_000)
    new_lm, old_lm = NgramLm(new), NgramLm(old)

    def step(state, w):
        c_new, s_new = new_lm.step(state[1], g.words.symbol(w))
        c_old, s_old = old_lm.step(state[0], g.words.symbol(w))
        return 0.7 * c_new - c_old, (s_old, s_new)

    for lat in ctc_lattices(lp, lengths, g, options):
        n = lat.num_nodes
        first = np.searchsorted(lat.src, np.arange(n + 1))
        start = (old_lm.start, new_lm.start)
        beta, limit, best_arcs = np.zeros(n), math.inf, np.zeros(0, np.int64)
        if beam is not None:
            beta = lat.backward()
            names = {w: g.words.symbol(w) for w in np.unique(lat.olabel).tolist() if w}
            best, best_arcs = _rescored_best(lat, names, lambda s, w: step(s, g.words.id(w)), start)
            limit = best + beam
        args = (first, lat.dst, lat.olabel, lat.arc_cost(), beta, limit, best_arcs, start, step)
        want = rc.compose_reference(*args, 10**6)
        assert len(want[0]) >= (n if beam is None else 1)
        assert beam is not None or len(set(want[1])) > 3  # states split the nodes
        for tiny in (False, True):
            with monkeypatch.context() as m:
                if tiny:
                    m.setattr(rc, "_first_room", lambda n: 1)
                    m.setattr(rc, "_MISSES", 2)
                    m.setattr(rc, "_pow2", lambda n, least=10, pow2=rc._pow2: pow2(n, least=1))
                calls: list = []
                m.setattr(
                    rc, "_run", lambda *a, calls=calls, run=rc._run: calls.append(1) or run(*a)
                )
                got = rc.compose(*args, 10**6)
            node_of, state_of, states, *rest = got
            assert [states[i] for i in state_of.tolist()] == want[1]
            for a, b in zip((node_of, *rest), want[:1] + want[2:], strict=True):
                assert a.dtype == b.dtype and np.array_equal(a, b)
            assert not tiny or len(calls) > 10
        with pytest.raises(OptionsError, match="more than 5 nodes"):
            rc.compose(*args, 5)


@pytest.mark.parametrize("seed", range(4))
def test_pruning_estimates_the_rest_at_the_new_lm_scale(tmp_path, seed):
    """Pruned rescoring judges what follows a node by the first pass's best, its graph costs at
    lm_scale (they were taken at 1: at lm_scale 0.5 on the OCR lines that cut the exact best in
    16 of 60): at the lattice beam it finds the exact composition's best."""
    g, lp, lengths, old, new = _first_pass(tmp_path, seed)
    for lat in ctc_lattices(lp, lengths, g, CtcBeamOptions(lattice_beam=8.0)):
        for scale in (0.3, 0.5):
            exact = rescore(lat, g.words, NgramLm(new), NgramLm(old), lm_scale=scale)
            pruned = rescore(lat, g.words, NgramLm(new), NgramLm(old), lm_scale=scale, beam=8.0)
            assert pruned.best_cost == pytest.approx(exact.best_cost, rel=1e-6)


def test_rescoring_refuses_lattices_it_would_score_as_nonsense(tmp_path):
    from wfstdecode import SymbolTable

    g, lp, lengths, old, new = _first_pass(tmp_path, 2)
    (lat,) = ctc_lattices(lp[:1], lengths[:1], g, CtcBeamOptions(lattice_beam=8.0))
    used = [w for w in np.unique(lat.olabel).tolist() if w]
    # an old LM the graph was not built from: its missing word would earn ~230 nats
    lacking = g.words.symbol(used[0])
    small = tmp_path / "small.arpa"
    others = [w for w in ["a", "ab", "ba", "bab", "c", "ca"] if w != lacking]  # _first_pass'
    small.write_text(random_arpa(others, order=2, seed=3))
    with pytest.raises(OptionsError, match=f"word '{lacking}' is not in the old LM .*small.arpa"):
        rescore(lat, g.words, NgramLm(new), NgramLm(small))
    rescore(lat, g.words, NgramLm(new), None)  # nothing subtracted: nothing to check
    # an oov slot's labels are not n-gram words
    names = [g.words.symbol(i) for i in range(len(g.words))]
    names[used[0]] = "<oov:a>"
    with pytest.raises(OptionsError, match="oov slot's label '<oov:a>'"):
        rescore(lat, SymbolTable.from_list(names), NgramLm(new), NgramLm(old))


def test_rescore_command_names_the_lattice_that_fails(tmp_path, capsys):
    from wfstdecode.cli import main

    g, lp, lengths, old, new = _first_pass(tmp_path, 6)
    graph = tmp_path / "graph"
    graph.mkdir()
    g.save(graph / "TLG.npz")
    np.savez(tmp_path / "e.npz", log_probs=lp, lengths=lengths, ids=np.array(["u1", "u2"]))
    ark = tmp_path / "lat.ark"
    assert main(["decode", str(graph), str(tmp_path / "e.npz"), "--lattice-beam", "8",
                 "--write-lattices", str(ark), "--no-determinize-lattice"]) == 0  # fmt: skip
    rescore_cmd = ["rescore", str(ark), "--words", str(graph), "--new-lm", str(new),
                   "--old-lm", str(old)]  # fmt: skip
    capsys.readouterr()
    assert main([*rescore_cmd, "--max-nodes", "3"]) == 2
    err = capsys.readouterr().err
    assert "lattice 'u1'" in err and "raise --max-nodes, or prune (--beam" in err
    assert main([*rescore_cmd, "--max-nodes", "0"]) == 2
    assert "--max-nodes must be >= 1" in capsys.readouterr().err
    # a new file inside the graph directory is refused as an existing one is
    assert main([*rescore_cmd, "--out", str(graph / "x.ark")]) == 2
    assert "would overwrite the input" in capsys.readouterr().err
    assert not (graph / "x.ark").exists()
    empty = tmp_path / "empty.ark"
    empty.write_bytes(b"")
    assert main(["rescore", str(empty), *rescore_cmd[2:]]) == 0
    assert "holds no lattices" in capsys.readouterr().err


def test_archives_with_weights_that_are_not_numbers_are_refused(tmp_path):
    from dataclasses import replace

    from wfstdecode.compact_lattice import determinize
    from wfstdecode.errors import InputFileError
    from wfstdecode.fstio import compact_lattice_bytes
    from wfstdecode.lattice_io import read_kaldi_archive, write_kaldi_archive

    g, lp, lengths, _, _ = _first_pass(tmp_path, 4)
    (lat,) = ctc_lattices(lp[:1], lengths[:1], g, CtcBeamOptions(lattice_beam=8.0))
    compact = determinize(lat)
    ark = tmp_path / "x.ark"
    for bad in (math.nan, -math.inf, math.inf):
        cost = lat.graph_cost.copy()
        cost[1] = bad
        broken = replace(lat, graph_cost=cost, _cache={})
        with pytest.raises(OptionsError, match=r"lattice 'u': arc 1 weighs"):
            write_kaldi_archive({"u": broken}, ark)
        assert not ark.exists()
        ark.write_bytes(b"u \0B" + broken.kaldi_bytes())  # as another tool might have
        with pytest.raises(InputFileError, match=r"entry 'u'.*arc 1 weighs .*must be finite"):
            read_kaldi_archive(ark)
        acoustic = compact.acoustic_cost.copy()
        acoustic[0] = bad
        ark.write_bytes(b"u \0B" + compact_lattice_bytes(replace(compact, acoustic_cost=acoustic)))
        with pytest.raises(InputFileError, match=r"entry 'u'.*arc 0 weighs"):
            read_kaldi_archive(ark)
        ark.unlink()
    final = lat.final.copy()
    final[np.flatnonzero(np.isfinite(final))[0]] = math.nan
    with pytest.raises(OptionsError, match="has the final weight"):
        write_kaldi_archive({"u": replace(lat, final=final, _cache={})}, ark)
    write_kaldi_archive({"u": lat, "c": compact}, ark)  # (inf, inf) finals: not final, fine
    assert set(read_kaldi_archive(ark)) == {"u", "c"}


def test_an_archive_is_read_at_the_acoustic_scale_given(tmp_path):
    """Word-determinized (CompactLattice) entries as well as state-level ones rank paths by
    ``graph + scale * acoustic`` at the scale the reader is given (an archive keeps acoustic
    costs unscaled); a scale that is not a positive finite number is refused."""
    from wfstdecode.compact_lattice import determinize
    from wfstdecode.lattice_io import read_kaldi_archive, write_kaldi_archive

    g, lp, lengths, _, _ = _first_pass(tmp_path, 4)
    (lat,) = ctc_lattices(lp[:1], lengths[:1], g, CtcBeamOptions(lattice_beam=8.0))
    state_level, compact = tmp_path / "l.ark", tmp_path / "c.ark"
    write_kaldi_archive({"u": lat}, state_level)
    write_kaldi_archive({"u": determinize(lat)}, compact)
    for scale in (1.0, 0.5, 2.0):
        want = read_kaldi_archive(state_level, acoustic_scale=scale)["u"].best_cost
        for keep in (True, False):
            got = read_kaldi_archive(compact, acoustic_scale=scale, keep_compact=keep)["u"]
            assert got.acoustic_scale == scale
            best = got.to_lattice().best_cost if keep else got.best_cost
            assert best == pytest.approx(want, rel=1e-6), (scale, keep)
    for bad in (0, 0.0, -1.0, math.inf, math.nan, True, "1"):
        with pytest.raises(OptionsError, match="positive finite"):
            read_kaldi_archive(compact, acoustic_scale=bad)


def test_rescore_refuses_max_nodes_below_one(tmp_path):
    """Mutant R8 (``max_nodes < 0`` refused, 0 accepted): max_nodes=0 then imposes no limit at
    all (the compiled loop never reaches node 0)."""
    from wfstdecode.ctc import CtcBeamOptions, ctc_lattices
    from wfstdecode.rescore import NgramLm, rescore

    g, lp, lengths, old, new = _first_pass(tmp_path, 1)
    (lat,) = ctc_lattices(lp[:1], lengths[:1], g, CtcBeamOptions(lattice_beam=8.0))
    for bad in (0, -1):
        with pytest.raises(OptionsError, match="max_nodes must be an int >= 1"):
            rescore(lat, g.words, NgramLm(new), NgramLm(old), max_nodes=bad)


def test_the_pruning_limit_is_the_first_pass_best_path_rescored_with_its_end(tmp_path):
    """Mutant R6 (`_rescored_best` leaves out the new and old LMs' ``</s>`` costs): the limit
    the pruned composition keeps to moves by their difference. The cost must be that of the
    path's word sequence rescored whole, ``</s>`` included."""
    from wfstdecode.ctc import CtcBeamOptions, ctc_lattices
    from wfstdecode.rescore import NgramLm, _rescored_best

    g, lp, lengths, old, new = _first_pass(tmp_path, 4)
    new_lm, old_lm = NgramLm(new), NgramLm(old)

    def step(state, word):
        c_new, s_new = new_lm.step(state[1], word)
        c_old, s_old = old_lm.step(state[0], word)
        return 0.7 * c_new - c_old, (s_old, s_new)

    for lat in ctc_lattices(lp, lengths, g, CtcBeamOptions(lattice_beam=8.0)):
        names = {w: g.words.symbol(w) for w in np.unique(lat.olabel).tolist() if w}
        best, arcs = _rescored_best(lat, names, step, (old_lm.start, new_lm.start))
        words = [names[w] for w in lat.olabel[arcs].tolist() if w]
        want = (lat.best_cost - old_lm.sentence_cost(words)
                + 0.7 * new_lm.sentence_cost(words))  # fmt: skip
        assert best == pytest.approx(want, rel=1e-6, abs=1e-4)


def test_a_pruned_rescoring_keeps_no_dead_ends(tmp_path):
    """Mutant R7 (the pruned composition returned as composed): the split nodes it did not
    follow stay in the lattice as dead ends (nodes on no complete path), growing the rescored
    lattice and the --out archive."""
    from wfstdecode.ctc import CtcBeamOptions, ctc_lattices
    from wfstdecode.rescore import NgramLm, rescore

    g, lp, lengths, old, new = _first_pass(tmp_path, 0)
    for lat in ctc_lattices(lp, lengths, g, CtcBeamOptions(lattice_beam=8.0)):
        for beam in (0.5, 2.0):
            out = rescore(lat, g.words, NgramLm(new), NgramLm(old), lm_scale=0.7, beam=beam)
            through = out.forward() + out.backward()
            assert np.isfinite(through).all(), beam


def test_a_split_node_exactly_at_the_limit_is_followed():
    """Mutant C5 (the compiled loop prunes at ``alpha + beta >= limit``, the reference at
    ``>``): node 2 (alpha 2, beta 0) lies exactly at limit 2 and off the best path 0-1-3."""
    from wfstdecode.rescore_compose import compose, compose_reference

    first = np.array([0, 2, 3, 4, 4], np.int64)
    dst = np.array([1, 2, 3, 3], np.int32)
    olabel = np.zeros(4, np.int32)
    w_arc = np.array([1.0, 2.0, 0.0, 0.0])
    beta = np.array([1.0, 0.0, 0.0, 0.0])
    args = (first, dst, olabel, w_arc, beta, 2.0, np.array([0, 2]), (), None)
    arc_of = compose(*args, 100)[5]
    assert arc_of.tolist() == [0, 1, 2, 3]
    assert arc_of.tolist() == compose_reference(*args, 100)[4].tolist()


def test_max_nodes_is_the_most_split_nodes_allowed():
    """Mutant C4 (``r > max_nodes``: one split node more than max_nodes passes). A chain of 3
    nodes splits into 3: max_nodes 3 composes it, 2 is refused, as the reference loop does."""
    from wfstdecode.rescore_compose import compose, compose_reference

    first = np.array([0, 1, 2, 2], np.int64)
    dst, olabel = np.array([1, 2], np.int32), np.zeros(2, np.int32)
    args = (first, dst, olabel, np.zeros(2), np.zeros(3), math.inf, np.zeros(0, np.int64), (),
            None)  # fmt: skip
    for fn in (compose, compose_reference):
        assert fn(*args, 3)[0].tolist() == [0, 1, 2]
        with pytest.raises(OptionsError, match="more than 2 nodes"):
            fn(*args, 2)


def _decode_args(**kw):
    args = dict(rescore_lm=None, first_pass_lm=None, lm_scale=None, rescore_beam=None,
                lattice_beam=8.0)  # fmt: skip
    args.update(kw)
    return argparse.Namespace(**args)


def test_decode_rescore_beam_overrides_the_lattice_beam(tmp_path):
    """Mutant L1 (--rescore-beam ignored: the lattice beam always prunes the composition)."""
    from wfstdecode.cli_rescore import rescoring
    from wfstdecode.testing.lm import random_arpa

    lm = tmp_path / "lm.arpa"
    lm.write_text(random_arpa(["a", "b"], order=2, seed=0))
    assert rescoring(_decode_args(rescore_lm=lm, first_pass_lm=lm)).beam == 8.0
    assert rescoring(_decode_args(rescore_lm=lm, first_pass_lm=lm, rescore_beam=3.0)).beam == 3.0
    assert (
        rescoring(_decode_args(rescore_lm=lm, first_pass_lm=lm, rescore_beam=math.inf)).beam is None
    )


def test_first_pass_lm_without_rescore_lm_is_refused(tmp_path):
    """Mutant L3 (decode --first-pass-lm without --rescore-lm silently ignored)."""
    from wfstdecode.cli_rescore import rescoring
    from wfstdecode.errors import WfstDecodeError

    with pytest.raises(WfstDecodeError, match="--first-pass-lm goes with --rescore-lm"):
        rescoring(_decode_args(first_pass_lm=tmp_path / "lm.arpa"))
    assert rescoring(_decode_args()) is None


def test_lm_scale_and_rescore_beam_without_rescore_lm_are_refused(tmp_path, capsys):
    """decode --lm-scale / --rescore-beam without --rescore-lm decoded without a word of it: the
    options that say how to rescore were silently ignored (as --first-pass-lm was)."""
    from wfstdecode.cli import main
    from wfstdecode.cli_rescore import rescoring
    from wfstdecode.errors import WfstDecodeError
    from wfstdecode.testing.lm import random_arpa

    with pytest.raises(WfstDecodeError, match="--lm-scale goes with --rescore-lm"):
        rescoring(_decode_args(lm_scale=1.0))
    with pytest.raises(WfstDecodeError, match="--lm-scale, --rescore-beam go with --rescore-lm"):
        rescoring(_decode_args(lm_scale=0.5, rescore_beam=4.0))
    g, lp, lengths, _, _ = _first_pass(tmp_path, 6)
    g.save(tmp_path / "g.npz")
    np.savez(tmp_path / "e.npz", log_probs=lp, lengths=lengths)
    args = ["decode", str(tmp_path / "g.npz"), str(tmp_path / "e.npz"), "--backend", "reference"]
    assert main([*args, "--lattice-beam", "8", "--rescore-beam", "4"]) == 2
    assert "--rescore-beam goes with --rescore-lm" in capsys.readouterr().err
    lm = tmp_path / "lm.arpa"
    lm.write_text(random_arpa(["a", "b"], order=2, seed=0))
    assert rescoring(_decode_args(rescore_lm=lm, first_pass_lm=lm)).lm_scale == 1.0  # default


def test_rescore_out_is_determinized_at_the_rescoring_beam(tmp_path, monkeypatch, capsys):
    """Mutant L2 (--out determinized unpruned whatever --beam says)."""
    import wfstdecode.compact_lattice as cl
    from wfstdecode.cli import main
    from wfstdecode.ctc import CtcBeamOptions, ctc_lattices
    from wfstdecode.lattice_io import write_kaldi_archive

    g, lp, lengths, old, new = _first_pass(tmp_path, 6)
    g.words.write(tmp_path / "words.txt")
    lattices = ctc_lattices(lp, lengths, g, CtcBeamOptions(lattice_beam=8.0))
    write_kaldi_archive(dict(zip(["u1", "u2"], lattices, strict=True)), tmp_path / "lat.ark")
    limits = []
    real = cl.determinize_pruned
    monkeypatch.setattr(
        cl,
        "determinize_pruned",
        lambda lat, beam, *a, **k: limits.append(beam) or real(lat, beam, *a, **k),
    )
    argv = [
        "rescore",
        str(tmp_path / "lat.ark"),
        "--words",
        str(tmp_path / "words.txt"),
        "--new-lm",
        str(new),
        "--old-lm",
        str(old),
        "--out",
        str(tmp_path / "r.ark"),
    ]
    assert main([*argv, "--beam", "3"]) == 0
    assert limits == [3.0, 3.0]
    limits.clear()
    assert main(argv) == 0
    assert limits == [math.inf, math.inf]


# --- the rescore / decode command lines: keys, arguments and warnings ---------------------


def _archive_keyed(tmp_path, key: bytes):
    """A one-lattice archive under ``key``, the words table beside it, the two LMs."""
    g, lp, lengths, old, new = _first_pass(tmp_path, 6)
    g.words.write(tmp_path / "words.txt")
    lats = ctc_lattices(lp, lengths, g, CtcBeamOptions(lattice_beam=8.0))
    write_kaldi_archive({"u1": lats[0]}, tmp_path / "a.ark")
    data = (tmp_path / "a.ark").read_bytes()
    (tmp_path / "k.ark").write_bytes(key + data[2:])
    return tmp_path / "k.ark", old, new


def _rescore_args(tmp_path, old, new):
    return ["--words", str(tmp_path / "words.txt"), "--new-lm", str(new), "--old-lm", str(old)]


def test_a_key_the_reader_accepts_is_written_back_by_rescore_out(tmp_path):
    """'utt\\u00a0x' (a no-break space: no ASCII whitespace, so Kaldi and read_kaldi_archive
    read it as one key) was refused by write_kaldi_archive, after all the rescoring."""
    ark, old, new = _archive_keyed(tmp_path, "utt\u00a0x".encode())
    assert list(read_kaldi_archive(ark)) == ["utt\u00a0x"]
    out = tmp_path / "o.ark"
    assert main(["rescore", str(ark), *_rescore_args(tmp_path, old, new), "--out", str(out)]) == 0
    assert list(read_kaldi_archive(out)) == ["utt\u00a0x"]


def test_decode_refuses_unwritable_lattice_keys_before_decoding(tmp_path, monkeypatch, capsys):
    """An id with a space (no archive key can hold it) was refused only after the whole decode,
    with nothing printed: now before any search."""
    from wfstdecode.ctc import npz

    g, lp, lengths, _, _ = _first_pass(tmp_path, 6)
    g.save(tmp_path / "TLG.npz")
    np.savez(tmp_path / "e.npz", log_probs=lp, lengths=lengths, ids=np.array(["utt 1", "u2"]))
    searched = []
    real = npz.prepared
    monkeypatch.setattr(npz, "prepared", lambda *a, **k: searched.append(1) or real(*a, **k))
    rc = main(["decode", str(tmp_path / "TLG.npz"), str(tmp_path / "e.npz"), "--backend", "cpu",
               "--lattice-beam", "8", "--write-lattices", str(tmp_path / "d.ark")])  # fmt: skip
    assert rc == 2 and "'utt 1'" in capsys.readouterr().err
    assert not searched and not (tmp_path / "d.ark").exists()


def test_rescore_says_which_lattices_have_no_path(tmp_path, capsys):
    """A lattice with no complete path (no final state reached) printed nothing and no
    warning; now a warning names it."""
    from wfstdecode.compact_lattice import compact_from_fst

    g, _, _, old, new = _first_pass(tmp_path, 6)
    g.words.write(tmp_path / "words.txt")
    never = np.array([np.inf, np.inf])
    nopath = compact_from_fst(
        dict(start=0, src=np.array([0], np.int32), dst=np.array([1], np.int32),
             word=np.array([1], np.int32), graph_cost=np.array([1.0]),
             acoustic_cost=np.array([1.0]), string=np.array([1], np.int32),
             string_start=np.array([0, 1]), final_graph=never, final_acoustic=never,
             final_string=np.zeros(0, np.int32), final_string_start=np.zeros(3, np.int64)),
        1.0,
    )  # fmt: skip
    write_kaldi_archive({"nf": nopath}, tmp_path / "nf.ark")
    assert main(["rescore", str(tmp_path / "nf.ark"), *_rescore_args(tmp_path, old, new)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "lattice 'nf': no complete path" in captured.err


def test_bad_lm_scale_and_beam_are_refused_up_front(tmp_path, capsys):
    """--lm-scale nan (or --beam nan / -1) was reported as lattice 'u1''s problem, and taken
    silently for an archive with no lattices."""
    ark, old, new = _archive_keyed(tmp_path, b"u1")
    (tmp_path / "empty.ark").write_bytes(b"")
    for bad, message in ((["--lm-scale", "nan"], "--lm-scale must be in"),
                         (["--beam", "nan"], "--beam must be > 0"),
                         (["--beam", "-1"], "--beam must be > 0")):  # fmt: skip
        for archive in (ark, tmp_path / "empty.ark"):
            assert main(["rescore", str(archive), *_rescore_args(tmp_path, old, new), *bad]) == 2
            err = capsys.readouterr().err
            assert message in err and "lattice 'u1'" not in err, err


def test_a_huge_lm_scale_is_refused_not_lost_to_overflow(tmp_path, capsys):
    """--lm-scale 1e300 (finite, so accepted) overflowed every rescored cost to inf: rescore
    printed no hypothesis (status 0) or inf scores, and decode --rescore-lm silently printed the
    first pass's hypotheses as if rescored. The scale is bounded as the acoustic scale is."""
    ark, old, new = _archive_keyed(tmp_path, b"u1")
    g, lp, lengths, _, _ = _first_pass(tmp_path, 1)
    g.save(tmp_path / "TLG.npz")
    np.savez(tmp_path / "e.npz", log_probs=lp, lengths=lengths)
    decode = ["decode", str(tmp_path / "TLG.npz"), str(tmp_path / "e.npz"), "--lattice-beam", "8",
              "--rescore-lm", str(new), "--first-pass-lm", str(old)]  # fmt: skip
    for scale in ("1e300", "-1e300", "1e40"):
        assert main(["rescore", str(ark), *_rescore_args(tmp_path, old, new),
                     f"--lm-scale={scale}"]) == 2  # fmt: skip
        assert "--lm-scale must be in" in capsys.readouterr().err
        assert main([*decode, f"--lm-scale={scale}"]) == 2
        assert "--lm-scale must be in" in capsys.readouterr().err
        with pytest.raises(OptionsError, match="lm_scale"):
            LmRescoring(NgramLm(old), NgramLm(old), lm_scale=float(scale))
    assert main([*decode, "--lm-scale=1000"]) == 0  # the bound itself is allowed


def test_rescore_warns_about_words_the_new_lm_lacks(tmp_path, capsys):
    """A new LM without some lattice words (and no <unk>) costs each -100 log10 (as KenLM),
    which may reorder the n-best: the warning names them."""
    ark, old, _ = _archive_keyed(tmp_path, b"u1")
    small = tmp_path / "small.arpa"
    small.write_text(random_arpa(["a", "c"], order=2, seed=1, unk=False))
    assert main(["rescore", str(ark), *_rescore_args(tmp_path, old, small)]) == 0
    err = capsys.readouterr().err
    assert "warning: --new-lm lacks" in err and "log10 -100 each" in err
    assert "'bab'" in err and "--old-lm" not in err


def test_rescore_prints_keys_escaped_as_decode_does(tmp_path, capsys):
    """An archive key holding a control character (an escape sequence, a bell: Kaldi keys end
    only at whitespace) was printed raw by rescore, which decode escapes: a terminal ran it."""
    from wfstdecode.cli import main
    from wfstdecode.lattice_io import write_kaldi_archive

    g, lp, lengths, old, new = _first_pass(tmp_path, 6)
    g.words.write(tmp_path / "words.txt")
    lattices = ctc_lattices(lp, lengths, g, CtcBeamOptions(lattice_beam=8.0))
    write_kaldi_archive({"u\x1b[2J": lattices[0], "v\x07w": lattices[1]}, tmp_path / "lat.ark")
    capsys.readouterr()
    assert main(["rescore", str(tmp_path / "lat.ark"), "--words", str(tmp_path / "words.txt"),
                 "--new-lm", str(new), "--old-lm", str(old), "--nbest", "2"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert {line.split("\t")[0] for line in out.splitlines()} <= {
        "u\\x1b[2J-1", "u\\x1b[2J-2", "v\\x07w-1", "v\\x07w-2"}  # fmt: skip


@pytest.mark.parametrize("flag", ["--no-determinize-lattice", "--determinize-lattice"])
def test_determinize_lattice_without_an_archive_to_write_is_refused(tmp_path, capsys, flag):
    """--(no-)determinize-lattice says how decode --write-lattices / rescore --out write their
    lattices; without that archive it would do nothing, so it is refused (as --lm-scale without
    --rescore-lm is), not silently ignored."""
    g, lp, lengths, old, new = _first_pass(tmp_path, 6)
    g.save(tmp_path / "TLG.npz")
    g.words.write(tmp_path / "words.txt")
    np.savez(tmp_path / "e.npz", log_probs=lp, lengths=lengths, ids=np.array(["u1", "u2"]))
    decode = ["decode", str(tmp_path / "TLG.npz"), str(tmp_path / "e.npz"), "--backend", "cpu",
              "--lattice-beam", "8"]  # fmt: skip
    assert main([*decode, flag]) == 2
    captured = capsys.readouterr()
    assert "--write-lattices" in captured.err and not captured.out
    ark = tmp_path / "lat.ark"
    assert main([*decode, "--write-lattices", str(ark)]) == 0  # the default: determinized
    assert "word-determinized CompactLattice" in capsys.readouterr().err
    rescore_cmd = ["rescore", str(ark), "--words", str(tmp_path / "words.txt"), "--new-lm",
                   str(new), "--old-lm", str(old)]  # fmt: skip
    assert main([*rescore_cmd, flag]) == 2
    captured = capsys.readouterr()
    assert "--out" in captured.err and not captured.out
    assert main([*rescore_cmd, "--out", str(tmp_path / "r.ark"), flag]) == 0


def test_a_lattice_rescoring_leaves_without_a_path_keeps_the_first_pass_and_says_so(tmp_path):
    """Where the rescored lattice has no complete path (every cost overflowed, say), the first
    pass's hypotheses come back — now with a note; before, unsaid, as if rescored."""
    from dataclasses import replace

    from wfstdecode.ctc import search

    g, lp, lengths, old, new = _first_pass(tmp_path, 5)
    options = CtcBeamOptions(lattice_beam=8.0, nbest=2)
    plain = decode_ctc(lp, lengths, g, options)

    class Lost(LmRescoring):
        def apply(self, lattice, words):  # (no final node left)
            return replace(lattice, final=np.full(lattice.num_nodes, np.inf), _cache={})

    lost = Lost(str(new), str(old))
    for got, want in zip(decode_ctc(lp, lengths, g, options, rescore=lost), plain, strict=True):
        assert [h.words for h in got] == [h.words for h in want]
        assert all(h.notes[-1] == search.NOT_RESCORED for h in got)


def _same_lattice(a, b):
    for name in ("node_frame", "node_state", "final", "src", "dst", "graph_arc", "olabel",
                 "graph_cost", "acoustic_cost"):  # fmt: skip
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name


@pytest.mark.parametrize("beam", [None, 3.0])
def test_an_lm_rescoring_keeps_its_steps_between_lattices_without_changing_them(tmp_path, beam):
    """`LmRescoring` keeps its checked words and LM steps from one lattice to the next (per word
    table): every lattice rescored through it, in any order, equals `rescore` on it alone;
    a word refused in one lattice is refused in the next; another graph through its own rescoring
    (one rescoring's two tables: test_one_lm_rescoring_keeps_two_word_tables_apart);
    a pickled copy starts empty."""
    import pickle

    options = CtcBeamOptions(beam=math.inf, lattice_beam=12.0, max_active=1_000_000)
    runs = []
    for seed in range(3):
        work = tmp_path / str(seed)
        work.mkdir()
        g, lp, lengths, old, new = _first_pass(work, seed, old_order=2, new_order=4)
        runs.append((g, ctc_lattices(lp, lengths, g, options), old, new))
    g0, lats0, old0, new0 = runs[0]
    kept = LmRescoring(NgramLm(new0), NgramLm(old0), 0.8, beam)
    for lat in [*lats0, *lats0[::-1]]:
        _same_lattice(kept.apply(lat, g0.words), rescore(lat, g0.words, new0, old0, 0.8, beam))
    assert kept._kept.of(g0.words)[2].n > 0  # (steps were kept)
    copy = pickle.loads(pickle.dumps(kept))
    assert copy.lm_scale == kept.lm_scale and copy._kept.of(g0.words)[2] is None
    # another graph (its own words and old LM) through its own rescoring, then back
    g1, lats1, old1, new1 = runs[1]
    other = LmRescoring(NgramLm(new1), NgramLm(old1), 0.8, beam)
    for g, lats, rescoring, (old, new) in ((g1, lats1, other, (old1, new1)),
                                           (g0, lats0, kept, (old0, new0))):  # fmt: skip
        for lat in lats:
            _same_lattice(rescoring.apply(lat, g.words), rescore(lat, g.words, new, old, 0.8, beam))
    # a word the old LM lacks stays refused however many lattices came before
    from wfstdecode.graph import read_arpa
    from wfstdecode.testing.lm import arpa_text, restrict_arpa

    missing = read_arpa(old0)
    lacking = tmp_path / "lacking.arpa"
    lacking.write_text(arpa_text(restrict_arpa(missing, 3, (0,))))  # the first words only
    refusing = LmRescoring(NgramLm(new0), NgramLm(lacking), 1.0, beam)
    lat = next(lat for lat in lats0 if len(set(lat.olabel.tolist()) - {0, 1, 2, 3}) > 1)
    for _ in range(len(set(lat.olabel.tolist())) + 1):  # (each word checked again)
        with pytest.raises(OptionsError, match="is not in the old LM"):
            refusing.apply(lat, g0.words)


def _tiny_lattice():
    """A two-word lattice (``a b``) of the word table ``<eps> a b``."""
    from wfstdecode import SymbolTable
    from wfstdecode.lattice import Lattice

    i32 = lambda *x: np.array(x, np.int32)  # noqa: E731
    f32 = lambda *x: np.array(x, np.float32)  # noqa: E731
    lat = Lattice(2, i32(0, 1, 2), i32(0, 1, 2), f32(np.inf, np.inf, 0.0), i32(0, 1), i32(1, 2),
                  i32(0, 1), i32(1, 1), i32(1, 2), i32(0, 1), f32(0.5, 0.5), f32(1.0, 1.0),
                  1.0)  # fmt: skip
    return lat, SymbolTable.from_list(["<eps>", "a", "b"])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_while_another_thread_rescores_rescores_too(tmp_path):
    """An `LmRescoring`'s kept steps are new in a forked child: forked while another thread
    held their lock (mid-lattice), the child waited on it for ever in its first `apply`."""
    import subprocess
    import sys
    import textwrap

    lm = tmp_path / "lm.arpa"
    lm.write_text(random_arpa(["a", "b"], order=2, seed=0))
    code = textwrap.dedent(f"""
        import os, signal, sys, threading
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_rescore import _tiny_lattice
        from wfstdecode.rescore import LmRescoring, NgramLm

        inside, go = threading.Event(), threading.Event()

        class Held(NgramLm):  # the first step waits: the thread holds the lock meanwhile
            def step(self, state, word):
                if not inside.is_set():
                    inside.set()
                    go.wait()
                return super().step(state, word)

        lat, words = _tiny_lattice()
        rescoring = LmRescoring(Held({str(lm)!r}), NgramLm({str(lm)!r}))
        thread = threading.Thread(target=rescoring.apply, args=(lat, words))
        thread.start()
        inside.wait()
        pid = os.fork()
        if pid == 0:
            signal.alarm(10)  # a child stuck on the lock dies of SIGALRM
            go.set()
            rescoring.apply(lat, words)
            os._exit(0)
        go.set()
        thread.join()
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.stdout.strip() == "child 0", (proc.stdout, proc.stderr)


def test_an_lm_rescoring_bounds_its_kept_steps_in_all(tmp_path, monkeypatch):
    """The steps an `LmRescoring` keeps for all its word tables together stay within
    `MAX_KEPT_STEPS` (as `_KeptSteps` says): each table's alone did, so ``MAX_KEPT_TABLES``
    times as much stayed kept."""
    import copy

    from wfstdecode import rescore as rescore_module

    lm = tmp_path / "lm.arpa"
    lm.write_text(random_arpa(["a", "b"], order=3, seed=1))
    lat, words = _tiny_lattice()
    rescoring = LmRescoring(NgramLm(lm), NgramLm(lm))

    def kept_steps():
        return sum(k[2].n for k in rescoring._kept._by_words.values() if k[2] is not None)

    rescoring.apply(lat, words)
    one = kept_steps()
    assert one > 0
    monkeypatch.setattr(rescore_module, "MAX_KEPT_STEPS", one)  # one table's steps: kept
    other = copy.deepcopy(words)
    _same_lattice(rescoring.apply(lat, other), rescore(lat, other, lm, lm))
    _same_lattice(rescoring.apply(lat, words), rescore(lat, words, lm, lm))
    assert kept_steps() <= one  # (two tables' steps, past the bound: dropped first)


def test_an_lm_rescoring_keeps_no_word_table_alive(tmp_path):
    """A word table dropped (a service reloading its graph, with the same rescoring) is freed:
    the steps kept for it do not hold it, and they go at the next lattice."""
    import copy
    import gc
    import weakref

    lm = tmp_path / "lm.arpa"
    lm.write_text(random_arpa(["a", "b"], order=3, seed=1))
    lat, words = _tiny_lattice()
    rescoring = LmRescoring(NgramLm(lm), NgramLm(lm))
    other = copy.deepcopy(words)
    rescoring.apply(lat, other)
    gone = weakref.ref(other)
    del other
    gc.collect()
    assert gone() is None
    _same_lattice(rescoring.apply(lat, words), rescore(lat, words, lm, lm))
    assert len(rescoring._kept._by_words) == 1


def test_one_lm_rescoring_keeps_two_word_tables_apart(tmp_path):
    """Two word tables through one `LmRescoring` (two graphs of one LM, their ids numbered
    differently): each lattice is rescored with its own table's words, as `rescore` alone does
    (kept names or steps of one table must not serve the other, where id 1 is another word)."""
    from wfstdecode import SymbolTable

    lm = tmp_path / "lm.arpa"
    lm.write_text(random_arpa(["a", "b"], order=2, seed=0))
    lat, words = _tiny_lattice()  # "a b"
    swapped = SymbolTable.from_list(["<eps>", "b", "a"])  # the same labels read "b a"
    rescoring = LmRescoring(NgramLm(lm), NgramLm(lm), 0.5)
    ab, ba = rescore(lat, words, lm, lm, 0.5), rescore(lat, swapped, lm, lm, 0.5)
    assert not np.array_equal(ab.graph_cost, ba.graph_cost)  # (the tables differ here)
    for _ in range(2):
        _same_lattice(rescoring.apply(lat, words), ab)
        _same_lattice(rescoring.apply(lat, swapped), ba)


def test_an_ngram_lm_bounds_what_it_remembers(tmp_path, monkeypatch):
    """An `NgramLm` remembers each cost and step it computed: `MAX_KEPT_STEPS` bounded an
    `LmRescoring`'s kept steps, but its LMs kept every step ever taken behind them (a service
    rescoring for days grew without end). Past `MAX_LM_MEMO` each is emptied; costs the same."""
    from wfstdecode import rescore as rescore_module

    words = ["a", "ab", "ba", "bab", "c"]
    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(words, order=3, seed=2, unk=True))
    sentences = _sentences(words, np.random.default_rng(2), 200, unknown=0.1)
    want = [NgramLm(path).sentence_cost(s) for s in sentences]
    monkeypatch.setattr(rescore_module, "MAX_LM_MEMO", 10, raising=False)
    lm = NgramLm(path)
    for sentence, cost in zip(sentences, want, strict=True):
        assert lm.sentence_cost(sentence) == cost
        assert len(lm._steps) <= 10 and len(lm._cache) <= 10

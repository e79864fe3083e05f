"""decode-corpus with lattice rescoring (--rescore-lm): each worker reads the LMs once and every
utterance comes out as `decode --rescore-lm` gives it; what every shard would fail on is refused
before any worker starts; a changed LM is a changed config."""

import json
import math

import numpy as np
import pytest

from wfstdecode.cli import main
from wfstdecode.corpus import CtcCorpusDecoder, decode_corpus
from wfstdecode.ctc import CtcBeamOptions
from wfstdecode.ctc.npz import decode_npz
from wfstdecode.decoding_graph import DecodingGraph
from wfstdecode.errors import InputFileError, OptionsError, WfstDecodeError
from wfstdecode.rescore import LmRescoring, RescoringFiles
from wfstdecode.testing.lm import random_arpa

OPTIONS = CtcBeamOptions(beam=12.0, lattice_beam=6.0, nbest=3)


@pytest.fixture(scope="module")
def lms(tmp_path_factory, corpus_words):
    root = tmp_path_factory.mktemp("lms")
    old, new = root / "old.arpa", root / "new.arpa"
    old.write_text(random_arpa(corpus_words, order=1, seed=5, density=1.0))
    new.write_text(random_arpa(corpus_words, order=3, seed=6, density=0.7))
    return old, new


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_rescored_corpus_equals_decode_with_rescoring_shard_by_shard(corpus, lms, tmp_path):
    old, new = lms
    files = RescoringFiles(str(new), str(old), lm_scale=0.8, beam=None)
    decoder = CtcCorpusDecoder(str(corpus.graph_path), OPTIONS, rescoring=files)
    summary = decode_corpus(corpus.shard_dir, tmp_path / "out", decoder, workers=2,
                            executor="local", progress="quiet")  # fmt: skip
    assert summary.ok and len(summary.decoded) == len(corpus.shards)
    graph = DecodingGraph.load(corpus.graph_path)
    rescoring = LmRescoring(str(new), str(old), 0.8, None)
    plain_differs = 0
    for shard in corpus.shards:
        want = decode_npz(shard, graph, OPTIONS, rescore=rescoring)
        plain = decode_npz(shard, graph, OPTIONS)
        got = _records(tmp_path / "out" / f"{shard.stem}.jsonl")
        assert [r["text"] for r in got] == [h[0].text for h in want.hypotheses]
        assert [r["score"] for r in got] == pytest.approx(
            [h[0].score for h in want.hypotheses], abs=1e-3
        )
        assert [[n["text"] for n in r["nbest"]] for r in got] == [
            [h.text for h in hs] for hs in want.hypotheses
        ]
        plain_differs += sum(
            a[0].score != pytest.approx(b[0].score, abs=1e-3)
            for a, b in zip(want.hypotheses, plain.hypotheses, strict=True)
        )
    assert plain_differs  # (the new LM changed the scores: the rescoring did something)


def test_what_every_shard_would_fail_on_is_refused_before_any_worker(corpus, lms, tmp_path):
    old, new = lms
    files = RescoringFiles(str(new), str(old))
    with pytest.raises(OptionsError, match="lattice_beam"):
        CtcCorpusDecoder(str(corpus.graph_path), CtcBeamOptions(), rescoring=files)
    with pytest.raises(OptionsError, match="RescoringFiles"):
        CtcCorpusDecoder(str(corpus.graph_path), OPTIONS, rescoring=LmRescoring(new, old))
    with pytest.raises(InputFileError, match="missing.arpa"):
        RescoringFiles(str(tmp_path / "missing.arpa"), str(old))
    with pytest.raises(OptionsError, match="lm_scale"):
        RescoringFiles(str(new), str(old), lm_scale=math.nan)
    out = tmp_path / "out"
    common = ["decode-corpus", str(corpus.shard_dir), "--graph", str(corpus.graph_path), "--out",
              str(out), "--executor", "local", "--workers", "1", "--quiet"]  # fmt: skip
    assert main([*common, "--rescore-lm", str(new), "--first-pass-lm", str(old)]) == 2
    assert not out.exists()
    assert main([*common, "--lm-scale", "0.5"]) == 2  # (without --rescore-lm: refused)
    assert main(["decode-corpus", str(corpus.shard_dir), "--transducer", "rnnt", "--out",
                 str(out), "--rescore-lm", str(new), "--quiet"]) == 2  # fmt: skip
    assert not out.exists()


def test_a_changed_lm_is_a_changed_config(corpus, corpus_words, lms, tmp_path, capsys):
    """A rerun whose new LM has other contents (same path) is refused unless --force; the same
    LM again skips every finished shard."""
    old, _ = lms
    new = tmp_path / "new.arpa"
    new.write_text(random_arpa(corpus_words, order=2, seed=8, density=0.7))
    out = tmp_path / "out"
    args = ["decode-corpus", str(corpus.shard_dir), "--graph", str(corpus.graph_path), "--out",
            str(out), "--executor", "local", "--workers", "1", "--quiet", "--lattice-beam", "6",
            "--rescore-lm", str(new), "--first-pass-lm", str(old)]  # fmt: skip
    assert main(args) == 0
    first = {p.name: p.read_text() for p in out.glob("*.jsonl")}
    assert main(args) == 0  # the same settings: every shard skipped
    assert {p.name: p.read_text() for p in out.glob("*.jsonl")} == first
    new.write_text(random_arpa(corpus_words, order=2, seed=9, density=0.7))
    capsys.readouterr()
    assert main(args) == 2
    assert "--force" in capsys.readouterr().err
    assert main([*args, "--force"]) == 0
    assert {p.name: p.read_text() for p in out.glob("*.jsonl")} != first


def test_the_python_decoder_without_rescoring_keeps_its_config(corpus):
    """Runs written before rescoring existed reopen: no 'rescoring' key unless it is set."""
    config = CtcCorpusDecoder(str(corpus.graph_path)).config()
    assert "rescoring" not in config
    assert np.all([k in config for k in ("options", "boosts", "frame_shift")])
    with pytest.raises(WfstDecodeError):
        CtcCorpusDecoder(str(corpus.graph_path), rescoring="big.arpa")


def test_the_rescoring_config_is_json_and_one_setting_has_one_digest(corpus, lms):
    """NumPy numbers (CtcBeamOptions takes them) crashed the run (not JSON), and 1 against 1.0
    or an infinite beam against None (exact, as the CLI says it) made another digest: every
    finished shard decoded again. The same setting gives the same config text."""
    old, new = lms

    def text(**kw):
        files = RescoringFiles(str(new), str(old), **kw)
        decoder = CtcCorpusDecoder(str(corpus.graph_path), OPTIONS, rescoring=files)
        return json.dumps(decoder.config(), sort_keys=True)  # (as the run's digest is made)

    assert text(lm_scale=np.float32(0.5), beam=np.float32(4)) == text(lm_scale=0.5, beam=4.0)
    assert text(lm_scale=1, beam=math.inf) == text(lm_scale=1.0, beam=None)


def test_lms_no_worker_could_read_are_refused_before_the_run(corpus, lms, tmp_path, capsys):
    """A file that is no ARPA (a KenLM binary, a words.txt) or a pipe passed the driver's
    check: every worker failed to load after run.json named the LMs, and the rerun with the
    right LM was refused as a run with other settings. Refused first, naming the file."""
    import os

    old, new = lms
    bad = tmp_path / "lm.bin"
    bad.write_bytes(b"mmap lm http://kheafield.com/code format version 5\n\0\1\2")
    out = tmp_path / "out"
    common = ["decode-corpus", str(corpus.shard_dir), "--graph", str(corpus.graph_path), "--out",
              str(out), "--executor", "local", "--workers", "1", "--quiet",
              "--lattice-beam", "6"]  # fmt: skip
    assert main([*common, "--rescore-lm", str(bad), "--first-pass-lm", str(old)]) == 2
    assert "lm.bin" in capsys.readouterr().err and not out.exists()
    r, w = os.pipe()
    try:
        os.write(w, new.read_bytes()[:1000])
        assert main([*common, "--rescore-lm", str(new), "--first-pass-lm",
                     f"/dev/fd/{r}"]) == 2  # fmt: skip
    finally:
        os.close(w)
        os.close(r)
    assert "not a regular file" in capsys.readouterr().err and not out.exists()
    assert main([*common, "--rescore-lm", str(new), "--first-pass-lm", str(old)]) == 0


def test_a_first_pass_lm_that_is_not_the_graphs_is_refused_before_the_run(
    corpus, corpus_words, lms, tmp_path, capsys
):
    """A valid ARPA lacking words of the graph passed the driver and failed every shard (each
    lattice with such a word refused); now refused first, naming the words; `decode` refuses
    it before the log-probs are read."""
    _, new = lms
    wrong = tmp_path / "wrong.arpa"
    wrong.write_text(random_arpa(corpus_words[:2], order=1, seed=5, density=1.0))
    out = tmp_path / "out"
    common = ["--lattice-beam", "6", "--rescore-lm", str(new), "--first-pass-lm", str(wrong)]
    assert main(["decode-corpus", str(corpus.shard_dir), "--graph", str(corpus.graph_path),
                 "--out", str(out), "--executor", "local", "--workers", "1", "--quiet",
                 *common]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert f"{wrong}: {len(corpus_words) - 2} of the words of the graph" in err
    assert repr(corpus_words[2]) in err and not out.exists()
    assert main(["decode", str(corpus.graph_path), str(corpus.shards[0]), *common]) == 2
    assert "not the LM the graph was built from" in capsys.readouterr().err

"""decode-corpus when the corpus around a finished run changes: shard names that are not UTF-8,
shards under symlinked directories, a new subdirectory of shards, a shard that changes and now
fails, a resumed transducer run with other threads, and a config with tuples reopening its own
output directory."""

import json
import os
import shutil

import numpy as np
import pytest

from wfstdecode.cli import main
from wfstdecode.corpus import CtcCorpusDecoder, decode_corpus, read_manifest
from wfstdecode.errors import WfstDecodeError
from wfstdecode.testing.ctc import lexicon_graph


def run(corpus, out, decoder=None, manifest=None, **kw):
    decoder = decoder or CtcCorpusDecoder(str(corpus.graph_path), backend="reference")
    kw.setdefault("workers", 1)
    return decode_corpus(manifest or corpus.shard_dir, out, decoder, executor="local",
                         progress="quiet", **kw)  # fmt: skip


def test_a_shard_name_that_is_not_utf8_is_refused_before_anything_is_decoded(corpus, tmp_path):
    """A Latin-1 file name (surrogate-escaped by Python) reached `output.text.encode("utf-8")`
    in OutputDir.write: UnicodeEncodeError, no summary, every rerun the same. It is refused up
    front, by name, before anything is decoded."""
    shards = tmp_path / "shards"
    shards.mkdir()
    shutil.copy(corpus.shards[0], shards / "plain.npz")
    shutil.copy(corpus.shards[1], os.path.join(os.fsencode(shards), b"caf\xe9.npz"))
    with pytest.raises(WfstDecodeError, match=r"caf\\xe9.npz'?: the shard's name is not UTF-8"):
        run(corpus, tmp_path / "out", manifest=shards)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.jsonl"))


def test_a_directory_manifest_follows_symlinked_subdirectories(corpus, tmp_path):
    """Shards under a symlinked subdirectory were silently left out of a directory manifest
    (Path.rglob does not follow directory links before Python 3.13); a glob took them."""
    root, elsewhere = tmp_path / "corpus", tmp_path / "elsewhere"
    (root / "local").mkdir(parents=True)
    elsewhere.mkdir()
    shutil.copy(corpus.shards[0], root / "local" / "a.npz")
    shutil.copy(corpus.shards[1], elsewhere / "b.npz")
    (root / "linked").symlink_to(elsewhere, target_is_directory=True)
    by_glob = [s.name for s in read_manifest(str(root / "**" / "*.npz"))]
    assert sorted(by_glob) == ["linked/b", "local/a"]
    assert [s.name for s in read_manifest(root)] == ["linked/b", "local/a"]


def test_adding_a_subdirectory_of_shards_does_not_rename_the_finished_ones(corpus, tmp_path):
    """Names were relative to the deepest directory holding every shard: a directory with only
    day1/ named its shards 'shard00', ...; adding day2/ renamed them 'day1/shard00', so the
    whole corpus was decoded again and the first outputs stayed beside the new ones."""
    root = tmp_path / "corpus"
    (root / "day1").mkdir(parents=True)
    for p in corpus.shards[:3]:
        shutil.copy(p, root / "day1" / p.name)
    out = tmp_path / "out"
    assert len(run(corpus, out, manifest=root).decoded) == 3
    (root / "day2").mkdir()
    shutil.copy(corpus.shards[3], root / "day2" / corpus.shards[3].name)
    again = run(corpus, out, manifest=root)
    assert len(again.skipped) == 3 and len(again.decoded) == 1
    assert len(list(out.rglob("*.jsonl"))) == 4


def test_a_config_holding_a_tuple_reopens_its_own_directory(tmp_path):
    """run.json's JSON list never equalled the config's tuple (a TransducerCorpusDecoder with
    BeamOptions(durations=...)): the same run started again was refused as another config."""
    from wfstdecode.corpus.ledger import OutputDir

    config = {"decoder": "transducer", "beam": {"durations": (0, 1, 2, 3, 4)}}
    with OutputDir(tmp_path / "out", config):
        pass
    with OutputDir(tmp_path / "out", config):  # raised WfstDecodeError "differing: beam"
        pass


def test_a_transducer_run_resumed_with_other_threads_equals_an_uninterrupted_one(tmp_path):
    """torch's thread count changes the float sums (scores differ in the 7th digit), but
    TransducerCorpusDecoder.config() left num_threads out: a run resumed with other threads
    skipped the first run's shards, and its directory matched neither uninterrupted run. Now
    the thread count is part of the config: such a resume asks for --force."""
    pytest.importorskip("torch")
    from wfstdecode.corpus import TransducerCorpusDecoder
    from wfstdecode.transducer import BeamOptions

    shards = tmp_path / "shards"
    shards.mkdir()
    rng = np.random.default_rng(0)
    for s, size in enumerate((3, 2, 4)):
        logits = rng.normal(size=(size, 40, 191)) * 3
        lp = (logits - np.log(np.exp(logits).sum(-1, keepdims=True))).astype(np.float32)
        np.savez(shards / f"t{s}.npz", log_probs=lp, lengths=rng.integers(10, 41, size))
    beam = BeamOptions("alsd", beam_size=2)

    def go(out, threads):
        decoder = TransducerCorpusDecoder("tdt", beam, num_threads=threads)
        try:
            return decode_corpus(shards, out, decoder, workers=1, executor="local",
                                 progress="quiet")  # fmt: skip
        except WfstDecodeError as exc:
            assert "differing: num_threads" in str(exc)
            return None

    go(tmp_path / "resumed", 1)
    assert go(tmp_path / "resumed", 2) is None  # another config: --force needed
    go(tmp_path / "fresh", 1)
    for p in sorted((tmp_path / "fresh").glob("*.jsonl")):
        assert (tmp_path / "resumed" / p.name).read_bytes() == p.read_bytes(), p.name


def test_a_changed_shard_that_now_fails_keeps_no_stale_output(corpus, tmp_path):
    """Its earlier OUT/NAME.jsonl (and done record) stayed: output of data that no longer
    exists, beside a summary that lists the shard as failed."""
    shards = tmp_path / "shards"
    shutil.copytree(corpus.shard_dir, shards)
    out = tmp_path / "out"
    run(corpus, out, manifest=shards)
    victim = corpus.shards[4].stem
    (shards / f"{victim}.npz").write_bytes(b"garbage")
    summary = run(corpus, out, manifest=shards)
    assert [f["name"] for f in summary.failed] == [victim]
    assert not (out / f"{victim}.jsonl").exists()
    assert not (out / f"{victim}.done.json").exists()


def test_a_ctrl_c_once_every_shard_is_settled_still_writes_the_summary(
    corpus, tmp_path, monkeypatch
):
    """A Ctrl-C (or SIGTERM) that lands while the totals are counted waited for nothing: the
    run ended without a summary.json (an earlier run's stayed). Now it comes after the summary,
    which holds this run's shards."""
    import _thread
    import json
    import signal

    from wfstdecode.corpus import run as corpus_run

    real = corpus_run._totals

    def interrupted(*args):
        _thread.interrupt_main()
        real(*args)

    monkeypatch.setattr(corpus_run, "_totals", interrupted)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run(corpus, tmp_path / "out")
    finally:
        signal.signal(signal.SIGINT, previous)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["shards"] == len(corpus.shards)
    assert len(summary["decoded"]) == len(corpus.shards)


def test_a_run_that_finished_no_shard_gives_way_to_new_settings(corpus, tmp_path, capsys):
    """A graph of other tokens fails every shard; the rerun with the right graph needed
    --force, though no finished shard was at stake. A run that finished one still asks."""
    wrong = tmp_path / "wrong.npz"
    lexicon_graph(["zq"]).save(wrong)
    out = tmp_path / "out"

    def run(graph):
        return main(["decode-corpus", str(corpus.shard_dir), "--graph", str(graph), "--out",
                     str(out), "--executor", "local", "--workers", "1", "--quiet",
                     "--max-attempts", "1"])  # fmt: skip

    assert run(wrong) != 0 and not list(out.glob("*.done.json"))
    assert run(corpus.graph_path) == 0
    assert len(list(out.glob("*.done.json"))) == len(corpus.shards)
    capsys.readouterr()
    assert run(wrong) == 2 and "--force" in capsys.readouterr().err


def test_a_config_equal_to_the_runs_but_of_another_digest_does_not_redo_every_shard(
    corpus, tmp_path
):
    """run.json was compared with ==, the done records by the config's digest: a run resumed
    with CtcBeamOptions(beam=16) where it was started with 16.0 (the command line's) passed
    the first check and failed the second, so every finished shard was decoded again without
    a word. The options now keep numbers as floats (one setting, one digest: the resume skips
    the shard), and both checks compare digests."""
    from wfstdecode.ctc import CtcBeamOptions

    out = tmp_path / "out"
    one = corpus.shards[3]
    first = run(corpus, out, CtcCorpusDecoder(str(corpus.graph_path), CtcBeamOptions(beam=16.0),
                                              backend="reference"), manifest=one)  # fmt: skip
    assert first.decoded == [one.stem]
    again = run(corpus, out, CtcCorpusDecoder(str(corpus.graph_path), CtcBeamOptions(beam=16),
                                              backend="reference"), manifest=one)  # fmt: skip
    assert again.skipped == [one.stem] and again.decoded == []
    with pytest.raises(WfstDecodeError, match="differing: options"):
        run(corpus, out, CtcCorpusDecoder(str(corpus.graph_path), CtcBeamOptions(beam=15),
                                          backend="reference"), manifest=one)  # fmt: skip


def test_a_numpy_frame_shift_is_a_plain_float_in_the_runs_config(corpus, tmp_path):
    """A float32 frame shift (read from an array) crashed the run on writing run.json
    ("Object of type float32 is not JSON serializable", a TypeError and a traceback); 1 and
    1.0 were two configs."""
    decoder = CtcCorpusDecoder(str(corpus.graph_path), backend="reference",
                               frame_shift=np.float32(0.04))  # fmt: skip
    assert type(decoder.frame_shift) is float
    assert CtcCorpusDecoder(str(corpus.graph_path), frame_shift=1).config() == CtcCorpusDecoder(
        str(corpus.graph_path), frame_shift=1.0).config()  # fmt: skip
    summary = run(corpus, tmp_path / "out", decoder, manifest=corpus.shards[3])
    assert summary.ok and summary.rtfx is not None
    pytest.importorskip("torch")
    from wfstdecode.corpus import TransducerCorpusDecoder

    assert type(TransducerCorpusDecoder("rnnt", frame_shift=np.float32(0.04)).frame_shift) is float


def test_a_ctrl_c_as_a_shard_is_written_leaves_the_summary_listing_it(
    corpus, tmp_path, monkeypatch
):
    """A Ctrl-C (or SIGTERM) landing just after a shard's done record was written, before the
    driver noted it, left a finished shard the summary of the interrupted run did not count
    (its decoded list, utterances and WER lacked it)."""
    import _thread
    import json
    import signal

    from wfstdecode.corpus.ledger import OutputDir

    real = OutputDir.write

    def interrupted(self, *args):
        record = real(self, *args)
        _thread.interrupt_main()
        return record

    monkeypatch.setattr(OutputDir, "write", interrupted)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        summary = run(corpus, tmp_path / "out")
    finally:
        signal.signal(signal.SIGINT, previous)
    done = sorted(p.name.removesuffix(".done.json") for p in (tmp_path / "out").glob("*.done.json"))
    said = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary.interrupted and len(done) == 1
    assert said["decoded"] == done and said["utterances"] == len(corpus.expected[done[0]])


def test_a_touched_shard_is_hashed_once_not_on_every_run(corpus, tmp_path, monkeypatch):
    """A shard whose mtime changed but not its contents is found unchanged by its hash; its done
    record kept the old mtime, so every later run hashed it again (a corpus of touched shards,
    restored from a backup, re-read in full on every resume). The record now takes the mtime."""
    import wfstdecode.corpus.ledger as ledger

    shards = tmp_path / "shards"
    shutil.copytree(corpus.shard_dir, shards)
    out = tmp_path / "out"
    decoder = CtcCorpusDecoder(str(corpus.graph_path), backend="reference")
    assert run(corpus, out, decoder, manifest=shards).decoded
    target = shards / corpus.shards[2].name
    os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns + 10**9))
    hashed = []
    real = ledger.input_id
    monkeypatch.setattr(ledger, "input_id", lambda p: hashed.append(p.name) or real(p))
    assert run(corpus, out, decoder, manifest=shards).decoded == []
    assert hashed == [target.name]
    assert run(corpus, out, decoder, manifest=shards).decoded == []
    assert hashed == [target.name]  # (not again)


def test_the_wer_line_counts_the_utterances_it_scores(corpus, tmp_path, capsys):
    """A shard without reference texts is decoded, not scored: the WER line said "(N
    utterances)" with all of them; it now says how many of them the WER counts."""
    from wfstdecode.cli import main

    shards = tmp_path / "shards"
    shutil.copytree(corpus.shard_dir, shards)
    bare = shards / corpus.shards[0].name
    with np.load(bare) as z:
        arrays = {k: z[k] for k in z.files if k != "texts"}
    np.savez(bare, **arrays)
    out = tmp_path / "out"
    argv = ["decode-corpus", str(shards), "--graph", str(corpus.graph_path), "--out", str(out),
            "--executor", "local", "--workers", "1", "--quiet"]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    unscored = len(arrays["lengths"])
    assert summary["scored_utterances"] == summary["utterances"] - unscored > 0
    assert (f"({summary['scored_utterances']:,} of {summary['utterances']:,} utterances)"
            in capsys.readouterr().out)  # fmt: skip


def test_a_shard_below_a_folder_whose_name_is_not_utf8_is_recorded(tmp_path):
    """A shard's name (its path below the directory given) is checked to be UTF-8, but its
    done record and a failure in summary.json hold its whole path: a folder above it named in
    Latin-1 made every run end in a UnicodeEncodeError traceback at the first done record."""
    from wfstdecode.corpus.ledger import OutputDir
    from wfstdecode.corpus.manifest import Shard
    from wfstdecode.corpus.shards import InputId, ShardOutput
    from wfstdecode.safe_io import read_json_file

    shard = Shard(tmp_path / os.fsdecode(b"caf\xe9") / "part0.npz", "part0")
    output = ShardOutput(text='{"id": "u"}\n', utterances=1, frames=3,
                         input=InputId(10, 1, "0" * 64), wall_seconds=0.1, cpu_seconds=0.1,
                         worker="w")  # fmt: skip
    with OutputDir(tmp_path / "out", {"decoder": "test"}) as out:
        out.write(shard, output, attempts=1)
        out.write_summary({"failed": [{"shard": str(shard.path), "error": "x"}]})
    record = read_json_file(tmp_path / "out" / "part0.done.json", ValueError)
    assert record["shard"] == str(shard.path)
    summary = read_json_file(tmp_path / "out" / "summary.json", ValueError)
    assert summary["failed"][0]["shard"] == str(shard.path)

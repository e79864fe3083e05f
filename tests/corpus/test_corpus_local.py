"""decode-corpus on local worker processes (the executor without Ray): results, failures,
retries, resuming, and the output directory's guarantees."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from wfstdecode.cli import main
from wfstdecode.corpus import CtcCorpusDecoder, decode_corpus, read_manifest
from wfstdecode.errors import WfstDecodeError
from wfstdecode.testing.corpus import FaultyDecoder, assert_outputs_match, output_records


def run(corpus, out, decoder=None, manifest=None, **kw):
    decoder = decoder or CtcCorpusDecoder(str(corpus.graph_path))
    kw.setdefault("workers", 2)
    return decode_corpus(manifest or corpus.shard_dir, out, decoder, executor="local",
                         progress="quiet", **kw)  # fmt: skip


def test_results_equal_single_process_decode(corpus, tmp_path):
    summary = run(corpus, tmp_path / "out")
    assert summary.ok and sorted(summary.decoded) == sorted(p.stem for p in corpus.shards)
    assert_outputs_match(corpus, tmp_path / "out")
    assert summary.utterances == sum(len(v) for v in corpus.expected.values())
    refs = [json.loads(x) for p in corpus.shards
            for x in (tmp_path / "out" / f"{p.stem}.jsonl").read_text().splitlines()]  # fmt: skip
    errors = sum(r["errors"] for r in refs)
    assert summary.wer == pytest.approx(errors / sum(len(r["ref"].split()) for r in refs))
    saved = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert saved["utterances"] == summary.utterances and saved["failed"] == []


def test_the_reference_backend_decodes_a_corpus_as_the_cpu_does(corpus, tmp_path):
    """The workers' thread count (1 by default) went to every backend: the reference (and cuda)
    refused it and every shard failed."""
    decoder = CtcCorpusDecoder(str(corpus.graph_path), backend="reference")
    summary = run(corpus, tmp_path / "out", decoder, workers=1)
    assert summary.ok and sorted(summary.decoded) == sorted(p.stem for p in corpus.shards)
    assert_outputs_match(corpus, tmp_path / "out")


def test_rerun_skips_finished_shards_and_redoes_changed_ones(corpus, tmp_path):
    shards = tmp_path / "shards"
    shutil.copytree(corpus.shard_dir, shards)
    out = tmp_path / "out"
    decoder = CtcCorpusDecoder(str(corpus.graph_path))
    first = run(corpus, out, decoder, manifest=shards)
    assert len(first.decoded) == len(corpus.shards)
    again = run(corpus, out, decoder, manifest=shards)
    assert again.decoded == [] and len(again.skipped) == len(corpus.shards)
    assert again.utterances == first.utterances and again.wer == first.wer
    # this run's own figures count what it decoded: nothing
    assert again.decoded_utterances == again.decoded_frames == 0
    assert again.worker_cpu_seconds == 0 and again.frames_per_second is None
    # A new shard's contents under an old name, and a hand-damaged output: both decoded again.
    shutil.copy(corpus.shards[0], shards / corpus.shards[1].name)
    (out / f"{corpus.shards[2].stem}.jsonl").write_text("{}\n")
    third = run(corpus, out, decoder, manifest=shards)
    assert sorted(third.decoded) == sorted([corpus.shards[1].stem, corpus.shards[2].stem])
    redone = len(corpus.expected[corpus.shards[0].stem]) + len(
        corpus.expected[corpus.shards[2].stem]
    )
    assert third.decoded_utterances == redone < third.utterances
    replaced = output_records(out / f"{corpus.shards[1].stem}.jsonl")
    assert [k for _, k in replaced] == corpus.expected[corpus.shards[0].stem]
    # Same size and mtime but other bytes: only --verify sees it.
    target = shards / corpus.shards[3].name
    st = target.stat()
    data = bytearray(target.read_bytes())
    with np.load(target) as z:
        arrays = dict(z)
    arrays["log_probs"] = arrays["log_probs"][:, :, ::-1].copy()
    np.savez(target, **arrays)
    assert target.stat().st_size == len(data)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert run(corpus, out, decoder, manifest=shards).decoded == []
    assert run(corpus, out, decoder, manifest=shards, verify=True).decoded == [target.stem]


def test_corrupt_and_missing_shards_are_reported_not_fatal(corpus, tmp_path):
    shards = tmp_path / "shards"
    shutil.copytree(corpus.shard_dir, shards)
    (shards / "garbage.npz").write_bytes(b"not a zip at all")
    good = corpus.shards[0].read_bytes()
    (shards / "truncated.npz").write_bytes(good[: len(good) // 2])
    np.savez(shards / "wrong_width.npz", log_probs=np.zeros((1, 4, 3), np.float32))
    manifest = shards / "manifest.jsonl"  # (names are relative to the manifest's directory)
    lines = [{"shard": p.name} for p in sorted(shards.iterdir())]
    lines.append({"shard": "missing.npz"})
    manifest.write_text("".join(json.dumps(x) + "\n" for x in lines))
    summary = run(corpus, tmp_path / "out", manifest=manifest)
    failed = {f["name"]: f for f in summary.failed}
    assert sorted(failed) == ["garbage", "missing", "truncated", "wrong_width"]
    assert all(f["attempts"] == 1 and f["shard"] in f["error"] for f in failed.values())
    assert "V=3" in failed["wrong_width"]["error"]
    assert sorted(summary.decoded) == sorted(p.stem for p in corpus.shards)
    assert_outputs_match(corpus, tmp_path / "out")
    assert not (tmp_path / "out" / "garbage.jsonl").exists()
    assert not summary.ok


def test_a_worker_that_crashes_once_loses_and_duplicates_nothing(corpus, tmp_path):
    base = CtcCorpusDecoder(str(corpus.graph_path))
    (tmp_path / "state").mkdir()
    crash = FaultyDecoder(base, "crash_once", str(tmp_path / "state"), corpus.shards[2].stem)
    summary = run(corpus, tmp_path / "out", crash)
    assert summary.ok and summary.retries == 1
    assert sorted(summary.decoded) == sorted(p.stem for p in corpus.shards)
    assert_outputs_match(corpus, tmp_path / "out")
    done = json.loads((tmp_path / "out" / f"{corpus.shards[2].stem}.done.json").read_text())
    assert done["attempts"] == 2


def test_a_shard_that_always_kills_its_worker_fails_after_max_attempts(corpus, tmp_path):
    base = CtcCorpusDecoder(str(corpus.graph_path))
    (tmp_path / "state").mkdir()
    crash = FaultyDecoder(base, "crash_always", str(tmp_path / "state"), corpus.shards[0].stem)
    summary = run(corpus, tmp_path / "out", crash, max_attempts=2)
    assert [f["name"] for f in summary.failed] == [corpus.shards[0].stem]
    assert summary.failed[0]["attempts"] == 2 and "exit code 3" in summary.failed[0]["error"]
    assert len(summary.decoded) == len(corpus.shards) - 1


INTERRUPTED_RUN = """
import signal
import sys
from wfstdecode.corpus import CtcCorpusDecoder, decode_corpus
from wfstdecode.interrupts import termination_raised
from wfstdecode.testing.corpus import FaultyDecoder
if __name__ == "__main__":
    # Ctrl-C as at a terminal, even when the tests run in a background job (which starts
    # with SIGINT ignored, and Python keeps that)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    graph, shards, out, state = sys.argv[1:]
    gated = FaultyDecoder(CtcCorpusDecoder(graph), "gated", state, seconds=60)
    with termination_raised():  # (as the command line: SIGTERM stops it as Ctrl-C does)
        s = decode_corpus(shards, out, gated, workers=1, executor="local", progress="log")
    print("INTERRUPTED" if s.interrupted else "COMPLETE", len(s.decoded), flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_rerun_after_an_interrupted_run_decodes_only_the_missing_shards(corpus, tmp_path, sig):
    out, state = tmp_path / "out", tmp_path / "state"
    state.mkdir()
    script = tmp_path / "run.py"
    script.write_text(INTERRUPTED_RUN)
    args = [sys.executable, str(script), str(corpus.graph_path), str(corpus.shard_dir), str(out),
            str(state)]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(out.glob("*.done.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(sig)  # the second shard waits for "go": the run is midway
    with contextlib.suppress(subprocess.TimeoutExpired):  # a run that stops on it ends here
        proc.wait(timeout=10)
    (state / "go").touch()  # a run that went on regardless would now finish every shard
    stdout, stderr = proc.communicate(timeout=60)
    finished = sorted(p.name.removesuffix(".done.json") for p in out.glob("*.done.json"))
    assert 1 <= len(finished) < len(corpus.shards), stderr
    if sig != signal.SIGKILL:
        assert stdout.startswith("INTERRUPTED"), (stdout, stderr)
        said = json.loads((out / "summary.json").read_text())
        assert said["interrupted"] is True and said["interrupted_by"] == sig.name
    summary = run(corpus, out)
    assert sorted(summary.skipped) == finished
    assert sorted(summary.decoded) == sorted(set(p.stem for p in corpus.shards) - set(finished))
    assert_outputs_match(corpus, out)
    assert not list(out.rglob("*.wfstdecode-partial"))


def test_output_directory_guards(corpus, tmp_path):
    decoder = CtcCorpusDecoder(str(corpus.graph_path))
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(WfstDecodeError, match="not a decode-corpus output"):
        run(corpus, foreign, decoder)
    assert (foreign / "notes.txt").read_text() == "mine"
    out = tmp_path / "out"
    run(corpus, out, decoder, manifest=corpus.shards[0])
    from wfstdecode.ctc import CtcBeamOptions

    wider = CtcCorpusDecoder(str(corpus.graph_path), CtcBeamOptions(beam=20.0))
    with pytest.raises(WfstDecodeError, match="differing: options"):
        run(corpus, out, wider, manifest=corpus.shards[0])
    assert run(corpus, out, wider, manifest=corpus.shards[0], force=True).decoded == ["shard00"]
    from wfstdecode.corpus.ledger import OutputDir

    with OutputDir(out, wider.config()), pytest.raises(WfstDecodeError, match="another"):
        run(corpus, out, wider)


def test_manifest_forms(corpus, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    shutil.copy(corpus.shards[0], tmp_path / "a" / "x.npz")
    shutil.copy(corpus.shards[1], tmp_path / "b" / "x.npz")
    names = [s.name for s in read_manifest(tmp_path)]
    assert names == ["a/x", "b/x"]
    assert [s.name for s in read_manifest(str(tmp_path / "*" / "x.npz"))] == names
    bad = tmp_path / "m.jsonl"
    bad.write_text('{"shard": "a/x.npz"}\n\n{"shard": "a/x.npz"}\n')
    with pytest.raises(WfstDecodeError, match=r"m.jsonl:3: a/x.npz is listed twice"):
        read_manifest(bad)
    bad.write_text('{"path": "a/x.npz"}\n')
    with pytest.raises(WfstDecodeError, match=r"m.jsonl:1: expected"):
        read_manifest(bad)
    with pytest.raises(WfstDecodeError, match="no file matches"):
        read_manifest(str(tmp_path / "*.nothing"))
    bad.write_text('{"shard": "a/x\\u0000.npz"}\n')
    with pytest.raises(WfstDecodeError, match=r"m.jsonl:1: the shard path .* NUL character"):
        read_manifest(bad)
    out = tmp_path / "out"
    run(corpus, out, manifest=tmp_path)
    ids = [i for i, _ in output_records(out / "a" / "x.jsonl")]
    assert ids == [f"a/x-{n}" for n in range(len(ids))]
    long = tmp_path / "long"  # a legal file name, too long once the outputs' suffixes are on
    long.mkdir()
    shutil.copy(corpus.shards[0], long / ("y" * 240 + ".npz"))
    with pytest.raises(WfstDecodeError, match="rename the shard"):
        run(corpus, tmp_path / "long_out", manifest=long)
    assert not (tmp_path / "long_out").exists()  # refused before anything was made


def test_cli(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["decode-corpus", str(corpus.shard_dir), "--graph", str(corpus.graph_path), "--out",
            str(out), "--executor", "local", "--workers", "2", "--frame-shift", "0.04",
            "--quiet"]  # fmt: skip
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert f"{len(corpus.shards)} shards decoded, 0 already done, 0 failed" in printed
    assert "RTFx" in printed and "WER" in printed
    first = json.loads((out / "shard00.jsonl").read_text().splitlines()[0])
    word = first["words"][0]
    assert word["start"] == round(word["start_frame"] * 0.04, 3)
    assert main(args) == 0 and "0 shards decoded, 6 already done" in capsys.readouterr().out
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "broken.npz").write_bytes(b"x")
    args[1] = str(tmp_path / "bad")
    assert main([*args[:5], str(tmp_path / "out2"), *args[6:]]) == 1
    assert "FAILED" in capsys.readouterr().out


def test_a_shard_that_hangs_is_stopped_at_the_timeout_and_reported(corpus, tmp_path):
    base = CtcCorpusDecoder(str(corpus.graph_path))
    (tmp_path / "state").mkdir()
    hang = FaultyDecoder(base, "hang", str(tmp_path / "state"), corpus.shards[1].stem)
    summary = run(corpus, tmp_path / "out", hang, max_attempts=2, shard_timeout=4.0)
    assert [f["name"] for f in summary.failed] == [corpus.shards[1].stem]
    assert summary.failed[0]["attempts"] == 2
    assert "no result after 4 s" in summary.failed[0]["error"]
    assert len(summary.decoded) == len(corpus.shards) - 1


def test_progress_bar_and_log_lines():
    import io
    from pathlib import Path

    from wfstdecode.corpus.manifest import Shard
    from wfstdecode.corpus.pools import Job
    from wfstdecode.corpus.progress import Progress
    from wfstdecode.corpus.shards import InputId, ShardOutput

    shards = [Shard(Path("/nonexistent/a.npz"), "a"), Shard(Path("/nonexistent/b.npz"), "b")]
    jobs = [Job(0, shards[0].path, "a"), Job(1, shards[1].path, "b")]
    output = ShardOutput("", 7, 700, InputId(1000, 0, ""), 0.5, 0.5, "host:1")
    stream = io.StringIO()
    bar = Progress(shards, jobs, "bar", stream)
    bar.bytes_total = 2000  # the shards do not exist: sizes as if they did
    bar.finished(shards[0], output)
    assert "1/2 shards | 7 utt | 700 frames" in stream.getvalue() and "ETA" in stream.getvalue()
    bar.failed(shards[1], "broken")
    bar.close()
    assert "FAILED b: broken\n" in stream.getvalue() and stream.getvalue().endswith("\n")
    log = io.StringIO()
    lines = Progress(shards, jobs, "auto", log)  # not a terminal: one line per shard
    lines.finished(shards[0], output)
    assert log.getvalue() == "[1/2] a: 7 utterances, 700 frames, 0.5 s\n"
    quiet = io.StringIO()
    Progress(shards, jobs, "quiet", quiet).finished(shards[0], output)
    assert quiet.getvalue() == ""


def test_without_ray_auto_runs_local_processes_and_ray_is_refused(corpus, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    decoder = CtcCorpusDecoder(str(corpus.graph_path))
    summary = decode_corpus(corpus.shards[0], tmp_path / "out", decoder, executor="auto",
                            progress="quiet")  # fmt: skip
    assert summary.ok and summary.executor == "local" and summary.workers == 1
    with pytest.raises(WfstDecodeError, match=r"pip install 'wfstdecode\[ray\]'"):
        decode_corpus(corpus.shards[1], tmp_path / "out2", decoder, executor="ray")


def test_a_failed_output_write_names_the_output_and_leaves_nothing(tmp_path, monkeypatch):
    """A full disk (ENOSPC from the write or the fsync carries no file name): the error names
    the output the run was writing, and its temporary file is gone."""
    import errno

    from wfstdecode.corpus import ledger

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(ledger.os, "fsync", full)
    target = tmp_path / "x.done.json"
    with pytest.raises(OSError, match="No space left") as info:
        ledger._write_atomically(target, b"{}")
    assert info.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []


def test_boosts_on_a_graph_without_a_word_table_keep_only_ids_it_outputs(tmp_path):
    """Ids beyond the graph's largest output label are unknown words: said once by the driver
    and left out, not passed to every shard to be warned of again."""
    import dataclasses

    from wfstdecode.testing import random_graph

    g = dataclasses.replace(random_graph(3), words=None)
    g.save(tmp_path / "TLG.npz")
    largest = int(g.olabel.max())
    with pytest.warns(UserWarning, match=str(2**40)):
        decoder = CtcCorpusDecoder(str(tmp_path / "TLG.npz"), boosts={2**40: 2.0, largest: 1.0})
    assert decoder.boosts == {largest: 1.0}


def test_ids_repeated_across_shards_are_reported(corpus, tmp_path):
    """A shard's reader refuses an id twice in it; across shards every line is written, but the
    corpus WER counts such an utterance twice, so the summary names them and warns."""
    shards = tmp_path / "shards"
    shards.mkdir()
    with np.load(corpus.shards[0]) as z:
        members = dict(z)
    n = len(members["lengths"])
    for name in ("a", "b"):
        ids = np.array(["same", *(f"{name}{i}" for i in range(1, n))])
        np.savez(shards / f"{name}.npz", **{**members, "ids": ids})
    summary = decode_corpus(shards, tmp_path / "out", CtcCorpusDecoder(str(corpus.graph_path)),
                            executor="local", workers=1, progress="quiet")  # fmt: skip
    assert summary.ok and summary.repeated_ids == ["same: a, b"]
    assert summary.repeated_id_count == 1
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["repeated_id_count"] == 1


def test_a_corpus_without_references_has_no_wer(corpus, tmp_path, capsys):
    from wfstdecode.corpus.run import print_summary

    shards = tmp_path / "shards"
    shards.mkdir()
    with np.load(corpus.shards[0]) as z:
        np.savez(shards / "plain.npz", **{k: z[k] for k in z.files if k != "texts"})
    summary = run(corpus, tmp_path / "out", manifest=shards)
    assert summary.ok and summary.utterances and summary.wer is None
    print_summary(summary, tmp_path / "out")
    printed = capsys.readouterr()
    assert "1 shards decoded" in printed.out and "WER" not in printed.out + printed.err


def test_a_shard_that_changes_while_it_is_decoded_is_not_recorded(tmp_path):
    """Its output would be kept under the identity it had before, and skipped next run."""
    from wfstdecode.corpus.shards import ShardChangedError, decode_shard

    path = tmp_path / "s.npz"
    path.write_bytes(b"first bytes")

    def run_and_change(p):
        p.write_bytes(b"other bytes, longer")
        return ["u"], [[]], [1], None

    with pytest.raises(ShardChangedError, match="changed while it was being decoded"):
        decode_shard(path, "s", run_and_change, None)


def test_kaldi_archives_are_shards_as_their_npz_are(corpus, tmp_path):
    """A directory of Kaldi archives (``.ark``, as nnet3-compute writes) decodes as the same
    emissions in ``.npz`` shards, keys as ids; a script (``.scp``) is refused as a shard (its
    matrices live in files the resume check would not see); transducer shards stay ``.npz``."""
    kio = pytest.importorskip("kaldi_native_io", reason="writes the archives")
    from wfstdecode.corpus import TransducerCorpusDecoder

    arks = tmp_path / "arks"
    arks.mkdir()
    for path in corpus.shards:
        with np.load(path) as z, kio.FloatMatrixWriter(f"ark:{arks / path.stem}.ark") as w:
            for i, (lp, n) in enumerate(zip(z["log_probs"], z["lengths"], strict=True)):
                w.write(f"{path.stem}-{i}", lp[:n])
    summary = run(corpus, tmp_path / "out", manifest=arks)
    assert summary.ok and sorted(summary.decoded) == sorted(p.stem for p in corpus.shards)
    assert_outputs_match(corpus, tmp_path / "out")
    assert read_manifest(arks / f"{corpus.shards[0].stem}.ark", (".npz", ".ark"))
    with pytest.raises(WfstDecodeError, match="no .npz file in this directory"):
        read_manifest(arks, TransducerCorpusDecoder.shard_suffixes)
    (arks / "all.scp").write_text("x shard00.ark:9\n")
    with pytest.raises(WfstDecodeError, match="all.scp: a Kaldi script is not a shard"):
        read_manifest(arks / "all.scp", (".npz", ".ark"))


def test_gzip_compressed_archives_are_shards_as_decode_reads_them(corpus, tmp_path):
    """``decode`` reads ``FILE.ark.gz`` (Kaldi's gzip-compressed archives), and decode-corpus
    reads shards "as decode reads them": one given alone was read as a JSONL manifest ("not
    UTF-8"), and a directory of them held "no .npz or .ark file"."""
    kio = pytest.importorskip("kaldi_native_io", reason="writes the archives")
    import gzip

    arks = tmp_path / "arks"
    arks.mkdir()
    for path in corpus.shards:
        ark = arks / f"{path.stem}.ark"
        with np.load(path) as z, kio.FloatMatrixWriter(f"ark:{ark}") as w:
            for i, (lp, n) in enumerate(zip(z["log_probs"], z["lengths"], strict=True)):
                w.write(f"{path.stem}-{i}", lp[:n])
        (arks / f"{path.stem}.ark.gz").write_bytes(gzip.compress(ark.read_bytes()))
        ark.unlink()
    one = arks / f"{corpus.shards[0].stem}.ark.gz"
    suffixes = CtcCorpusDecoder.shard_suffixes
    assert [s.name for s in read_manifest(one, suffixes)] == [corpus.shards[0].stem]
    summary = run(corpus, tmp_path / "out", manifest=arks)
    assert summary.ok and sorted(summary.decoded) == sorted(p.stem for p in corpus.shards)
    assert_outputs_match(corpus, tmp_path / "out")


def test_a_script_listed_by_a_manifest_or_matched_by_a_glob_is_refused_too(tmp_path):
    """A script (``.scp``) is no shard however it is named: a rerun checks a shard's own file,
    and a script stays the same when the archives it names are written again (new log-probs of
    the same sizes), so its stale output was skipped as finished."""
    (tmp_path / "x.ark").write_bytes(b"u [ 0 0 ]\n")
    (tmp_path / "x.scp").write_text("u x.ark:2\n")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"shard": "x.ark"}\n{"shard": "x.scp"}\n')
    with pytest.raises(WfstDecodeError, match=r"m.jsonl:2: x.scp: a Kaldi script is not a shard"):
        read_manifest(manifest, (".npz", ".ark"))
    with pytest.raises(WfstDecodeError, match=r"x.scp: a Kaldi script is not a shard"):
        read_manifest(str(tmp_path / "x.*"), (".npz", ".ark"))
    (tmp_path / "x.scp").rename(tmp_path / "y.SCP")
    manifest.write_text('{"shard": "y.SCP"}\n')
    with pytest.raises(WfstDecodeError, match=r"m.jsonl:1: y.SCP: a Kaldi script is not a shard"):
        read_manifest(manifest, (".npz", ".ark"))


def test_reference_texts_give_kaldi_archives_their_wer(corpus, tmp_path, capsys):
    """decode-corpus --text (a Kaldi data directory's text) scores archives, which carry no
    texts, as the .npz shards' own texts score them; a shard without ids cannot be matched to
    references and fails by name; a changed text file is a changed config."""
    kio = pytest.importorskip("kaldi_native_io", reason="writes the archives")
    arks, lines = tmp_path / "arks", []
    arks.mkdir()
    for path in corpus.shards:
        with np.load(path) as z, kio.FloatMatrixWriter(f"ark:{arks / path.stem}.ark") as w:
            for i, (lp, n, text) in enumerate(zip(z["log_probs"], z["lengths"], z["texts"],
                                                  strict=True)):  # fmt: skip
                w.write(f"{path.stem}-{i}", lp[:n])
                lines.append(f"{path.stem}-{i} {text}\n")
    (tmp_path / "text").write_text("".join(lines))
    want = run(corpus, tmp_path / "npz_out")
    argv = ["decode-corpus", str(arks), "--graph", str(corpus.graph_path), "--out",
            str(tmp_path / "out"), "--executor", "local", "--workers", "1", "--quiet",
            "--text", str(tmp_path / "text")]  # fmt: skip
    assert main(argv) == 0
    got = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert got["wer"] == pytest.approx(want.wer) and got["failed"] == []
    (tmp_path / "text").write_text("".join(lines[1:]))
    assert main(argv) == 2 and "--force" in capsys.readouterr().err  # (another config)
    decoder = CtcCorpusDecoder(str(corpus.graph_path), references={"x": "a"})
    summary = run(corpus, tmp_path / "no_ids", decoder, workers=1)
    assert len(summary.failed) == len(corpus.shards)
    assert "has no 'ids': the reference texts name utterances by id" in summary.failed[0]["error"]


def test_a_shard_with_boosts_but_no_ids_fails_by_name(corpus, tmp_path):
    """A shard's boosts member names utterances by id; without ids its lines are named
    NAME-INDEX, yet the boosts had to name decode's utt0000 ids: keyed as the lines name the
    utterances ("s-0") the shard failed with "boosts name utterance 's-0', which the file does
    not have", and keyed "utt0000" they applied to lines named otherwise. Now refused by name,
    as reference texts without ids are."""
    shards = tmp_path / "shards"
    shards.mkdir()
    with np.load(corpus.shards[0]) as z:
        arrays = dict(z)
    assert "ids" not in arrays
    for key in ("s-0", "utt0000"):
        boosts = np.array(json.dumps({key: {"hello": 2.0}}))
        np.savez(shards / "s.npz", **arrays, boosts=boosts)
        summary = run(corpus, tmp_path / f"out_{key}", manifest=shards, workers=1)
        assert len(summary.failed) == 1, key
        assert "has 'boosts' but no 'ids'" in summary.failed[0]["error"]


class _DiesWhileLoading:
    """A corpus decoder whose worker process exits while loading it (as a script without an
    ``if __name__ == "__main__":`` guard does under spawn)."""

    def load(self):
        import os

        os._exit(3)


def test_a_local_worker_that_dies_while_loading_raises_not_retries():
    """pools.py:195 `if not w.ready: raise` dropped: a worker that never loaded the decoder
    must stop the run with the __main__-guard advice, not count as a shard's crash."""
    from pathlib import Path

    from wfstdecode.corpus.pools import Job, LocalPool
    from wfstdecode.errors import WfstDecodeError

    pool = LocalPool(_DiesWhileLoading(), 1)
    try:
        pool.submit(Job(0, Path("a.npz"), "a"))
        deadline = time.monotonic() + 120
        with pytest.raises(WfstDecodeError, match="exited while loading the decoder .*exit code 3"):
            while time.monotonic() < deadline:  # None: nothing happened yet (as the driver loops)
                event = pool.next_event(timeout=5)
                assert event is None, event  # the mutant: a "died" event, to be retried
    finally:
        pool.close(kill=True)


@pytest.mark.parametrize("threads", ["0", "-2"])
def test_a_bad_thread_count_is_refused_before_any_shard(corpus, tmp_path, capsys, threads):
    """--threads-per-worker 0 or below is refused at once, in the driver (status 2, nothing
    written), not given to every worker to fail each shard with (status 1, an output directory
    of failures); with --transducer, 0 is not silently torch's default."""
    from wfstdecode.corpus import TransducerCorpusDecoder

    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_:  # (argparse's, naming the flag)
        main(["decode-corpus", str(corpus.shard_dir), "--graph", str(corpus.graph_path),
              "--out", str(out), "--executor", "local", "--workers", "1", "--quiet",
              "--threads-per-worker", threads])  # fmt: skip
    assert exit_.value.code == 2 and "--threads-per-worker" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(WfstDecodeError, match="num_threads"):
        TransducerCorpusDecoder("rnnt", num_threads=int(threads))


def test_a_replacement_worker_that_dies_while_loading_is_a_death_not_a_broken_script(
    corpus, tmp_path
):
    """A worker replacing one that died (an out-of-memory kill on a loaded node) and dying
    itself while it loads the decoder ended the whole run with the advice to guard the script
    with 'if __name__ == "__main__":' and no summary.json, though its workers had loaded the
    decoder: now its shard is retried as after any death."""
    base = CtcCorpusDecoder(str(corpus.graph_path), backend="reference")
    (tmp_path / "state").mkdir()
    target = corpus.shards[2].stem
    crash = FaultyDecoder(base, "crash_once_then_on_load", str(tmp_path / "state"), target)
    summary = run(corpus, tmp_path / "out", crash, workers=1)
    assert summary.ok and summary.retries == 2, summary.failed
    assert sorted(summary.decoded) == sorted(p.stem for p in corpus.shards)
    assert_outputs_match(corpus, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["retries"] == 2


def test_a_worker_dying_while_loading_beside_a_loaded_one_is_a_death(corpus, tmp_path):
    """The same for a first worker that dies while it loads (out of memory) where another one
    has loaded the decoder and is decoding: the pool counted only loaded workers that had
    died, so the run ended with the advice to guard the script."""
    base = CtcCorpusDecoder(str(corpus.graph_path), backend="reference")
    (tmp_path / "state").mkdir()
    faulty = FaultyDecoder(base, "load_dies_beside_a_loaded_one", str(tmp_path / "state"))
    summary = run(corpus, tmp_path / "out", faulty, workers=2)
    assert summary.ok and summary.retries == 1, summary.failed
    assert_outputs_match(corpus, tmp_path / "out")


def test_a_ray_address_with_the_local_executor_is_refused(corpus, tmp_path, capsys):
    """--address with --executor local was ignored without a word: the run went to this
    machine's processes, not the cluster it named."""
    out = tmp_path / "out"
    code = main(["decode-corpus", str(corpus.shard_dir), "--graph", str(corpus.graph_path),
                 "--out", str(out), "--executor", "local", "--address", "ray://head:10001",
                 "--workers", "1", "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "ray://head:10001" in err and "local executor" in err
    assert not out.exists()


def test_upper_case_shard_suffixes_are_read_as_decode_reads_them(tmp_path):
    """``decode`` reads ``X.NPZ`` as an .npz (and ``X.ARK`` as an archive); a directory scan
    left such shards out, unsaid, and a listed ``X.NPZ`` was taken for a Kaldi archive (its
    missing ids defaulted as a table's, not ``NAME-i``)."""
    from wfstdecode.corpus.shards import _has_ids

    for name in ("a.NPZ", "b.npz", "c.Ark", "d.ARK.GZ", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    shards = read_manifest(tmp_path, CtcCorpusDecoder.shard_suffixes)
    want = [("a.NPZ", "a"), ("b.npz", "b"), ("c.Ark", "c"), ("d.ARK.GZ", "d")]
    assert [(s.path.name, s.name) for s in shards] == want
    with open(tmp_path / "a.NPZ", "wb") as f:  # (np.savez would add ".npz" to the name)
        np.savez(f, log_probs=np.zeros((1, 2, 3), np.float32), lengths=[2])
    assert not _has_ids(tmp_path / "a.NPZ") and _has_ids(tmp_path / "c.Ark")


def test_a_shard_name_too_long_for_a_worker_threads_temporary_file_is_refused():
    """The done record is written through `safe_io.replacing`, whose temporary file is named by
    the writing thread's id (up to 7 digits on Linux, 10 for any 32-bit id), but the check
    measured it with the driver's process id: a name that fit with the driver's pid (5 digits,
    say) failed with ENAMETOOLONG in a worker thread after its shard was decoded."""
    from types import SimpleNamespace

    from wfstdecode.corpus.ledger import DONE_SUFFIX, check_output_names
    from wfstdecode.safe_io import PARTIAL_SUFFIX

    fits_with_pid = 255 - len(f".{DONE_SUFFIX}.{os.getpid()}{PARTIAL_SUFFIX}")
    shard = SimpleNamespace(name="y" * fits_with_pid, path="y.npz")
    with pytest.raises(WfstDecodeError, match="rename the shard"):
        check_output_names([shard])
    check_output_names([SimpleNamespace(name="y" * (fits_with_pid - 10), path="y.npz")])

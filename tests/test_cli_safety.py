"""The command line with its users' files: outputs that would overwrite an input, that are
directories or have no folder, are refused before any work (and name the user's path); a link
is written through; utterance ids are distinct and non-empty; numbers out of range are refused
with the option's name; a refused corpus directory is left as it was; ids print escaped."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from wfstdecode.cli import main
from wfstdecode.errors import OptionsError
from wfstdecode.testing import simulate_ctc
from wfstdecode.testing.lm import random_arpa


@pytest.fixture
def files(tmp_path):
    """A graph directory's TLG and words, an ARPA, emissions, and their lattices' archive."""
    from wfstdecode import SymbolTable
    from wfstdecode.graph import LexiconEntry, build_tlg

    words = ["a", "ab", "ba", "c"]
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(random_arpa(words, order=2, seed=3, density=0.6))
    tokens = SymbolTable.from_list(["<blk>", "a", "b", "c", "|"])
    from wfstdecode.graph.output import write_graph_dir

    build = build_tlg(tokens, [LexiconEntry(w, tuple(w)) for w in words], str(arpa), "compact",
                      separator="|")  # fmt: skip
    g, graph = build.graph, tmp_path / "g"
    write_graph_dir(build, graph)
    g.words.write(tmp_path / "words.txt")
    seqs = [[tokens.id(c) for c in "ab|c"], [tokens.id(c) for c in "ba"]]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=1, confusion_prob=0.2, noise=1.0)
    npz = tmp_path / "e.npz"
    np.savez(npz, log_probs=lp, lengths=lengths, ids=np.array(["u1", "u2"]))
    ark = tmp_path / "lat.ark"
    decode = ["decode", str(graph / "TLG.npz"), str(npz), "--backend", "cpu", "--lattice-beam",
              "6"]  # fmt: skip
    assert main([*decode, "--write-lattices", str(ark)]) == 0
    return dict(graph=graph, npz=npz, ark=ark, arpa=arpa, words=tmp_path / "words.txt",
                decode=decode, dir=tmp_path)  # fmt: skip


def _unchanged(path, before: bytes) -> bool:
    return path.read_bytes() == before


def test_lattice_outputs_never_overwrite_an_input(files, capsys):
    rescore = ["rescore", str(files["ark"]), "--words", str(files["words"]), "--new-lm",
               str(files["arpa"]), "--old-lm", str(files["arpa"])]  # fmt: skip
    link = files["dir"] / "link.npz"
    os.symlink(files["npz"], link)
    cases = [
        ([*files["decode"], "--write-lattices", str(files["npz"])], files["npz"]),
        ([*files["decode"], "--write-lattices", str(link)], files["npz"]),  # through a link
        (
            [*files["decode"], "--write-lattices", str(files["graph"] / "TLG.npz")],
            files["graph"] / "TLG.npz",
        ),  # a file of the graph directory
        (
            [*files["decode"], "--write-lattices", str(files["graph"] / "words.txt")],
            files["graph"] / "words.txt",
        ),  # another file of the directory of the graph given as its TLG.npz
        (
            [
                *rescore[:3],
                str(files["graph"] / "words.txt"),
                *rescore[4:],
                "--out",
                str(files["graph"] / "TLG.npz"),
            ],
            files["graph"] / "TLG.npz",
        ),  # the words of a graph directory: the rest of it is the graph's too
        ([*rescore, "--out", str(files["ark"])], files["ark"]),
        ([*rescore, "--out", str(files["arpa"])], files["arpa"]),
    ]
    for argv, victim in cases:
        before = victim.read_bytes()
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr()
        assert "would overwrite the input" in err.err and not err.out, argv  # before any work
        assert _unchanged(victim, before), argv


def test_lattice_outputs_that_cannot_be_written_are_refused_first(files, capsys):
    """Refused before the decode, each named: it would fail at the end, or replace a device,
    a pipe or the file a redirected stdout writes to."""
    fifo = files["dir"] / "pipe"
    os.mkfifo(fifo)
    cases = [(files["dir"], "is a directory"),
             (files["dir"] / "nowhere" / "l.ark", "does not exist"),
             (fifo, "not a regular file"),
             (files["dir"] / ("a" * 240), "file name is too long")]  # fmt: skip
    if os.path.islink("/dev/stdout"):
        cases.append((Path("/dev/stdout"), "not a regular file"))
    if os.geteuid() != 0:  # (root writes any file)
        locked = files["dir"] / "locked.ark"
        locked.write_bytes(b"kept")
        locked.chmod(0o444)
        cases.append((locked, "read-only"))
    for out, says in cases:
        capsys.readouterr()
        assert main([*files["decode"], "--write-lattices", str(out)]) == 2
        err = capsys.readouterr()
        assert says in err.err and str(out) in err.err and not err.out, out
        assert not list(files["dir"].glob("*.partial"))
    assert fifo.is_fifo()


def test_a_linked_archive_path_is_written_through(files):
    target = files["dir"] / "target.ark"
    target.write_bytes(b"old")
    link = files["dir"] / "via.ark"
    os.symlink(target, link)
    assert main([*files["decode"], "--write-lattices", str(link)]) == 0
    assert link.is_symlink() and target.read_bytes() == files["ark"].read_bytes()


@pytest.mark.parametrize("ids, says", [(["x", "x"], "ids must be distinct"),
                                       (["x", ""], "must not be empty"),
                                       (["x", "  "], "must not be empty")])  # fmt: skip
def test_utterance_ids_are_distinct_and_named(files, capsys, ids, says):
    with np.load(files["npz"]) as z:
        lp, lengths = z["log_probs"], z["lengths"]
    bad = files["dir"] / "bad.npz"
    np.savez(bad, log_probs=lp, lengths=lengths, ids=np.array(ids))
    out = files["dir"] / "l.ark"
    argv = ["decode", str(files["graph"] / "TLG.npz"), str(bad), "--backend", "cpu"]
    assert main([*argv, "--lattice-beam", "6", "--write-lattices", str(out)]) == 2
    err = capsys.readouterr().err
    assert says in err and "bad.npz" in err and not out.exists()


@pytest.mark.parametrize("extra, says", [
    (["--acoustic-scale", "nan"], "--acoustic-scale must be in"),
    (["--acoustic-scale", "0"], "--acoustic-scale must be in"),
    (["--nbest", "99999999999999999999"], "--nbest must be in"),
])  # fmt: skip
def test_rescore_refuses_numbers_out_of_range(files, capsys, extra, says):
    out = files["dir"] / "r.ark"
    assert main(["rescore", str(files["ark"]), "--words", str(files["words"]), "--new-lm",
                 str(files["arpa"]), "--old-lm", str(files["arpa"]), "--out", str(out),
                 *extra]) == 2  # fmt: skip
    assert says in capsys.readouterr().err and not out.exists()


def test_rescore_with_another_word_table_says_so(files, capsys):
    tokens = files["dir"] / "tokens.txt"
    tokens.write_text("<blk> 0\na 1\n")
    assert main(["rescore", str(files["ark"]), "--words", str(tokens), "--new-lm",
                 str(files["arpa"]), "--old-lm", str(files["arpa"])]) == 2  # fmt: skip
    assert "not in the word table" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--max-active", "--min-active", "--nbest", "--mbr-candidates"])
def test_huge_counts_are_refused_by_name(files, capsys, option):
    extra = ["--max-active", "99999999999999999999"] if option == "--min-active" else []
    assert main([*files["decode"], option, "99999999999999999999", *extra]) == 2
    assert "must be at most 2147483647" in capsys.readouterr().err


def test_boost_options_are_checked_as_boost_options(files, capsys):
    with pytest.raises(SystemExit):  # argparse's: usage, then the option and the problem
        main([*files["decode"], "--boost", "a=nan"])
    err = capsys.readouterr().err
    assert "argument --boost: the bonus of 'a=nan' must be in [-1000, 1000]" in err
    assert main([*files["decode"], "--boost", "a=1", "--boost", "a=2"]) == 2
    assert "boosted by two --boost options" in capsys.readouterr().err


def test_a_refused_corpus_directory_is_left_as_it_was(files, capsys):
    manifest = files["dir"] / "shards"  # a folder of shards
    manifest.mkdir()
    (manifest / "e.npz").write_bytes(files["npz"].read_bytes())
    out = files["dir"] / "taken"
    out.mkdir()
    (out / "mine.txt").write_text("user data")
    assert main(["decode-corpus", str(manifest), "--out", str(out), "--graph",
                 str(files["graph"] / "TLG.npz"), "--executor", "local", "--workers",
                 "1"]) != 0  # fmt: skip
    assert "not a decode-corpus output" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]


def test_transducer_ids_print_escaped(tmp_path, capsys):
    lp = np.log(np.full((2, 12, 191), 1 / 191, np.float32))
    npz = tmp_path / "t.npz"
    np.savez(npz, log_probs=lp, ids=np.array(["a\nb", "c\td"]))
    assert main(["decode-transducer", "rnnt", str(npz)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["a\\nb", "c\\td"]
    lp[1, 5, 3] = np.nan
    np.savez(npz, log_probs=lp)
    assert main(["decode-transducer", "rnnt", str(npz)]) == 2
    assert "t.npz: log_probs[1, 5] contains NaN" in capsys.readouterr().err


def test_transducer_inputs_the_model_cannot_take_name_the_file(tmp_path, capsys):
    npz = tmp_path / "narrow.npz"
    np.savez(npz, log_probs=np.zeros((2, 20, 29), np.float32))  # a CTC model's, not hama's
    assert main(["decode-transducer", "rnnt", str(npz)]) == 2
    assert "narrow.npz: log_probs has V = 29 columns; the model reads 191" in (
        capsys.readouterr().err)  # fmt: skip
    np.savez(npz, enc=np.zeros((2, 20, 7), np.float32))
    assert main(["decode-transducer", "rnnt", str(npz)]) == 2
    assert "narrow.npz: the model's joint failed on enc of shape (2, 20, 7)" in (
        capsys.readouterr().err)  # fmt: skip


def test_a_graph_directory_with_a_replaced_file(tmp_path, capsys):
    """`info` says when build.json describes another graph than TLG.npz; `rescore --words DIR`
    takes the words the graph itself holds, not a words.txt that may have been replaced."""
    (tmp_path / "tokens.txt").write_text("<blk> 0\na 1\nb 2\n| 3\n")
    dirs = []
    for k, words in enumerate((["a", "ab", "ba"], ["b", "bb"])):
        (tmp_path / f"lex{k}.txt").write_text("".join(f"{w} {' '.join(w)}\n" for w in words))
        (tmp_path / f"lm{k}.arpa").write_text(random_arpa(words, order=2, seed=k))
        out = tmp_path / f"g{k}"
        assert main(["build-tlg", "--tokens", str(tmp_path / "tokens.txt"), "--lexicon",
                     str(tmp_path / f"lex{k}.txt"), "--arpa", str(tmp_path / f"lm{k}.arpa"),
                     "--separator", "|", "--out", str(out)]) == 0  # fmt: skip
        dirs.append(out)
    seqs = [[1, 3, 1, 2], [2, 1]]  # "a ab", "ba"
    lp, lengths = simulate_ctc(seqs, 4, seed=2, confusion_prob=0.1, noise=0.5)
    np.savez(tmp_path / "e.npz", log_probs=lp, lengths=lengths)
    ark = tmp_path / "l.ark"
    assert main(["decode", str(dirs[0]), str(tmp_path / "e.npz"), "--lattice-beam", "6",
                 "--write-lattices", str(ark)]) == 0  # fmt: skip
    rescore = ["rescore", str(ark), "--words", str(dirs[0]), "--new-lm", str(tmp_path / "lm0.arpa"),
               "--old-lm", str(tmp_path / "lm0.arpa")]  # fmt: skip
    capsys.readouterr()
    assert main(rescore) == 0
    before = capsys.readouterr().out
    assert main(["info", str(dirs[0])]) == 0
    assert "warning" not in capsys.readouterr().err
    (dirs[0] / "words.txt").write_bytes((dirs[1] / "words.txt").read_bytes())
    assert main(rescore) == 0 and capsys.readouterr().out == before  # the graph's own words
    with pytest.warns(UserWarning, match=r"words.txt is not the file this graph's build wrote"):
        assert main(["info", str(dirs[0])]) == 0
    with pytest.warns(UserWarning, match=r"words.txt is not the file"):  # (its TLG.npz given)
        assert main(["info", str(dirs[0] / "TLG.npz")]) == 0
    report = json.loads((dirs[0] / "build.json").read_text())
    report["files"]["../l.ark"] = report["files"]["words.txt"]  # (hashed, once: not its file)
    (dirs[0] / "build.json").write_text(json.dumps(report))
    with pytest.warns(UserWarning, match=r"build.json lists '../l.ark', not a file of the dir"):
        assert main(["info", str(dirs[0])]) == 0
    (dirs[0] / "TLG.npz").write_bytes((dirs[1] / "TLG.npz").read_bytes())
    with pytest.warns(UserWarning, match="describes another graph than the directory's TLG.npz"):
        assert main(["info", str(dirs[0])]) == 0


def test_a_key_twice_in_one_json_object_is_refused(files, capsys):
    """JSON keeps the last of two equal keys: a bonus or an id typed twice was lost silently."""
    per = files["dir"] / "per.jsonl"
    for line in ('{"id": "u1", "boosts": {"a": 3, "a": -3}}', '{"id": "u1", "id": "u2", '
                 '"boosts": {"a": 1}}'):  # fmt: skip
        per.write_text(line + "\n")
        assert main([*files["decode"], "--utterance-boosts", str(per)]) == 2
        assert "appears twice in one object" in capsys.readouterr().err
    with np.load(files["npz"]) as z:
        lp, lengths = z["log_probs"], z["lengths"]
    npz = files["dir"] / "b.npz"
    np.savez(npz, log_probs=lp, lengths=lengths, ids=np.array(["u1", "u2"]),
             boosts=np.array('{"u1": {"a": 1}, "u1": {"c": 2}}'))  # fmt: skip
    assert main(["decode", str(files["graph"] / "TLG.npz"), str(npz)]) == 2
    assert "appears twice in one object" in capsys.readouterr().err


def test_outputs_say_what_they_leave_out_and_stay_valid(files, capsys):
    """Found by probing: --ctm dropped an utterance whose search died without a word; texts of
    no words gave 'WER 1400%'; a frame shift of 1e307 wrote JSON's forbidden Infinity."""
    with np.load(files["npz"]) as z:
        lp, lengths = z["log_probs"].copy(), z["lengths"]
    lp[1] = -np.inf
    lp[1, 0::2, 3], lp[1, 1::2, 1] = 0.0, 0.0  # "c a c a ...", no separator: no word spells it
    dead = files["dir"] / "dead.npz"
    np.savez(dead, log_probs=lp, lengths=lengths, ids=np.array(["ok", "gone"]),
             texts=np.array(["", ""]))  # fmt: skip
    argv = ["decode", str(files["graph"] / "TLG.npz"), str(dead), "--backend", "cpu"]
    capsys.readouterr()
    assert main([*argv, "--ctm", "--frame-shift", "0.04"]) == 0
    out = capsys.readouterr()
    assert "gone: no words (search died" in out.err and "gone" not in out.out
    assert "WER" not in out.err  # no reference word: no rate
    assert main(argv) == 0  # plain lines: the score says -inf, stderr why
    out = capsys.readouterr()
    assert "gone\t-inf\t\n" in out.out and "gone: search died" in out.err
    assert "ok:" not in out.err
    assert main([*argv, "--json", "--frame-shift", "1e307"]) == 2
    assert "--frame-shift must be in [0.001, 10] seconds" in capsys.readouterr().err


def test_results_and_metrics_check_what_they_are_given():
    from fractions import Fraction

    from wfstdecode.metrics import word_error_rate
    from wfstdecode.results import Hypothesis

    none = dict(tokens=(), timestamps=())
    cases = [
        (dict(tokens=(1, 2), timestamps=(5,), score=0.0), "2 tokens but 1"),
        (dict(none, score="x"), "score must be a number"),
        (dict(none, score=0.0, words=("a",), word_timestamps=((5, 2),)), "start <= end"),
        (dict(none, score=0.0, words=("a", "b"), word_confidences=(0.5,)), "2 words but 1"),
    ]
    for kwargs, says in cases:
        with pytest.raises(ValueError, match=says):
            Hypothesis(**kwargs)
    assert Hypothesis((), (), 0.0, words=("a", "b")).record(0.04)["words"] == [
        {"word": "a"}, {"word": "b"}]  # fmt: skip
    # a NumPy score is a float, lists are tuples: equal to the plain one, and hashable
    given = Hypothesis([1], [0], np.float32(-1.5), words=["a"], word_timestamps=[[0, 0]])
    plain = Hypothesis((1,), (0,), -1.5, words=("a",), word_timestamps=((0, 0),))
    assert given == plain and hash(given) == hash(plain) and type(given.score) is float
    # every field of NumPy values: plain Python values, so record() is JSON-ready
    arrays = Hypothesis(np.array([1, 2]), np.array([0, 3]), np.float32(-1.5),
                        words=np.array(["a", "b"]), word_ids=np.array([4, 5]),
                        word_timestamps=np.array([[0, 1], [2, 3]]), acoustic_score=np.float64(-1),
                        graph_score=np.float32(2), stable_words=np.int64(1),
                        word_confidences=np.array([0.5, 1.0], np.float32))  # fmt: skip
    plain = Hypothesis((1, 2), (0, 3), -1.5, words=("a", "b"), word_ids=(4, 5),
                       word_timestamps=((0, 1), (2, 3)), acoustic_score=-1.0, graph_score=2.0,
                       stable_words=1, word_confidences=(0.5, 1.0))  # fmt: skip
    assert arrays == plain and hash(arrays) == hash(plain)
    assert json.loads(json.dumps(arrays.record(0.04, tokens=True)))["tokens"] == [1, 2]
    refused = [(dict(tokens=(1.0,), timestamps=(0,)), "tokens must be integers"),
               (dict(words="ab"), "words must be strings"),
               (dict(words=("a",), word_timestamps=((1, 2, 3),)), "pairs of integers"),
               (dict(graph_score="x"), "graph_score must be a number or None"),
               (dict(tokens=(True,), timestamps=(0,)), "tokens must be integers"),
               (dict(stable_words=True), "stable_words must be an integer"),
               (dict(words={"a", "b"}), "words must be strings"),  # (a set has no order)
               (dict(score=Fraction(10**400)), "score must be a number")]  # fmt: skip
    for kwargs, says in refused:
        with pytest.raises(ValueError, match=says):
            Hypothesis(**{**none, "score": 0.0, **kwargs})
    with pytest.raises(TypeError, match="word lists"):
        word_error_rate(["hello world"], ["hello word"])
    assert word_error_rate([["hello", "world"]], [["hello", "word"]]) == 0.5


def test_ctm_ids_keep_their_field_and_transducer_ranks_are_always_given(files, tmp_path, capsys):
    with np.load(files["npz"]) as z:
        lp, lengths = z["log_probs"], z["lengths"]
    npz = tmp_path / "nbsp.npz"
    np.savez(npz, log_probs=lp, lengths=lengths, ids=np.array(["a\u00a0b", "c\u3000d"]))
    assert main(["decode", str(files["graph"] / "TLG.npz"), str(npz), "--ctm", "--frame-shift",
                 "0.04"]) == 0  # fmt: skip
    ids = {line.split()[0] for line in capsys.readouterr().out.splitlines()}
    assert ids <= {"a\\xa0b", "c\\u3000d"} and ids  # one field each, as CTM readers split
    t = tmp_path / "t.npz"
    hama = np.log(np.full((2, 12, 191), 1 / 191, np.float32))
    np.savez(t, log_probs=hama, lengths=np.array([12, 0]))  # the second: no frames, one hypothesis
    assert main(["decode-transducer", "rnnt", str(t), "--beam-size", "2", "--nbest", "2",
                 "--json"]) == 0  # fmt: skip
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert all("rank" in r for r in records) and {r["id"] for r in records} == {
        "utt0000",
        "utt0001",
    }


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_terminated_write_leaves_no_temporary_file(files, capsys, monkeypatch, sig):
    """SIGTERM (a scheduler's stop) and SIGHUP end a command as Ctrl-C does: the temporary file
    beside the output is removed (it stayed, named after a pid, for good), the old one kept."""
    import signal

    from wfstdecode.compact_lattice import CompactLattice

    ark = files["dir"] / "kept.ark"
    ark.write_bytes(b"old")
    real = CompactLattice.kaldi_bytes  # (the command writes word-determinized lattices)

    def signalled(self):
        os.kill(os.getpid(), getattr(signal, sig))  # mid-write: the temporary file is open
        return real(self)

    monkeypatch.setattr(CompactLattice, "kaldi_bytes", signalled)
    capsys.readouterr()
    assert main([*files["decode"], "--write-lattices", str(ark)]) == 128 + getattr(signal, sig)
    assert f"terminated ({sig})" in capsys.readouterr().err
    assert ark.read_bytes() == b"old" and not list(files["dir"].glob(".kept.ark.*"))
    assert signal.getsignal(getattr(signal, sig)) is signal.SIG_DFL  # put back


def test_unwritable_archive_targets_are_refused_for_any_user(tmp_path, monkeypatch):
    """The read-only file and unwritable folder checks, whoever runs the tests (root writes
    any file, so the command-line test above skips them there)."""
    from wfstdecode.lattice_io import check_archive_path

    locked, folder = tmp_path / "locked.ark", tmp_path / "ro"
    locked.write_bytes(b"kept")
    folder.mkdir()
    denied = {str(locked.resolve()), str(folder.resolve())}
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: str(p) not in denied and real_access(p, mode))
    with pytest.raises(OptionsError, match="the file is read-only"):
        check_archive_path(locked, [], "--out")
    with pytest.raises(OptionsError, match="cannot be written"):
        check_archive_path(folder / "new.ark", [], "--out")
    check_archive_path(tmp_path / "fine.ark", [], "--out")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
@pytest.mark.parametrize("line_buffered", [False, True])
def test_a_full_standard_output_is_named(files, capsys, monkeypatch, line_buffered):
    """Results sent to a full disk (`> /dev/full`) end in ``standard output: No space left on
    device``, status 2 (was a bare ``[Errno 28]``), whether the write or the final flush fails;
    the stream is given back afterwards."""
    import io
    import sys

    full = io.TextIOWrapper(io.FileIO("/dev/full", "w"), line_buffering=line_buffered)
    monkeypatch.setattr(sys, "stdout", full)
    assert main(files["decode"]) == 2
    assert sys.stdout is full
    monkeypatch.undo()
    full.close()
    assert "wfstdecode: error: standard output: No space left on device" in capsys.readouterr().err


def test_json_lines_of_a_file_name_that_is_not_utf8_can_be_written():
    """transcribe --json prints each audio file's path: a name whose bytes are not UTF-8 comes
    from Python as lone surrogates, which json.dumps(ensure_ascii=False) left raw, so the line
    raised UnicodeEncodeError on a UTF-8 stdout (a traceback; under C.UTF-8 a raw 0xE9 byte in
    the JSON). Escaped, it is ASCII there and reads back as the same string."""
    from wfstdecode.safe_io import json_line

    path = os.fsdecode(b"caf\xe9.wav")
    line = json_line({"path": path, "text": "é\u2028"})
    line.encode("utf-8")  # (raised before)
    assert "\\udce9" in line and "é" in line and "\\u2028" in line
    assert json.loads(line) == {"path": path, "text": "é\u2028"}


def test_a_replaced_output_keeps_its_permissions(tmp_path):
    """Every output is written beside its path and renamed over it: the new file had the
    umask's mode, so a private 0600 archive (or summary) came back world-readable 0644."""
    from wfstdecode.safe_io import replacing

    out = tmp_path / "private.ark"
    out.write_bytes(b"old")
    out.chmod(0o600)
    link = tmp_path / "link.ark"
    os.symlink(out, link)
    with replacing(link) as f:  # (through a link: the file it names keeps its mode)
        f.write(b"new")
    assert out.read_bytes() == b"new" and (out.stat().st_mode & 0o777) == 0o600
    new = tmp_path / "new.ark"
    with replacing(new) as f:
        f.write(b"x")
    assert (new.stat().st_mode & 0o777) == 0o666 & ~_umask()


def test_two_threads_replacing_one_file_leave_one_whole_file(tmp_path):
    """The temporary file was named by the process id only: two threads writing one path (two
    `DecodingGraph.save` calls) wrote into one file, which was renamed into place holding both
    writers' bytes mixed, and the other thread failed with FileNotFoundError."""
    import threading

    from wfstdecode.safe_io import replacing

    path = tmp_path / "out.bin"
    both_open = threading.Barrier(2)
    errors = []

    def write(byte: int) -> None:
        try:
            with replacing(path) as f:
                both_open.wait(timeout=10)
                for _ in range(50):
                    f.write(bytes([byte]) * 1000)
                    f.flush()
        except Exception as exc:  # (reported below)
            errors.append(exc)

    for _ in range(5):
        threads = [threading.Thread(target=write, args=(b,)) for b in b"AB"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert path.read_bytes() in (b"A" * 50_000, b"B" * 50_000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_a_symbol_table_write_that_fails_leaves_the_old_file(tmp_path, monkeypatch):
    """SymbolTable.write opened its path for writing (truncating it) and wrote line by line: a
    Ctrl-C or full disk half-way left the user's words.txt cut short. Now whole or nothing."""
    import errno

    import wfstdecode.safe_io as safe_io
    from wfstdecode import SymbolTable

    path = tmp_path / "words.txt"
    path.write_text("old 0\n")
    table = SymbolTable.from_list(["<eps>", *(f"w{i}" for i in range(1000))])

    class Interrupted(dict):
        def __getitem__(self, key):
            if key == 500:
                raise KeyboardInterrupt
            return super().__getitem__(key)

    monkeypatch.setattr(table, "_symbol_of", Interrupted(table._symbol_of))
    with pytest.raises(KeyboardInterrupt):
        table.write(path)
    assert path.read_text() == "old 0\n" and os.listdir(tmp_path) == ["words.txt"]
    monkeypatch.undo()

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(safe_io.os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        table.write(path)
    monkeypatch.undo()
    assert path.read_text() == "old 0\n" and os.listdir(tmp_path) == ["words.txt"]
    table.write(path)
    assert SymbolTable.read(path).symbols_of([0, 1000]) == ["<eps>", "w999"]


def test_a_path_that_is_not_utf8_is_printed_not_a_traceback(monkeypatch):
    """On a strict UTF-8 stdout (en_US.UTF-8: Python's default errors='strict') a message
    naming a path whose bytes are not UTF-8 ('wrote DIR' after build-tlg, decode-corpus'
    summary lines) raised UnicodeEncodeError after the work was done: a traceback and status
    1. The path is written as its bytes."""
    import io
    import sys

    from wfstdecode.cli import run_reporting

    raw = io.BytesIO()
    strict = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", line_buffering=True)
    monkeypatch.setattr(sys, "stdout", strict)
    name = os.fsdecode(b"/tmp/g\xe9")
    assert run_reporting(lambda: print(f"wrote {name}: é")) == 0
    strict.flush()
    assert raw.getvalue() == b"wrote /tmp/g\xe9: \xc3\xa9\n"


def test_info_of_another_graph_file_in_a_graph_directory_reads_no_build_json(files, capsys):
    """`info DIR/TLG.npz` reads DIR's build.json; another .npz kept in the directory (a graph
    saved there beside it) is not the graph build.json describes: its stages were printed as
    that file's and a warning said build.json "describes another graph than the directory's
    TLG.npz (a file of it was replaced?)" when nothing had been."""
    import warnings

    from wfstdecode.testing import random_graph

    other = files["graph"] / "other.npz"
    random_graph(5).save(other)
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no warning at all)
        assert main(["info", str(other)]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["graph"]["states"] == random_graph(5).num_states
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["info", str(files["graph"] / "TLG.npz")]) == 0  # (its own: checked, fine)
    assert "TLG" in capsys.readouterr().out  # the build's stages, printed after the summary

"""Output directories of build-tlg and demo: only a graph directory wfstdecode wrote is ever
replaced, --out is checked before the build, relative and odd paths leave no stray directories,
modes follow the umask, and the leftovers of killed builds are cleaned (only ours)."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

import wfstdecode.ctc
import wfstdecode.graph
from wfstdecode import SymbolTable
from wfstdecode.cli import main
from wfstdecode.errors import WfstDecodeError
from wfstdecode.graph import build_tlg, read_lexicon
from wfstdecode.graph import output as output_mod
from wfstdecode.graph.output import (
    FILES,
    MARKER_KEY,
    PARTIAL_MARKER,
    check_out_dir,
    clean_stale_siblings,
    current_umask,
    is_graph_dir,
    process_alive,
    write_graph_dir,
)
from wfstdecode.testing.data import PACKAGE_DATA
from wfstdecode.testing.lm import random_arpa

TOKENS = PACKAGE_DATA / "tokens.txt"


@pytest.fixture
def small_inputs(tmp_path):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    lexicon = inputs / "lexicon.txt"
    lexicon.write_text("cat c a t\ncar c a r\nca c a\n")
    arpa = inputs / "lm.arpa"
    arpa.write_text(random_arpa(["cat", "car", "ca"], order=2, seed=3))
    return lexicon, arpa


@pytest.fixture
def build_args(small_inputs):
    lexicon, arpa = small_inputs

    def args(out, *extra):
        return ["build-tlg", "--tokens", str(TOKENS), "--lexicon", str(lexicon),
                "--arpa", str(arpa), "--out", str(out), *extra]  # fmt: skip

    return args


@pytest.fixture
def tiny_build(small_inputs):
    lexicon, arpa = small_inputs
    tokens = SymbolTable.read(TOKENS)
    return build_tlg(tokens, read_lexicon(lexicon, tokens), str(arpa), "compact")


@pytest.fixture
def no_build(monkeypatch):
    """Fail the test if a TLG build starts: the refusal must come before it."""

    def fail(*_args, **_kwargs):
        pytest.fail("build_tlg ran although --out was going to be refused")

    monkeypatch.setattr(wfstdecode.graph, "build_tlg", fail)


def foreign_dir(path):
    path.mkdir()
    (path / "thesis.tex").write_text("years of work")
    (path / "data").mkdir()
    (path / "data" / "x.bin").write_bytes(b"\0\1")
    return snapshot(path)


def snapshot(path):
    return {p.relative_to(path): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def hidden_siblings(path):
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith("."))


def assert_refused(code, capsys, *words):
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("wfstdecode: error: "), err
    for word in words:
        assert word in err, err


# --- what may be replaced -----------------------------------------------------------------


@pytest.mark.parametrize("force", [False, True])
def test_build_tlg_refuses_a_foreign_directory(tmp_path, build_args, no_build, capsys, force):
    out = tmp_path / "mine"
    before = foreign_dir(out)
    code = main(build_args(out, *(["--force"] if force else [])))
    assert_refused(code, capsys, str(out), "did not write", "thesis.tex")
    assert snapshot(out) == before
    assert hidden_siblings(out) == []


def test_force_replaces_a_graph_dir_and_only_that(tmp_path, build_args, capsys):
    out = tmp_path / "graph"
    assert main(build_args(out)) == 0
    report = json.loads((out / "build.json").read_text())
    assert report[MARKER_KEY] == 1 and is_graph_dir(out)
    # the process's peak with the files written, at least every stage's
    assert report["peak_rss_mb"] >= max(s["peak_rss_mb"] for s in report["stages"]) > 0
    (out / "TLG.npz").write_bytes(b"stale")
    assert main(build_args(out, "--force")) == 0
    assert (out / "TLG.npz").read_bytes() != b"stale"
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)
    assert hidden_siblings(out) == []
    capsys.readouterr()
    assert_refused(main(build_args(out)), capsys, str(out), "--force")


def unmarked(out):
    report = json.loads((out / "build.json").read_text())
    del report[MARKER_KEY]
    (out / "build.json").write_text(json.dumps(report))


@pytest.mark.parametrize(
    "spoil,why",
    [
        (unmarked, f'no "{MARKER_KEY}" marker'),
        (lambda out: (out / "build.json").write_text("{not json"), "unreadable build.json"),
        (lambda out: (out / "build.json").write_bytes(b"\xff\xfe"), "unreadable build.json"),
        (lambda out: (out / "build.json").write_text("[1]"), "not a JSON object"),
        (lambda out: (out / "build.json").unlink(), "has no build.json"),
        (lambda out: (out / "notes.txt").write_text("mine"), "notes.txt"),
        (lambda out: (out / "TLG.fst").unlink() or (out / "TLG.fst").mkdir(), "TLG.fst"),
    ],
)
def test_force_refuses_a_graph_dir_that_is_not_clearly_ours(
    tmp_path, build_args, capsys, monkeypatch, spoil, why
):
    out = tmp_path / "graph"
    assert main(build_args(out)) == 0
    spoil(out)
    before = snapshot(out)
    monkeypatch.setattr(wfstdecode.graph, "build_tlg", lambda *a, **k: pytest.fail("built"))
    capsys.readouterr()
    assert_refused(main(build_args(out, "--force")), capsys, str(out), why)
    assert snapshot(out) == before and not is_graph_dir(out)


def test_files_and_symlinks_are_refused(tmp_path, build_args, no_build, capsys):
    graph = tmp_path / "graph"
    graph.mkdir()
    (graph / "build.json").write_text(json.dumps({MARKER_KEY: 1}))
    link = tmp_path / "link"
    link.symlink_to(graph)
    assert_refused(main(build_args(link, "--force")), capsys, str(link), "symbolic link")
    assert (graph / "build.json").exists() and link.is_symlink()
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    assert_refused(main(build_args(dangling, "--force")), capsys, "symbolic link")
    file = tmp_path / "file"
    file.write_text("keep")
    assert_refused(main(build_args(file, "--force")), capsys, str(file), "not a directory")
    assert file.read_text() == "keep"


def test_an_empty_directory_is_used(tmp_path, build_args):
    out = tmp_path / "empty"
    out.mkdir()
    assert main(build_args(out)) == 0
    assert is_graph_dir(out) and hidden_siblings(out) == []


# --- checked before the build -------------------------------------------------------------


def test_existing_graph_dir_is_refused_before_the_build(tmp_path, build_args, capsys, monkeypatch):
    out = tmp_path / "graph"
    assert main(build_args(out)) == 0
    monkeypatch.setattr(wfstdecode.graph, "build_tlg", lambda *a, **k: pytest.fail("built"))
    capsys.readouterr()
    assert_refused(main(build_args(out)), capsys, str(out), "--force")


def test_unwritable_parent_is_refused_before_the_build(
    tmp_path, build_args, no_build, capsys, monkeypatch
):
    parent = tmp_path / "ro"
    parent.mkdir(mode=0o555)
    if os.geteuid() == 0:  # root may write anywhere: pretend the permission bits hold
        real_access = os.access
        monkeypatch.setattr(
            output_mod.os, "access", lambda p, mode: p != parent and real_access(p, mode)
        )
    try:
        assert_refused(main(build_args(parent / "a" / "graph")), capsys, str(parent), "permission")
    finally:
        parent.chmod(0o755)


def test_parent_that_is_a_file_is_refused(tmp_path, build_args, no_build, capsys):
    (tmp_path / "f").write_text("x")
    assert_refused(main(build_args(tmp_path / "f" / "graph")), capsys, "not a directory")


def test_write_graph_dir_checks_again_after_the_build(tmp_path, tiny_build):
    out = tmp_path / "graph"
    check_out_dir(out)  # fine before the build ...
    before = foreign_dir(out)  # ... but something else appeared there meanwhile
    with pytest.raises(WfstDecodeError, match="did not write"):
        write_graph_dir(tiny_build, out, force=True)
    assert snapshot(out) == before and hidden_siblings(out) == []


# --- relative and odd paths ---------------------------------------------------------------


@pytest.mark.parametrize("target", [".", ".."])
def test_out_dot_is_refused_without_stray_directories(
    tmp_path, build_args, capsys, monkeypatch, target
):
    work = tmp_path / "work" / "graph"
    assert main(build_args(work)) == 0
    monkeypatch.chdir(work)
    capsys.readouterr()
    assert_refused(main(build_args(target, "--force")), capsys, "current directory")
    assert is_graph_dir(work)
    for parent in (work, work.parent, tmp_path):
        assert not [p for p in parent.iterdir() if ".old-" in p.name or ".partial-" in p.name]


def test_relative_paths_are_resolved(tmp_path, build_args, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    assert main(build_args("sub/graph/")) == 0
    assert main(build_args("sub/../sub/graph/", "--force")) == 0
    assert main(build_args("./sub/graph", "--force")) == 0
    assert is_graph_dir(tmp_path / "sub" / "graph")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "inputs") == ["sub"]
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["graph"]


def test_temporary_siblings_are_named_after_the_real_directory(tmp_path, tiny_build, monkeypatch):
    graph = tmp_path / "graph"
    write_graph_dir(tiny_build, graph)
    made = []
    real_mkdtemp = output_mod.tempfile.mkdtemp

    def mkdtemp(prefix, dir):
        made.append((prefix, dir))
        return real_mkdtemp(prefix=prefix, dir=dir)

    monkeypatch.setattr(output_mod.tempfile, "mkdtemp", mkdtemp)
    (tmp_path / "work").mkdir()
    (tmp_path / "link").symlink_to(tmp_path)
    monkeypatch.chdir(tmp_path / "work")
    write_graph_dir(tiny_build, "../link/./graph/", force=True)
    parent = tmp_path.resolve()
    assert made == [(".graph.partial-", parent), (".graph.old-", parent)]
    assert hidden_siblings(graph) == []


# --- modes --------------------------------------------------------------------------------


@pytest.mark.parametrize("umask,dir_mode,file_mode", [(0o022, 0o755, 0o644), (0o027, 0o750, 0o640)])
def test_modes_follow_the_umask(tmp_path, tiny_build, umask, dir_mode, file_mode):
    old = os.umask(umask)
    try:
        assert current_umask() == umask
        out = write_graph_dir(tiny_build, tmp_path / "graph")
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == dir_mode
    assert {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()} == dict.fromkeys(
        FILES, file_mode
    )


# --- leftovers of killed builds -----------------------------------------------------------


def dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def leftover(parent, name, pid, host=None, content=None):
    path = parent / name
    path.mkdir()
    (path / "TLG.npz").write_bytes(b"half")
    if content is None and pid is not None:
        content = json.dumps({"pid": pid, "host": host or socket.gethostname()})
    if content is not None:
        (path / PARTIAL_MARKER).write_text(content)
    return path


def test_stale_leftovers_are_cleaned_and_nothing_else(tmp_path, tiny_build):
    dead = dead_pid()
    stale = [
        leftover(tmp_path, ".graph.partial-dead1", dead),
        leftover(tmp_path, ".graph.old-dead2", dead),
    ]
    kept = [
        leftover(tmp_path, ".graph.partial-live", os.getpid()),
        leftover(tmp_path, ".graph.partial-foreign", None),  # no marker: not ours
        leftover(tmp_path, ".graph.partial-elsewhere", dead, host="another-host"),
        leftover(tmp_path, ".graph.partial-badpid", None, content='{"pid": 0}'),
        leftover(tmp_path, ".graph.partial-junk", None, content="not json"),
        leftover(tmp_path, ".other.partial-dead", dead),  # another target's
        leftover(tmp_path, "graph.partial-dead", dead),  # not hidden: not our name pattern
    ]
    link = tmp_path / ".graph.partial-link"
    link.symlink_to(stale[0])  # a symlink is never ours: kept, and its target not followed
    kept.append(link)
    write_graph_dir(tiny_build, tmp_path / "graph")
    assert not any(p.exists() for p in stale)
    assert all(p.is_dir() and (p / "TLG.npz").read_bytes() == b"half" for p in kept[:-1])
    assert link.is_symlink()


def test_an_interrupted_replacement_is_put_back(tmp_path, tiny_build):
    old = leftover(tmp_path, ".graph.old-dead", dead_pid())
    write_graph_dir(tiny_build, old / "graph")  # the old graph, moved aside, never replaced
    with pytest.raises(WfstDecodeError, match="--force"):  # as if that build never ran
        check_out_dir(tmp_path / "graph")
    assert is_graph_dir(tmp_path / "graph") and not old.exists()


def test_a_killed_build_is_cleaned_by_the_next(tmp_path, build_args):
    out = tmp_path / "graph"
    script = textwrap.dedent(
        """
        import os, signal, sys
        import wfstdecode.graph.output as output
        from wfstdecode.cli import main
        output.write_openfst = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
        main(sys.argv[1:])
        """
    )
    killed = subprocess.run([sys.executable, "-c", script, *build_args(out)], check=False)
    assert killed.returncode == -signal.SIGKILL
    [partial] = hidden_siblings(out)
    assert partial.startswith(".graph.partial-") and not out.exists()
    assert main(build_args(out)) == 0
    assert hidden_siblings(out) == [] and is_graph_dir(out)


def test_process_alive():
    assert process_alive(os.getpid())
    assert not process_alive(dead_pid())
    assert process_alive(1)  # init: exists (PermissionError when not root)


# --- the swap -----------------------------------------------------------------------------


def test_a_failed_swap_puts_the_old_graph_back(tmp_path, tiny_build, monkeypatch):
    out = write_graph_dir(tiny_build, tmp_path / "graph")
    before = snapshot(out)
    real_replace = os.replace

    def replace(src, dst):
        if ".partial-" in str(src):
            raise OSError("simulated failure between the renames")
        real_replace(src, dst)

    monkeypatch.setattr(output_mod.os, "replace", replace)
    with pytest.raises(OSError, match="simulated"):
        write_graph_dir(tiny_build, out, {"new": True}, force=True)
    assert snapshot(out) == before and hidden_siblings(out) == []


def test_a_replacement_interrupted_while_removing_the_old_graph_is_cleaned_later(
    tmp_path, tiny_build, monkeypatch
):
    """Ctrl-C while the old graph is deleted: what is left keeps its marker (removed last), so
    a later build knows it as its own and removes the rest (a multi-GB graph leaked)."""
    out = write_graph_dir(tiny_build, tmp_path / "graph")
    real_rmtree = shutil.rmtree

    def interrupted(path, *args, **kwargs):
        if ".old-" in str(path):
            marker = os.path.join(path, PARTIAL_MARKER)
            if os.path.exists(marker):
                os.unlink(marker)  # (a removal may take it first)
            raise KeyboardInterrupt
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(output_mod.shutil, "rmtree", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_graph_dir(tiny_build, out, {"new": True}, force=True)
    monkeypatch.setattr(output_mod.shutil, "rmtree", real_rmtree)
    [left] = hidden_siblings(out)
    assert left.startswith(".graph.old-") and (tmp_path / left / PARTIAL_MARKER).exists()
    assert is_graph_dir(out)  # the new graph is in place
    monkeypatch.setattr(output_mod, "process_alive", lambda pid: False)  # (as if it exited)
    assert [p.name for p in clean_stale_siblings(out)] == [left]
    assert hidden_siblings(out) == [] and is_graph_dir(out)


# --- demo ---------------------------------------------------------------------------------


def fake_result(*_args, **_kwargs):
    return SimpleNamespace(texts=["x"], references=["x"], greedy_texts=["x"], greedy_wer=0, wer=0)


@pytest.fixture
def fast_demo(monkeypatch, tiny_build):
    """The demo with a tiny build and no decoding: only its output directory is under test."""
    monkeypatch.setattr(wfstdecode.graph, "build_tlg", lambda *a, **k: tiny_build)
    monkeypatch.setattr(wfstdecode.ctc, "decode_npz", fake_result)


def test_demo_refuses_a_foreign_directory(tmp_path, no_build, capsys):
    out = tmp_path / "mine"
    before = foreign_dir(out)
    for extra in ([], ["--force"]):
        refused = main(["demo", "--ocr", "--out", str(out), *extra])
        assert_refused(refused, capsys, str(out), "did not write")
        assert snapshot(out) == before


def test_demo_replaces_its_own_graph_and_other_graphs_only_with_force(
    tmp_path, build_args, fast_demo, capsys
):
    out = tmp_path / "demo"
    assert main(["demo", "--ocr", "--out", str(out)]) == 0
    assert main(["demo", "--ocr", "--out", str(out)]) == 0  # a rerun replaces the earlier graph
    assert json.loads((out / "build.json").read_text())["demo"] is True
    graph = tmp_path / "graph"
    assert main(build_args(graph)) == 0
    capsys.readouterr()
    assert_refused(main(["demo", "--ocr", "--out", str(graph)]), capsys, str(graph), "--force")
    assert "demo" not in json.loads((graph / "build.json").read_text())
    assert main(["demo", "--ocr", "--out", str(graph), "--force"]) == 0
    assert hidden_siblings(graph) == []


def test_deeply_nested_build_json_is_refused_cleanly(tmp_path):
    """A build.json nested beyond the JSON parser's recursion limit is just "not ours"."""
    from wfstdecode.graph.output import check_out_dir

    out = tmp_path / "graph"
    out.mkdir()
    (out / "build.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(WfstDecodeError, match="unreadable build.json"):
        check_out_dir(out, force=True)


def test_a_directory_written_meanwhile_by_another_process_is_left_alone(
    tmp_path, tiny_build, monkeypatch
):
    """Two builds of one target: the one that renames second gets a clear error (not a raw
    OSError), the first one's graph stays, and no temporary sibling is left."""
    out = tmp_path / "g"
    rename = os.replace

    def other_process_wins(src, dst):
        if dst == out and not out.exists():  # written between the last check and the rename
            out.mkdir()
            (out / "TLG.npz").write_text("theirs")
        rename(src, dst)

    monkeypatch.setattr(output_mod.os, "replace", other_process_wins)
    with pytest.raises(WfstDecodeError, match="written by another process"):
        write_graph_dir(tiny_build, out)
    assert (out / "TLG.npz").read_text() == "theirs"
    assert hidden_siblings(out) == []


def test_a_name_too_long_for_the_temporary_sibling_is_refused_before_the_build(tmp_path):
    """The build is written to ``.NAME.partial-XXXXXXXX`` first: a legal name of 238-255 bytes
    failed only after the whole build, naming the hidden directory."""
    spare = os.pathconf(tmp_path, "PC_NAME_MAX") - len(".partial-XXXXXXXX.")  # 237 of 255
    check_out_dir(tmp_path / ("b" * spare))
    with pytest.raises(WfstDecodeError, match=f"the name is too long; at most {spare} bytes"):
        check_out_dir(tmp_path / ("b" * (spare + 1)))


def test_a_write_error_names_the_output_not_the_hidden_folder(tmp_path, tiny_build, monkeypatch):
    """A full disk (or a file size limit) while a graph file is written: the error names
    OUT/TLG.fst, the file the user asked for, and nothing is left behind."""
    import errno

    def full(_fst, path):
        raise OSError(errno.EFBIG, "File too large", str(path))

    monkeypatch.setattr(output_mod, "write_openfst", full)
    out = tmp_path / "graph"
    with pytest.raises(OSError, match="File too large") as info:
        write_graph_dir(tiny_build, out)
    assert info.value.filename == str(out / "TLG.fst") and info.value.errno == errno.EFBIG
    assert not out.exists() and hidden_siblings(out) == []


def test_a_boolean_marker_is_not_ours(tmp_path):
    """``"wfstdecode_graph_dir": true`` is no format version (mutant W1: bool taken as int)."""
    import json

    from wfstdecode.graph.output import MARKER_KEY, is_graph_dir

    (tmp_path / "build.json").write_text(json.dumps({MARKER_KEY: True}))
    assert not is_graph_dir(tmp_path)
    (tmp_path / "build.json").write_text(json.dumps({MARKER_KEY: 1}))
    assert is_graph_dir(tmp_path)


def test_an_output_name_too_long_in_bytes_is_refused(tmp_path):
    """The limit is on the encoded name (mutant W2: characters counted): 120 'é' are 240 bytes,
    more than fit beside '.partial-XXXXXXXX' in a 255-byte name."""
    import os

    from wfstdecode.errors import WfstDecodeError
    from wfstdecode.graph.output import check_out_dir

    if os.pathconf(tmp_path, "PC_NAME_MAX") != 255:
        pytest.skip("a filesystem with 255-byte names")
    with pytest.raises(WfstDecodeError, match="the name is too long"):
        check_out_dir(tmp_path / ("é" * 120))
    check_out_dir(tmp_path / ("e" * 120))

"""One builder of graph directories: build-tlg, the recipes and the demo all go through
`build_graph_dir` and record the same build.json; imports run one way (no circles); the decode
command's defaults are CtcBeamOptions' own."""

import dataclasses
import json
import runpy
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

import wfstdecode.ctc
import wfstdecode.graph
from wfstdecode import CtcBeamOptions, SymbolTable
from wfstdecode.cli import DECODE_OPTIONS, main, make_parser
from wfstdecode.errors import WfstDecodeError
from wfstdecode.graph import build_dir, build_tlg
from wfstdecode.graph.lexicon import spell_lexicon
from wfstdecode.testing.data import PACKAGE_DATA
from wfstdecode.testing.lm import random_arpa

TOKENS = PACKAGE_DATA / "tokens.txt"
RECIPES = Path(__file__).resolve().parents[2] / "graph_recipes"
WORDS = ["cat", "car", "ca"]
RECORDED = ("command", "arpa", "topology", "separator", "lexicon_entries", "total_seconds")


@pytest.fixture
def arpa(tmp_path):
    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(WORDS, order=2, seed=3))
    return path


@pytest.fixture
def calls(monkeypatch):
    """Every call of `build_graph_dir` (which still does its work), by output directory."""
    seen, real = [], build_dir.build_graph_dir

    def record(out, *args, **kwargs):
        seen.append(Path(out).name)
        return real(out, *args, **kwargs)

    monkeypatch.setattr(build_dir, "build_graph_dir", record)
    return seen


def run_recipe(name, args):
    return runpy.run_path(str(RECIPES / f"{name}.py"), run_name=f"recipe_{name}")["main"](args)


def test_cli_recipe_and_demo_build_through_the_one_function(
    tmp_path, arpa, calls, monkeypatch, capsys
):
    spelled = ["--tokens", str(TOKENS), "--separator", "|", "--arpa", str(arpa)]
    assert main(["build-tlg", "--chars", *spelled, "--out", str(tmp_path / "cli")]) == 0
    run_recipe("characters", [*spelled, "--out", str(tmp_path / "recipe")])
    tokens = SymbolTable.read(TOKENS)
    lexicon, _ = spell_lexicon(WORDS, tokens, "|")
    tiny = build_tlg(tokens, lexicon, str(arpa), "compact", separator="|")

    def tiny_build(*_args, progress, **_kwargs):  # the demo's 5k-word build, made small
        for stage in tiny.stages:
            progress(stage)
        return tiny

    monkeypatch.setattr(wfstdecode.graph, "build_tlg", tiny_build)
    fake = SimpleNamespace(texts=["x"], references=["x"], greedy_texts=["x"], greedy_wer=0, wer=0)
    monkeypatch.setattr(wfstdecode.ctc, "decode_npz", lambda *a, **k: fake)
    assert main(["demo", "--ocr", "--out", str(tmp_path / "demo")]) == 0
    assert calls == ["cli", "recipe", "demo"]
    printed = capsys.readouterr().out
    assert printed.count("min(det(LG))") == 3  # every caller prints the stages
    for name, extra in [("cli", "tokens"), ("recipe", "recipe"), ("demo", "demo")]:
        report = json.loads((tmp_path / name / "build.json").read_text())
        assert {*RECORDED, extra} <= report.keys(), name
        assert report["separator"] == "|" and report["lexicon_entries"] > 0


def test_a_recipe_refuses_out_before_reading_its_inputs(tmp_path, arpa):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    missing = tmp_path / "no-tokens.txt"  # reading it would fail with another error
    args = ["--tokens", str(missing), "--arpa", str(arpa), "--out", str(out), "--force"]
    with pytest.raises(WfstDecodeError, match="did not write"):
        run_recipe("characters", args)
    assert (out / "notes.txt").read_text() == "mine"


def test_decode_defaults_are_the_options_defaults():
    args = make_parser().parse_args(["decode", "graph", "x.npz"])
    defaults = CtcBeamOptions()
    for name in DECODE_OPTIONS:
        assert getattr(args, name) == getattr(defaults, name), name
    assert set(DECODE_OPTIONS) <= {f.name for f in dataclasses.fields(CtcBeamOptions)}
    args = make_parser().parse_args(["decode", "g", "x.npz", "--beam", "9", "--max-active", "7"])
    assert (args.beam, args.max_active) == (9.0, 7)


def run_python(code):
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "first,second",
    [("demo", "cli"), ("cli", "demo"), ("graph.build_dir", "cli"), ("progress", "demo")],
)
def test_modules_import_in_either_order(first, second):
    run_python(f"import wfstdecode.{first}, wfstdecode.{second}")


def test_the_demo_runs_without_the_cli(tmp_path):
    """demo -> cli was half of an import circle: running the demo must not load the CLI."""
    run_python(f"""
        import sys
        from types import SimpleNamespace
        import wfstdecode.ctc, wfstdecode.graph
        from wfstdecode.demo import run_demo
        from wfstdecode.testing.lm import random_arpa

        real, arpa = wfstdecode.graph.build_tlg, {str(tmp_path / "lm.arpa")!r}

        def small(tokens, lexicon, _arpa, *args, **kwargs):  # a few words, not the 5k
            lexicon = lexicon[:20]
            open(arpa, "w").write(random_arpa([e.word for e in lexicon], order=2))
            return real(tokens, lexicon, arpa, *args, **kwargs)

        fake = SimpleNamespace(texts=[], references=[], greedy_texts=[], greedy_wer=0, wer=0)
        wfstdecode.graph.build_tlg = small
        wfstdecode.ctc.decode_npz = lambda *a, **k: fake
        run_demo()
        assert "wfstdecode.cli" not in sys.modules, "the demo imported the CLI"
    """)

"""The benchmark tools' measurements (tools/ are scripts: imported from their folder): peers get
the inputs and settings the committed tables say they get."""

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import bench_ctc

from wfstdecode import SymbolTable


def _fl_inputs(tmp_path):
    pytest.importorskip("flashlight.lib.text")
    (tmp_path / "tokens.txt").write_text("<blk> 0\n| 1\na 2\nb 3\nc 4\nd 5\n")
    (tmp_path / "lexicon.txt").write_text("ab a b\ncd c d\n")
    (tmp_path / "lm.arpa").write_text(  # KenLM needs bigrams
        "\\data\\\nngram 1=4\nngram 2=1\n\n\\1-grams:\n-0.5\t</s>\n-99\t<s>\t0\n"
        "-0.5\tab\t0\n-0.5\tcd\t0\n\n\\2-grams:\n-0.3\tab cd\n\n\\end\\\n"
    )
    return SymbolTable.read(tmp_path / "tokens.txt")


def test_flashlight_reads_the_last_word_without_a_final_separator(tmp_path):
    """The TLG may end without a separator and the models never emit one there; flashlight's
    lexicon spells each word with one at its end, so its inputs end with a free one (else it
    drops the last word, as it did on every bench/ctc_cpu_pareto.md flashlight row)."""
    tokens = _fl_inputs(tmp_path)
    frames = [2, 3, 1, 4, 5]  # a b | c d: a separator between the words, none after
    lp = np.full((1, len(frames), 6), -20.0, np.float32)
    lp[0, np.arange(len(frames)), frames] = 0.0
    args = SimpleNamespace(separator="|", fl_beam_size=100, beam=20.0, acoustic_scale=1.0,
                           repeats=1)  # fmt: skip
    words, _ = bench_ctc.run_flashlight(tokens, tmp_path / "lexicon.txt", str(tmp_path / "lm.arpa"),
                                        lp, np.array([len(frames)]), args)  # fmt: skip
    assert words == [["ab", "cd"]]


def test_flashlight_beam_is_ours_at_any_acoustic_scale():
    """flashlight's scores are the TLG searches' over the acoustic scale: so must its beam be
    (``beam_threshold = beam`` made speech's flashlight beam 1.25x ours)."""
    pytest.importorskip("flashlight.lib.text")
    opts = bench_ctc.flashlight_options(
        SimpleNamespace(fl_beam_size=100, beam=10.0, acoustic_scale=1.25), 7
    )
    assert opts.beam_threshold == pytest.approx(8.0)
    assert opts.lm_weight == pytest.approx(np.log(10) / 1.25)


def test_streaming_bench_decodes_every_chunk_it_counts(monkeypatch):
    """A server behind real time finds two chunks of one stream in one loop: both are decoded
    (end to end), not the later one alone while both count as decoded."""
    import argparse
    import time

    import bench_streaming

    import wfstdecode.ctc.stream

    fed = []

    class SlowDecoder:  # takes 20 ms a call: the chunks (4 ms apart per stream) pile up
        def __init__(self, *args, **kwargs):
            self.n = 0

        def open(self):
            self.n += 1
            return self.n

        def advance(self, chunks):
            time.sleep(0.02)
            fed.append(sum(len(c) for c in chunks.values()))

        def partial(self, sid):
            return None

    monkeypatch.setattr(wfstdecode.ctc.stream, "CtcStreamDecoder", SlowDecoder)
    args = argparse.Namespace(chunk=4, frame_shift=0.001, seconds=0.3, threads=None,
                              backend="cpu", beam=12.0, max_lanes=64)  # fmt: skip
    frames = np.zeros((200, 3), np.float32)
    r = bench_streaming.run(None, frames, 8, args, np.random.default_rng(0))
    assert r["chunks"] * args.chunk == sum(fed)
    assert round(r["frames_per_s"] * r["wall_s"]) == sum(fed)


def test_the_pareto_tool_reads_each_peer_against_our_fastest_point_as_accurate():
    """`bench_ctc_pareto.equal_wer`: a peer's point against our fastest point whose WER is at
    most its own (a slower, more accurate one is not chosen over a faster one that qualifies);
    none where we never reach its WER; a peer's point beaten by its own faster one left out."""
    import bench_ctc_pareto

    def row(decoder, beam, fps, wer):
        return dict(data="ocr", decoder=decoder, beam=beam, fps=fps, wer=wer)

    rows = [row("wfstdecode", 4, 400.0, 0.28), row("wfstdecode", 5, 300.0, 0.20),
            row("wfstdecode", 8, 100.0, 0.15), row("flashlight-text", 4, 150.0, 0.25),
            row("kaldi-decoder", 4, 200.0, 0.10), row("kaldi-decoder", 6, 100.0, 0.12)]  # fmt: skip
    lines = bench_ctc_pareto.equal_wer(rows)[2:]
    assert len(lines) == 2  # (kaldi's beam 6: slower than its beam 4, and less accurate)
    assert lines[0] == "| ocr | flashlight-text | 4 | 25.00 | 150 | 5 | 20.00 | 300 | 2.00x |"
    assert lines[1].endswith("| - | - | - | none as accurate |")
    rows[1]["min_active"] = 2  # (a point of another min_active is labelled with it)
    assert bench_ctc_pareto.equal_wer(rows)[2] == (
        "| ocr | flashlight-text | 4 | 25.00 | 150 | 5 m2 | 20.00 | 300 | 2.00x |"
    )


def test_every_name_a_tool_imports_from_another_tool_exists():
    """A tool's ``from bench_x import name`` of a sibling tool finds ``name`` there (read from
    the files, nothing imported): the forty-third session's rewrite of bench_ctc_pareto dropped
    its ``best_cpu``, and bench_phrases and bench_determinize no longer started."""
    import ast

    tools = Path(__file__).resolve().parents[1] / "tools"
    defined = {}
    for path in tools.glob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        names = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        defined[path.stem] = (tree, names)
    missing = [
        f"{stem}: {node.module}.{alias.name}"
        for stem, (tree, _) in defined.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in defined
        for alias in node.names
        if alias.name not in defined[node.module][1]
    ]
    assert not missing, missing

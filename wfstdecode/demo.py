"""The main job on the embedded default: build TLG from the shipped data (character tokens with a
word separator, a 5k-word lexicon, a real-text trigram) and decode the shipped OCR log-probs."""

from __future__ import annotations

import tempfile
import time
from importlib.resources import files
from pathlib import Path

DATA = Path(str(files("wfstdecode") / "data"))
SHOWN = 8


def run_demo(out: Path | None = None, backend: str = "cpu", force: bool = False) -> dict:
    """Build ``out`` (a temporary directory if None), decode, print; returns the WERs.

    ``out`` may be new, empty or the graph directory of an earlier demo (replaced, so the demo
    can be rerun); another graph directory is replaced only with ``force``, and a directory
    wfstdecode did not write never. Checked before the build, so a refusal comes at once.
    """
    from .ctc import CtcBeamOptions, decode_npz
    from .decoding_graph import DecodingGraph
    from .graph.build_dir import build_graph_dir
    from .progress import print_stage

    def replace(target: Path) -> bool:  # asked before the build and again before the write
        return force or _is_demo_graph(target)

    with tempfile.TemporaryDirectory() as tmp:
        target, _ = build_graph_dir(
            out or Path(tmp) / "graph", _read_inputs, DATA / "lm.arpa.gz", "compact",
            separator="|", force=replace, info={"demo": True}, progress=print_stage,
        )  # fmt: skip
        print(f"wrote {target}")
        graph = DecodingGraph.load(target)
    options = CtcBeamOptions(beam=16.0, max_active=2000, acoustic_scale=2.0)
    start = time.perf_counter()
    result = decode_npz(DATA / "ocr_emissions.npz", graph, options, backend=backend)
    seconds = time.perf_counter() - start
    print(f"\ndecoded {len(result.texts)} OCR text lines ({backend} backend, {seconds:.2f} s "
          f"incl. compilation), {options}")  # fmt: skip
    for ref, greedy, text in list(zip(result.references, result.greedy_texts, result.texts,
                                      strict=True))[:SHOWN]:  # fmt: skip
        print(f"  reference: {ref}\n  greedy:    {greedy}\n  TLG:       {text}\n")
    greedy, graph_wer = 100 * result.greedy_wer, 100 * result.wer
    print(f"WER greedy CTC {greedy:.1f}%  ->  TLG beam search {graph_wer:.1f}%")
    return {"greedy_wer": result.greedy_wer, "wer": result.wer}


def _read_inputs() -> tuple:
    """The shipped tokens and lexicon, announced as the build starts."""
    from .graph import read_lexicon
    from .symbols import SymbolTable

    tokens = SymbolTable.read(DATA / "tokens.txt")
    lexicon = read_lexicon(DATA / "lexicon.txt", tokens)
    print(f"building TLG (compact) from {DATA}: {len(tokens)} tokens, {len(lexicon):,} words")
    return tokens, lexicon


def _is_demo_graph(path: Path) -> bool:
    """Whether ``path`` is what an earlier demo wrote (a rerun replaces its own graph)."""
    from .graph.output import graph_dir_report

    report = graph_dir_report(path)
    return report is not None and report.get("demo") is True

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
    from .cli import print_stage
    from .ctc import CtcBeamOptions, decode_npz
    from .decoding_graph import DecodingGraph
    from .graph import build_tlg, read_lexicon
    from .graph.output import check_out_dir, write_graph_dir
    from .symbols import SymbolTable

    if out is not None:
        out = check_out_dir(out, _may_replace(out, force))
    tokens = SymbolTable.read(DATA / "tokens.txt")
    lexicon = read_lexicon(DATA / "lexicon.txt", tokens)
    print(f"building TLG (compact) from {DATA}: {len(tokens)} tokens, {len(lexicon):,} words")
    build = build_tlg(tokens, lexicon, str(DATA / "lm.arpa.gz"), "compact", separator="|",
                      progress=print_stage)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        replace = out is not None and _may_replace(out, force)  # again: it may have changed
        target = write_graph_dir(build, out or Path(tmp) / "graph", {"demo": True}, force=replace)
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


def _may_replace(out: Path, force: bool) -> bool:
    """``force``, or ``out`` is what an earlier demo wrote (a rerun replaces its own graph)."""
    from .graph.output import graph_dir_report

    report = graph_dir_report(out)
    return force or (report is not None and report.get("demo") is True)

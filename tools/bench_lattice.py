"""Lattices and rescoring on real posteriors: a first pass with a pruned LM, its lattice rescored
with the full LM, against decoding the full-LM graph directly and against flashlight-text (KenLM,
the full LM); the n-best's oracle WER next to the one-best.

* ocr: the shipped real OCR CTC posteriors (60 lines), character TLGs of the shipped 5k-word
  trigram ("full") and of its pruned copy (every bigram but the 5,000 most probable dropped, no
  trigrams: `wfstdecode.testing.lm.restrict_arpa`), acoustic scale 1 (``--ocr-scale``),
  max-active 10000;
* speech (``--speech``, from ``tools/bench_speech_ctc.py --write-npz``): hama's phone
  posteriors of held-out flite speech, the shipped 72,547-word speech graph ("full") and one of
  its LM pruned the same way (50,000 bigrams, no trigrams), acoustic scale 1.25, max-active 4000.

CPU seconds of one thread (decode_ctc with num_threads=1 / flashlight in-process), best of
``--repeats`` taken alternately; graph building is not timed. Oracle WER: per utterance the
fewest errors among its n-best.

    python tools/bench_lattice.py --speech /tmp/speech/flite.npz --out bench/ctc_lattice.md
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_ctc  # flashlight-text's runner
import bench_stream_overhead  # streams fed by chunks
from speech_npz import speech_npz

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "wfstdecode" / "data"


def data_sets(
    work: Path, speech: Path | None, speech_utts: int, ocr_scale: float = 1.0
) -> list[dict]:
    from wfstdecode import SymbolTable
    from wfstdecode.graph import build_tlg, read_arpa, read_lexicon
    from wfstdecode.testing.lm import arpa_text, restrict_arpa

    def pruned_copy(arpa: Path, bigrams: int, name: str) -> Path:
        full = read_arpa(arpa)
        out = work / name
        out.write_text(arpa_text(restrict_arpa(full, len(full.ngrams[0]), (bigrams, 0))))
        return out

    tokens = SymbolTable.read(DATA / "tokens.txt")
    lexicon = read_lexicon(DATA / "lexicon.txt", tokens)
    small = pruned_copy(DATA / "lm.arpa.gz", 5000, "ocr_pruned.arpa")
    graphs = {
        name: build_tlg(tokens, lexicon, str(arpa), "compact", separator="|").graph
        for name, arpa in (("full", DATA / "lm.arpa.gz"), ("pruned", small))
    }
    with np.load(DATA / "ocr_emissions.npz") as z:
        ocr = (z["log_probs"], z["lengths"], [str(t).split() for t in z["texts"]])
    sets = [dict(name="ocr" if ocr_scale == 1 else f"ocr, scale {ocr_scale:g}", graphs=graphs,
                 data=ocr, scale=ocr_scale, max_active=10000,
                 lexicon=DATA / "lexicon.txt", full_lm=DATA / "lm.arpa.gz", pruned_lm=small,
                 sep="|", beams=(10.0, 16.0))]  # fmt: skip
    if speech:
        from wfstdecode import DecodingGraph
        from wfstdecode.speech.graph import TOPOLOGY, WORD_BOUNDARY, _read_inputs, speech_graph_dir

        sdata = DATA / "speech"
        full = DecodingGraph.load(speech_graph_dir(verbose=False))
        small = pruned_copy(sdata / "lm.arpa.gz", 50_000, "speech_pruned.arpa")
        stokens, slexicon = _read_inputs(sdata)
        pruned = build_tlg(stokens, slexicon, str(small), TOPOLOGY, separator=WORD_BOUNDARY).graph
        with np.load(speech) as z:
            n = speech_utts
            lp, lengths = z["log_probs"][:n], z["lengths"][:n]
            data = (lp[:, : int(lengths.max())], lengths, [str(t).split() for t in z["texts"][:n]])
        lex = work / "speech_lexicon.txt"
        with gzip.open(sdata / "lexicon.txt.gz", "rb") as src, open(lex, "wb") as dst:
            shutil.copyfileobj(src, dst)
        sets.append(dict(name="speech", graphs={"full": full, "pruned": pruned}, data=data,
                         scale=1.25, max_active=4000, lexicon=lex, full_lm=sdata / "lm.arpa.gz",
                         pruned_lm=small, sep=WORD_BOUNDARY, beams=(10.0, 14.0)))  # fmt: skip
    return sets


def best_cpu(fn):
    t = time.process_time()
    out = fn()
    return out, time.process_time() - t


def oracle_wer(refs, nbest) -> float:
    from wfstdecode.metrics import word_error_rate

    errors = sum(min(word_error_rate([r], [list(h.words)]) * len(r) for h in hyps)
                 for r, hyps in zip(refs, nbest, strict=True))  # fmt: skip
    return errors / sum(len(r) for r in refs)


def run(s: dict, repeats: int, lattice_beam: float, nbest: int, fl_beam_size: int,
        beams: list[float] | None = None) -> list:  # fmt: skip
    from wfstdecode.ctc import CtcBeamOptions, decode_ctc
    from wfstdecode.metrics import word_error_rate
    from wfstdecode.rescore import LmRescoring, NgramLm

    lp, lengths, refs = s["data"]
    frames = int(lengths.sum())
    full, pruned = s["graphs"]["full"], s["graphs"]["pruned"]
    rescoring = LmRescoring(NgramLm(s["full_lm"]), NgramLm(s["pruned_lm"]), 1.0, lattice_beam)
    feats = bench_ctc.flashlight_feats(lp, lengths, full.tokens, s["sep"])
    rows = []
    for beam in beams or s["beams"]:
        base = dict(beam=beam, max_active=s["max_active"], acoustic_scale=s["scale"])
        one = CtcBeamOptions(**base)
        lat = CtcBeamOptions(**base, lattice_beam=lattice_beam, nbest=nbest)
        args = SimpleNamespace(separator=s["sep"], fl_beam_size=fl_beam_size, beam=beam,
                               acoustic_scale=s["scale"])  # fmt: skip
        fl = bench_ctc.flashlight_decoder(full.tokens, s["lexicon"], s["full_lm"], args)

        def dec(graph, options, rescore=None):
            return lambda: decode_ctc(lp, lengths, graph, options, backend="cpu",
                                      num_threads=1, rescore=rescore)  # fmt: skip

        def streamed(graph, options):
            return bench_stream_overhead.streamed(graph, options, lp, lengths, chunk=16)

        systems = {
            "full LM graph, one-best": dec(full, one),
            f"full LM graph + lattice ({nbest}-best)": dec(full, lat),
            "pruned LM graph, one-best": dec(pruned, one),
            f"full LM graph + lattice ({nbest}-best), streamed by 16 frames": streamed(full, lat),
            f"pruned LM graph + lattice ({nbest}-best)": dec(pruned, lat),
            "pruned LM graph + lattice rescored with the full LM": dec(
                pruned, CtcBeamOptions(**base, lattice_beam=lattice_beam), rescoring),
            "flashlight-text + KenLM (full LM)": lambda fl=fl: [
                [SimpleNamespace(words=w)] for w in bench_ctc._flashlight_decode(*fl, feats)],
        }  # fmt: skip
        for fn in systems.values():  # warm-up: Numba compilation, caches
            fn()
        whole = systems[f"full LM graph + lattice ({nbest}-best)"]()
        if systems[f"full LM graph + lattice ({nbest}-best), streamed by 16 frames"]() != whole:
            raise AssertionError("the streamed lattices' hypotheses differ from decode_ctc's")
        results: dict = {}
        for _ in range(repeats):  # alternately, the best CPU time of each kept
            for name, fn in systems.items():
                out, cpu = best_cpu(fn)
                if name not in results or cpu < results[name][1]:
                    results[name] = (out, cpu)
        for name, (out, cpu) in results.items():
            wer = word_error_rate(refs, [list(h[0].words) for h in out])
            oracle = oracle_wer(refs, out) if "-best)" in name else None
            rows.append(dict(data=s["name"], system=name, beam=beam, cpu=cpu, fps=frames / cpu,
                             wer=wer, oracle=oracle))  # fmt: skip
            print(_row(rows[-1]), flush=True)
    return rows


def _row(r: dict) -> str:
    oracle = f"{100 * r['oracle']:.2f}" if r["oracle"] is not None else ""
    return (f"| {r['data']} | {r['system']} | {r['beam']:g} | {r['cpu']:.3f} | {r['fps']:,.0f} "
            f"| {100 * r['wer']:.2f} | {oracle} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speech", type=speech_npz, help=".npz of speech posteriors (optional)")
    ap.add_argument("--speech-utts", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lattice-beam", type=float, default=8.0)
    ap.add_argument("--nbest", type=int, default=10)
    ap.add_argument("--fl-beam-size", type=int, default=100)
    ap.add_argument(
        "--beams",
        type=lambda v: [float(x) for x in v.split(",")],
        help="search beams for every data set (default: ocr 10,16; speech 10,14)",
    )
    ap.add_argument("--ocr-scale", type=float, default=1.0,
                    help="acoustic scale on ocr (its posteriors decode best near 2)")  # fmt: skip
    ap.add_argument("--out", type=Path, help="write the Markdown table here too")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    header = ["| data | system | beam | CPU s | frames per CPU-second | WER % | oracle WER % |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    print("\n".join(header))
    with tempfile.TemporaryDirectory() as work:
        rows = []
        for s in data_sets(Path(work), args.speech, args.speech_utts, args.ocr_scale):
            rows += run(s, args.repeats, args.lattice_beam, args.nbest, args.fl_beam_size,
                        args.beams)  # fmt: skip
    import numba

    machine = (f"{platform.machine()}, {os.cpu_count()} cores, load average {load:.2f} before "
               f"and {os.getloadavg()[0]:.2f} after; Python {platform.python_version()}, numba "
               f"{numba.__version__}")  # fmt: skip
    print(machine)
    if args.out:
        args.out.write_text("\n".join([*header, *map(_row, rows), "", machine, ""]))


if __name__ == "__main__":
    main()

"""WER against CPU speed for the CTC search, one curve per decoder, on real posteriors:
wfstdecode cpu and kaldi-decoder's FasterDecoder on the same TLG over a sweep of beams, and
flashlight-text's LexiconDecoder + KenLM on the same lexicon and ARPA over the same beams.

* ocr: the shipped real OCR CTC posteriors (60 lines), compact character TLG of the shipped
  5k-word LM (``|`` between words), acoustic scale 1;
* speech: hama's phone posteriors of held-out flite speech (``--speech``, from
  ``tools/bench_speech_ctc.py --write-npz``; the first ``--speech-utts``), the shipped
  72,547-word speech graph (``<wb>`` between words), acoustic scale 1.25.

``--ocr-scales`` (a set per scale) / ``--speech-scale`` change the acoustic scales (all three
decoders alike; the shipped OCR posteriors decode best near 2, the demo's). kaldi-decoder runs
at our beam and max_active and at min_active one less than ours (`KaldiFasterDecoder.like`: its
min_active=1, which runs before the forty-second session gave it, keeps the best token alone as
ours does but widens the next frame's beam at narrow beams where ours does not; its 0 is our 1);
``--min-active 1,2`` adds points at our min_active 2 (Kaldi's 1), a curve of their own for each.
After the table, each peer point against wfstdecode's fastest point at least as accurate.

Each decoder runs alone in a process of its own (this tool, as a child, once per repeat for all
its points on a set; the decoders in turn): CPU seconds of one thread, the best of
``--repeats``. Writes a table (stdout) and ``--plot`` (PNG, needs matplotlib).

    python tools/bench_ctc_pareto.py --speech /tmp/speech/flite.npz --plot bench/ctc_cpu_pareto.png
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_ctc  # the decoders' runners
from speech_npz import speech_npz

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "wfstdecode" / "data"


def data_sets(work: Path, speech: Path | None, speech_utts: int, ocr_scales=(1.0,),
              speech_scale: float = 1.25, only: str | None = None) -> list[dict]:  # fmt: skip
    """One set per OCR acoustic scale (named with it unless it is 1), then speech; ``only``:
    the set of that name alone."""
    from wfstdecode import DecodingGraph, SymbolTable
    from wfstdecode.graph import build_tlg, read_lexicon

    names = ["ocr" if scale == 1 else f"ocr, scale {scale:g}" for scale in ocr_scales]
    sets = []
    if only is None or only in names:
        tokens = SymbolTable.read(DATA / "tokens.txt")
        lexicon = read_lexicon(DATA / "lexicon.txt", tokens)
        ocr_graph = build_tlg(tokens, lexicon, str(DATA / "lm.arpa.gz"), "compact",
                              separator="|").graph  # fmt: skip
        with np.load(DATA / "ocr_emissions.npz") as z:
            ocr = (z["log_probs"], z["lengths"], [str(t).split() for t in z["texts"]])
        sets = [dict(name=name, graph=ocr_graph, data=ocr, scale=scale, max_active=10000,
                     lexicon=DATA / "lexicon.txt", arpa=DATA / "lm.arpa.gz", sep="|")
                for name, scale in zip(names, ocr_scales, strict=True)
                if only is None or only == name]  # fmt: skip
    if only is not None and only != "speech":
        speech = None
    if speech:
        from wfstdecode.speech.graph import speech_graph_dir

        graph = DecodingGraph.load(speech_graph_dir(verbose=False))
        with np.load(speech) as z:
            n = speech_utts
            lp, lengths = z["log_probs"][:n], z["lengths"][:n]
            data = (lp[:, : int(lengths.max())], lengths, [str(t).split() for t in z["texts"][:n]])
        lex = work / "speech_lexicon.txt"
        with gzip.open(DATA / "speech" / "lexicon.txt.gz", "rb") as src, open(lex, "wb") as dst:
            shutil.copyfileobj(src, dst)
        sets.append(dict(name="speech", graph=graph, data=data, scale=speech_scale, max_active=4000,
                         lexicon=lex, arpa=DATA / "speech" / "lm.arpa.gz", sep="<wb>"))  # fmt: skip
    return sets


DECODERS = ("wfstdecode", "kaldi-decoder", "flashlight-text")


def best_cpu(fn, repeats: int):
    """``(fn()'s result, the least CPU seconds of a thread over repeats calls)``."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t)
    return out, best


def decoder_points(s: dict, decoder: str, beams: list[float], fl_beam_size: int,
                   min_actives=(1,), skips=(None,)) -> list[dict]:  # fmt: skip
    """In this process, which runs ``decoder`` alone: each of its points on set ``s``, an
    untimed call (one-off costs of a first call: with one timed call only, the speech rows of
    the first beams came out 4-30x slow) then a timed one: ``[{beam, min_active, skip, cpu,
    hyps}]`` (``skips``: wfstdecode's blank skip thresholds, None for none; one point each).
    Alone, as C++ decoders ran up to 2.5x slower in a process that had built flashlight's
    decoders (KenLM and a trie per beam; forty-second session, `bench/ctc_cpu_pareto.md`)."""
    from wfstdecode.ctc import CtcBeamOptions, decode_ctc
    from wfstdecode.testing.oracles import KaldiFasterDecoder

    g, (lp, lengths, _) = s["graph"], s["data"]
    words = g.words.symbol
    points = []
    ours = decoder == "wfstdecode"
    for beam, min_active, skip in ((b, m, k) for b in beams for m in min_actives
                                   for k in (skips if ours else (None,))):  # fmt: skip
        opts = CtcBeamOptions(beam=beam, max_active=s["max_active"], min_active=min_active,
                              acoustic_scale=s["scale"], blank_skip_threshold=skip)  # fmt: skip
        if ours:

            def run(opts=opts):
                return [list(h[0].words) for h in decode_ctc(lp, lengths, g, opts,
                                                               backend="cpu", num_threads=1)]  # fmt: skip

        elif decoder == "kaldi-decoder":
            kaldi = KaldiFasterDecoder.like(g, opts)  # (Kaldi's min_active 0 is our 1: `like`)

            def run(kaldi=kaldi):
                out = []
                for b in range(len(lp)):
                    path = kaldi.best_path(lp[b, : lengths[b]], s["scale"])
                    out.append([words(w) for w in (path[0] if path else ())])
                return out

        else:
            if min_active != min_actives[0]:  # (no such knob: once per beam)
                continue
            args = SimpleNamespace(separator=s["sep"], fl_beam_size=fl_beam_size, beam=beam,
                                   acoustic_scale=s["scale"])  # fmt: skip
            fl = bench_ctc.flashlight_decoder(g.tokens, s["lexicon"], s["arpa"], args)
            feats = bench_ctc.flashlight_feats(lp, lengths, g.tokens, s["sep"])

            def run(fl=fl, feats=feats):
                return bench_ctc._flashlight_decode(*fl, feats)

        run()
        t = time.process_time()
        hyps = run()
        points.append(dict(beam=beam, min_active=min_active if decoder != DECODERS[2] else 1,
                           skip=skip, cpu=time.process_time() - t, hyps=hyps))  # fmt: skip
    return points


def sweep(s: dict, child_args: list[str], repeats: int) -> list[dict]:
    """Set ``s``'s points of every decoder, each decoder in a process of its own
    (`decoder_points`, run as this tool's ``--child``), ``repeats`` times taken alternately,
    the best CPU time of each point kept."""
    from wfstdecode.metrics import word_error_rate

    best: dict[tuple, dict] = {}
    for _ in range(repeats):
        for decoder in DECODERS:
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "points.json"
                subprocess.run([sys.executable, __file__, *child_args, "--child", decoder,
                                "--child-set", s["name"], "--child-out", str(out)],
                               check=True)  # fmt: skip
                for p in json.loads(out.read_text()):
                    key = (decoder, p["beam"], p["min_active"], p["skip"])
                    if key not in best or p["cpu"] < best[key]["cpu"]:
                        best[key] = p
    frames = int(s["data"][1].sum())
    rows = []
    for (decoder, beam, min_active, skip), p in best.items():
        rows.append(dict(data=s["name"], decoder=decoder, beam=beam, min_active=min_active,
                         skip=skip, cpu=p["cpu"], fps=frames / p["cpu"],
                         wer=word_error_rate(s["data"][2], p["hyps"])))  # fmt: skip
        print(f"| {s['name']} | {decoder} | {point(rows[-1])} | {p['cpu']:.3f} | "
              f"{frames / p['cpu']:,.0f} | {100 * rows[-1]['wer']:.2f} |", flush=True)  # fmt: skip
    return rows


def point(row: dict) -> str:
    """A point's settings: its beam, ``m2`` etc. for our min_active when not 1 (Kaldi's then
    one less: `KaldiFasterDecoder.like`), ``s0.95`` etc. for our blank skip threshold."""
    m, skip = row.get("min_active", 1), row.get("skip")
    return f"{row['beam']:g}" + (f" m{m}" if m != 1 else "") + (f" s{skip:g}" if skip else "")


def equal_wer(rows: list[dict]) -> list[str]:
    """Table lines: each peer's point on its own frontier (no faster point of that peer as
    accurate: a slower one only measures its waste) against wfstdecode's fastest point at
    least as accurate ("none" where none is), and the speed ratio."""
    out = [
        "| data | peer | peer beam | peer WER % | peer frames/CPU-s | our beam | our WER % "
        "| our frames/CPU-s | ours / peer |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def points(data, decoder):
        return [o for o in rows if o["data"] == data and o["decoder"] == decoder]

    for r in rows:
        peer = points(r["data"], r["decoder"])
        if r["decoder"] == "wfstdecode" or any(
            o["fps"] > r["fps"] and o["wer"] <= r["wer"] for o in peer
        ):
            continue
        ours = [o for o in points(r["data"], "wfstdecode") if o["wer"] <= r["wer"]]
        best = max(ours, key=lambda o: o["fps"], default=None)
        mine = ("-", "-", "-", "none as accurate") if best is None else (
            point(best), f"{100 * best['wer']:.2f}", f"{best['fps']:,.0f}",
            f"{best['fps'] / r['fps']:.2f}x")  # fmt: skip
        out.append(f"| {r['data']} | {r['decoder']} | {point(r)} | {100 * r['wer']:.2f} | "
                   f"{r['fps']:,.0f} | " + " | ".join(mine) + " |")  # fmt: skip
    return out


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = list(dict.fromkeys(r["data"] for r in rows))  # (in the order decoded)
    fig, axes = plt.subplots(1, len(sets), figsize=(6 * len(sets), 4.5))
    for ax, name in zip(np.atleast_1d(axes), sets, strict=True):
        curves = dict.fromkeys((r["decoder"], r.get("min_active", 1), r.get("skip"))
                               for r in rows)  # fmt: skip
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for k, (decoder, m, skip) in enumerate(curves):
            color = colors[k % len(colors)]
            pts = sorted((r["fps"], 100 * r["wer"], point(r)) for r in rows
                         if r["data"] == name and r["decoder"] == decoder
                         and r.get("min_active", 1) == m and r.get("skip") == skip)  # fmt: skip
            marker = {"wfstdecode": "o", "kaldi-decoder": "s"}.get(decoder, "^")
            label = decoder + (f", our min_active {m}" if m != 1 else "")
            label += f", blank skip > {skip:g}" if skip else ""
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color,
                    linestyle="-" if m == 1 and not skip else "--", label=label)  # fmt: skip
            for x, y, label in pts:
                ax.annotate(label, (x, y), fontsize=7, xytext=(3, 3),
                            textcoords="offset points")  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel("frames per CPU-second (one thread; log scale)")
        ax.set_ylabel("WER %")
        ax.set_title(f"{name}: WER against speed (beam, m: min_active, s: blank skip)")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speech", type=speech_npz, help="hama posteriors .npz (bench_speech_ctc.py)")
    ap.add_argument("--speech-utts", type=int, default=60)
    ap.add_argument("--beams", default="4,6,8,10,12,16,20")
    ap.add_argument("--fl-beam-size", type=int, default=100, help="flashlight beam_size")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--plot", type=Path)
    ap.add_argument("--ocr-scales", default="1", help="acoustic scales on ocr (a set each)")
    ap.add_argument("--speech-scale", type=float, default=1.25, help="acoustic scale on speech")
    ap.add_argument(
        "--min-active",
        default="1",
        help="our min_active values (Kaldi's one less each; flashlight has none)",
    )
    ap.add_argument(
        "--blank-skip",
        default="",
        help="wfstdecode's blank_skip_threshold values (a curve each, besides none)",
    )
    ap.add_argument("--child", choices=DECODERS, help=argparse.SUPPRESS)
    ap.add_argument("--child-set", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    beams = [float(b) for b in args.beams.split(",")]
    min_actives = [int(m) for m in args.min_active.split(",")]
    skips = [None, *(float(x) for x in args.blank_skip.split(",") if x)]
    ocr_scales = list(dict.fromkeys(float(x) for x in args.ocr_scales.split(",")))
    work = Path(tempfile.mkdtemp(prefix="pareto_"))
    try:
        if args.child:  # one decoder's points on one set, in this process alone
            (s,) = data_sets(work, args.speech, args.speech_utts, ocr_scales, args.speech_scale,
                             only=args.child_set)  # fmt: skip
            points = decoder_points(s, args.child, beams, args.fl_beam_size, min_actives, skips)
            args.child_out.write_text(json.dumps(points))
            return
        import flashlight.lib.text  # noqa: F401  (fail now, not after the first data set)
        import kaldi_decoder  # noqa: F401

        print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, python "
              f"{sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}; "
              f"{time.strftime('%Y-%m-%d %H:%M %Z')}")  # fmt: skip
        print("\n| data | decoder | beam (m: min_active) | CPU s | frames per CPU-second | WER % |")
        print("|---|---|---|---|---|---|")
        child_args = [
            "--speech-utts",
            str(args.speech_utts),
            "--beams",
            args.beams,
            "--fl-beam-size",
            str(args.fl_beam_size),
            "--ocr-scales",
            args.ocr_scales,
            "--speech-scale",
            str(args.speech_scale),
            "--min-active",
            args.min_active,
            "--blank-skip",
            args.blank_skip,
        ]
        if args.speech:
            child_args += ["--speech", str(args.speech)]
        rows = []
        for s in data_sets(work, args.speech, args.speech_utts, ocr_scales, args.speech_scale):
            rows += sweep(s, child_args, args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"# load average after {os.getloadavg()[0]:.2f}")
    print("\nAt equal WER (each peer's frontier point against our fastest at least as accurate):\n")
    print("\n".join(equal_wer(rows)))
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()

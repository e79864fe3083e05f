#!/usr/bin/env python
"""Word error rate of TLG decoding on real speech posteriors (hama's phone CTC model), against
no-LM baselines, on two sets:

- ``librivox``: the shipped LibriVox clips (real read speech, 5 clips, 71 words);
- ``flite``: held-out synthetic speech — the 60 test sentences of wfstdecode/data (351 words,
  never in any LM's training text here) spoken by Debian flite voices (``--voices``), 8 kHz
  voices resampled to 16 kHz by `wfstdecode.speech.audio.resample`.

Systems, all over the same posteriors:
- ``greedy+lookup``: best-path phones split at hama's word boundary, each phone word looked up in
  the shipped lexicon (a pronunciation shared by several words: the most probable unigram);
  a phone word with no entry is an error.
- ``TLG unigram``: the shipped lexicon with a unigram G (the shipped LM's unigrams, renormalised).
- ``TLG trigram``: the shipped speech graph (pruned en-us trigram).
TLG rows at each ``--scales`` acoustic scale, beam 16, max-active 4000. CPU seconds are the
search alone (model time is printed once). Needs flite for the ``flite`` set (skipped without).

    python tools/bench_speech_ctc.py --out bench/speech_ctc.md
"""

from __future__ import annotations

import argparse
import gzip
import math
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np

from wfstdecode import CtcBeamOptions, DecodingGraph, SymbolTable
from wfstdecode.graph import read_lexicon
from wfstdecode.graph.build_dir import build_graph_dir
from wfstdecode.metrics import word_error_rate
from wfstdecode.speech.audio import load_audio
from wfstdecode.speech.graph import CLIPS, DATA, load_speech_graph
from wfstdecode.speech.phone_model import WORD_BOUNDARY, HamaPhoneModel, pad_log_probs
from wfstdecode.speech.transcribe import decode_log_probs, read_transcripts
from wfstdecode.testing.lm import unigram_logprobs

SENTENCES = Path(__file__).resolve().parent.parent / "wfstdecode" / "data" / "test_sentences.txt"


def librivox_set(model):
    refs = read_transcripts(CLIPS / "transcripts.tsv")
    return [(model.log_probs_of_file(CLIPS / f"{u}.wav"), r) for u, r in refs.items()]


def flite_set(model, voices):
    sents = [line.split() for line in SENTENCES.read_text().splitlines()]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for voice in voices:
            for i, words in enumerate(sents):
                wav = Path(tmp) / f"{voice}-{i}.wav"
                subprocess.run(["flite", "-voice", voice, "-t", " ".join(words), "-o", str(wav)],
                               check=True, capture_output=True)  # fmt: skip
                out.append((model.log_probs_of(load_audio(wav, model.sample_rate)), words))
    return out


def unigram_graph(tmp: Path) -> DecodingGraph:
    """The shipped lexicon with a unigram G from the shipped LM's unigrams."""
    uni = unigram_logprobs(DATA / "lm.arpa.gz")
    probs = {w: 10**lp for w, lp in uni.items() if w != "<s>" and lp > -99}
    total = sum(probs.values())
    lines = [f"{math.log10(p / total):.6f}\t{w}" for w, p in sorted(probs.items())]
    arpa = tmp / "unigram.arpa.gz"
    header = f"\\data\\\nngram 1={len(lines) + 1}\n\n\\1-grams:\n-99\t<s>\n"
    text = header + "\n".join(lines) + "\n\n\\end\\\n"
    arpa.write_bytes(gzip.compress(text.encode()))
    tokens = SymbolTable.read(DATA / "tokens.txt")

    def inputs():
        return tokens, read_lexicon(DATA / "lexicon.txt.gz", tokens)

    out, _ = build_graph_dir(tmp / "unigram", inputs, arpa, "compact", separator=WORD_BOUNDARY)
    return DecodingGraph.load(out)


def lookup_words(model, rows) -> list[list[str]]:
    uni = unigram_logprobs(DATA / "lm.arpa.gz")
    best: dict[tuple[str, ...], str] = {}
    with gzip.open(DATA / "lexicon.txt.gz", "rt", encoding="utf-8") as f:
        for line in f:
            word, *phones = line.split()
            key = tuple(phones)
            if key not in best or uni.get(word, -99) > uni.get(best[key], -99):
                best[key] = word
    return [[best.get(tuple(w), "<no-entry>") for w in model.greedy_phones(r)] for r in rows]


def wer(refs, hyps) -> float:
    return 100 * word_error_rate(refs, hyps)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--voices", nargs="*", default=["slt", "rms", "kal"])
    ap.add_argument("--scales", type=float, nargs="*", default=[0.5, 0.7, 1.0, 1.5])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--write-npz", type=Path, metavar="DIR",
                    help="also write each set's log-probs as DIR/SET.npz (wfstdecode decode and "
                    "tools/bench_ctc.py --emissions read them)")  # fmt: skip
    args = ap.parse_args(argv)
    model = HamaPhoneModel()
    t0 = time.process_time()
    sets = {"librivox": librivox_set(model)}
    if shutil.which("flite"):
        sets["flite"] = flite_set(model, args.voices)
    else:
        print("flite not found: the synthetic set is skipped (apt-get install flite)")
    if args.write_npz:
        args.write_npz.mkdir(parents=True, exist_ok=True)
        for name, items in sets.items():
            log_probs, lengths = pad_log_probs([x for x, _ in items], len(model.tokens))
            np.savez_compressed(args.write_npz / f"{name}.npz", log_probs=log_probs, lengths=lengths,
                                texts=np.array([" ".join(r) for _, r in items]),
                                tokens=np.array([s for s, _ in sorted(model.tokens, key=lambda x: x[1])]))  # fmt: skip
    audio_s = sum(len(r) for s in sets.values() for r, _ in s) * model.frame_seconds
    model_s = time.process_time() - t0
    lines = [f"| system | acoustic scale | {' | '.join(f'{n} WER %' for n in sets)} | "
             f"{' | '.join(f'{n} search CPU s' for n in sets)} |",
             "|---|---|" + "---|" * (2 * len(sets))]  # fmt: skip
    lookup = [
        f"{wer([r for _, r in s], lookup_words(model, [x for x, _ in s])):.1f}"
        for s in sets.values()
    ]
    lines.append(
        f"| greedy phones + lexicon lookup | – | {' | '.join(lookup)} | {' | '.join('–' for _ in sets)} |"
    )
    with tempfile.TemporaryDirectory() as tmp:
        graphs = {
            "TLG unigram": unigram_graph(Path(tmp)),
            "TLG trigram (shipped)": load_speech_graph(),
        }
        for name, graph in graphs.items():
            for scale in args.scales:
                options = CtcBeamOptions(beam=16.0, max_active=4000, acoustic_scale=scale)
                decode_log_probs([sets["librivox"][0][0]], graph, options, backend="cpu")  # compile
                wers, secs = [], []
                for s in sets.values():
                    start = time.process_time()
                    hyps = decode_log_probs([x for x, _ in s], graph, options, backend="cpu")
                    secs.append(f"{time.process_time() - start:.2f}")
                    wers.append(f"{wer([r for _, r in s], [h[0].words for h in hyps]):.1f}")
                lines.append(f"| {name} | {scale:g} | {' | '.join(wers)} | {' | '.join(secs)} |")
                print(lines[-1], flush=True)
    sizes = ", ".join(
        f"{n}: {len(s)} utterances, {sum(len(r) for _, r in s)} words" for n, s in sets.items()
    )
    head = (f"Command: `python tools/bench_speech_ctc.py {' '.join(argv or sys.argv[1:])}`\n\n"
            f"Sets: {sizes}; flite voices {', '.join(args.voices)}. {audio_s:.0f} s of audio; the phone "
            f"model took {model_s:.1f} CPU s ({model_s / audio_s:.3f} CPU s per second of audio).\n"
            f"Machine: {platform.machine()}, {platform.python_version()}, load average "
            f"{' '.join(f'{x:.2f}' for x in __import__('os').getloadavg())}; hama {version('hama')}, "
            f"numba {version('numba')}, numpy {np.__version__}.\n\n")  # fmt: skip
    report = head + "\n".join(lines) + "\n"
    print(report)
    if args.out:
        args.out.write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

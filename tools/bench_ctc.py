#!/usr/bin/env python
"""Benchmark the CTC WFST beam search: this project's CPU backend against kaldi-decoder's
FasterDecoder (and flashlight-text when a lexicon + ARPA are given and it is installed) on one
fixed emission set, at identical beam / max_active / min_active / acoustic scale.

Prints decoder-only frames per second, the ratios, and how often the best word sequences agree.

    python tools/bench_ctc.py                               # synthetic lexicon graph
    python tools/bench_ctc.py --graph DIR --utts 64         # a graph written by build-tlg
    python tools/bench_ctc.py --emissions wfstdecode/data/ocr_emissions.npz \\
        --tokens wfstdecode/data/tokens.txt --lexicon wfstdecode/data/lexicon.txt \\
        --arpa wfstdecode/data/lm.arpa.gz --beam 12      # shipped TLG + OCR lines, + flashlight

Times are the best of --repeats runs; CPU time (process time) is reported beside wall time
because it compares single-threaded decoders fairly on a shared, loaded machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time

import numpy as np

from wfstdecode import DecodingGraph
from wfstdecode.ctc import CtcBeamOptions, decode_ctc
from wfstdecode.testing import lexicon_graph, simulate_ctc, word_error_rate


def synthetic(num_words: int, seed: int):
    rng = np.random.default_rng(seed)
    letters = list("abcdefghijklmnopqrstuvwxyz")
    words = set()
    while len(words) < num_words:
        words.add("".join(rng.choice(letters, size=int(rng.integers(2, 9)))))
    words = sorted(words)
    costs = rng.uniform(3.0, 12.0, len(words))  # a unigram "LM"
    return lexicon_graph(words, word_cost=list(costs)), words


def emissions(graph, vocab_words, utts, words_per_utt, seed):
    rng = np.random.default_rng(seed)
    refs = [list(rng.choice(vocab_words, size=words_per_utt)) for _ in range(utts)]
    tok = graph.tokens
    seqs = [[tok.id(c) for c in "".join(r)] for r in refs]
    lp, lengths = simulate_ctc(seqs, graph.num_tokens, seed=seed, confusion_prob=0.15,
                               deletion_prob=0.02, noise=1.5, peak=7.0)  # fmt: skip
    return refs, lp, lengths


def _clock():
    return time.perf_counter(), time.process_time()


def _since(t0, best):
    wall, cpu = time.perf_counter() - t0[0], time.process_time() - t0[1]
    return (min(best[0], wall), min(best[1], cpu))


def run_kaldi(graph, lp, lengths, opts, repeats=3):
    from wfstdecode.testing.oracles import KaldiFasterDecoder

    dec = KaldiFasterDecoder(graph, opts.beam, opts.max_active, opts.min_active)
    best = (float("inf"), float("inf"))
    for _ in range(repeats):
        t0 = _clock()
        out = []
        for b in range(len(lp)):
            path = dec.best_path(lp[b, : lengths[b]], opts.acoustic_scale)
            out.append(path[0] if path else ())
        best = _since(t0, best)
    return out, best


def run_flashlight(tokens, lexicon_path, arpa_path, lp, lengths, args):
    """flashlight-text LexiconDecoder + KenLM on the same ARPA. KenLM scores are log10, so
    ``lm_weight = ln 10`` puts them on the natural-log scale of the TLG's costs."""
    import gzip
    import math
    import shutil

    from flashlight.lib.text.decoder import (
        CriterionType,
        KenLM,
        LexiconDecoder,
        LexiconDecoderOptions,
        SmearingMode,
        Trie,
    )
    from flashlight.lib.text.dictionary import Dictionary, create_word_dict

    sep = args.separator
    lexicon: dict[str, list[list[str]]] = {}
    with open(lexicon_path, encoding="utf-8") as f:
        for line in f:
            word, *spelling = line.split()
            lexicon.setdefault(word, []).append(spelling + ([sep] if sep else []))
    lexicon.setdefault("<unk>", [])  # create_word_dict needs it; never spelled
    word_dict = create_word_dict(lexicon)
    tok_dict = Dictionary()
    for sym, _ in tokens:
        tok_dict.add_entry(sym)
    with tempfile.TemporaryDirectory() as d:
        arpa = arpa_path
        if str(arpa_path).endswith(".gz"):
            arpa = os.path.join(d, "lm.arpa")
            with gzip.open(arpa_path, "rb") as src, open(arpa, "wb") as dst:
                shutil.copyfileobj(src, dst)
        lm = KenLM(arpa, word_dict)
    trie = Trie(len(tokens), tok_dict.get_index(sep) if sep else 0)
    start = lm.start(False)
    for word, spellings in lexicon.items():
        widx = word_dict.get_index(word)
        _, score = lm.score(start, widx)
        for spelling in spellings:
            trie.insert([tok_dict.get_index(t) for t in spelling], widx, score)
    trie.smear(SmearingMode.MAX)
    opts = LexiconDecoderOptions(
        beam_size=args.fl_beam_size, beam_size_token=len(tokens), beam_threshold=args.beam,
        lm_weight=math.log(10) / args.acoustic_scale, word_score=0.0, unk_score=-math.inf,
        sil_score=0.0, log_add=False, criterion_type=CriterionType.CTC,
    )  # fmt: skip
    decoder = LexiconDecoder(
        opts, trie, lm, tok_dict.get_index(sep) if sep else 0, tokens.id("<blk>"),
        word_dict.get_index("<unk>"), [], False,
    )  # fmt: skip
    feats = [np.ascontiguousarray(lp[b, : lengths[b]], np.float32) for b in range(len(lp))]
    best = (float("inf"), float("inf"))
    for _ in range(args.repeats):
        out = []
        t0 = _clock()
        for f in feats:
            res = decoder.decode(f.ctypes.data, f.shape[0], f.shape[1])
            out.append([word_dict.get_entry(i) for i in res[0].words if i >= 0])
        best = _since(t0, best)
    return out, best


def build(args):
    """TLG from --tokens, --lexicon, --arpa with the project's graph builder."""
    from wfstdecode.graph import build_tlg, read_lexicon
    from wfstdecode.symbols import SymbolTable

    tokens = SymbolTable.read(args.tokens)
    lexicon = read_lexicon(args.lexicon, tokens)
    t0 = time.perf_counter()
    graph = build_tlg(tokens, lexicon, args.arpa, topology=args.topology,
                      separator=args.separator).graph  # fmt: skip
    print(f"# built TLG ({args.topology}) in {time.perf_counter() - t0:.1f} s")
    return graph


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--graph", help="a DecodingGraph .npz or build-tlg directory")
    ap.add_argument("--emissions", help="decode this .npz (log_probs, lengths, texts) instead of "
                    "simulated emissions")  # fmt: skip
    ap.add_argument("--lexicon", help="lexicon.txt: with --arpa, also run flashlight-text")
    ap.add_argument("--arpa", help="the ARPA file of the graph (built from it when no --graph)")
    ap.add_argument("--tokens", help="tokens.txt, to build TLG from --lexicon and --arpa")
    ap.add_argument("--topology", default="compact", help="CTC topology when building TLG")
    ap.add_argument("--separator", default="|", help="word-separator token (flashlight silence)")
    ap.add_argument("--fl-beam-size", type=int, default=500, help="flashlight beam_size")
    ap.add_argument("--words", type=int, default=2000, help="synthetic vocabulary size")
    ap.add_argument("--utts", type=int, default=32)
    ap.add_argument("--words-per-utt", type=int, default=12)
    ap.add_argument("--beam", type=float, default=12.0)
    ap.add_argument("--max-active", type=int, default=2000)
    ap.add_argument("--min-active", type=int, default=1)
    ap.add_argument("--acoustic-scale", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--repeats", type=int, default=3, help="time each decoder N times, keep the best"
    )
    args = ap.parse_args(argv)

    if args.graph or args.arpa:
        graph = DecodingGraph.load(args.graph) if args.graph else build(args)
        vocab = [w for w, i in graph.words if i and not w.startswith(("#", "<"))]
        vocab = [w for w in vocab if all(c in graph.tokens for c in w)]
    else:
        graph, vocab = synthetic(args.words, args.seed)
    if args.emissions:
        with np.load(args.emissions) as z:
            lp, lengths = z["log_probs"], z["lengths"]
            refs = [str(t).split() for t in z["texts"]] if "texts" in z.files else None
    else:
        refs, lp, lengths = emissions(graph, vocab, args.utts, args.words_per_utt, args.seed + 1)
    frames = int(lengths.sum())
    opts = CtcBeamOptions(beam=args.beam, max_active=args.max_active, min_active=args.min_active,
                          acoustic_scale=args.acoustic_scale)  # fmt: skip
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"python {sys.version.split()[0]}")  # fmt: skip
    print(f"# graph: {graph.summary()}")
    print(f"# emissions: {len(lp)} utterances, {frames} frames, V={lp.shape[2]}; {opts}")

    decode_ctc(lp[:1, :5], [5], graph, opts, backend="cpu", num_threads=1)  # compile / load cache
    rows = []

    def timed(threads):
        best = (float("inf"), float("inf"))
        for _ in range(args.repeats):
            t0 = _clock()
            hyps = decode_ctc(lp, lengths, graph, opts, backend="cpu", num_threads=threads)
            best = _since(t0, best)
        return hyps, best

    ours, sec = timed(1)
    rows.append(("wfstdecode cpu, 1 thread", sec))
    if args.threads > 1:
        rows.append((f"wfstdecode cpu, {args.threads} threads", timed(args.threads)[1]))
    ours_words = [h[0].word_ids for h in ours]
    try:
        kaldi_words, kt = run_kaldi(graph, lp, lengths, opts, args.repeats)
        rows.append(("kaldi-decoder FasterDecoder, 1 thread", kt))
    except ImportError as exc:
        kaldi_words = None
        print(f"# kaldi-decoder not available: {exc}")
    fl_words = None
    if args.lexicon and args.arpa:
        try:
            fl_words, ft = run_flashlight(graph.tokens, args.lexicon, args.arpa, lp, lengths, args)
            rows.append((f"flashlight-text LexiconDecoder (beam_size {args.fl_beam_size}), 1 thread",
                         ft))  # fmt: skip
        except ImportError as exc:
            print(f"# flashlight-text not available: {exc}")
    base = rows[0][1][1]
    print(
        "\n| decoder | wall s | CPU s | frames per CPU-second | CPU speed vs wfstdecode 1 thread |"
        "\n|---|---|---|---|---|"
    )
    for name, (wall, cpu) in rows:
        print(f"| {name} | {wall:.3f} | {cpu:.3f} | {frames / cpu:,.0f} | {base / cpu:.2f}x |")
    print("(best of --repeats runs each; CPU time is what a loaded machine measures fairly)")
    wid = graph.words
    hyp_words = [[wid.symbol(w) for w in ws] for ws in ours_words]
    if refs is not None:
        print(f"\nWER wfstdecode: {word_error_rate(refs, hyp_words):.4f}")
    if kaldi_words is not None:
        same = sum(a == tuple(b) for a, b in zip(ours_words, kaldi_words, strict=True))
        kw = [[wid.symbol(w) for w in ws] for ws in kaldi_words]
        if refs is not None:
            print(f"WER kaldi-decoder: {word_error_rate(refs, kw):.4f}")
        print(f"same best word sequence as kaldi-decoder: {same}/{len(lp)}")
    if fl_words is not None and refs is not None:
        print(f"WER flashlight-text: {word_error_rate(refs, fl_words):.4f}")


if __name__ == "__main__":
    main()

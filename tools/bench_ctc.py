#!/usr/bin/env python
"""Benchmark the CTC WFST beam search: this project's CPU backend against kaldi-decoder's
FasterDecoder (and flashlight-text when a lexicon + ARPA are given and it is installed) on one
fixed emission set, at identical beam / max_active / acoustic scale and Kaldi's min_active one
less than ours (`KaldiFasterDecoder.like`: its 0 is our 1).

Prints decoder-only frames per second, the ratios, and how often the best word sequences agree.

    python tools/bench_ctc.py                               # synthetic lexicon graph
    python tools/bench_ctc.py --graph DIR --utts 64         # a graph written by build-tlg
    python tools/bench_ctc.py --emissions wfstdecode/data/ocr_emissions.npz \\
        --tokens wfstdecode/data/tokens.txt --lexicon wfstdecode/data/lexicon.txt \\
        --arpa wfstdecode/data/lm.arpa.gz --beam 12      # shipped TLG + OCR lines, + flashlight
    python tools/restrict_arpa.py --arpa ../shared/data/en-us.arpa.gz --words 20000 \\
        --max-ngrams 600000 400000 --tokens wfstdecode/data/tokens.txt \\
        --out /tmp/en20k.arpa.gz --lexicon /tmp/en20k.lex
    python tools/bench_ctc.py --tokens wfstdecode/data/tokens.txt --lexicon /tmp/en20k.lex \\
        --arpa /tmp/en20k.arpa.gz --sentences lm --utts 200   # real LM cut, sampled sentences
    python tools/bench_ctc.py ... --utts 512 --backend cuda --batch-sizes 1,8,64,256,512 \\
        --fl-processes 16                     # GPU: cuda backend vs flashlight on 1 and 16 cores

With ``--backend cuda`` the log-probs sit in GPU memory (uploaded once, untimed), and at
each ``--mode-batch`` the run also compares CUDA graphs, double buffering, chunking and the
closure/prune block size each on and off (same hypotheses required) and prints the stream
time per frame step split into expand / prune / record copy (between events, graphs off: the
host's launch waits included), and their share of the wall time.

Simulated emissions spell each sentence with the graph's word separator (``|``) between words
when the graph has one; ``--sentences lm`` samples them from the ARPA model's own n-grams
(`wfstdecode.testing.lm.sample_sentences`) instead of drawing words uniformly.

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
from wfstdecode.ctc import CtcBeamOptions, decode_ctc, greedy_ctc_texts
from wfstdecode.ctc.npz import WORD_SEPARATOR
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


def emissions(graph, vocab_words, args, seed, model=None):
    """Simulated emissions of ``args.utts`` sentences: ``args.words_per_utt`` uniform words, or
    sampled from ``model``'s n-grams (3 to ``args.words_per_utt`` words) when given."""
    rng = np.random.default_rng(seed)
    if model is not None:
        from wfstdecode.testing.lm import sample_sentences

        refs = sample_sentences(model, args.utts, rng, min_words=3, max_words=args.words_per_utt)
    else:
        refs = [list(rng.choice(vocab_words, size=args.words_per_utt)) for _ in range(args.utts)]
    tok = graph.tokens
    sep = graph.metadata.get("separator") or ""
    seqs = [[tok.id(c) for c in sep.join(r)] for r in refs]
    lp, lengths = simulate_ctc(seqs, graph.num_tokens, seed=seed,
                               confusion_prob=args.confusion_prob,
                               deletion_prob=args.deletion_prob, noise=args.noise,
                               peak=args.peak)  # fmt: skip
    return refs, lp, lengths


def _clock():
    return time.perf_counter(), time.process_time()


def _since(t0, best):
    wall, cpu = time.perf_counter() - t0[0], time.process_time() - t0[1]
    return (min(best[0], wall), min(best[1], cpu))


def run_kaldi(graph, lp, lengths, opts, repeats=3):
    from wfstdecode.testing.oracles import KaldiFasterDecoder

    dec = KaldiFasterDecoder.like(graph, opts)  # (Kaldi's min_active 0 is our 1: `like`)
    best = (float("inf"), float("inf"))
    for _ in range(repeats):
        t0 = _clock()
        out = []
        for b in range(len(lp)):
            path = dec.best_path(lp[b, : lengths[b]], opts.acoustic_scale)
            out.append(path[0] if path else ())
        best = _since(t0, best)
    return out, best


def flashlight_decoder(tokens, lexicon_path, arpa_path, args):
    """flashlight-text LexiconDecoder + KenLM on the same ARPA, and its word dictionary. KenLM
    scores are log10, so ``lm_weight = ln 10`` puts them on the natural-log scale of the TLG's
    costs. flashlight scores its inputs unscaled, so its scores are the TLG searches' divided by
    the acoustic scale (``lm_weight = ln 10 / scale``), and so is its beam: ``beam_threshold =
    beam / scale`` is the same beam as ours and Kaldi's. Feed it `flashlight_feats`."""
    import gzip
    import shutil

    from flashlight.lib.text.decoder import KenLM, LexiconDecoder, SmearingMode, Trie
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
        lm = KenLM(str(arpa), word_dict)
    trie = Trie(len(tokens), tok_dict.get_index(sep) if sep else 0)
    start = lm.start(False)
    for word, spellings in lexicon.items():
        widx = word_dict.get_index(word)
        _, score = lm.score(start, widx)
        for spelling in spellings:
            trie.insert([tok_dict.get_index(t) for t in spelling], widx, score)
    trie.smear(SmearingMode.MAX)
    decoder = LexiconDecoder(
        flashlight_options(args, len(tokens)), trie, lm, tok_dict.get_index(sep) if sep else 0,
        tokens.id("<blk>"), word_dict.get_index("<unk>"), [], False,
    )  # fmt: skip
    return decoder, word_dict


def flashlight_options(args, num_tokens: int):
    """`flashlight_decoder`'s LexiconDecoderOptions: ``args.beam`` and ``args.acoustic_scale``
    turned into flashlight's units (its scores are ours over the acoustic scale)."""
    import math

    from flashlight.lib.text.decoder import CriterionType, LexiconDecoderOptions

    return LexiconDecoderOptions(
        beam_size=args.fl_beam_size, beam_size_token=num_tokens,
        beam_threshold=args.beam / args.acoustic_scale,
        lm_weight=math.log(10) / args.acoustic_scale, word_score=0.0, unk_score=-math.inf,
        sil_score=0.0, log_add=False, criterion_type=CriterionType.CTC,
    )  # fmt: skip


def flashlight_feats(lp, lengths, tokens, separator):
    """flashlight-text's inputs: each utterance's (T, V) float32 log-probs and, with a
    ``separator``, one more frame in which the separator has log-prob 0 and every other token
    -1e4. `flashlight_decoder`'s lexicon spells every word with the separator at its end, so
    flashlight must read one after the last word, while the TLG (`build_lexicon_fst`) may end
    without one and the models here never emit one there: without the free frame flashlight pays
    for a separator the posteriors do not hold (it drops or shortens the last word: "ruler" read
    as "rule" + ``|``). A separator that already ends a path repeats into it at no cost."""
    feats = []
    for b in range(len(lp)):
        f = np.asarray(lp[b, : int(lengths[b])], np.float32)
        if separator:
            end = np.full((1, f.shape[1]), -1e4, np.float32)
            end[0, tokens.id(separator)] = 0.0
            f = np.concatenate([f, end])
        feats.append(np.ascontiguousarray(f))
    return feats


def _flashlight_decode(decoder, word_dict, feats):
    out = []
    for f in feats:
        res = decoder.decode(f.ctypes.data, f.shape[0], f.shape[1])
        out.append([word_dict.get_entry(i) for i in res[0].words if i >= 0])
    return out


def run_flashlight(tokens, lexicon_path, arpa_path, lp, lengths, args):
    decoder, word_dict = flashlight_decoder(tokens, lexicon_path, arpa_path, args)
    feats = flashlight_feats(lp, lengths, tokens, args.separator)
    best = (float("inf"), float("inf"))
    for _ in range(args.repeats):
        t0 = _clock()
        out = _flashlight_decode(decoder, word_dict, feats)
        best = _since(t0, best)
    return out, best


_FL_WORKER: dict = {}


def _fl_init(tokens, lexicon_path, arpa_path, args):
    _FL_WORKER["dec"] = flashlight_decoder(tokens, lexicon_path, arpa_path, args)


def _fl_work(feats):
    return _flashlight_decode(*_FL_WORKER["dec"], feats)


def run_flashlight_processes(tokens, lexicon_path, arpa_path, lp, lengths, args):
    """flashlight-text on ``args.fl_processes`` cores: one decoder per process (built before the
    clock starts), utterances dealt out in equal chunks; wall time of the whole set."""
    import multiprocessing as mp

    n = args.fl_processes
    feats = flashlight_feats(lp, lengths, tokens, args.separator)
    chunks = [feats[i::n] for i in range(n)]
    ctx = mp.get_context("fork")
    with ctx.Pool(n, _fl_init, (tokens, lexicon_path, arpa_path, args)) as pool:
        pool.map(_fl_work, [c[:1] for c in chunks])  # every worker has built its decoder
        best = float("inf")
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            parts = pool.map(_fl_work, chunks, chunksize=1)
            best = min(best, time.perf_counter() - t0)
    out = [None] * len(feats)
    for i, part in enumerate(parts):
        out[i::n] = part
    return out, best


def run_cuda(graph, lp, lengths, opts, args):
    """The cuda backend at each of ``args.batch_sizes`` on log-probs already in GPU memory (as a
    model would leave them; uploaded once, untimed), results on the host; best of
    ``args.repeats`` wall times over the whole set. Returns ``{batch size: (seconds, hyps)}``."""
    from numba import cuda

    from wfstdecode.ctc import cuda_memory_bytes
    from wfstdecode.ctc.cuda.memory import table_size

    dev = cuda.to_device(np.ascontiguousarray(lp))
    out = {}
    for bs in (int(b) for b in args.batch_sizes.split(",")):
        bs = min(bs, len(lp))
        mb = cuda_memory_bytes(graph, opts, bs) / 2**20
        print(f"cuda batch {bs}: token tables of {table_size(graph.num_states, opts)} slots, "
              f"{mb:,.0f} MB of device memory")  # fmt: skip
        decode_ctc(dev[:bs], lengths[:bs], graph, opts, backend="cuda")  # compile, upload graph
        best, hyps = float("inf"), None
        for _ in range(args.repeats):
            cuda.synchronize()
            t0 = time.perf_counter()
            hyps = []
            for i in range(0, len(lp), bs):
                hyps += decode_ctc(dev[i : i + bs], lengths[i : i + bs], graph, opts,
                                   backend="cuda")  # fmt: skip
            best = min(best, time.perf_counter() - t0)
        out[bs] = (best, hyps)
    return out


CUDA_MODES = {  # name: (CtcBeamOptions.cuda_graphs, CudaTuning fields)
    "default (graphs auto, 16-frame chunks, double buffer)": ("auto", {}),
    "CUDA graphs off": ("off", {}),
    "double buffering off": ("auto", {"double_buffer": False}),
    "graphs off, 1-frame chunks (host waits each frame)": ("off", {"frames_per_chunk": 1}),
    "closure/prune blocks of 256 threads": ("auto", {"prune_threads": 256}),
}


def run_cuda_modes(graph, lp, lengths, opts, args, bs: int) -> None:
    """Each of `CUDA_MODES` at batch ``bs`` (same hypotheses required), then the GPU time split
    per frame step from CUDA events (expand / prune stages on the compute stream, the host's
    launch waits included; record copy on the copy stream) and the stages' share of the wall
    time."""
    import dataclasses

    from numba import cuda

    from wfstdecode.ctc import CudaTuning
    from wfstdecode.ctc.cuda.driver import prune_block_size

    n = min(len(lp), max(bs, 32))  # small batches: 32 utterances keep the device time short
    lp, lengths = lp[:n], lengths[:n]
    dev = cuda.to_device(np.ascontiguousarray(lp))

    def decode_all(graphs, profile=None, **run):
        o = dataclasses.replace(opts, cuda_graphs=graphs)
        hyps = []
        for i in range(0, len(lp), bs):
            tuning = CudaTuning(profile=profile, **run)
            hyps += decode_ctc(dev[i : i + bs], lengths[i : i + bs], graph, o, backend="cuda",
                               tuning=tuning)  # fmt: skip
        return hyps

    print(f"\n| cuda mode, batch {bs}, {n} utterances (closure/prune blocks of "
          f"{prune_block_size(bs)} threads) "
          "| wall s | vs default | same hypotheses |\n|---|---|---|---|")  # fmt: skip
    base = None
    for name, (graphs, run) in CUDA_MODES.items():
        decode_all(graphs, **run)
        best = float("inf")
        for _ in range(args.repeats):
            cuda.synchronize()
            t0 = time.perf_counter()
            hyps = decode_all(graphs, **run)
            best = min(best, time.perf_counter() - t0)
        if base is None:
            base = (best, hyps)
        same = all(a[0].words == b[0].words and a[0].score == b[0].score
                   for a, b in zip(hyps, base[1], strict=True))  # fmt: skip
        print(f"| {name} | {best:.3f} | {base[0] / best:.2f}x | {same} |")
    profile: dict = {}
    cuda.synchronize()
    t0 = time.perf_counter()
    decode_all("off", profile=profile)
    wall_ms = 1e3 * (time.perf_counter() - t0)
    steps = profile["frame_steps"]
    busy = (profile["expand"] + profile["prune"]) / wall_ms
    # Graphs off, the intervals between events include the stream's waits for the host's next
    # launch: they bound the kernels' time from above, they do not measure it.
    print(f"\nStream time per frame step at batch {bs} ({steps} steps, events around each stage, "
          f"graphs off, host launch waits included): expand {1e3 * profile['expand'] / steps:.1f} us, prune "
          f"{1e3 * profile['prune'] / steps:.1f} us, record copy (other stream) "
          f"{1e3 * profile['copy'] / steps:.1f} us; stages {100 * busy:.0f}% of "
          f"the wall time ({wall_ms:.0f} ms)")  # fmt: skip


def build(args):
    """TLG from --tokens, --lexicon, --arpa with the project's graph builder; returns it and the
    ARPA model read (n-grams over the lexicon's words)."""
    from wfstdecode.graph import build_tlg, read_arpa, read_lexicon
    from wfstdecode.symbols import SymbolTable

    tokens = SymbolTable.read(args.tokens)
    lexicon = read_lexicon(args.lexicon, tokens)
    t0 = time.perf_counter()
    model = read_arpa(args.arpa, {e.word for e in lexicon} - {"<unk>"})
    graph = build_tlg(tokens, lexicon, model, topology=args.topology,
                      separator=args.separator).graph  # fmt: skip
    counts = " / ".join(f"{c:,}" for c in model.counts())
    print(f"# built TLG ({args.topology}) from {counts} n-grams, {len(lexicon):,} lexicon "
          f"entries in {time.perf_counter() - t0:.1f} s (ARPA reading included)")  # fmt: skip
    return graph, model


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
    ap.add_argument(
        "--fl-processes",
        type=int,
        default=0,
        help="also run flashlight-text on this many cores (processes)",
    )
    ap.add_argument(
        "--backend",
        choices=["cpu", "cuda"],
        default="cpu",
        help="cuda: also time the cuda backend at --batch-sizes",
    )
    ap.add_argument(
        "--batch-sizes",
        default="1,8,64,256,512",
        help="cuda backend batch sizes (utterances per decode_ctc call)",
    )
    ap.add_argument(
        "--mode-batch",
        default="0",
        help="batch sizes (comma-separated) of the cuda on/off comparison (graphs, double "
        "buffering, chunks, closure/prune block size) and the stage split; 0 = the largest of "
        "--batch-sizes",
    )
    ap.add_argument("--words", type=int, default=2000, help="synthetic vocabulary size")
    ap.add_argument("--utts", type=int, default=32)
    ap.add_argument(
        "--words-per-utt",
        type=int,
        default=12,
        help="words per simulated utterance (the most, with --sentences lm)",
    )
    ap.add_argument(
        "--sentences",
        choices=("uniform", "lm"),
        default="uniform",
        help="simulated sentences: uniform vocabulary words, or sampled from the "
        "ARPA model's n-grams (needs --arpa and --lexicon, no --graph)",
    )
    ap.add_argument("--confusion-prob", type=float, default=0.15, help="simulator confusions")
    ap.add_argument("--deletion-prob", type=float, default=0.02, help="simulator deletions")
    ap.add_argument("--noise", type=float, default=1.5, help="simulator logit noise")
    ap.add_argument("--peak", type=float, default=7.0, help="simulator peak height (logits)")
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

    model = None
    if args.sentences == "lm" and (args.graph or not (args.arpa and args.lexicon)):
        ap.error("--sentences lm needs --arpa, --lexicon and --tokens, and no --graph")
    if args.graph or args.arpa:
        graph, model = (DecodingGraph.load(args.graph), None) if args.graph else build(args)
        vocab = [w for w, i in graph.words if i and not w.startswith(("#", "<"))]
        vocab = [w for w in vocab if all(c in graph.tokens for c in w)]
    else:
        graph, vocab = synthetic(args.words, args.seed)
    if args.emissions:
        with np.load(args.emissions) as z:
            lp, lengths = z["log_probs"], z["lengths"]
            refs = [str(t).split() for t in z["texts"]] if "texts" in z.files else None
    else:
        refs, lp, lengths = emissions(graph, vocab, args, args.seed + 1,
                                      model if args.sentences == "lm" else None)  # fmt: skip
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
    if args.threads > 1:  # (warmed as one thread was: the threaded path loads its own code)
        decode_ctc(lp[:2, :5], [5, 5], graph, opts, backend="cpu", num_threads=args.threads)
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
        if graph.tokens.get(WORD_SEPARATOR) is None:
            # words are spelled back to back (the synthetic lexicon graph): greedy output is one
            # unsegmented string per utterance, so a word error rate would say nothing
            print("\nWER greedy CTC (no graph): n/a (no word separator token to split words)")
        else:
            greedy = [t.split() for t in greedy_ctc_texts(lp, lengths, graph.tokens)]
            print(f"\nWER greedy CTC (no graph): {word_error_rate(refs, greedy):.4f}")
        print(f"WER wfstdecode: {word_error_rate(refs, hyp_words):.4f}")
    if kaldi_words is not None:
        same = sum(a == tuple(b) for a, b in zip(ours_words, kaldi_words, strict=True))
        kw = [[wid.symbol(w) for w in ws] for ws in kaldi_words]
        if refs is not None:
            print(f"WER kaldi-decoder: {word_error_rate(refs, kw):.4f}")
        print(f"same best word sequence as kaldi-decoder: {same}/{len(lp)}")
    if fl_words is not None and refs is not None:
        print(f"WER flashlight-text: {word_error_rate(refs, fl_words):.4f}")
    wall_rows = [(name, wall) for name, (wall, _cpu) in rows]
    if args.fl_processes > 1 and args.lexicon and args.arpa and fl_words is not None:
        fl_n, fl_n_wall = run_flashlight_processes(graph.tokens, args.lexicon, args.arpa, lp,
                                                   lengths, args)  # fmt: skip
        wall_rows.append((f"flashlight-text, {args.fl_processes} processes", fl_n_wall))
        print(f"flashlight-text on {args.fl_processes} processes gives the 1-core words: "
              f"{fl_n == fl_words}")  # fmt: skip
    if args.backend == "cuda":
        ours_text = [h[0].words for h in ours]
        for bs, (secs, hyps) in run_cuda(graph, lp, lengths, opts, args).items():
            wall_rows.append((f"wfstdecode cuda, batch {bs}", secs))
            same = sum(h[0].words == w for h, w in zip(hyps, ours_text, strict=True))
            line = f"cuda batch {bs}: same best words as the cpu backend {same}/{len(lp)}"
            if refs is not None:
                line += f", WER {word_error_rate(refs, [list(h[0].words) for h in hyps]):.4f}"
            print(line + f", overflow notes {sum(bool(h[0].notes) for h in hyps)}")
        largest = max(int(b) for b in args.batch_sizes.split(","))
        for bs in (int(b) or largest for b in args.mode_batch.split(",")):
            run_cuda_modes(graph, lp, lengths, opts, args, bs)
    if len(wall_rows) > len(rows):
        ref = {name: wall for name, wall in wall_rows}
        fl1 = next(
            (w for n, w in wall_rows if n.startswith("flashlight-text LexiconDecoder")), None
        )
        fln = next((w for n, w in wall_rows if "processes" in n), None)
        print("\n| decoder | wall s | frames per second | vs wfstdecode cpu 1 thread |"
              " vs flashlight 1 core | vs flashlight N cores |\n|---|---|---|---|---|---|")  # fmt: skip
        for name, wall in wall_rows:
            cells = [f"{ref[wall_rows[0][0]] / wall:.2f}x"]
            cells += [f"{w / wall:.2f}x" if w else "-" for w in (fl1, fln)]
            print(f"| {name} | {wall:.3f} | {frames / wall:,.0f} | " + " | ".join(cells) + " |")
        print("(wall-clock time, best of --repeats; decoder only: log-probs in host memory, in "
              "GPU memory for the cuda backend)")  # fmt: skip


if __name__ == "__main__":
    main()

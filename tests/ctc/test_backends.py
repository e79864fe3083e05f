import os
import subprocess
import sys

import pytest

from wfstdecode import BackendUnavailableError
from wfstdecode.backends import available_ctc_backends, cuda_available, resolve_ctc_backend
from wfstdecode.ctc import decode_ctc
from wfstdecode.testing import random_graph, random_log_probs


def test_names():
    assert resolve_ctc_backend("auto") in ("cpu", "cuda")
    assert resolve_ctc_backend("reference") == "reference"
    assert {"reference", "cpu"} <= set(available_ctc_backends())
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        resolve_ctc_backend("gpu")


@pytest.mark.skipif(cuda_available(), reason="this machine has a GPU")
def test_explicit_cuda_without_gpu_raises():
    g = random_graph(0)
    lp = random_log_probs(0, 1, 3, g.num_tokens)
    with pytest.raises(BackendUnavailableError, match="cuda"):
        decode_ctc(lp, None, g, backend="cuda")


def test_importing_the_package_pulls_no_torch():
    import subprocess
    import sys

    code = (
        "import sys, wfstdecode, wfstdecode.ctc, wfstdecode.testing, wfstdecode.backends;"
        "bad = [m for m in ('torch', 'cupy', 'pynini') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


FORKED = """
import os, sys
from wfstdecode.ctc import CpuTuning, CtcBeamOptions, decode_ctc
from wfstdecode.testing import random_graph, random_log_probs
g = random_graph(3)
lp = random_log_probs(3, 6, 20, g.num_tokens)
two = CpuTuning(num_threads=2)
parent = CpuTuning(num_threads=int(sys.argv[1]))  # 1: no parallel region, the layer started
want = decode_ctc(lp, None, g, CtcBeamOptions(beam=6.0), tuning=parent)
pid = os.fork()
if pid == 0:  # as a fork pool's or a DataLoader's worker
    got = decode_ctc(lp, None, g, CtcBeamOptions(beam=6.0), tuning=two)
    os._exit(0 if got == want else 3)
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
@pytest.mark.parametrize("parent_threads", ["1", "2"])
def test_a_process_forked_after_a_decode_decodes_too(parent_threads):
    """GNU OpenMP cannot start threads in a child forked after the parent started Numba's
    threading layer (a parallel region, or only asking for its thread count): Numba terminated
    such a child at its first threaded decode (SIGTERM); it now decodes in turn, with the
    parent's results."""
    run = subprocess.run([sys.executable, "-c", FORKED, parent_threads], capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr

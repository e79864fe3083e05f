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

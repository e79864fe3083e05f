import math
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PACKAGE_DATA = Path(__file__).resolve().parents[1] / "wfstdecode" / "data"


def shared_file(name: str) -> Path:
    """A file of ../shared/data, or skip the test saying why."""
    path = SHARED_DATA / name
    if not path.is_file():
        pytest.skip(f"needs {path} (../shared/data is not beside this checkout)")
    return path


def close(a: float, b: float, tol: float = 1e-4) -> bool:
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)

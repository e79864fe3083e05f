"""Where tests and benchmarks find data: the package's shipped data and ``../shared/data``."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DATA = Path(__file__).resolve().parents[1] / "data"
# ../shared/data beside the repository checkout; WFSTDECODE_SHARED_DATA overrides.
SHARED_DATA = Path(
    os.environ.get(
        "WFSTDECODE_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"
    )
)


def shared_file(name: str) -> Path:
    """A file of ../shared/data, or skip the calling test saying why."""
    path = SHARED_DATA / name
    if not path.is_file():
        import pytest

        pytest.skip(f"needs {path} (../shared/data is not beside this checkout)")
    return path

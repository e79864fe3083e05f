"""``--speech`` for the benchmarks: an argparse type that says at once when the file is missing
and how to make it, instead of a traceback from ``np.load`` after minutes of graph building."""

from __future__ import annotations

import argparse
from pathlib import Path


def speech_npz(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(
            f"{text}: no such file (write the speech sets with "
            "tools/bench_speech_ctc.py --write-npz DIR)"
        )
    return path

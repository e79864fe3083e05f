"""Constants of the cuda backend's device buffers, shared by the kernels, their steps and the
host (a module of its own so that the kernels need not import the buffers' allocation)."""

from __future__ import annotations

import numpy as np

# ctl: the frame being run, whether this step runs it, the chunk's record buffer (0 or 1), the
# frames the chunk has run (kept here: `info` is mapped host memory, slow to read from the GPU)
CTL_FRAME, CTL_GO, CTL_HALF, CTL_CHUNK_FRAMES = 0, 1, 2, 3
# info[half]: frames run, first frame, record start of each frame ..., records used (last column)
INFO_FRAMES, INFO_FIRST, INFO_STARTS = 0, 1, 2

EMPTY = -1  # a free hash-table slot
NO_SRC = np.int32(0x7FFFFFFF)  # a slot's source context state before the tie-break sets it
NO_KEY = np.uint64(0xFFFFFFFFFFFFFFFF)  # a slot's key before any candidate: larger than all
NO_BEST = np.uint32(0xFFFFFFFF)  # no best cost yet (ordered bits: larger than every cost's)

# CUDA allows at most 65535 blocks along a grid's y (and z) axis: kernels with one grid row per
# lane (utterance) take ``grid_rows(B)`` rows and loop over the lanes, so a batch may be larger
MAX_GRID_ROWS = 65535


def grid_rows(lanes: int) -> int:
    """The grid's y extent for ``lanes`` lanes (at least 1)."""
    return max(1, min(int(lanes), MAX_GRID_ROWS))

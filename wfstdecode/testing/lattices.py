"""Small lattices whose every path can be listed: brute-force oracles for the lattice code."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from ..lattice import Lattice


def sausage_lattice(rng, positions: int, width: int, vocab: int) -> Lattice:
    """``positions`` slots in a row, each ``width`` parallel arcs with random words (0: no
    word) and graph and acoustic costs; every path ends at the last node (acoustic scale 0.5)."""
    src, dst, olabel, gcost, acost = [], [], [], [], []
    for p in range(positions):
        for _ in range(width):
            src.append(p)
            dst.append(p + 1)
            olabel.append(int(rng.integers(0, vocab + 1)))
            gcost.append(float(rng.uniform(0, 3)))
            acost.append(float(rng.uniform(0, 3)))
    n_nodes, n_arcs = positions + 1, len(src)
    final = np.full(n_nodes, np.inf, np.float32)
    final[-1] = float(rng.uniform(0, 1))
    i32 = lambda x: np.asarray(x, np.int32)  # noqa: E731
    return Lattice(
        positions, i32(range(n_nodes)), i32(range(n_nodes)), final, i32(src), i32(dst),
        i32(range(n_arcs)), i32([1] * n_arcs), i32(olabel), i32([p for p in range(positions)
        for _ in range(width)]), np.asarray(gcost, np.float32), np.asarray(acost, np.float32),
        0.5,
    )  # fmt: skip


def sausage_paths(lat: Lattice) -> Iterator[tuple[int, ...]]:
    """Every complete path of a `sausage_lattice`, as its arcs."""
    yield from itertools.product(*[np.flatnonzero(lat.src == p) for p in range(lat.num_frames)])

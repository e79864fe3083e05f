"""Kaldi matrix tables read into NumPy: what ``nnet3-compute``, ``copy-matrix`` and
``copy-feats`` write, so that a Kaldi or k2 user's network outputs decode without a conversion.

A table is named as Kaldi names one (``ark:PATH``, ``scp:PATH``) or by its file's suffix
(`kaldi_tables` reads the archive or script). Text and binary matrices are told apart per entry
(``ark,t:`` changes nothing). Matrices may be binary float (``FM``) or double (``DM``),
compressed (``CM``, ``CM2``, ``CM3``: ``copy-feats --compress=true``), or text
(``[ 1 2 \\n 3 4 ]``). Every size read from a file is checked against the bytes that hold it
before anything is allocated; errors are `InputFileError` naming the file, the entry and its
byte (or the script's line).
"""

from __future__ import annotations

import os
import re
import struct

import numpy as np

from .errors import InputFileError
from .kaldi_tables import read_table
from .textfiles import is_float, strict_float

__all__ = ["read_kaldi_matrices"]

_BINARY_TYPES = {b"FM ": np.dtype("<f4"), b"DM ": np.dtype("<f8")}
_COMPRESSED = (b"CM ", b"CM2 ", b"CM3 ")  # one byte with column percentiles; two bytes; one byte
_GLOBAL_HEADER_BYTES = 16  # float32 min, float32 range, int32 rows, int32 cols
_UINT16_STEP = np.float32(1.52590218966964e-05)  # 1 / 65535, as Kaldi writes it


def read_kaldi_matrices(spec: str | os.PathLike) -> dict[str, np.ndarray]:
    """``{key: float32 (rows, cols) matrix}`` of the Kaldi table ``spec`` (an rspecifier or a
    path: `kaldi_tables`), in the table's order. Raises `InputFileError`."""
    return read_table(spec, _matrix, "a matrix")


def _matrix(raw, pos: int, path: str, key: str) -> tuple[np.ndarray, int]:
    """The matrix at byte ``pos`` (binary after ``\\0B``, else text) and the byte after it;
    values beyond float32 become infinite (as the decoders' checks then name), quietly."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _any_matrix(raw, pos, path, key)


def _any_matrix(raw, pos: int, path: str, key: str) -> tuple[np.ndarray, int]:
    start = pos

    def fail(message: str) -> InputFileError:
        return InputFileError(path, None, f"entry {key!r} (byte {start}): {message}")

    if raw[pos : pos + 2] != b"\0B":
        return _text_matrix(raw, pos, fail)
    pos += 2
    kind = next((t for t in (*_BINARY_TYPES, *_COMPRESSED) if raw[pos : pos + len(t)] == t), None)
    if kind is None:
        found = bytes(raw[pos : pos + 4]).split(b" ")[0]
        raise fail(f"holds a {found.decode('latin-1')!r} object, not a matrix (FM, DM, CM, CM2, "
                   "CM3)")  # fmt: skip
    pos += len(kind)
    if kind in _BINARY_TYPES:
        dims = bytes(raw[pos : pos + 10])
        if len(dims) < 10 or dims[0] != 4 or dims[5] != 4:
            raise fail("truncated or corrupt matrix header (expected two 4-byte sizes)")
        rows, cols = (int.from_bytes(dims[i : i + 4], "little", signed=True) for i in (1, 6))
        dtype, pos = _BINARY_TYPES[kind], pos + 10
        count = _checked_size(rows, cols, dtype.itemsize, len(raw) - pos, fail)
        values = np.frombuffer(raw, dtype, count, pos).astype(np.float32)
        return values.reshape(rows, cols), pos + count * dtype.itemsize
    if len(raw) - pos < _GLOBAL_HEADER_BYTES:
        raise fail("truncated compressed-matrix header")
    low, span, rows, cols = struct.unpack_from("<ffii", raw, pos)
    low, span, pos = np.float32(low), np.float32(span), pos + _GLOBAL_HEADER_BYTES
    if cols == 0:  # Kaldi writes an empty one as "CM " and its whole 20-byte in-memory header
        # (its own reader then misreads the next key): the 4 bytes more are that header's last
        # size, 0. Other writers (kaldiio's CM2, CM3) write the 16 bytes read, and nothing more.
        kaldi_empty = kind == b"CM " and rows == 0 and raw[pos : pos + 4] == bytes(4)
        return np.zeros((0, 0), np.float32), pos + 4 * kaldi_empty
    if kind == b"CM ":  # per column: 4 percentiles (uint16), then the rows' bytes by column
        _checked_size(rows, cols, 1, len(raw) - pos - 8 * max(cols, 0), fail)
        percentiles = np.frombuffer(raw, "<u2", 4 * cols, pos).reshape(cols, 4)
        codes = np.frombuffer(raw, np.uint8, rows * cols, pos + 8 * cols).reshape(cols, rows)
        values = _one_byte_with_percentiles(low + span * _UINT16_STEP * percentiles, codes).T
        return np.ascontiguousarray(values), pos + cols * (8 + rows)
    dtype = np.dtype("<u2") if kind == b"CM2 " else np.dtype(np.uint8)
    step = np.float32(float(span) / (65535.0 if kind == b"CM2 " else 255.0))  # (as Kaldi: double)
    count = _checked_size(rows, cols, dtype.itemsize, len(raw) - pos, fail)
    codes = np.frombuffer(raw, dtype, count, pos).reshape(rows, cols)
    return low + codes.astype(np.float32) * step, pos + count * dtype.itemsize


def _one_byte_with_percentiles(p: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Kaldi's one-byte codes (cols, rows), read against their column's 0/25/75/100th
    percentiles ``p`` (cols, 4): codes 0-64 span [p0, p25], 64-192 [p25, p75], 192-255 [p75,
    p100]. Rounded as Kaldi rounds (a float32 product, scaled and added in double)."""
    part = (codes > 64).astype(np.intp) + (codes > 192)
    low, high = np.take_along_axis(p, part, 1), np.take_along_axis(p, part + 1, 1)
    first = np.array([0, 64, 192], np.float32)[part]
    scale = np.array([1 / 64, 1 / 128, 1 / 63])[part]  # (Kaldi multiplies by these doubles)
    step = ((high - low) * (codes.astype(np.float32) - first)).astype(np.float64) * scale
    return (low + step).astype(np.float32)


def _checked_size(rows: int, cols: int, itemsize: int, available: int, fail) -> int:
    """``rows * cols``, refused where negative, or more than the ``available`` bytes hold (a
    corrupt size must not become an allocation)."""
    if rows < 0 or cols < 0:
        raise fail(f"a matrix of {rows} x {cols}: sizes must not be negative")
    if rows * cols * itemsize > available:
        raise fail(f"a matrix of {rows} x {cols} needs {rows * cols * itemsize} bytes; the file "
                   f"holds {available} after its header (truncated?)")  # fmt: skip
    return rows * cols


def _text_matrix(raw, pos: int, fail) -> tuple[np.ndarray, int]:
    """``[ row \\n row ... ]``: rows end at line breaks or ';', all of one width."""
    start = pos
    while start < len(raw) and raw[start : start + 1].isspace():  # (Kaldi: ``is >> str``)
        start += 1
    if raw[start : start + 1] != b"[":
        raise fail("expected a matrix: '\\0B' and a binary one, or '[' and a text one")
    end = raw.find(b"]", start)
    if end < 0:
        raise fail("a text matrix with no closing ']'")
    rows = []
    for line in re.split(rb"[\n;]", bytes(raw[start + 1 : end])):  # (Kaldi ends rows at both)
        fields = line.split()
        if not fields:
            continue
        try:
            rows.append(np.array([strict_float(f) for f in fields], np.float32))
        except ValueError:
            bad = next(f for f in fields if not is_float(f))
            raise fail(f"text matrix row {len(rows)}: {bad.decode('latin-1')!r} is not a "
                       "number") from None  # fmt: skip
        if len(rows[-1]) != len(rows[0]):
            raise fail(f"text matrix row {len(rows) - 1} has {len(rows[-1])} values; row 0 has "
                       f"{len(rows[0])}")  # fmt: skip
    matrix = np.stack(rows) if rows else np.zeros((0, 0), np.float32)
    return matrix, end + 1

"""Kaldi archives (``ark:``) of lattices: `write_kaldi_archive` writes `Lattice` and
`CompactLattice` entries, `read_kaldi_archive` reads both kinds (Kaldi's ``lattice4`` and
``compactlattice44`` FSTs)."""

from __future__ import annotations

import io
import os

from .compact_lattice import compact_from_fst
from .errors import GraphError, InputFileError, OptionsError
from .fstio import read_lattice_bytes
from .lattice import lattice_from_fst


def write_kaldi_archive(lattices, path: str | os.PathLike | io.BufferedIOBase) -> None:
    """Write ``{key: Lattice or CompactLattice}`` as a binary Kaldi archive (``ark:``): per entry
    the key, a space, Kaldi's binary marker and the FST. A path is written to a temporary file
    beside it and renamed into place, so a failed write leaves nothing half-written."""
    for key in lattices:
        if not key or any(c.isspace() for c in key):
            raise OptionsError(f"lattice key {key!r} must be non-empty, without whitespace")
    if hasattr(path, "write"):
        for key, lat in lattices.items():
            path.write(key.encode() + b" \0B" + lat.kaldi_bytes())
        return
    path = os.fspath(path)
    tmp = f"{path}.{os.getpid()}.partial"
    try:
        with open(tmp, "wb") as f:
            write_kaldi_archive(lattices, f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)  # our own partial file, never the user's
        raise


def read_kaldi_archive(path: str | os.PathLike, acoustic_scale: float = 1.0,
                       keep_compact: bool = False) -> dict:  # fmt: skip
    """``{key: Lattice}`` from a binary Kaldi archive of ``Lattice`` or ``CompactLattice``
    entries (as `write_kaldi_archive` and Kaldi's decoders and ``lattice-copy`` write).
    CompactLattices are expanded to state-level lattices (`CompactLattice.to_lattice`) unless
    ``keep_compact``. A file has no graph arcs or states (``graph_arc`` and ``node_state`` are
    -1); node frames are counted along the arcs (input label 0 = no frame). ``acoustic_scale``:
    what paths rank by (the file keeps acoustic costs unscaled). Raises `InputFileError` naming
    the entry and byte."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise InputFileError(path, None, f"cannot read: {exc}") from None
    out, pos = {}, 0
    while pos < len(data):
        space = data.find(b" ", pos)
        if space < 0 or data[space + 1 : space + 3] != b"\0B":
            raise InputFileError(path, None, f"byte {pos}: expected 'KEY \\0B' (a binary Kaldi "
                                             "archive entry)")  # fmt: skip
        key = data[pos:space].decode("utf-8", errors="replace")
        try:
            arrays, pos = read_lattice_bytes(data, space + 3, str(path))
            if arrays.get("compact"):
                compact = compact_from_fst(arrays, acoustic_scale)
                out[key] = compact if keep_compact else compact.to_lattice()
            else:
                out[key] = lattice_from_fst(arrays, acoustic_scale)
        except GraphError as exc:
            raise InputFileError(path, None, f"entry {key!r}: {exc}") from None
    return out

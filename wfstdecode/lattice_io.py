"""Kaldi archives (``ark:``) of lattices: `write_kaldi_archive` writes `Lattice` and
`CompactLattice` entries, `read_kaldi_archive` reads both kinds (Kaldi's ``lattice4`` and
``compactlattice44`` FSTs)."""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

import numpy as np

from .compact_lattice import compact_from_fst
from .errors import GraphError, InputFileError, OptionsError
from .fstio import check_weights, read_lattice_bytes
from .kaldi_matrices import archive_key
from .lattice import lattice_from_fst
from .safe_io import replacing


def write_kaldi_archive(lattices, path: str | os.PathLike | io.BufferedIOBase) -> None:
    """Write ``{key: Lattice or CompactLattice}`` as a binary Kaldi archive (``ark:``): per entry
    the key, a space, Kaldi's binary marker and the FST. A path is written to a temporary file
    beside it and renamed into place, so a failed write leaves nothing half-written; a path
    that is a symbolic link is written through (the file it names gets the archive)."""
    check_archive_keys(lattices)
    for key, lat in lattices.items():
        if not hasattr(lat, "kaldi_bytes"):  # e.g. None: ctc_lattices' where a search died
            raise OptionsError(f"lattice {key!r} is {type(lat).__name__}, not a Lattice or "
                               "CompactLattice (leave out utterances without one)")  # fmt: skip
        compact = hasattr(lat, "final_graph")
        finals = ((lat.final_graph, lat.final_acoustic) if compact  # (not final: (inf, inf))
                  else (lat.final, np.where(np.isinf(lat.final), np.inf, 0.0)))  # fmt: skip
        try:  # what read_kaldi_archive would refuse is not written
            check_weights(f"lattice {key!r}", (lat.graph_cost, lat.acoustic_cost), finals)
        except GraphError as exc:
            raise OptionsError(str(exc)) from None
    if hasattr(path, "write"):
        for key, lat in lattices.items():
            path.write(key.encode() + b" \0B" + lat.kaldi_bytes())
        return
    with replacing(path) as f:
        write_kaldi_archive(lattices, f)


_ASCII_SPACE = frozenset(" \t\n\r\v\f")  # what bytes.isspace() is, as the reader splits


def check_archive_keys(keys) -> None:
    """Archive keys are non-empty strings without ASCII whitespace (Kaldi ends a key at a space
    and skips the others before one; other characters, a no-break space too, are the key's, as
    `read_kaldi_archive` reads them)."""
    for key in keys:
        if not isinstance(key, str) or not key or any(c in _ASCII_SPACE for c in key):
            raise OptionsError(f"lattice key {key!r} must be non-empty, without whitespace")
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            raise OptionsError(f"lattice key {key!r} is not writable as UTF-8") from None


def check_archive_path(path: str | os.PathLike, inputs, option: str) -> None:
    """Before any work, refuse an archive path (given as ``option``) that cannot be written or
    would destroy something: an existing directory, a device, pipe or standard stream (the
    archive is written beside its path and renamed over it: a device would be replaced, a
    redirected stdout's file emptied), a folder that does not exist or cannot be written, a
    read-only file, a name too long for the temporary file beside it, or one of ``inputs``
    (paths of files or directories, None skipped): the same file, through any link, or a file
    inside an input directory (a graph's, also when the graph was given as its TLG.npz)."""
    from .graph.output import is_graph_dir
    from .safe_io import PARTIAL_SUFFIX

    path = Path(path)
    if path.is_dir():
        raise OptionsError(f"{option} {path}: is a directory; give the archive's file name")
    target = path.resolve()  # (a new file's too: it may be made inside a graph directory)
    given_at = os.path.abspath(path)  # /dev/stdout, /proc/self/fd/1: links to a stream's file
    stream = os.path.islink(given_at) and Path(given_at).parts[1:2] in (("dev",), ("proc",))
    if stream or (path.exists() and not target.is_file()):
        raise OptionsError(f"{option} {path}: not a regular file (a device, pipe or standard "
                           f"stream); give a file name: the archive is written whole, then "
                           f"renamed into place")  # fmt: skip
    if not target.parent.is_dir():
        raise OptionsError(f"{option} {path}: its folder {path.parent} does not exist")
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise OptionsError(f"{option} {path}: its folder {target.parent} cannot be written")
    if path.exists() and not os.access(target, os.W_OK):
        raise OptionsError(f"{option} {path}: the file is read-only; make it writable or give "
                           f"another file")  # fmt: skip
    try:
        name_max = os.pathconf(target.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    spare = name_max - len(f"..{os.getpid()}{PARTIAL_SUFFIX}")  # (`safe_io.replacing`'s name)
    if len(os.fsencode(target.name)) > spare:
        raise OptionsError(f"{option} {path}: the file name is too long; at most {spare} bytes "
                           f"here")  # fmt: skip
    for given in inputs:
        if given is None or not Path(given).exists():
            continue
        given = Path(given)
        if given.is_file() and is_graph_dir(given.parent):
            given = given.parent  # its graph directory: every file of it is the graph's
        inside = given.is_dir() and target.is_relative_to(given.resolve())
        same = path.exists() and not given.is_dir() and os.path.samefile(target, given)
        if inside or same:
            raise OptionsError(f"{option} {path} would overwrite the input {given}; "
                               f"give another file")  # fmt: skip


def read_kaldi_archive(path: str | os.PathLike, acoustic_scale: float = 1.0,
                       keep_compact: bool = False) -> dict:  # fmt: skip
    """``{key: Lattice}`` from a binary Kaldi archive of ``Lattice`` or ``CompactLattice``
    entries (as `write_kaldi_archive` and Kaldi's decoders and ``lattice-copy`` write).
    CompactLattices are expanded to state-level lattices (`CompactLattice.to_lattice`) unless
    ``keep_compact``. A file has no graph arcs or states (``graph_arc`` and ``node_state`` are
    -1); node frames are counted along the arcs (input label 0 = no frame). ``acoustic_scale``:
    what paths rank by (the file keeps acoustic costs unscaled). Raises `InputFileError` naming
    the entry and byte."""
    scale = acoustic_scale
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < math.inf:
        raise OptionsError(f"acoustic_scale must be a positive finite number; got {scale!r}")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise InputFileError(path, None, f"cannot read: {exc}") from None
    out, pos = {}, 0
    while (entry := archive_key(data, pos, path, out, "a binary lattice")) is not None:
        key, start = entry
        if data[start : start + 2] != b"\0B":
            raise InputFileError(path, None, f"byte {start}: entry {key!r} is not binary ('\\0B'"
                                             "): text-mode entries are not read, write the "
                                             "archive in binary")  # fmt: skip
        try:
            arrays, pos = read_lattice_bytes(data, start + 2, str(path))
            if arrays.get("compact"):
                compact = compact_from_fst(arrays, acoustic_scale)
                out[key] = compact if keep_compact else compact.to_lattice()
            else:
                out[key] = lattice_from_fst(arrays, acoustic_scale)
        except GraphError as exc:
            raise InputFileError(path, None, f"entry {key!r}: {exc}") from None
    return out

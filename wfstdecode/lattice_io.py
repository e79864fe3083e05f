"""Kaldi tables of lattices: `write_kaldi_archive` writes `Lattice` and `CompactLattice`
entries, `read_kaldi_archive` reads both kinds (Kaldi's ``lattice4`` and ``compactlattice44``
FSTs); files named as Kaldi names them (`kaldi_tables`: ``ark:``, ``scp:``, ``ark,scp:``,
gzip-compressed archives)."""

from __future__ import annotations

import contextlib
import gzip
import io
import math
import os
from pathlib import Path

import numpy as np

from .compact_lattice import compact_from_fst
from .errors import GraphError, InputFileError, OptionsError
from .fstio import check_weights, read_lattice_bytes
from .kaldi_tables import read_table, written_files
from .lattice import lattice_from_fst
from .safe_io import replacing


def write_kaldi_archive(lattices, path: str | os.PathLike | io.BufferedIOBase) -> None:
    """Write ``{key: Lattice or CompactLattice}`` as a binary Kaldi archive: per entry the key, a
    space, Kaldi's binary marker and the FST. ``path``: a file, a wspecifier (``ark:FILE``;
    ``ark,scp:FILE,SCRIPT`` writes the script of ``KEY FILE:OFFSET`` lines too), or a binary
    stream. A name ending in ``.gz`` is written gzip-compressed (as Kaldi's ``lat.1.gz``). Files
    are written to a temporary file beside them and renamed into place, so a failed write
    leaves nothing half-written; a symbolic link is written through (the file it names gets
    the archive)."""
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
        _write_entries(lattices, path)
        return
    archive, script = written_files(path, "the lattice archive")
    with contextlib.ExitStack() as files:  # (renamed into place only when both are whole)
        # the script's file is made first so that it is renamed last: never a new script over
        # the old archive
        script_file = None if script is None else files.enter_context(replacing(script))
        f = files.enter_context(replacing(archive))
        if archive.endswith(".gz"):
            f = files.enter_context(gzip.GzipFile("", "wb", fileobj=f, mtime=0))
        offsets = _write_entries(lattices, f)
        if script_file is not None:
            lines = "".join(f"{key} {archive}:{at}\n" for key, at in offsets.items())
            script_file.write(lines.encode())
            # whole before the archive is renamed: a full disk said now keeps the old pair
            script_file.flush()
            os.fsync(script_file.fileno())


def determinized_on_words(lattices: dict, beam: float, prefix: str = "") -> dict:
    """``{key: CompactLattice}``: each lattice determinized on words as Kaldi's decoders write
    them (`compact_lattice.determinize_pruned` at ``beam``; inf: exact); where the beam had to
    be lowered, its note goes to stderr as ``PREFIXKEY: note``."""
    import sys

    from .compact_lattice import determinize_pruned

    out = {}
    for key, lat in lattices.items():
        try:
            out[key] = determinize_pruned(lat, beam)[0]
        except OptionsError as exc:  # past its smallest beam (exactly tied paths): name whose
            raise OptionsError(f"{prefix}{key}: {exc} (or keep the lattices state-level: not "
                               "determinized)") from None  # fmt: skip
        for note in out[key].notes[len(lat.notes) :]:  # a lowered beam
            print(f"{prefix}{key}: {note}", file=sys.stderr)
    return out


def _write_entries(lattices, f) -> dict[str, int]:
    """Write the entries to ``f``; ``{key: byte of its object}`` (a script's offsets)."""
    offsets, at = {}, 0
    for key, lat in lattices.items():
        head = key.encode() + b" "
        body = b"\0B" + lat.kaldi_bytes()
        f.write(head + body)
        offsets[key] = at + len(head)
        at += len(head) + len(body)
    return offsets


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
    """Before any work, refuse an archive (a path or a wspecifier, given as ``option``) that
    `write_kaldi_archive` would not write, and a file of it that cannot be written or would
    destroy something (`check_output_file`)."""
    given = os.fspath(path)
    for file in filter(None, written_files(given, option)):
        check_output_file(file, inputs, option if file == given else f"{option} {given}:")


def check_output_file(path: str | os.PathLike, inputs, option: str) -> None:
    """Refuse an output file that cannot be written or would destroy something: an existing
    directory, a device, pipe or standard stream (the archive is written beside its path and
    renamed over it: a device would be replaced, a redirected stdout's file emptied), a folder
    that does not exist or cannot be written, a read-only file, a name too long for the
    temporary file beside it, or one of ``inputs`` (paths of files or directories, None
    skipped): the same file, through any link, or a file inside an input directory (a graph's,
    also when the graph was given as its TLG.npz)."""
    from .graph.output import is_graph_dir
    from .safe_io import PARTIAL_NAME_ROOM

    if os.fspath(path).strip() == "-":  # (Kaldi's standard output: not a file named '-')
        raise OptionsError(f"{option} -: standard output is not written: give a file name (the "
                           "file is written whole, then renamed into place)")  # fmt: skip
    path = Path(path)
    if path.is_dir():
        raise OptionsError(f"{option} {path}: is a directory; give a file name")
    target = path.resolve()  # (a new file's too: it may be made inside a graph directory)
    given_at = os.path.abspath(path)  # /dev/stdout, /proc/self/fd/1: links to a stream's file
    stream = os.path.islink(given_at) and Path(given_at).parts[1:2] in (("dev",), ("proc",))
    if stream or (path.exists() and not target.is_file()):
        raise OptionsError(f"{option} {path}: not a regular file (a device, pipe or standard "
                           f"stream); give a file name: the file is written whole, then "
                           f"renamed into place")  # fmt: skip
    if path.exists() and _is_standard_stream(target):  # `> FILE`: the results would be lost
        raise OptionsError(f"{option} {path}: standard output or error is redirected to this "
                           f"file; the file renamed over it would leave what is printed "
                           f"in a deleted file: give another file")  # fmt: skip
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
    spare = name_max - PARTIAL_NAME_ROOM  # (`safe_io.replacing`'s name)
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


def _is_standard_stream(path: Path) -> bool:
    """Whether the file ``path`` is the one standard output or error writes to."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            if os.path.samestat(st, os.fstat(fd)):
                return True
    return False


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

    def read_entry(data, start: int, file: str, key: str):
        if data[start : start + 2] != b"\0B":
            raise InputFileError(file, None, f"byte {start}: entry {key!r} is not binary ('\\0B'"
                                             "): text-mode entries are not read, write the "
                                             "archive in binary")  # fmt: skip
        try:
            arrays, end = read_lattice_bytes(data, start + 2, file)
            if arrays.get("compact"):
                compact = compact_from_fst(arrays, acoustic_scale)
                return (compact if keep_compact else compact.to_lattice()), end
            return lattice_from_fst(arrays, acoustic_scale), end
        except GraphError as exc:
            raise InputFileError(file, None, f"entry {key!r}: {exc}") from None

    return read_table(path, read_entry, "a binary lattice")

"""Kaldi tables as files: what a Kaldi rspecifier or wspecifier names, and reading the entries of
one, whatever the entries hold (`kaldi_matrices` reads matrices, `lattice_io` lattices).

Read (an rspecifier, or a file told by its suffix):

* ``ark:PATH`` or ``PATH.ark`` (or any other name) — an archive: ``KEY`` then an object, one
  after another; gzip-compressed (Kaldi's ``lat.1.gz``) is read as it is;
* ``scp:PATH`` or ``PATH.scp`` — a script: lines ``KEY FILE[:OFFSET]`` (Kaldi's ``ark,scp:``
  writers give ``OFFSET``, the byte of the object in ``FILE``); a relative ``FILE`` is read from
  the current directory, as Kaldi does.

Write (a wspecifier): ``ark:PATH`` (or a plain path), or ``ark,scp:PATH,SCRIPT`` for an archive
and its script. Options before the colon (``ark,s,cs:``, ``ark,b:``; in any order, as Kaldi
takes them: ``b,ark:``) are accepted where they change nothing here; text output (``ark,t:``)
is refused, entries are written in binary. Kaldi's pipe forms (``ark:cmd |``, ``ark:-``,
``ark:``) and row ranges (``FILE:OFFSET[0:9]``) are refused: tables are files here (a pipe
named by a path, ``ark:/dev/stdin`` or the shell's ``ark:<(cmd)``, is read as one). Errors
are `InputFileError` (reading: the file, the entry, its byte or the script's line) or
`OptionsError` (a specifier that cannot be written).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import mmap
import os
import re
import zlib
from pathlib import Path

from .errors import InputFileError, OptionsError

__all__ = [
    "archive_key",
    "is_kaldi_table",
    "read_table",
    "table_files",
    "written_files",
]

# options before the colon, in any order, one of them ark or scp (Kaldi's own also take b,ark:)
_SPECIFIER = re.compile(r"^((?:[a-z]+,)*(?:ark|scp)(?:,[a-z]+)*):(.*)$", re.DOTALL)
_GZIP_MAGIC = b"\x1f\x8b"
_ASCII_SPACE = re.compile(rb"[ \t\n\r\v\f]")  # what bytes.isspace() is
_PIPE_HINT = ("Kaldi's pipes (ark:cmd |, ark:-) are not read: write the table to a file "
              "(ark:out.ark) and give that, or name the pipe by a path (ark:/dev/stdin, "
              "ark:<(cmd)); a gzip-compressed archive (lat.1.gz) is read as it is")  # fmt: skip


def is_kaldi_table(spec: str | os.PathLike) -> bool:
    """Whether ``spec`` names a Kaldi table (``ark:``/``scp:``, or a ``.ark``, ``.scp`` or
    gzip-compressed ``.gz`` file: Kaldi's ``lat.1.gz``)."""
    text = os.fspath(spec)
    return bool(_SPECIFIER.match(text)) or text.lower().endswith((".ark", ".gz", ".scp"))


def table_files(spec: str | os.PathLike) -> list[str]:
    """The files a read of ``spec`` opens (the script and the archives it names), for checks
    that an output would not overwrite an input; ``[spec]`` when it is not a Kaldi table."""
    if not is_kaldi_table(spec):
        return [os.fspath(spec)]
    kind, path = _read_specifier(os.fspath(spec))
    if kind == "ark":
        return [path]
    try:
        return [path, *dict.fromkeys(target for _, _, target, _ in _script_lines(path))]
    except InputFileError:
        return [path]  # (the read says what is wrong)


def read_table(spec: str | os.PathLike, read_entry, what: str) -> dict:
    """``{key: object}`` of the Kaldi table ``spec`` (an rspecifier or a path: module docstring),
    in the table's order. ``read_entry(data, byte, path, key)`` reads one object starting at
    ``byte`` of ``data`` and returns it with the byte after it; ``what``: the object, for
    errors ("a matrix")."""
    kind, path = _read_specifier(os.fspath(spec))
    out: dict = {}
    if kind == "ark":
        with _Bytes(path) as data:
            pos = 0
            while (entry := archive_key(data.bytes, pos, path, out, what)) is not None:
                key, start = entry
                out[key], pos = read_entry(data.bytes, start, path, key)
        return out
    with contextlib.ExitStack() as files:
        opened: dict[str, _Bytes] = {}
        for line_no, key, target, offset in _script_lines(path):
            if key in out:
                raise InputFileError(path, line_no, f"the key {key!r} appears twice (keys name "
                                                    "utterances)")  # fmt: skip
            if target not in opened:
                try:
                    opened[target] = files.enter_context(_Bytes(target))
                except InputFileError as exc:
                    raise InputFileError(path, line_no, str(exc)) from None
            data = opened[target].bytes
            if offset >= len(data):
                raise InputFileError(path, line_no, f"offset {offset} is beyond the end of "
                                                    f"{target} ({len(data)} bytes)")  # fmt: skip
            out[key] = read_entry(data, offset, target, key)[0]
    return out


def written_files(spec: str | os.PathLike, option: str) -> tuple[str, str | None]:
    """``(archive, script or None)``: the files the wspecifier ``spec`` (module docstring) names;
    refused (`OptionsError` naming ``option``) where it asks for what is not written."""
    text = os.fspath(spec)
    match = _SPECIFIER.match(text)
    if not match:
        if not text.strip():
            raise OptionsError(f"{option} {text!r}: names no file; give the archive's file name")
        if text.strip() == "-":
            raise OptionsError(f"{option} -: standard output is not written: give a file (the "
                               "archive is written whole, then renamed into place)")  # fmt: skip
        return text, None
    kinds = set(match.group(1).split(","))
    paths = match.group(2)
    if "t" in kinds:
        raise OptionsError(f"{option} {text}: text archives (,t) are not written; the archive "
                           "is binary (Kaldi's copy tools print it as text: ark,t:-)")  # fmt: skip
    if "ark" not in kinds:
        raise OptionsError(f"{option} {text}: a script alone (scp:) names where existing "
                           "entries go; give ark:FILE or ark,scp:FILE,SCRIPT")  # fmt: skip
    if "scp" in kinds:
        archive, comma, script = paths.partition(",")
        if not comma or "," in script or not archive.strip() or not script.strip():
            raise OptionsError(f"{option} {text}: ark,scp: takes two files, the archive's and "
                               "the script's: ark,scp:FILE.ark,FILE.scp")  # fmt: skip
    else:
        archive, script = paths, None
    for path in (archive,) if script is None else (archive, script):
        stripped = path.strip()  # (Kaldi writes "" to standard output, as "-")
        if stripped in ("", "-") or stripped.startswith("|") or stripped.endswith("|"):
            raise OptionsError(f"{option} {text}: pipes and standard output are not written: "
                               "give a file (the archive is written whole, then renamed into "
                               "place)")  # fmt: skip
        if stripped != path:  # (a script's reader strips its file names: it would not read back)
            raise OptionsError(f"{option} {text}: the file name {path!r} begins or ends with "
                               "a space")  # fmt: skip
    if script is not None and archive.endswith(".gz"):
        raise OptionsError(f"{option} {text}: a script's byte offsets cannot point into a "
                           "gzip-compressed archive; leave out ,scp or .gz")  # fmt: skip
    if script is not None and os.path.realpath(script) == os.path.realpath(archive):
        raise OptionsError(f"{option} {text}: the archive and the script are the same file")
    return archive, script


def archive_key(raw, pos: int, path, seen, what: str) -> tuple[str, int] | None:
    """The key of the Kaldi archive entry at byte ``pos`` (after any whitespace, as Kaldi's
    readers skip it) and the byte of its object, or None at the end. A key ends, as Kaldi's, at
    a space or a tab (taken) or a newline (left: a text object may follow); it is UTF-8 and not
    in ``seen``; else `InputFileError` naming the byte (``what``: the object expected after it)."""
    while pos < len(raw) and raw[pos : pos + 1].isspace():
        pos += 1
    if pos == len(raw):
        return None
    space = _ASCII_SPACE.search(raw, pos)  # (a corrupt archive's megabytes: not byte by byte)
    end = len(raw) if space is None else space.start()
    after = raw[end : end + 1]  # Kaldi's reader takes ' ' or a tab (consumed), or a newline
    if after not in (b" ", b"\t", b"\n"):  # (left: a text object may follow it)
        raise InputFileError(path, None, f"byte {pos}: expected 'KEY ' and {what} (a Kaldi "
                                         "archive entry)")  # fmt: skip
    try:
        key = bytes(raw[pos:end]).decode("utf-8")
    except UnicodeDecodeError:
        raise InputFileError(path, None, f"byte {pos}: the key {bytes(raw[pos:end])!r} is not "
                                         "UTF-8") from None  # fmt: skip
    if key in seen:
        raise InputFileError(path, None, f"byte {pos}: the key {key!r} appears twice (keys name "
                                         "utterances)")  # fmt: skip
    return key, end + (after != b"\n")


def _read_specifier(spec: str) -> tuple[str, str]:
    """``("ark" | "scp", path)``; pipes and standard input refused."""
    match = _SPECIFIER.match(spec)
    kinds, path = (set(match.group(1).split(",")), match.group(2)) if match else (set(), spec)
    if {"ark", "scp"} <= kinds:
        raise InputFileError(spec, None, "ark,scp: names an archive and its script to write; "
                                         "read ark:FILE or scp:SCRIPT")  # fmt: skip
    if not kinds:
        kinds = {"scp" if Path(spec).suffix.lower() == ".scp" else "ark"}
    kind = "scp" if "scp" in kinds else "ark"
    if path.strip() in ("", "-") or path.rstrip().endswith("|"):
        raise InputFileError(spec, None, _PIPE_HINT)
    return kind, path


class _Bytes:
    """A file's bytes, memory-mapped (an archive of network outputs may hold gigabytes); a
    gzip-compressed one decompressed into memory."""

    def __init__(self, path: str):
        self.path, self.bytes, self._map = path, b"", None

    def __enter__(self) -> _Bytes:
        try:
            with open(self.path, "rb") as f:
                if os.fstat(f.fileno()).st_size:
                    self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                    self.bytes = self._map
                else:  # (mmap refuses an empty file; a pipe is not a table either)
                    self.bytes = f.read()
        except (OSError, ValueError) as exc:
            raise InputFileError(self.path, None, f"cannot read: {exc}") from None
        if self.bytes[:2] == _GZIP_MAGIC:
            try:
                self.bytes = self._gunzipped()
            except (OSError, EOFError, zlib.error) as exc:
                self.__exit__()
                raise InputFileError(self.path, None, f"gzip-compressed, and cannot be "
                                                      f"decompressed: {exc}") from None  # fmt: skip
            except InputFileError:
                self.__exit__()
                raise
        return self

    def _gunzipped(self) -> bytearray:
        """The gzip stream's bytes, decompressed in chunks up to the expansion an ``.npz`` is
        allowed (`safe_io.MAX_EXPANSION`): deflate reaches ~1000x on constant data, and a few
        MB of concatenated gzip members of zeros asked for gigabytes before their first key."""
        from .safe_io import EXPANSION_FLOOR, MAX_EXPANSION

        limit = max(EXPANSION_FLOOR, MAX_EXPANSION * len(self.bytes))
        out = bytearray()
        with gzip.GzipFile(fileobj=io.BytesIO(self.bytes)) as f:
            while chunk := f.read(1 << 22):
                out += chunk
                if len(out) > limit:
                    raise InputFileError(
                        self.path,
                        None,
                        f"gzip-compressed, and expands past {limit:,} bytes "
                        f"from {len(self.bytes):,}, over {MAX_EXPANSION}x: refused as a likely "
                        "gzip bomb (gunzip it and give the archive itself: a plain .ark is "
                        "memory-mapped)",
                    )
        return out

    def __exit__(self, *exc) -> None:
        if self._map is not None:
            with contextlib.suppress(BufferError):  # an array on it lives on in a traceback:
                self._map.close()  # (then unmapped with it)


def _script_lines(path: str):
    """``(line_no, key, file, byte offset)`` per line of a script."""
    from .textfiles import kaldi_fields, text_lines

    for line_no, line in text_lines(path, "Kaldi script"):
        fields = kaldi_fields(line)
        if not fields:
            continue
        if len(fields) < 2:
            raise InputFileError(path, line_no, f"expected 'KEY FILE[:OFFSET]'; got {line!r}")
        key, target = fields[0], fields[1].strip()
        if target.endswith("|") or target == "-":
            raise InputFileError(path, line_no, f"{target!r} is a pipe or standard input, which "
                                                "is not read: write it to a file")  # fmt: skip
        if target.endswith("]"):
            raise InputFileError(path, line_no, f"{target!r}: row and column ranges are not "
                                                "read; give whole entries")  # fmt: skip
        file, colon, offset = target.rpartition(":")
        if colon and offset.isascii() and offset.isdigit():  # (Kaldi's: ASCII digits; not '²')
            yield line_no, key, file, int(offset)
        else:
            yield line_no, key, target, 0

"""Readers for files that may be corrupt or hostile: ``.npz`` members with bounded memory, and
JSON objects. Both raise the caller's `WfstDecodeError` (built by ``fail(message)``, which names
the file), never a zipfile, zlib, numpy or json exception. And `replacing`, through which every
output file is written: all of it or nothing.

No size read from an ``.npz`` is allocated before it has been checked against the bytes on disk:

* only the members a caller names are opened; any others are never decompressed;
* a member must be a stored or deflated, unencrypted ``.npy``, and its zip entry's size must be
  exactly its ``.npy`` header plus shape x itemsize, so neither can promise more than the other;
* a stored member cannot be larger than the archive, and the members read may expand to at most
  `MAX_EXPANSION` times the archive's size (or `EXPANSION_FLOOR`): deflate reaches ~1000x on
  constant data, which is how a 1 MB file asks for gigabytes;
* data is decompressed in chunks straight into the array; zipfile stops at the declared size and
  checks the CRC, so a stream longer or shorter than declared is an error, not an allocation;
* object dtypes (pickles), zero-sized items and ``U`` strings holding non-characters are refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import stat
import struct
import threading
import tokenize
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

import numpy as np

from .errors import WfstDecodeError

Fail = Callable[[str], WfstDecodeError]

PARTIAL_SUFFIX = ".wfstdecode-partial"  # an output being written (`replacing`)
# what `replacing`'s temporary file adds to a name: ".NAME.TID" + PARTIAL_SUFFIX, the writing
# thread's id of at most 10 digits (a worker's may be longer than this process's id)
PARTIAL_NAME_ROOM = len(f"..{2**32 - 1}{PARTIAL_SUFFIX}")
MAX_EXPANSION = 100  # numpy's savez writes stored members (1x); savez_compressed gives ~1-5x
EXPANSION_FLOOR = 64 << 20  # small archives may expand this far whatever their ratio
MAX_JSON_BYTES = 16 << 20  # metadata and build reports are a few KB
_CHUNK = 1 << 22
_NPY_MAGIC = b"\x93NUMPY"
_OPENFST_MAGIC = (2125659606).to_bytes(4, "little")  # (`fstio.FST_MAGIC`: a TLG.fst given)
# a Kaldi archive's first entry: a key, a space, then binary ("\0B") or a text matrix ("[")
_KALDI_ARCHIVE_START = re.compile(rb"[!-~]{1,200} (\0B|\s*\[)")
_LOCAL_HEADER_SIZE = 30
_PADDING_FIELD_ID = 0xD935  # the extra-field id Android's zipalign uses for alignment padding
_MAX_NPY_HEADER = 10_000  # numpy's own limit (header lengths beyond it need allow_pickle)
# What zipfile and numpy's header parser raise on corrupt bytes (GraphError etc. are ValueErrors,
# so callers' errors are re-raised before this tuple is tried). TokenError: numpy retries a
# header that is not a Python literal as Python 2 source; SyntaxError: numpy parses repeat counts
# in dtype strings such as "3f4," with ast.literal_eval.
_CORRUPT = (
    zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, TypeError, OverflowError,
    NotImplementedError, struct.error, RecursionError, tokenize.TokenError, SyntaxError,
)  # fmt: skip


class NpzArchive:
    """An ``.npz`` opened for bounded reads of the members named in ``members`` (without the
    ``.npy`` suffix). Use as a context manager; every failure is raised as ``fail(message)``."""

    def __init__(self, path: str | os.PathLike, members: Iterable[str], fail: Fail):
        self.path, self.fail = str(path), fail
        self._requested = tuple(members)
        try:
            self._zip = zipfile.ZipFile(path)
        except (IsADirectoryError, FileNotFoundError, PermissionError) as exc:
            raise fail(f"cannot read: {exc.strerror}") from None
        except _CORRUPT as exc:
            raise fail(self._not_a_zip(exc)) from None
        try:
            self.size = os.fstat(self._zip.fp.fileno()).st_size
            self._infos, self.others = self._check_members(set(members))
        except BaseException:
            self._zip.close()
            raise

    def __enter__(self) -> NpzArchive:
        return self

    def __exit__(self, *exc_info) -> None:
        self._zip.close()

    @property
    def names(self) -> set[str]:
        """The requested members this archive holds."""
        return set(self._infos)

    def say_misspelled(self, stacklevel: int = 2) -> None:
        """Warn of a member not requested that looks like one that is (``lens`` for ``lengths``:
        without it the padding would be decoded). ``stacklevel`` counts from the caller."""
        import difflib

        for name in self.others:
            close = difflib.get_close_matches(name, self._requested, n=1, cutoff=0.7)
            if close and close[0][0] == name[0]:  # (not 'logits', 'targets', 'posts')
                warnings.warn(f"{self.path}: array {name!r} is not read (the arrays read are "
                              f"named {', '.join(self._requested)}): did you mean {close[0]!r}?",
                              stacklevel=stacklevel + 1)  # fmt: skip

    def read(
        self, name: str, kinds: str, *, shape: tuple[int, ...] | None = None,
        ndim: int | None = None, max_bytes: int | None = None,
    ) -> np.ndarray:  # fmt: skip
        """Member ``name`` as an array whose dtype kind is one of ``kinds`` (e.g. ``"iu"``), with
        the given ``shape`` or ``ndim`` if any; checked against its header before allocation."""
        info = self._infos[name]
        if max_bytes is not None and info.file_size > max_bytes:
            raise self.fail(f"{name} is {info.file_size:,} bytes (at most {max_bytes:,} expected)")
        try:
            with self._zip.open(info) as f:
                got_shape, fortran, dtype = _read_npy_header(f)
                self._check_header(name, got_shape, dtype, kinds, shape, ndim)
                nbytes = math.prod(got_shape) * dtype.itemsize
                if f.tell() + nbytes != info.file_size:
                    raise self.fail(
                        f"{name}: its .npy header declares {nbytes:,} bytes of {dtype} "
                        f"{got_shape}, but its zip entry holds {info.file_size - f.tell():,}"
                    )
                flat = np.empty(math.prod(got_shape), dtype)
                _read_into(f, memoryview(flat.view(np.uint8)))
        except WfstDecodeError:
            raise
        except _CORRUPT as exc:
            raise self.fail(f"{name} is corrupt ({type(exc).__name__}: {exc})") from None
        if dtype.kind == "U":
            _check_code_points(flat, name, self.fail)
        return flat.reshape(got_shape, order="F" if fortran else "C")

    def map(
        self, name: str, kinds: str, *, shape: tuple[int, ...] | None = None,
        ndim: int | None = None,
    ) -> np.ndarray:  # fmt: skip
        """Member ``name`` as `read` gives it, but memory-mapped copy-on-write when it is stored
        uncompressed with its data aligned for its dtype: processes that map one file share its
        pages in the page cache instead of holding a copy each. Other members are read. The CRC
        is checked over the mapped bytes, so a mapped member is as trusted as a read one."""
        info = self._infos[name]
        if info.compress_type != zipfile.ZIP_STORED:
            return self.read(name, kinds, shape=shape, ndim=ndim)
        try:
            with self._zip.open(info) as f:
                got_shape, fortran, dtype = _read_npy_header(f)
                header = f.tell()
            self._check_header(name, got_shape, dtype, kinds, shape, ndim)
            count = math.prod(got_shape)
            if header + count * dtype.itemsize != info.file_size:
                return self.read(name, kinds, shape=shape, ndim=ndim)  # read() names the mismatch
            start = _member_data_offset(self._zip.fp, info)
            if count == 0 or dtype.kind == "U" or (start + header) % dtype.alignment:
                return self.read(name, kinds, shape=shape, ndim=ndim)
            with open(self.path, "rb") as raw:
                raw.seek(start)
                crc = zlib.crc32(raw.read(header))
            flat = np.memmap(self.path, dtype, mode="c", offset=start + header, shape=(count,))
            for lo in range(0, flat.nbytes, _CHUNK):
                crc = zlib.crc32(flat.view(np.uint8)[lo : lo + _CHUNK], crc)
        except WfstDecodeError:
            raise
        except _CORRUPT as exc:
            raise self.fail(f"{name} is corrupt ({type(exc).__name__}: {exc})") from None
        if crc != info.CRC:
            raise self.fail(f"{name} is corrupt (its bytes do not match the zip entry's CRC)")
        return flat.reshape(got_shape, order="F" if fortran else "C")

    def read_lengths(self, batch: int, frames: int) -> np.ndarray:
        """The optional ``lengths`` member, (batch,) ints in 0..frames; all ``frames`` when
        absent."""
        if "lengths" not in self.names:
            return np.full(batch, frames, dtype=np.int64)
        lengths = self.read("lengths", "iu", ndim=1)
        if lengths.shape != (batch,):
            hint = (f" (log_probs read as {batch} utterances of {frames} frames: is it "
                    "time-major, (T, B, V)? it must be (B, T, V))" if lengths.shape == (frames,)
                    else "")  # fmt: skip
            raise self.fail(f"lengths has shape {lengths.shape}; expected ({batch},){hint}")
        bad = (lengths < 0) | (lengths > frames)
        if bad.any():
            b = int(bad.argmax())
            raise self.fail(f"lengths[{b}] = {lengths[b]} is outside 0..T={frames}")
        return lengths.astype(np.int64)

    def read_texts(self, name: str, size: int) -> list[str] | None:
        """The optional member ``name`` as ``size`` strings (bytes decoded as UTF-8, numbers
        written out); None when absent. Bytes that are not UTF-8 are refused, naming the entry
        (as the text files' reader refuses them): replaced, a reference's word was silently
        another (every such word an error) and two ids could become one."""
        if name not in self.names:
            return None
        values = self.read(name, "USiu", shape=(size,)).tolist()
        return [utf8_text(x, f"{name}[{k}]", self.fail) if isinstance(x, bytes) else str(x)
                for k, x in enumerate(values)]  # fmt: skip

    def read_ids(self, size: int) -> list[str] | None:
        """The optional ``ids`` member (`read_texts`): ``size`` utterance names, each non-empty
        and none twice (results and lattices are keyed by them); None when absent."""
        ids = self.read_texts("ids", size)
        if ids is None:
            return None
        seen: dict[str, int] = {}
        for k, utt in enumerate(ids):
            if not utt.strip():
                raise self.fail(f"ids[{k}] is {utt!r}: utterance ids must not be empty")
            if utt in seen:
                raise self.fail(f"ids[{k}] {utt!r} is ids[{seen[utt]}] too: ids must be distinct")
            seen[utt] = k
        return ids

    def _check_members(self, wanted: set[str]):
        infos, others = {}, []
        for info in self._zip.infolist():
            name = info.filename.removesuffix(".npy")
            if name not in wanted or not info.filename.endswith(".npy"):
                others.append(name)  # listed in messages, never decompressed
                continue
            if name in infos:
                raise self.fail(f"member {info.filename} appears twice")
            if info.flag_bits & 0x1:
                raise self.fail(f"member {info.filename} is encrypted")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise self.fail(
                    f"member {info.filename} uses zip compression method {info.compress_type} "
                    f"(only stored and deflated members are read)"
                )
            stored = info.compress_type == zipfile.ZIP_STORED
            if info.compress_size > self.size or (stored and info.file_size != info.compress_size):
                raise self.fail(
                    f"member {info.filename} declares {info.file_size:,} bytes "
                    f"({info.compress_size:,} compressed) in a {self.size:,}-byte file"
                )
            infos[name] = info
        total = sum(info.file_size for info in infos.values())
        if total > max(EXPANSION_FLOOR, MAX_EXPANSION * self.size):
            raise self.fail(
                f"its arrays expand to {total:,} bytes from a {self.size:,}-byte file, over "
                f"{MAX_EXPANSION}x: refused as a likely zip bomb (an uncompressed np.savez "
                f"file is always accepted)"
            )
        return infos, others

    def _check_header(self, name, got, dtype, kinds, shape, ndim) -> None:
        if dtype.hasobject or dtype.kind not in kinds or dtype.itemsize == 0:
            raise self.fail(f"{name} has dtype {dtype}; expected kind {' or '.join(kinds)}")
        if any(d < 0 for d in got):
            raise self.fail(f"{name} has a negative dimension {got}")
        if shape is not None and tuple(got) != tuple(shape):
            raise self.fail(f"{name} has shape {got}; expected {tuple(shape)}")
        if ndim is not None and len(got) != ndim:
            raise self.fail(f"{name} has shape {got}; expected {ndim} dimensions")

    def _not_a_zip(self, exc: Exception) -> str:
        try:
            regular = stat.S_ISREG(os.stat(self.path).st_mode)
            with open(self.path, "rb") as f:
                head = f.read(256)
        except OSError:
            regular, head = True, b""
        if not head:
            return "the file is empty (not an .npz archive)"
        if _KALDI_ARCHIVE_START.match(head):
            return ("this looks like a Kaldi archive, not an .npz archive (log-probs: name it "
                    f"ark:{self.path})")  # fmt: skip
        if not regular:  # (a pipe's bytes cannot be sought in, whatever they hold)
            return ("not a regular file (a pipe or standard input?): an .npz archive is read by "
                    "seeking in it; write it to a file and give that")  # fmt: skip
        if head[: len(_NPY_MAGIC)] == _NPY_MAGIC:
            return "this is a single .npy array, not an .npz archive"
        if head[:4] == _OPENFST_MAGIC:
            return ("this is an OpenFst file, not an .npz archive (for a graph: give the "
                    "graph directory or its TLG.npz)")  # fmt: skip
        return f"not an .npz archive ({type(exc).__name__}: {exc})"


# what JSON leaves raw in strings with ensure_ascii=False and a line cannot hold: the line
# separators `str.splitlines` splits at, and lone surrogates (a file name's bytes that are not
# UTF-8, as Python decodes them), which no UTF-8 stream can write
_RAW_IN_JSON = re.compile("[\u2028\u2029\x85\ud800-\udfff]")


def utf8_text(data: bytes, what: str, fail: Fail) -> str:
    """``data`` decoded as UTF-8; ``fail`` names ``what`` and the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(f"{what}: byte 0x{data[exc.start]:02x} at {exc.start} is not UTF-8 (store "
                   "text as str, or bytes encoded as UTF-8)") from None  # fmt: skip


def json_line(value) -> str:
    """``value`` as one line of JSON (non-ASCII kept) that every line splitter reads as one line
    and UTF-8 can write: the line separators JSON leaves raw in strings (U+2028, U+2029, U+0085;
    `str.splitlines` splits at them) and lone surrogates (``os.fsdecode`` of a file name that is
    not UTF-8) escaped (``json.loads`` gives the same string back)."""
    return json_text(value)


def json_text(value, indent: int | None = None) -> str:
    """``json.dumps(value, ensure_ascii=False, indent=indent)`` with what `json_line` escapes
    escaped: text that UTF-8 can always write (a path's bytes that are not UTF-8 too)."""
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_HEADER_WARNINGS = threading.Lock()


def _read_npy_header(f) -> tuple[tuple[int, ...], bool, np.dtype]:
    version = np.lib.format.read_magic(f)
    readers = {(1, 0): np.lib.format.read_array_header_1_0,
               (2, 0): np.lib.format.read_array_header_2_0}  # fmt: skip
    if version not in readers:
        raise ValueError(f".npy format version {version} is not supported")
    # catch_warnings swaps the process-wide filter list: two threads' blocks overlapping left
    # the "ignore" in place for good (every thread's warnings lost); one block at a time
    with _HEADER_WARNINGS, warnings.catch_warnings():  # e.g. "created on Python 2": the header
        warnings.simplefilter("ignore")  # is still checked
        return readers[version](f, max_header_size=_MAX_NPY_HEADER)


def _member_data_offset(fp, info: zipfile.ZipInfo) -> int:
    """File offset of a member's first data byte: after its local header, whose name and extra
    field lengths may differ from the central directory's."""
    fp.seek(info.header_offset)
    local = fp.read(_LOCAL_HEADER_SIZE)
    if len(local) != _LOCAL_HEADER_SIZE or local[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"no local header for {info.filename}")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    return info.header_offset + _LOCAL_HEADER_SIZE + name_len + extra_len


def write_aligned_npz(f, arrays: dict[str, np.ndarray], align: int = 64) -> None:
    """Write ``arrays`` as an uncompressed ``.npz`` (``np.load`` reads it) whose members' data
    start at multiples of ``align`` bytes in the file, so that `NpzArchive.map` can map them
    (``np.savez`` leaves members at arbitrary offsets). The padding is an extra field of the
    local header, which zip readers skip."""
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, value in arrays.items():
            arr = np.asanyarray(value)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            # zipfile appends a 20-byte zip64 field to the local header (force_zip64 below);
            # the .npy header itself is padded by numpy to a multiple of 64 bytes.
            fixed = zf.fp.tell() + _LOCAL_HEADER_SIZE + len(info.filename.encode()) + 20
            pad = -(fixed + 4) % align
            info.extra = struct.pack("<HH", _PADDING_FIELD_ID, pad) + bytes(pad)
            with zf.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, arr, allow_pickle=False)


def _read_into(f, buf: memoryview) -> None:
    pos = 0
    while pos < len(buf):
        n = f.readinto(buf[pos : pos + _CHUNK])
        if not n:
            raise EOFError(f"data ends after {pos:,} of {len(buf):,} bytes")
        pos += n


def _check_code_points(flat: np.ndarray, name: str, fail: Fail) -> None:
    """NumPy stores ``U`` strings as UTF-32 without checking them; ``tolist`` then fails with a
    SystemError on a value past U+10FFFF, and a lone surrogate cannot be printed."""
    codes = flat.view(np.dtype(np.uint32).newbyteorder(flat.dtype.byteorder))
    if ((codes > 0x10FFFF) | ((codes >= 0xD800) & (codes < 0xE000))).any():
        raise fail(f"{name} holds strings that are not valid Unicode")


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes (hex), read in blocks."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def json_loads(text: str):
    """``json.loads``, except that an object naming a key twice raises ValueError (JSON allows
    it and Python keeps the last: a typo'd file would lose the first silently)."""
    return json.loads(text, object_pairs_hook=_unique_keys)


def _unique_keys(pairs: list) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key!r} appears twice in one object")
        out[key] = value
    return out


def json_object(text: str, what: str, fail: Fail) -> dict:
    """``text`` parsed as a JSON object (`json_loads`: no key twice); ``what`` names it in the
    error."""
    try:
        value = json_loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: deeply nested arrays
        raise fail(f"{what} is not valid JSON ({type(exc).__name__}: {exc})") from None
    if not isinstance(value, dict):
        raise fail(f"{what} is not a JSON object (got {type(value).__name__})")
    return value


def read_json_file(path: str | os.PathLike, fail: Fail) -> dict:
    """The JSON object in the file ``path`` (UTF-8, at most `MAX_JSON_BYTES`)."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size > MAX_JSON_BYTES:
                raise fail(f"larger than {MAX_JSON_BYTES:,} bytes: not a file wfstdecode wrote")
            data = f.read()
    except OSError as exc:
        raise fail(f"cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(f"not UTF-8 text ({exc})") from None
    return json_object(text, "the file", fail)


@contextlib.contextmanager
def replacing(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new contents into: a temporary file beside it
    (``.NAME.TID`` + `PARTIAL_SUFFIX`, TID the writing thread's native id), synced and renamed
    over ``path`` when the block ends without an error, removed when it raises. So a failed
    write (a full disk, Ctrl-C) leaves ``path`` as it was, and whoever has the old file open or
    memory-mapped (a graph loaded with ``mmap=True`` and saved to its own file) keeps reading
    it. A symbolic link is written through (the file it names is replaced). An existing file's
    permissions are kept (a private 0600 file stays private). OSErrors name ``path``, not the
    temporary file."""
    given = os.fspath(path)
    target = os.path.realpath(given)
    folder, name = os.path.split(target)
    # the thread's id, not the process's: two threads writing one path would share the file
    # (the main thread's is the process id; both are unique among live threads of the system)
    tmp = os.path.join(folder, f".{name}.{threading.get_native_id()}{PARTIAL_SUFFIX}")
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode) & 0o777  # (no set-id bits copied)
    except OSError:  # a new file: the umask's mode
        mode = None
    try:
        with open(tmp, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # our own partial file, never the user's
        if isinstance(exc, OSError) and exc.errno and exc.filename in (None, tmp):
            raise OSError(exc.errno, exc.strerror, given) from None
        raise

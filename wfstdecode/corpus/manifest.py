"""Which shards a corpus decode covers: a manifest (JSONL), a directory, a glob or one file.

Every shard gets an output name: its path relative to the directory the spec names (the
directory itself, the manifest's directory, a glob's directory before its first wildcard, a
file's directory), without its suffix (``.npz``; ``.ark`` or ``.ark.gz``, a Kaldi archive of CTC
log-probs), so that ``a/part0.npz`` and ``b/part0.npz`` write ``OUT/a/part0.jsonl`` and
``OUT/b/part0.jsonl`` rather than one file twice, and shards added later (a new ``day2/``) leave
the names of those done alone. A manifest entry outside its directory moves the base up to a
directory holding both.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputFileError, WfstDecodeError
from ..safe_io import json_object
from ..textfiles import text_lines

SHARD_SUFFIXES = (".npz",)  # what a decoder reads unless it says (`CtcCorpusDecoder`: ".ark")


@dataclass(frozen=True)
class Shard:
    """One input file: ``path`` (absolute) and ``name``, its output path under OUT without a
    suffix (``/``-separated)."""

    path: Path
    name: str


def read_manifest(
    spec: str | os.PathLike, suffixes: tuple[str, ...] = SHARD_SUFFIXES
) -> list[Shard]:
    """The shards ``spec`` lists, in order:

    * a ``.jsonl`` file: one JSON object per line with ``"shard": PATH`` (relative paths are
      relative to the manifest's directory; blank lines are skipped);
    * a directory: every file below it with one of the ``suffixes``, sorted;
    * a file with one of them: that one shard;
    * otherwise a glob pattern (``**`` recursive), sorted.

    A path listed twice, or a pattern or directory that matches nothing, raises; a listed file
    that is missing or unreadable is not checked here — it fails as that shard's error, so one
    bad entry does not stop the others."""
    text = os.fspath(spec)
    path = Path(text)
    kinds = " or ".join(suffixes)
    if path.is_dir():
        paths, base = _files_below(path, suffixes), path
        if not paths:
            raise WfstDecodeError(f"{path}: no {kinds} file in this directory")
    elif path.is_file() and _shard_suffix(path.name, suffixes):
        paths, base = [path], path.parent
    elif _is_script(path):  # (its matrices may change in files no ledger would check)
        raise WfstDecodeError(f"{path}: {_SCRIPT_REFUSED}")
    elif path.is_file():
        paths, base = _read_jsonl(path), path.parent
    else:
        paths = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
        if not paths:
            what = "no such file" if not glob.has_magic(text) else "no file matches this pattern"
            raise WfstDecodeError(f"{text}: {what}")
        base = Path(*_prefix(Path(text).parts) or ".")
        script = next((p for p in paths if _is_script(p)), None)
        if script is not None:
            raise WfstDecodeError(f"{text}: matches {script}: {_SCRIPT_REFUSED}")
    return _name_shards([p.absolute() for p in paths], text, suffixes, base.absolute())


# a shard's input is identified (and a finished one skipped) by its own file's size, mtime and
# digest: a script's would not change when the archives it names do
_SCRIPT_REFUSED = ("a Kaldi script is not a shard: give the archives it names (a directory, a "
                   "glob or a manifest of them)")  # fmt: skip


def _is_script(path: Path) -> bool:
    """Whether ``path`` names a Kaldi script (``.scp``, as `kaldi_tables` tells one)."""
    return path.suffix.lower() == ".scp"


def _shard_suffix(name: str, suffixes: tuple[str, ...]) -> str:
    """The end of the file ``name`` that is the longest of ``suffixes`` in any case (a
    two-part one such as ``.ark.gz`` too, which `Path.suffix` would not see; ``x.NPZ`` is read
    as an ``.npz``, as `decode` reads it), or ""."""
    lower = name.lower()
    found = [s for s in suffixes if lower.endswith(s) and len(name) > len(s)]  # (".npz": none,
    return name[-max(map(len, found)) :] if found else ""  # as Path.suffix has it)


def _prefix(parts: tuple[str, ...]) -> list[str]:
    """A glob's directory parts before its first wildcard (not the last part: a file name)."""
    out = []
    for part in parts[:-1]:
        if glob.has_magic(part):
            break
        out.append(part)
    return out


def _files_below(root: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """The files with one of ``suffixes`` below ``root``, sorted, through symlinked directories
    too (`Path.rglob` skips them before Python 3.13), each real directory once (a link back up
    would loop)."""
    found, seen = [], set()
    for top, dirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(top)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        found += [Path(top, f) for f in files if _shard_suffix(f, suffixes)]
    return sorted(p for p in found if p.is_file())


def _read_jsonl(path: Path) -> list[Path]:
    paths, seen = [], {}
    for line_no, line in text_lines(path, "manifest"):
        if not line.strip():
            continue

        def fail(message: str, line_no=line_no) -> InputFileError:
            return InputFileError(path, line_no, message)

        entry = json_object(line, "the line", fail)
        shard = entry.get("shard")
        if not isinstance(shard, str) or not shard:
            raise fail('expected {"shard": "path/to/file.npz"}')
        if "\0" in shard:
            raise fail(f"the shard path {shard!r} holds a NUL character: no file has that name")
        if _is_script(Path(shard)):
            raise fail(f"{shard}: {_SCRIPT_REFUSED}")
        resolved = (path.parent / shard).absolute()
        if resolved in seen:
            raise fail(f"{shard} is listed twice (first on line {seen[resolved]})")
        seen[resolved] = line_no
        paths.append(resolved)
    if not paths:
        raise InputFileError(path, None, "the manifest lists no shard")
    return paths


def _name_shards(paths: list[Path], spec: str, suffixes: tuple[str, ...],
                 base: Path) -> list[Shard]:  # fmt: skip
    normalized = [Path(os.path.normpath(p)) for p in paths]
    if len(set(normalized)) != len(normalized):
        dup = next(p for p in normalized if normalized.count(p) > 1)
        raise WfstDecodeError(f"{spec}: {dup} is listed twice")
    root = Path(os.path.commonpath([os.path.normpath(base), *(p.parent for p in normalized)]))
    shards = []
    for p in normalized:
        rel = p.relative_to(root)
        name = rel.as_posix().removesuffix(_shard_suffix(rel.name, suffixes))
        shards.append(Shard(p, name))
    names = [s.name for s in shards]
    if len(set(names)) != len(names):  # e.g. "x.npz" beside "x" or "x.ark"
        dup = next(n for n in names if names.count(n) > 1)
        raise WfstDecodeError(f"{spec}: two shards would both write {dup}.jsonl; rename one")
    return shards

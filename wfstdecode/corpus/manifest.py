"""Which shards a corpus decode covers: a manifest (JSONL), a directory, a glob or one file.

Every shard gets an output name: its path relative to the deepest directory holding all shards,
without its suffix (``.npz``; ``.ark``, a Kaldi archive of CTC log-probs), so that
``a/part0.npz`` and ``b/part0.npz`` write ``OUT/a/part0.jsonl`` and ``OUT/b/part0.jsonl`` rather
than one file twice.
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
        paths = sorted(p for p in path.rglob("*") if p.suffix in suffixes and p.is_file())
        if not paths:
            raise WfstDecodeError(f"{path}: no {kinds} file in this directory")
    elif path.is_file() and path.suffix in suffixes:
        paths = [path]
    elif path.suffix == ".scp":  # (its matrices may change in files no ledger would check)
        raise WfstDecodeError(f"{path}: a Kaldi script is not a shard: give the archives it "
                              "names (a directory, a glob or a manifest of them)")  # fmt: skip
    elif path.is_file():
        paths = _read_jsonl(path)
    else:
        paths = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
        if not paths:
            what = "no such file" if not glob.has_magic(text) else "no file matches this pattern"
            raise WfstDecodeError(f"{text}: {what}")
    return _name_shards([p.absolute() for p in paths], text, suffixes)


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
        resolved = (path.parent / shard).absolute()
        if resolved in seen:
            raise fail(f"{shard} is listed twice (first on line {seen[resolved]})")
        seen[resolved] = line_no
        paths.append(resolved)
    if not paths:
        raise InputFileError(path, None, "the manifest lists no shard")
    return paths


def _name_shards(paths: list[Path], spec: str, suffixes: tuple[str, ...]) -> list[Shard]:
    normalized = [Path(os.path.normpath(p)) for p in paths]
    if len(set(normalized)) != len(normalized):
        dup = next(p for p in normalized if normalized.count(p) > 1)
        raise WfstDecodeError(f"{spec}: {dup} is listed twice")
    root = Path(os.path.commonpath([p.parent for p in normalized]))
    shards = []
    for p in normalized:
        rel = p.relative_to(root)
        name = rel.with_suffix("") if rel.suffix in suffixes else rel
        shards.append(Shard(p, name.as_posix()))
    names = [s.name for s in shards]
    if len(set(names)) != len(names):  # e.g. "x.npz" beside "x" or "x.ark"
        dup = next(n for n in names if names.count(n) > 1)
        raise WfstDecodeError(f"{spec}: two shards would both write {dup}.jsonl; rename one")
    return shards

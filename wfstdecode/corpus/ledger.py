"""The output directory of a corpus decode: what is done, written so that a crash at any instant
leaves every shard either finished (and provably so) or to be decoded again.

``OUT/run.json`` holds the config that changes results; a run with another config is refused
(``force`` replaces it, and then every shard is decoded again). Per shard, ``OUT/NAME.jsonl`` is
written to a temporary file, synced and renamed; then ``OUT/NAME.done.json`` records the input's
size, mtime and SHA-256, the output's SHA-256, the config digest and the shard's counts, the same
way; a decoder that writes lattices (`ShardOutput.lattices`) has ``OUT/NAME.lat.gz`` written
before the done record, which holds its SHA-256 too. A shard is finished only when its done file
matches the run's config, its output files' digests and its input (size and mtime, else the
input's digest); anything else is decoded again and its outputs replaced. One run at a time
holds ``OUT/.lock``. Only files this module wrote are ever replaced or removed (``run.json``
says the directory is one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import time
from pathlib import Path

from ..errors import WfstDecodeError
from ..safe_io import (
    PARTIAL_NAME_ROOM,
    PARTIAL_SUFFIX,
    file_sha256,
    json_text,
    read_json_file,
    replacing,
)
from .manifest import Shard
from .shards import ShardOutput, input_id

RUN_FILE = "run.json"
SUMMARY_FILE = "summary.json"
LOCK_FILE = ".lock"
OUTPUT_SUFFIX = ".jsonl"
DONE_SUFFIX = ".done.json"
LATTICES_SUFFIX = ".lat.gz"  # a gzip-compressed Kaldi archive, as Kaldi's lat.N.gz
MARKER_KEY = "wfstdecode_corpus"  # in run.json: this directory is a corpus decode's output
FORMAT_VERSION = 1


def check_output_names(shards) -> None:
    """Refuse, before anything is decoded, a shard whose output files' names would be longer
    than a file name may be (255 bytes): the longest is its done record's temporary file; or
    whose name is not UTF-8 (bytes Python could not decode), which no record could hold."""
    for shard in shards:
        try:
            shard.name.encode("utf-8")
        except UnicodeEncodeError:
            raise WfstDecodeError(
                f"{os.fsencode(shard.path)!r}: the shard's name is not UTF-8, "
                "which its output's records cannot hold; rename it"
            ) from None
        # (`replacing` names the file by the writing thread's id: any worker thread's)
        longest = len(os.fsencode(f"{Path(shard.name).name}{DONE_SUFFIX}")) + PARTIAL_NAME_ROOM
        if longest > 255:
            raise WfstDecodeError(f"{shard.path}: its output files' names would be "
                                  f"{longest} bytes, more than the 255 a file "
                                  "name may have; rename the shard")  # fmt: skip


def check_paths_free(out: str | os.PathLike, shards) -> None:
    """Refuse, before the run claims ``out`` or removes any shard's old output, a directory
    where a shard's output, done record or lattices would go: no file could replace it, and it
    is not ours to remove."""
    for shard in shards:
        for suffix in (OUTPUT_SUFFIX, DONE_SUFFIX, LATTICES_SUFFIX):
            path = Path(out) / f"{shard.name}{suffix}"
            if path.is_dir() and not path.is_symlink():
                raise WfstDecodeError(f"{path}: a directory where shard {shard.name}'s output "
                                      "goes; move it away")  # fmt: skip


class OutputDir:
    """An output directory opened for one run (a context manager holding its lock)."""

    def __init__(self, out: str | os.PathLike, config: dict, force: bool = False):
        self.path = Path(out)
        self.config = json.loads(json.dumps(config))  # as run.json holds it (tuples as lists)
        self.digest = _config_digest(config)
        if self.path.exists() and not self.path.is_dir():
            raise WfstDecodeError(f"{self.path}: exists and is not a directory")
        made_dir = not self.path.exists()
        self.path.mkdir(parents=True, exist_ok=True)
        made_lock = not (self.path / LOCK_FILE).exists()
        self._lock = open(self.path / LOCK_FILE, "a")  # noqa: SIM115 (held for the run)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise WfstDecodeError(
                f"{self.path}: another decode-corpus run is writing here"
            ) from None
        try:
            self._claim(force)
            self._remove_partials()
        except BaseException:
            self.close()
            if made_lock:  # a refused directory is left as it was found
                with contextlib.suppress(OSError):
                    (self.path / LOCK_FILE).unlink()
                    if made_dir:
                        self.path.rmdir()
            raise

    def __enter__(self) -> OutputDir:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self._lock.close()  # releases the flock

    def output_path(self, shard: Shard) -> Path:
        return self.path / f"{shard.name}{OUTPUT_SUFFIX}"

    def done_path(self, shard: Shard) -> Path:
        return self.path / f"{shard.name}{DONE_SUFFIX}"

    def lattices_path(self, shard: Shard) -> Path:
        return self.path / f"{shard.name}{LATTICES_SUFFIX}"

    def finished(self, shard: Shard, verify: bool = False) -> dict | None:
        """The done record of ``shard`` if its output is complete and was decoded from the
        shard's current contents with this run's config, else None. ``verify`` hashes every
        input instead of trusting an unchanged size and mtime."""
        done = self.done_path(shard)
        if not done.is_file():
            return None
        try:
            record = read_json_file(done, WfstDecodeError)
            if record.get("config_sha256") != self.digest:
                return None
            if file_sha256(self.output_path(shard)) != record["output_sha256"]:
                return None
            lattices = record.get("lattices_sha256")  # (the run's config says if it has them)
            if lattices is not None and file_sha256(self.lattices_path(shard)) != lattices:
                return None
            st = os.stat(shard.path)
            if not verify and (st.st_size, st.st_mtime_ns) == (
                record["input"]["bytes"], record["input"]["mtime_ns"]
            ):  # fmt: skip
                return record
            now = input_id(shard.path)
            if now.sha256 != record["input"]["sha256"]:
                return None
            if (now.bytes, now.mtime_ns) != (record["input"]["bytes"], record["input"]["mtime_ns"]):
                # touched, the same contents: the record takes the new mtime (hashed once, not
                # on every later run; if it cannot be written, it is hashed again next time)
                record["input"] = dataclasses.asdict(now)
                with contextlib.suppress(OSError):
                    _write_atomically(done, _json_bytes(record))
            return record
        except (OSError, WfstDecodeError, KeyError, TypeError):
            return None  # unreadable: decode again (and the error, if lasting, shows then)

    def forget(self, shard: Shard) -> None:
        """Remove what an earlier run wrote for ``shard`` (its done record first, then its
        output), before it is decoded again: if it now fails, no output of the input it had
        then stays beside a summary that lists it as failed."""
        for path in (self.done_path(shard), self.output_path(shard), self.lattices_path(shard)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def write(self, shard: Shard, output: ShardOutput, attempts: int) -> dict:
        """Write a decoded shard's output (and lattices), then its done record; returns the
        record."""
        target = self.output_path(shard)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = output.text.encode("utf-8")
        _write_atomically(target, data)
        lattices = {}
        if output.lattices is not None:
            _write_atomically(self.lattices_path(shard), output.lattices)
            lattices = {"lattices_sha256": hashlib.sha256(output.lattices).hexdigest()}
        record = {
            "shard": str(shard.path),
            "name": shard.name,
            "input": dataclasses.asdict(output.input),
            "output_sha256": hashlib.sha256(data).hexdigest(),
            **lattices,
            "config_sha256": self.digest,
            "utterances": output.utterances,
            "frames": output.frames,
            "errors": output.errors,
            "ref_words": output.ref_words,
            "wall_seconds": round(output.wall_seconds, 4),
            "cpu_seconds": round(output.cpu_seconds, 4),
            "worker": output.worker,
            "worker_memory_mb": output.memory_mb,
            "attempts": attempts,
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        _write_atomically(self.done_path(shard), _json_bytes(record))
        return record

    def write_summary(self, summary: dict) -> Path:
        path = self.path / SUMMARY_FILE
        _write_atomically(path, _json_bytes(summary))
        return path

    def _claim(self, force: bool) -> None:
        run = self.path / RUN_FILE
        if run.is_file():
            previous = read_json_file(run, lambda m: WfstDecodeError(f"{run}: {m}"))
            if previous.get(MARKER_KEY) != FORMAT_VERSION:
                raise WfstDecodeError(f"{run}: not written by wfstdecode decode-corpus; "
                                      f"choose another --out")  # fmt: skip
            # the digest the done records hold, not ==: 16 == 16.0, but their records differ
            # (a config that compared equal had every finished shard decoded again, unsaid)
            if _config_digest(previous.get("config")) == self.digest:
                return
            finished_any = any(p.is_file() for p in self.path.rglob(f"*{DONE_SUFFIX}"))
            if not force and finished_any:  # (a run that finished nothing is not worth keeping)
                old = previous.get("config") or {}
                keys = {*old, *self.config}
                changed = sorted(
                    k for k in keys
                    if _config_digest(old.get(k)) != _config_digest(self.config.get(k))
                )  # fmt: skip
                raise WfstDecodeError(
                    f"{self.path} holds the output of a run with other settings (differing: "
                    f"{', '.join(changed)}); use another --out, or --force to decode every shard "
                    f"again with these"
                )
        else:
            others = [p.name for p in self.path.iterdir() if p.name != LOCK_FILE]
            if others:
                raise WfstDecodeError(
                    f"{self.path}: not empty and not a decode-corpus output (holds "
                    f"{', '.join(sorted(others)[:5])}); choose a new or empty directory"
                )
        _write_atomically(run, _json_bytes({MARKER_KEY: FORMAT_VERSION, "config": self.config}))

    def _remove_partials(self) -> None:
        """Temporary files of a run that was killed while writing (ours: this run holds the lock
        and only this module names files so)."""
        for p in self.path.rglob(f"*{PARTIAL_SUFFIX}"):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()


def _write_atomically(path: Path, data: bytes) -> None:
    with replacing(path) as f:
        f.write(data)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself survives a power cut
    finally:
        os.close(fd)


def _config_digest(config) -> str:
    """What a done record names its run's config by: the SHA-256 of its JSON."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def _json_bytes(value: dict) -> bytes:
    return (json_text(value, indent=1) + "\n").encode("utf-8")  # (a shard's path not UTF-8)

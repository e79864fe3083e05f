"""Write a built TLG as a graph directory, atomically, and never lose a user's files doing it.

The directory is assembled under a hidden temporary name beside the target and renamed into
place only when every file is written, so an interrupted build leaves no directory that looks
complete (and the temporary one is removed on the way out).

Only a directory this toolkit wrote is ever replaced: its ``build.json`` carries the marker key
``"wfstdecode_graph_dir": <format version>`` and it holds nothing but the files below. Anything
else at ``--out`` (a file, a symbolic link, a foreign or hand-edited directory, the current
directory) is refused with the path and the reason; an empty directory is used as is.

A temporary sibling (``.NAME.partial-*`` for the new graph, ``.NAME.old-*`` for the one being
replaced) holds a marker file naming its process and host while it exists. A build killed
half-way leaves one behind; the next build into the same target removes those whose process is
gone (and puts back an old graph whose replacement never arrived), and nothing else.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import resource
import shutil
import socket
import tempfile
from pathlib import Path

from ..decoding_graph import GRAPH_FILE
from ..errors import WfstDecodeError
from ..fstio import write_openfst
from ..safe_io import file_sha256, read_json_file
from .tlg import TlgBuild

log = logging.getLogger(__name__)

FILES = ("TLG.fst", GRAPH_FILE, "tokens.txt", "words.txt", "build.json")
MARKER_KEY = "wfstdecode_graph_dir"  # in build.json: this directory is ours to replace
MARKER_VERSION = 1  # the graph directory format; raised when its files change
PARTIAL_MARKER = ".wfstdecode-partial"  # in a temporary sibling: {"pid": …, "host": …}


def write_graph_dir(build: TlgBuild, out_dir: str | os.PathLike, info: dict | None = None,
                    force: bool = False) -> Path:  # fmt: skip
    """Write TLG.fst (OpenFst binary), TLG.npz, tokens.txt, words.txt and build.json
    (stages with sizes and timings, plus ``info``) to ``out_dir``; returns its resolved path.

    ``out_dir`` may be missing or an empty directory; a graph directory written by wfstdecode is
    replaced only with ``force``; anything else is refused (see `check_out_dir`). The target is
    checked again just before the swap, since it may have changed during the build.
    """
    out = check_out_dir(out_dir, force)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = _make_sibling(out, "partial")
    try:
        os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp made it 0o700
        _write_files(build, tmp, info)
        (tmp / PARTIAL_MARKER).unlink()
        _check_existing(out, force)
        _swap_in(tmp, out)
    except BaseException as exc:
        _remove_marked(tmp)
        written = getattr(exc, "filename", None)
        if isinstance(exc, OSError) and written and Path(written).parent == tmp:
            # (a full disk while writing a file: named as the user's, not the hidden folder's)
            raise OSError(exc.errno, exc.strerror, str(out / Path(written).name)) from None
        raise
    return out


def check_out_dir(out_dir: str | os.PathLike, force: bool = False) -> Path:
    """Refuse an output directory that cannot or must not be written, before a long build;
    returns the resolved path. Also removes the stale temporary siblings of killed builds."""
    out = resolve_out_dir(out_dir)
    clean_stale_siblings(out)
    _check_existing(out, force)
    _check_parent_writable(out)
    return out


def resolve_out_dir(out_dir: str | os.PathLike) -> Path:
    """The absolute target with ``.``, ``..`` and symlinked parents resolved, so temporary
    siblings get the real name in the real parent. A symlink as the last part is not followed
    (`check_out_dir` refuses it rather than replace whatever it points to)."""
    path = Path(out_dir)
    out = path.parent.resolve() / path.name if path.is_symlink() else path.resolve()
    if out.parent == out:
        raise WfstDecodeError(f"{out}: the filesystem root cannot be an output directory")
    return out


def graph_dir_report(path: str | os.PathLike) -> dict | None:
    """The build.json of ``path`` if it is a graph directory wfstdecode wrote (and so may be
    replaced), else None."""
    return _inspect(Path(path))[0]


def is_graph_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a graph directory wfstdecode wrote: the only kind it replaces."""
    return graph_dir_report(path) is not None


def _inspect(path: Path) -> tuple[dict | None, str]:
    """(build.json, "") for a graph directory we wrote, else (None, why it is not one)."""
    if path.is_symlink():
        return None, "is a symbolic link"
    if not path.is_dir():
        return None, "is not a directory"
    with os.scandir(path) as entries:
        foreign = sorted(e.name for e in entries if e.name not in FILES or e.is_dir())
    if foreign:
        shown = ", ".join(foreign[:5]) + (", …" if len(foreign) > 5 else "")
        return None, f"holds files that wfstdecode did not write ({shown})"
    report, why = _read_report(path / "build.json")
    if report is None:
        return None, why
    if not isinstance(report.get(MARKER_KEY), int) or isinstance(report[MARKER_KEY], bool):
        return None, f'its build.json has no "{MARKER_KEY}" marker (not written by wfstdecode)'
    return report, ""


def _read_report(path: Path) -> tuple[dict | None, str]:
    """(the JSON object in ``path``, "") or (None, why it cannot be read)."""
    if not path.is_file() or path.is_symlink():
        return None, "has no build.json"
    try:
        return read_json_file(path, WfstDecodeError), ""
    except WfstDecodeError as exc:
        return None, f"has an unreadable build.json ({exc})"


def _check_existing(out: Path, force: bool) -> None:
    """Raise unless ``out`` is missing, an empty directory, or (with ``force``) our graph dir."""
    if not os.path.lexists(out):
        return
    if out.is_symlink() or not out.is_dir():
        kind = "a symbolic link" if out.is_symlink() else "not a directory"
        raise WfstDecodeError(f"{out} exists and is {kind}; choose another output directory")
    _refuse_current_directory(out)
    if not any(out.iterdir()):
        return
    report, why = _inspect(out)
    if report is None:
        raise WfstDecodeError(
            f"{out} exists and {why}; wfstdecode replaces only a graph directory it wrote: "
            "move or remove it yourself, or choose another output directory"
        )
    if not force:
        raise WfstDecodeError(f"{out} already exists (use --force to replace it)")


def _refuse_current_directory(out: Path) -> None:
    """A directory holding the process's cwd cannot be renamed aside or replaced safely."""
    try:
        cwd = Path.cwd()
    except OSError:  # the cwd was deleted: it is not ``out``
        return
    if cwd == out or out in cwd.parents:
        raise WfstDecodeError(
            f"{out} is or contains the current directory; run from elsewhere or choose another "
            "output directory"
        )


def _check_parent_writable(out: Path) -> None:
    """The parent (or the nearest existing ancestor, created later) must be a writable dir."""
    parent = out.parent
    while not os.path.lexists(parent):
        parent = parent.parent
    if not parent.is_dir():
        raise WfstDecodeError(f"cannot write {out}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise WfstDecodeError(f"cannot write {out}: no write permission in {parent}")
    try:
        name_max = os.pathconf(parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    spare = name_max - len(".partial-") - 9  # (`_make_sibling`'s ".NAME.partial-XXXXXXXX")
    if len(os.fsencode(out.name)) > spare:
        raise WfstDecodeError(f"cannot write {out}: the name is too long; at most {spare} bytes "
                              f"here (the build is written beside it first)")  # fmt: skip


def _write_files(build: TlgBuild, tmp: Path, info: dict | None) -> None:
    write_openfst(build.fst, tmp / "TLG.fst")
    build.graph.save(tmp / GRAPH_FILE)
    build.graph.tokens.write(tmp / "tokens.txt")
    build.words.write(tmp / "words.txt")
    report = {
        MARKER_KEY: MARKER_VERSION,
        **(info or {}),
        "graph": build.graph.summary(),
        "metadata": build.graph.metadata,
        "stages": build.stages,
        "dropped_arpa_words": len(build.dropped_words),
        # what `wfstdecode info` checks the directory's files against (one replaced by another
        # graph's would otherwise go unnoticed: decoding reads TLG.npz alone)
        "files": {
            n: file_record(tmp / n) for n in (GRAPH_FILE, "TLG.fst", "tokens.txt", "words.txt")
        },
        # the process's peak so far, the files above written: the stages' peaks end before them
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    (tmp / "build.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def file_record(path: Path) -> dict:
    """``{"bytes": size, "sha256": hex digest}`` of a file."""
    return {"bytes": path.stat().st_size, "sha256": file_sha256(path)}


def _swap_in(tmp: Path, out: Path) -> None:
    """Rename ``tmp`` to ``out``. An old graph dir is renamed aside first and removed only once
    the new one is in place; if that rename fails, the old one is put back."""
    if not os.path.lexists(out) or not any(out.iterdir()):
        try:
            os.replace(tmp, out)  # rename(2) replaces an empty directory atomically
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            # Another process wrote ``out`` since the check above: theirs stays.
            raise WfstDecodeError(
                f"{out} was written by another process while this build ran; left as it is"
            ) from None
        return
    old = _make_sibling(out, "old")
    os.replace(out, old / out.name)
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(old / out.name, out)
        _remove_marked(old)
        raise
    _remove_marked(old)


def _make_sibling(out: Path, kind: str) -> Path:
    """A new hidden ``.NAME.KIND-*`` directory beside ``out``, marked with our pid and host so
    that a later build can tell it is ours and whether its process is gone."""
    path = Path(tempfile.mkdtemp(prefix=f".{out.name}.{kind}-", dir=out.parent))
    owner = {"pid": os.getpid(), "host": socket.gethostname()}
    try:
        (path / PARTIAL_MARKER).write_text(json.dumps(owner) + "\n", encoding="utf-8")
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path


def _remove_marked(path: Path) -> None:
    """Remove a ``.NAME.KIND-*`` sibling, its marker last: one interrupted on the way (Ctrl-C
    in a multi-GB graph's removal) still carries it, so a later build removes the rest."""
    with contextlib.suppress(OSError), os.scandir(path) as entries:
        for entry in entries:
            if entry.name != PARTIAL_MARKER:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
    shutil.rmtree(path, ignore_errors=True)


def clean_stale_siblings(out: Path) -> list[Path]:
    """Remove the ``.NAME.partial-*`` / ``.NAME.old-*`` siblings of ``out`` left by killed builds:
    only those carrying our marker whose process is gone (same host). An old graph whose
    replacement never arrived is put back at ``out`` first. Returns the removed paths."""
    try:
        with os.scandir(out.parent) as entries:
            names = [e.name for e in entries]
    except OSError:  # no parent yet: nothing to clean
        return []
    removed = []
    for name in names:
        stale = out.parent / name
        if name.startswith((f".{out.name}.partial-", f".{out.name}.old-")) and _is_stale(stale):
            _restore_old_graph(stale, out)
            _remove_marked(stale)
            log.info("removed %s, left by a build that was killed", stale)
            removed.append(stale)
    return removed


def _restore_old_graph(stale: Path, out: Path) -> None:
    old_graph = stale / out.name
    if old_graph.is_dir() and not old_graph.is_symlink() and not os.path.lexists(out):
        os.replace(old_graph, out)
        log.warning("put back %s: its replacement was interrupted", out)


def _is_stale(path: Path) -> bool:
    """Whether ``path`` is a temporary directory of ours whose process is gone."""
    if path.is_symlink() or not path.is_dir():
        return False
    try:
        owner = read_json_file(path / PARTIAL_MARKER, WfstDecodeError)
    except WfstDecodeError:
        return False
    if owner.get("host") != socket.gethostname():
        return False  # another machine's build (shared filesystem): its pid means nothing here
    pid = owner.get("pid")
    valid = isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid < 2**31
    return valid and not process_alive(pid)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists; True when it cannot be told (keep rather than delete)."""
    if os.name == "nt":  # os.kill would terminate it
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, another user's
        return True
    return True


def current_umask() -> int:
    """The process umask. Read from /proc/self/status (Linux 4.7+), because the portable way,
    setting it to read the old value, briefly changes it for every thread of the process."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o077)  # restrictive while swapped, should another thread create a file
    os.umask(mask)
    return mask

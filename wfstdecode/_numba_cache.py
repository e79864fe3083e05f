"""Where Numba keeps the package's compiled functions, when neither of its own places is writable.

The searches are compiled with ``cache=True``: Numba writes them next to the sources
(``__pycache__``) or to ``~/.cache/numba``, and raises at import ("no locator available") when it
can write to neither — a read-only install run by a service account without a home, a container
with a read-only root. Then the cache goes to a private folder under the temporary directory,
as if ``NUMBA_CACHE_DIR`` named it; a ``NUMBA_CACHE_DIR`` the user set is left alone.
"""

from __future__ import annotations

import os
import stat
import tempfile

import numba

_IN_TREE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__")


def _probe():  # (decorated with cache=True below: Numba looks for a cache place right then)
    return 0


def ensure_cache_dir() -> None:
    """Point Numba at a private temporary folder when it has nowhere to cache this package's
    functions (module docstring); raise naming ``NUMBA_CACHE_DIR`` when even that fails."""
    if numba.config.CACHE_DIR or _can_cache():
        return
    # the environment too: Numba re-reads it (dropping a CACHE_DIR set only in its config) when
    # any NUMBA_ variable changes, and child processes inherit it
    numba.config.CACHE_DIR = os.environ["NUMBA_CACHE_DIR"] = _private_folder()
    if not _can_cache():
        raise RuntimeError(
            "wfstdecode caches its compiled functions on disk and found no writable place (its "
            f"package folder, ~/.cache/numba, {numba.config.CACHE_DIR}): set NUMBA_CACHE_DIR to "
            "a writable folder"
        )


def _can_cache() -> bool:
    if not numba.config.CACHE_DIR and os.access(_IN_TREE, os.W_OK):
        return True  # (the usual case, without the ~5 ms of making a dispatcher)
    try:
        numba.njit(cache=True)(_probe)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return False
    return True


def _private_folder() -> str:
    """``wfstdecode-numba-<uid>`` under the temporary directory, made by this user and writable
    by no one else (cached code is loaded and run: another user's files must not be); a fresh
    folder where that one is not so."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    try:
        path = os.path.join(tempfile.gettempdir(), f"wfstdecode-numba-{uid}")
    except OSError:  # no usable temporary directory: the caller's check says so
        return os.path.join(os.curdir, f"wfstdecode-numba-{uid}")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
        if (
            stat.S_ISDIR(info.st_mode)
            and info.st_uid == uid
            and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        ):
            return path
    except OSError:
        pass
    try:
        return tempfile.mkdtemp(prefix="wfstdecode-numba-")
    except OSError:
        return path  # (unwritable: the caller's check says so)


ensure_cache_dir()  # (imported first by the package's __init__, before any cached function)

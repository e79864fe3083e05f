"""The package imports and caches where Numba has no place of its own to cache (a read-only
install, no writable home): it raised "no locator available" at import."""

import os
import subprocess
import sys
import textwrap

import pytest

# Numba's two places made unwritable (their locators find nothing, as on a read-only install
# without a home), then the package imported and one cached function run.
_SCRIPT = textwrap.dedent("""
    import os
    from numba.core import caching
    for cls in (caching.InTreeCacheLocator, caching.UserWideCacheLocator):
        cls.from_function = classmethod(lambda cls, f, p: None)
    real_access = os.access
    os.access = lambda path, mode, **kw: False if mode & os.W_OK else real_access(path, mode, **kw)
    import numba
    from wfstdecode.metrics import word_error_rate
    assert word_error_rate([["a", "b"]], [["a", "c"]]) == 0.5
    print(numba.config.CACHE_DIR)
""")


def _run(tmp_path, cache_dir=None):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["TMPDIR"] = str(tmp_path)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    return subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_a_private_temporary_folder_takes_the_cache(tmp_path):
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    folder = done.stdout.strip()
    assert os.path.dirname(folder) == str(tmp_path)
    assert os.stat(folder).st_mode & 0o077 == 0
    assert any(name.endswith(".nbi") for _, _, files in os.walk(folder) for name in files)


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")
def test_a_folder_others_can_write_is_not_used(tmp_path):
    shared = tmp_path / f"wfstdecode-numba-{os.getuid()}"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # (mkdir's mode is masked by the umask)
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    folder = done.stdout.strip()
    assert folder != str(shared) and os.path.dirname(folder) == str(tmp_path)
    assert not any(shared.iterdir())


def test_a_cache_folder_the_user_names_is_kept(tmp_path):
    mine = tmp_path / "mine"
    done = _run(tmp_path, str(mine))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(mine)

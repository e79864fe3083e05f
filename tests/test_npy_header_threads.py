"""Threads reading .npz archives at once (a server loading graphs or log-prob files per request:
`NpzArchive` reads each member's .npy header in `safe_io._read_npy_header`): the process's
warning filters must come out as they went in."""

import io
import threading
import warnings

import numpy as np

from wfstdecode import safe_io


def _npy() -> io.BytesIO:
    f = io.BytesIO()
    np.save(f, np.zeros(3, np.float32))
    f.seek(0)
    return f


def test_overlapping_header_reads_leave_no_ignore_filter_behind(monkeypatch):
    """`_read_npy_header` silenced numpy's header warning with `warnings.catch_warnings`, which
    swaps the process-wide filter list: A entered (saved F, set F+ignore), B entered (saved
    F+ignore), A left (restored F), B left (restored F+ignore). Every warning of every thread
    was ignored from then on (decode_ctc's "boosts with words not in the graph's vocabulary are
    ignored" among them)."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    reader = np.lib.format.read_array_header_1_0

    def read(f, **kwargs):  # A waits inside its block until B is inside too; B until A left
        me = threading.current_thread().name
        if me == "A":
            a_in.set()
            b_in.wait(2)  # (with the fix B cannot enter: A goes on after 2 s)
        elif me == "B":
            b_in.set()
            a_out.wait(5)  # (a fix that makes B wait for A's block goes on after 5 s)
        return reader(f, **kwargs)

    monkeypatch.setattr(np.lib.format, "read_array_header_1_0", read)
    before = list(warnings.filters)
    errors = []

    def a():
        try:
            safe_io._read_npy_header(_npy())
        except BaseException as exc:
            errors.append(exc)
        finally:
            a_out.set()

    def b():
        try:
            a_in.wait(5)
            safe_io._read_npy_header(_npy())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=a, name="A"), threading.Thread(target=b, name="B")]
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        after = list(warnings.filters)
    finally:
        warnings.filters[:] = before  # (the other tests' warnings stay seen)
        warnings._filters_mutated()
    assert not errors, errors
    assert after == before

"""Line-by-line reading of the text inputs (ARPA models, lexicons, symbol tables).

One reader for all of them, so each accepts the same things (plain or gzip-compressed UTF-8, with
or without a byte-order mark, any line ending) and fails the same way: an `InputFileError` naming
the file and the 1-based line, never a codec or zlib traceback.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import zlib
from collections.abc import Iterator

from .errors import InputFileError

# No line of these formats comes near this; a longer one is a binary or corrupt file, and the limit
# keeps a newline-free gzip stream (which may inflate a thousandfold) from filling the memory.
MAX_LINE_CHARS = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
# Bytes that are not UTF-8, as the "surrogateescape" error handler maps them.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def text_lines(
    path: str | os.PathLike, what: str, max_line_chars: int = MAX_LINE_CHARS
) -> Iterator[tuple[int, str]]:
    """Yield ``(line_no, line)`` of the UTF-8 text file ``path`` (gzip if it starts with the gzip
    magic, whatever its name); ``line`` keeps no newline and no leading byte-order mark.

    ``what`` names the kind of file in messages ("ARPA file", "lexicon", …); a line longer than
    ``max_line_chars`` is refused (a format whose valid lines are longer gives its own bound).
    """
    line_no = 0
    try:
        # opened once, its first bytes peeked, not read: a pipe (`<(zcat …)`, /dev/stdin) cannot
        # be opened again, and a second open of it starts after what the first one buffered
        with open(path, "rb") as raw:
            gz = raw.peek(2)[:2] == _GZIP_MAGIC
            binary = gzip.GzipFile(fileobj=raw) if gz else raw
            # Decode errors are escaped rather than raised: the codec decodes ahead of the line
            # being returned, so only a per-line check can say which line holds the bad byte.
            f = io.TextIOWrapper(binary, encoding="utf-8-sig", errors="surrogateescape")
            readline = f.readline
            while line := readline(max_line_chars + 2):  # (the limit, one more, its newline)
                line_no += 1
                if len(line) - line.endswith("\n") > max_line_chars:
                    raise InputFileError(
                        path,
                        line_no,
                        f"line longer than {max_line_chars:,} characters: not a valid {what}",
                    )
                if not line.isascii() and (bad := _ESCAPED_BYTE.search(line)):
                    raise InputFileError(
                        path,
                        line_no,
                        f"byte 0x{ord(bad.group()) - 0xDC00:02x} at column {bad.start() + 1} is "
                        f"not UTF-8: the {what} must be UTF-8 text (convert it, e.g. with iconv)",
                    )
                yield line_no, line.rstrip("\n")
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InputFileError(
            path, line_no + 1, f"cannot read the {what}: truncated or corrupt gzip data ({exc})"
        ) from None
    except OSError as exc:
        where = line_no + 1 if line_no else None
        raise InputFileError(path, where, f"cannot read the {what}: {exc}") from None


def quoted(text: str, limit: int = 80) -> str:
    """``repr(text)``, cut to about ``limit`` characters: messages echo lines of any length."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "…"


_KALDI_SPACE = " \t\n\r\v\f"  # what Kaldi's readers split at (a no-break space is a key's)


def kaldi_fields(line: str) -> list[str]:
    """A Kaldi table line (a script's, a ``text`` file's) as ``[key, rest]``, ``[key]`` or
    ``[]``: split once at ASCII whitespace, as Kaldi and the archive reader split keys."""
    stripped = line.strip(_KALDI_SPACE)
    for i, c in enumerate(stripped):
        if c in _KALDI_SPACE:
            return [stripped[:i], stripped[i:].lstrip(_KALDI_SPACE)]
    return [stripped] if stripped else []


def strict_float(text: str | bytes) -> float:
    """``float(text)`` for a number as the files read here write one: Python's float() also takes
    ``1_000`` (as 1000), which Kaldi and ARPA readers refuse; `ValueError` for it."""
    if ("_" if isinstance(text, str) else b"_") in text:
        raise ValueError(f"not a number: {text!r}")
    return float(text)


def is_float(text: str | bytes) -> bool:
    """Whether `strict_float` reads ``text``."""
    try:
        strict_float(text)
    except ValueError:
        return False
    return True

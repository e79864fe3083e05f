"""Progress of a corpus decode on stderr: a one-line bar on a terminal (shards, utterances,
frames, rate, ETA), a line per shard in logs, or nothing but problems when quiet."""

from __future__ import annotations

import os
import sys
import time

MODES = ("auto", "bar", "log", "quiet")
BAR_WIDTH = 24
REDRAW_SECONDS = 0.5


class Progress:
    """``mode``: one of `MODES`. The ETA scales the time so far by the input bytes still to
    decode: shards differ in size, and their sizes are known before they are decoded."""

    def __init__(self, shards, pending, mode: str = "auto", stream=None):
        if mode not in MODES:
            raise ValueError(f"progress must be one of {', '.join(MODES)}; got {mode!r}")
        self.stream = stream or sys.stderr
        if mode == "auto":
            mode = "bar" if self.stream.isatty() else "log"
        self.mode = mode
        self.total = len(pending)
        self.bytes_total = sum(_size(shards[job.index].path) for job in pending)
        self.done = self.bytes_done = self.utterances = self.frames = 0
        self.started = time.perf_counter()
        self._drawn = 0.0

    def skipped(self, count: int) -> None:
        if count and self.mode != "quiet":
            self._line(f"{count} shard(s) already decoded with these settings: skipped")

    def finished(self, shard, output) -> None:
        self.done += 1
        self.bytes_done += output.input.bytes
        self.utterances += output.utterances
        self.frames += output.frames
        if self.mode == "log":
            self._line(
                f"[{self.done}/{self.total}] {shard.name}: {output.utterances} utterances, "
                f"{output.frames:,} frames, {output.wall_seconds:.1f} s"
            )
        self.refresh(force=True)

    def failed(self, shard, message: str) -> None:
        self.done += 1
        self.bytes_done += _size(shard.path)
        self._line(f"FAILED {shard.name}: {message}")
        self.refresh(force=True)

    def retrying(self, shard, message: str, attempt: int) -> None:
        if self.mode != "quiet":
            self._line(f"retrying {shard.name} (attempt {attempt} failed: {message})")

    def refresh(self, force: bool = False) -> None:
        now = time.perf_counter()
        if self.mode != "bar" or (not force and now - self._drawn < REDRAW_SECONDS):
            return
        self._drawn = now
        elapsed = now - self.started
        filled = int(BAR_WIDTH * self.done / max(self.total, 1))
        rate = self.frames / elapsed if elapsed > 0 else 0.0
        eta = "?"
        if 0 < self.bytes_done < self.bytes_total:
            eta = _clock(elapsed * (self.bytes_total - self.bytes_done) / self.bytes_done)
        elif self.done == self.total:
            eta = "0:00"
        text = (f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {self.done}/{self.total} shards "
                f"| {self.utterances:,} utt | {self.frames:,} frames | {rate:,.0f} frames/s "
                f"| {_clock(elapsed)} elapsed, ETA {eta}")  # fmt: skip
        self.stream.write("\r\x1b[2K" + text)
        self.stream.flush()

    def close(self) -> None:
        if self.mode == "bar" and self.total:
            self.refresh(force=True)
            self.stream.write("\n")
            self.stream.flush()

    def _line(self, text: str) -> None:
        prefix = "\r\x1b[2K" if self.mode == "bar" else ""
        self.stream.write(f"{prefix}{text}\n")
        self.stream.flush()
        if self.mode == "bar":
            self.refresh(force=True)


def _size(path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"

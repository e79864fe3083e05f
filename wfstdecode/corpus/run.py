"""`decode_corpus`: the driver of a corpus decode — skip what is done, hand the rest to a worker
pool one shard per worker, retry what a dead worker or a transient error lost (bounded), write
each finished shard atomically, and end with a summary of what was done, skipped and failed."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass, field

from ..errors import OptionsError, WfstDecodeError
from ..interrupts import Terminated, signals_deferred
from .ledger import OutputDir, check_output_names, check_paths_free
from .manifest import SHARD_SUFFIXES, read_manifest
from .pools import Event, Job, LocalPool, RayPool
from .progress import Progress

log = logging.getLogger("wfstdecode.corpus")
EXECUTORS = ("auto", "ray", "local")
POLL_SECONDS = 0.5


@dataclass
class CorpusSummary:
    """What a run did. Corpus totals (``utterances``, ``frames``, ``wer``) cover every finished
    shard, earlier runs' included; ``decoded_*`` and the rates cover this run's shards."""

    shards: int
    decoded: list[str] = field(default_factory=list)  # shard names finished by this run
    skipped: list[str] = field(default_factory=list)  # finished by an earlier run
    failed: list[dict] = field(default_factory=list)  # {"shard", "error", "attempts", "errors"}
    retries: int = 0
    interrupted: bool = False
    interrupted_by: str | None = None  # the signal that stopped it: SIGINT (Ctrl-C), SIGTERM...
    utterances: int = 0
    frames: int = 0
    wer: float | None = None
    ref_words: int = 0
    scored_utterances: int = 0  # of shards with reference texts: what the WER counts
    decoded_utterances: int = 0
    decoded_frames: int = 0
    wall_seconds: float = 0.0
    worker_cpu_seconds: float = 0.0
    frames_per_second: float | None = None
    rtfx: float | None = None  # seconds of audio per second of run time (needs a frame shift)
    executor: str = ""
    workers: int = 0
    # utterance ids in more than one finished shard ("ID: shard, shard", the first 20) and
    # their number: every line is written, but the corpus WER counts each such utterance twice
    repeated_ids: list[str] = field(default_factory=list)
    repeated_id_count: int = 0

    @property
    def ok(self) -> bool:
        return not self.failed and not self.interrupted

    def as_dict(self) -> dict:
        return asdict(self)


def decode_corpus(
    manifest, out, decoder, *, workers: int | None = None, executor: str = "auto",
    address: str | None = None, max_attempts: int = 3, shard_timeout: float | None = None,
    force: bool = False, verify: bool = False, progress: str = "auto",
) -> CorpusSummary:  # fmt: skip
    """Decode every shard ``manifest`` lists (see `read_manifest`) with ``decoder`` (a
    `CtcCorpusDecoder` or `TransducerCorpusDecoder`) into ``out``: ``OUT/NAME.jsonl`` per shard,
    ``OUT/summary.json``.

    executor:     ``"ray"`` (actors on the Ray cluster at ``address``, else a local Ray),
                  ``"local"`` (processes on this machine) or ``"auto"`` (Ray when installed);
    workers:      how many (default: the cluster's CPUs or GPUs per worker, or this machine's
                  cores);
    max_attempts: tries per shard when its worker dies or it fails with a transient error (a
                  corrupt shard fails at once);
    shard_timeout: seconds a worker may hold a shard (from handing it over; local workers'
                  start-up included for their first, while Ray's actors get shards only once
                  started) before it is stopped and the shard retried;
    force:        reuse an output directory written with another config (every shard is decoded
                  again; not needed where that run finished no shard); verify: hash every
                  input instead of trusting unchanged size and mtime;
    progress:     ``"bar"`` (a terminal line), ``"log"`` (a line per shard), ``"quiet"`` or
                  ``"auto"`` (bar on a terminal, else log).

    Shards finished by an earlier run with the same config are skipped. A shard that keeps
    failing is listed in ``summary.failed`` with its error; the others are decoded regardless.
    On Ctrl-C the workers stop, finished shards stay written and the summary says interrupted.
    """
    if executor not in EXECUTORS:
        raise OptionsError(f"executor must be one of {', '.join(EXECUTORS)}; got {executor!r}")
    if address is not None and executor == "local":  # (it was ignored: no Ray was joined)
        raise OptionsError(f"address {address!r} is a Ray cluster's; the local executor "
                           "runs processes on this machine (executor 'ray' or 'auto')")  # fmt: skip
    if max_attempts < 1:
        raise OptionsError(f"max_attempts must be at least 1; got {max_attempts}")
    if shard_timeout is not None and not shard_timeout > 0:
        raise OptionsError(f"shard_timeout must be a positive number of seconds; got "
                           f"{shard_timeout}")  # fmt: skip
    if workers is not None and workers < 1:
        raise OptionsError(f"workers must be at least 1; got {workers}")
    shards = read_manifest(manifest, getattr(decoder, "shard_suffixes", SHARD_SUFFIXES))
    check_output_names(shards)
    check_paths_free(out, shards)
    started = time.perf_counter()
    summary = CorpusSummary(shards=len(shards))
    with OutputDir(out, decoder.config(), force=force) as outdir:
        records, pending = {}, []
        for i, shard in enumerate(shards):
            record = outdir.finished(shard, verify)
            if record is None:
                outdir.forget(shard)
                pending.append(Job(i, shard.path, shard.name))
            else:
                records[i] = record
                summary.skipped.append(shard.name)
        bar = Progress(shards, pending, progress)
        bar.skipped(len(summary.skipped))
        if pending:
            pool = None
            try:  # (a Ctrl-C while the workers start is an interruption like any other)
                pool = _make_pool(executor, decoder, workers, address, len(pending),
                                  shard_timeout)  # fmt: skip
                summary.executor, summary.workers = pool.kind, pool.size
                _drive(pool, pending, max_attempts, shards, outdir, records, summary, bar)
            except KeyboardInterrupt as exc:
                summary.interrupted = True
                signum = exc.signum if isinstance(exc, Terminated) else signal.SIGINT
                summary.interrupted_by = signal.Signals(signum).name
                if pool is not None:
                    pool.close(kill=True)
            except BaseException:
                if pool is not None:
                    pool.close(kill=True)
                raise
            else:
                pool.close()
        bar.close()

        def summarize():  # (a signal now waits for the summary: every shard is settled)
            _totals(summary, records, time.perf_counter() - started, decoder)
            _repeated_ids(summary, outdir, shards, records)
            outdir.write_summary(summary.as_dict())

        signals_deferred(summarize)
    return summary


def _make_pool(executor, decoder, workers, address, at_most: int, shard_timeout):
    threads = getattr(decoder, "num_threads", None) or 1
    gpu = getattr(decoder, "backend", "") == "cuda"
    if executor in ("auto", "ray"):
        try:
            import ray  # noqa: F401
        except ImportError:
            if executor == "ray" or address is not None:
                raise WfstDecodeError("the ray executor needs Ray: pip install 'wfstdecode[ray]' "
                                      "(or --executor local)") from None  # fmt: skip
        else:
            return RayPool(decoder, workers, address=address, num_cpus=threads,
                           num_gpus=1 if gpu else 0, at_most=at_most,
                           shard_timeout=shard_timeout)  # fmt: skip
    if workers is None:
        workers = 1 if gpu else max(1, (os.cpu_count() or 1) // threads)
    return LocalPool(decoder, min(workers, at_most), shard_timeout)


def _drive(pool, pending, max_attempts, shards, outdir, records, summary, bar) -> None:
    queue = deque(pending)
    errors: dict[int, list[str]] = {}
    while queue or pool.in_flight():
        while queue and pool.idle():
            job = queue.popleft()
            job.attempts += 1
            pool.submit(job)
        event: Event | None = pool.next_event(POLL_SECONDS)
        if event is None:
            bar.refresh()
            continue
        job, shard = event.job, shards[event.job.index]
        if event.kind == "done":
            if job.index in records:  # cannot happen with one shard per worker; never twice
                log.warning("%s was decoded twice; the second result is ignored", shard.name)
                continue

            def settle(job=job, shard=shard, output=event.value):
                records[job.index] = outdir.write(shard, output, job.attempts)
                summary.decoded.append(shard.name)

            signals_deferred(settle)  # (a Ctrl-C now comes once the summary counts the shard)
            bar.finished(shard, event.value)
            continue
        errors.setdefault(job.index, []).append(event.value)
        if event.permanent or job.attempts >= max_attempts:
            summary.failed.append({"shard": str(shard.path), "name": shard.name,
                                   "error": event.value, "attempts": job.attempts,
                                   "errors": errors[job.index]})  # fmt: skip
            bar.failed(shard, event.value)
        else:
            summary.retries += 1
            bar.retrying(shard, event.value, job.attempts)
            queue.append(job)


def _totals(summary: CorpusSummary, records: dict, wall: float, decoder) -> None:
    decoded = set(summary.decoded)
    errors = ref_words = 0
    for record in records.values():
        summary.utterances += record["utterances"]
        summary.frames += record["frames"]
        if record.get("ref_words") is not None:
            errors += record["errors"]
            ref_words += record["ref_words"]
            summary.scored_utterances += record["utterances"]
    summary.ref_words = ref_words
    summary.wer = errors / ref_words if ref_words else None
    mine = [r for r in records.values() if r["name"] in decoded]
    summary.decoded_utterances = sum(r["utterances"] for r in mine)
    summary.decoded_frames = sum(r["frames"] for r in mine)
    summary.worker_cpu_seconds = round(sum(r["cpu_seconds"] for r in mine), 3)
    summary.wall_seconds = round(wall, 3)
    if summary.decoded and wall > 0:
        summary.frames_per_second = round(summary.decoded_frames / wall, 1)
        shift = getattr(decoder, "frame_shift", None)
        if shift:
            summary.rtfx = round(summary.decoded_frames * shift / wall, 2)


def _repeated_ids(summary: CorpusSummary, outdir, shards, records: dict) -> None:
    """Note the utterance ids that more than one finished shard's output holds (a shard's own
    ids are distinct: its reader refuses a repeat), and warn of them."""
    shown = 20
    where: dict[str, list[str]] = {}
    for i in sorted(records):
        with open(outdir.output_path(shards[i]), encoding="utf-8") as f:
            for line in f:
                where.setdefault(json.loads(line)["id"], []).append(shards[i].name)
    repeated = [f"{utt}: {', '.join(names)}" for utt, names in where.items() if len(names) > 1]
    summary.repeated_ids, summary.repeated_id_count = repeated[:shown], len(repeated)
    if repeated:
        log.warning("%d utterance ids are in more than one shard (the WER counts each of "
                    "those utterances more than once): %s%s", len(repeated),
                    "; ".join(repeated[:3]), " …" if len(repeated) > 3 else "")  # fmt: skip


def print_summary(summary: CorpusSummary, out_dir, stream=None) -> None:
    """The end-of-run report: counts, corpus WER, this run's rates, every failed shard."""
    stream = stream or sys.stdout
    line = (f"{len(summary.decoded)} shards decoded, {len(summary.skipped)} already done, "
            f"{len(summary.failed)} failed, of {summary.shards}")  # fmt: skip
    if summary.retries:
        line += f" ({summary.retries} retried)"
    print(line, file=stream)
    if summary.wer is not None:
        scored = f"{summary.scored_utterances:,}" + (
            f" of {summary.utterances:,}" if summary.scored_utterances != summary.utterances else ""
        )  # (shards without reference texts are decoded, not scored)
        print(f"WER {100 * summary.wer:.2f}% over {summary.ref_words:,} reference words "
              f"({scored} utterances)", file=stream)  # fmt: skip
    if summary.frames_per_second is not None:
        rate = f"{summary.decoded_frames:,} frames in {summary.wall_seconds:.1f} s: "
        rate += f"{summary.frames_per_second:,.0f} frames/s"
        if summary.rtfx is not None:
            rate += f", RTFx {summary.rtfx:,.1f}"
        print(f"{rate} ({summary.workers} {summary.executor} workers)", file=stream)
    if summary.repeated_id_count:
        print(f"{summary.repeated_id_count:,} utterance ids are in more than one shard (see "
              f"summary.json's repeated_ids): the WER counts them more than once",
              file=stream)  # fmt: skip
    for failure in summary.failed:
        print(f"FAILED {failure['shard']} after {failure['attempts']} attempt(s): "
              f"{failure['error']}", file=stream)  # fmt: skip
    if summary.interrupted:
        by = f" ({summary.interrupted_by})" if summary.interrupted_by else ""
        print(f"interrupted{by}: finished shards are kept; run the same command again to "
              f"decode the rest", file=stream)  # fmt: skip
    print(f"outputs and summary.json in {out_dir}", file=stream)

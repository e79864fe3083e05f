"""Mutation fuzzing of every file loader, shared by ``tests/test_fuzz_loaders.py`` (Hypothesis)
and ``tools/fuzz_loaders.py`` (long runs): valid seed files, their loaders, byte mutations.

A loader passes an input when it returns, or raises a `WfstDecodeError` (for the command line:
exit status 2 and one ``wfstdecode: error:`` line), and the memory it allocates (as traced by
`tracemalloc`, which sees NumPy's buffers) stays small. Anything else "escapes".
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import random
import struct
import time
import tracemalloc
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..decoding_graph import DecodingGraph
from ..errors import WfstDecodeError
from ..fstio import write_openfst_bytes
from ..graph.grammar import read_arpa, read_arpa_unigrams
from ..graph.lexicon import read_lexicon
from ..symbols import SymbolTable
from .ctc import random_graph, random_log_probs
from .lm import random_arpa

KINDS = ("truncate", "flip", "insert", "delete", "overwrite")
# Payloads that reach past the first check of each format: numbers at their limits, separators,
# markers of ARPA and JSON, bytes that are not UTF-8, extreme int32/int64 and float32 patterns.
INTERESTING = (
    b"\x00", b"\xff", b"\n", b"\t", b" ", b"\\", b"-", b"#0", b"<s>", b"</s>", b"\\data\\",
    b"\\end\\", b"\\1-grams:", b"ngram 1=", b"nan", b"inf", b"-inf", b"1e400", b"-99",
    b"99999999999999999999", b'"', b"[", b"{", b"null", b"\xef\xbb\xbf", b"\xc3", b"\xed\xa0\x80",
    b"\xff\xff\xff\x7f", b"\x00\x00\x80\x7f", b"\x00\x00\x80\xff", b"\xff\xff\xff\xff",
    b"\x00\x00\x00\x80", b"\xff\xff\xff\xff\xff\xff\xff\x7f",
)  # fmt: skip
MEMORY_LIMIT = 200 << 20  # per input; the seeds are a few KB
TARGET_NAMES = (
    "tokens", "words", "lexicon", "lexicon-probs", "arpa", "arpa-unigrams", "arpa.gz", "tlg.npz",
    "tlg-deflated.npz", "openfst-vector", "openfst-const", "build.json", "log-probs.npz",
    "log-probs-deflated.npz", "log-probs.ark", "log-probs.ark.gz", "lattices.ark",
    "lattices.ark.gz",
)  # fmt: skip


@dataclass(frozen=True)
class Mutation:
    """One edit of a byte string; ``pos`` is taken modulo the length, so any int is valid."""

    kind: str
    pos: int
    value: int = 0  # the bit to flip (flip), the number of bytes (delete)
    payload: bytes = b""  # the bytes to insert or write over (insert, overwrite)

    def apply(self, data: bytes) -> bytes:
        if self.kind == "truncate":
            return data[: self.pos % (len(data) + 1)]
        if self.kind == "insert":
            i = self.pos % (len(data) + 1)
            return data[:i] + self.payload + data[i:]
        if not data:
            return data
        i = self.pos % len(data)
        if self.kind == "flip":
            return data[:i] + bytes([data[i] ^ (1 << self.value % 8)]) + data[i + 1 :]
        if self.kind == "delete":
            return data[:i] + data[i + 1 + self.value % 16 :]
        if self.kind == "overwrite":
            return data[:i] + self.payload + data[i + len(self.payload) :]
        raise ValueError(f"unknown mutation {self.kind!r}")


@dataclass(frozen=True)
class Case:
    """Mutations applied in turn, to the whole file or (``member`` given, for an ``.npz``) to one
    member's bytes, re-zipped with a valid CRC so that the ``.npy`` parsing is reached."""

    mutations: tuple[Mutation, ...]
    member: int | None = None


@dataclass(frozen=True)
class Target:
    """A loader, the valid file it is fed mutations of, and where that file is written."""

    name: str
    path: Path
    seed: bytes
    load: Callable[[Path], object]
    npz: bool = False

    def mutate(self, case: Case) -> bytes:
        if case.member is not None and self.npz:
            return _mutate_member(self.seed, case.member, case.mutations)
        data = self.seed
        for m in case.mutations:
            data = m.apply(data)
        return data


@dataclass
class Outcome:
    status: str  # "accepted", "error" (a WfstDecodeError) or "escaped"
    error: BaseException | None
    peak_bytes: int
    seconds: float


class CliError(WfstDecodeError):
    """The command line exited with status 2 and one ``wfstdecode: error:`` line."""


def random_case(rng: random.Random, target: Target) -> Case:
    """A `Case` of 1 to 3 mutations; for an ``.npz``, inside one member half of the time."""
    mutations = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        payload = (
            rng.choice(INTERESTING) if rng.random() < 0.5 else rng.randbytes(rng.randint(1, 8))
        )
        mutations.append(
            Mutation(rng.choice(KINDS), rng.getrandbits(24), rng.randrange(64), payload)
        )
    member = rng.randrange(16) if target.npz and rng.random() < 0.5 else None
    return Case(tuple(mutations), member)


def run(target: Target, data: bytes, trace: bool = True) -> Outcome:
    """Write ``data`` where ``target`` reads it, load it, and classify what came out; with
    ``trace``, measure the peak allocation of the load alone. Tracing is started and stopped
    around the load unless the caller keeps it on (cheaper for long runs: stopping and starting
    it again leaks a few KB each time)."""
    target.path.write_bytes(data)
    started = trace and not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    if trace:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
    status, error = "accepted", None
    start = time.perf_counter()
    try:
        target.load(target.path)
    except WfstDecodeError as exc:
        status, error = "error", exc
    except Exception as exc:  # what the fuzzer looks for
        status, error = "escaped", exc
    finally:
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] - base if trace else 0
        if started:
            tracemalloc.stop()
    if peak > MEMORY_LIMIT and status != "escaped":
        status, error = "escaped", MemoryError(f"allocated {peak / 2**20:.0f} MB for one input")
    return Outcome(status, error, peak, seconds)


def make_targets(workdir: Path, names: Sequence[str] | None = None) -> list[Target]:
    """Write the seed files under ``workdir`` and return the targets (all, or those named)."""
    workdir.mkdir(parents=True, exist_ok=True)
    graph = random_graph(seed=1, num_states=10, num_tokens=5, num_words=6)
    graph_dir = workdir / "graph"
    graph_dir.mkdir(exist_ok=True)
    graph.save(graph_dir / "TLG.npz")
    graph.tokens.write(workdir / "tokens.txt")
    tokens = graph.tokens
    words = [w for w, i in graph.words if i]
    pieces = [t for t, i in tokens if i]
    lexicon = "".join(f"{w} {' '.join(pieces[k % 4 : k % 4 + 2])}\n" for k, w in enumerate(words))
    with_probs = "".join(f"{w} 0.{k + 1} {pieces[k % 4]}\n" for k, w in enumerate(words))
    arpa = random_arpa(words, order=3, seed=0).encode()
    stages = [
        {"stage": s, "states": 10, "arcs": 40, "seconds": 0.01, "peak_rss_mb": 90.5}
        for s in ("L", "G", "LG", "TLG")
    ]
    report = json.dumps({"wfstdecode_graph_dir": 1, "stages": stages, "topology": "compact"})
    stored_graph = (graph_dir / "TLG.npz").read_bytes()
    log_probs = _log_probs_npz(tokens.symbols(), words[:2])
    fst = graph.to_arrays()
    lattices = _lattice_archive(graph)
    seeds = [
        ("tokens", "tokens.txt", (workdir / "tokens.txt").read_bytes(), SymbolTable.read, False),
        ("words", "words.txt", _table_bytes(graph.words), SymbolTable.read, False),
        ("lexicon", "lexicon.txt", lexicon.encode(), lambda p: read_lexicon(p, tokens), False),
        ("lexicon-probs", "lexicon-probs.txt", with_probs.encode(),
         lambda p: read_lexicon(p, tokens, with_probs=True), False),
        ("arpa", "lm.arpa", arpa, read_arpa, False),
        ("arpa-unigrams", "lm-unigrams.arpa", arpa, read_arpa_unigrams, False),
        ("arpa.gz", "lm.arpa.gz", gzip.compress(arpa, mtime=0), read_arpa, False),
        ("tlg.npz", "tlg.npz", stored_graph, DecodingGraph.load, True),
        ("tlg-deflated.npz", "tlg-deflated.npz", _deflated(stored_graph), DecodingGraph.load,
         True),
        ("openfst-vector", "vector.fst", write_openfst_bytes(fst), DecodingGraph.from_openfst,
         False),
        ("openfst-const", "const.fst", write_openfst_bytes(fst, "const"),
         DecodingGraph.from_openfst, False),
        ("build.json", "graph/build.json", report.encode(), _info, False),
        ("log-probs.npz", "log-probs.npz", log_probs, _load_log_probs, True),
        ("log-probs-deflated.npz", "log-probs-deflated.npz", _deflated(log_probs),
         _load_log_probs, True),
        ("log-probs.ark", "log-probs.ark", _kaldi_table(len(tokens)), _load_log_probs, False),
        ("log-probs.ark.gz", "log-probs.ark.gz", gzip.compress(_kaldi_table(len(tokens)),
                                                               mtime=0), _load_log_probs, False),
        ("lattices.ark", "lattices.ark", lattices, _load_lattices, False),
        ("lattices.ark.gz", "lattices.ark.gz", gzip.compress(lattices, mtime=0), _load_lattices,
         False),
    ]  # fmt: skip
    targets = [Target(n, workdir / f, seed, load, npz) for n, f, seed, load, npz in seeds]
    assert tuple(t.name for t in targets) == TARGET_NAMES
    unknown = set(names or ()) - set(TARGET_NAMES)
    if unknown:
        raise ValueError(f"no fuzz targets {sorted(unknown)}; there are {', '.join(TARGET_NAMES)}")
    return [t for t in targets if names is None or t.name in names]


def _load_log_probs(path: Path):
    import warnings

    from ..ctc.npz import load_emissions

    with warnings.catch_warnings():  # (a mutated member name may look misspelled: said, fine)
        warnings.simplefilter("ignore", UserWarning)
        return load_emissions(path)


def _load_lattices(path: Path):
    from ..lattice_io import read_kaldi_archive

    return read_kaldi_archive(path, keep_compact=True)


def _lattice_archive(graph: DecodingGraph) -> bytes:
    """A Kaldi archive holding a word-determinized CompactLattice and a state-level Lattice."""
    from ..compact_lattice import determinize
    from ..ctc import CtcBeamOptions, ctc_lattices

    lp = random_log_probs(3, 1, 6, graph.num_tokens)
    (lat,) = ctc_lattices(
        lp, np.array([6]), graph, CtcBeamOptions(lattice_beam=8.0), backend="reference"
    )
    return b"c \0B" + determinize(lat).kaldi_bytes() + b"s \0B" + lat.kaldi_bytes()


def _info(path: Path) -> None:
    """``wfstdecode info`` on the graph directory holding ``path`` (its build.json)."""
    from ..cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["info", str(path.parent)])
    message = err.getvalue()
    if status == 2 and message.startswith("wfstdecode: error: ") and message.count("\n") == 1:
        raise CliError(message.strip())
    if status != 0:
        raise AssertionError(f"wfstdecode info exited {status} with {message!r}")


def _table_bytes(table: SymbolTable) -> bytes:
    return "".join(f"{s} {i}\n" for s, i in table).encode()


def _log_probs_npz(tokens: list[str], texts: list[str]) -> bytes:
    buf = io.BytesIO()
    lp = random_log_probs(0, len(texts), 6, len(tokens))
    np.savez(buf, log_probs=lp, lengths=np.array([6, 4]), texts=np.array(texts),
             ids=np.array(["utt-a", "utt-b"]), tokens=np.array(tokens))  # fmt: skip
    return buf.getvalue()


def _kaldi_table(width: int) -> bytes:
    """A Kaldi archive holding each kind of matrix it may: binary float and double, compressed
    with column percentiles (CM), two-byte (CM2) and one-byte (CM3) codes, text."""
    rng = np.random.default_rng(0)
    lp = random_log_probs(0, 1, 6, width)[0]

    def entry(key: str, kind: bytes, body: bytes) -> bytes:
        return key.encode() + b" \0B" + kind + body

    def dims(rows: int, cols: int) -> bytes:
        return b"\x04" + struct.pack("<i", rows) + b"\x04" + struct.pack("<i", cols)

    head = struct.pack("<ffii", -30.0, 30.0, 6, width)
    percentiles = np.sort(rng.integers(0, 65536, (width, 4)), axis=1).astype("<u2")
    text = " [\n" + "".join(" " + " ".join(f"{v:g}" for v in row) + " \n" for row in lp) + "]\n"
    return b"".join([
        entry("float", b"FM ", dims(6, width) + lp.astype("<f4").tobytes()),
        entry("double", b"DM ", dims(4, width) + lp[:4].astype("<f8").tobytes()),
        entry("cm", b"CM ", head + percentiles.tobytes() + rng.bytes(6 * width)),
        entry("cm2", b"CM2 ", head + rng.bytes(2 * 6 * width)),
        entry("cm3", b"CM3 ", head + rng.bytes(6 * width)),
        b"text" + text.encode(),
    ])  # fmt: skip


def _deflated(npz: bytes) -> bytes:
    """The same archive with deflated members, as `numpy.savez_compressed` writes."""
    return _rezip(npz, lambda i, body: body, zipfile.ZIP_DEFLATED)


def _mutate_member(npz: bytes, member: int, mutations: Sequence[Mutation]) -> bytes:
    def edit(i: int, body: bytes) -> bytes:
        if i == member % count:
            for m in mutations:
                body = m.apply(body)
        return body

    with zipfile.ZipFile(io.BytesIO(npz)) as z:
        count = len(z.infolist())
    return _rezip(npz, edit, None)


def _rezip(npz: bytes, edit: Callable[[int, bytes], bytes], compression: int | None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(npz)) as src, zipfile.ZipFile(out, "w") as dst:
        for i, info in enumerate(src.infolist()):
            new = zipfile.ZipInfo(info.filename, info.date_time)
            new.compress_type = info.compress_type if compression is None else compression
            dst.writestr(new, edit(i, src.read(info)))
    return out.getvalue()


@dataclass
class Tally:
    """Per-target counts of a fuzz run."""

    inputs: int = 0
    errors: int = 0
    accepted: int = 0
    escaped: dict[str, int] = field(default_factory=dict)
    peak_bytes: int = 0
    max_seconds: float = 0.0

    def add(self, outcome: Outcome) -> None:
        self.inputs += 1
        self.errors += outcome.status == "error"
        self.accepted += outcome.status == "accepted"
        if outcome.status == "escaped":
            kind = type(outcome.error).__name__
            self.escaped[kind] = self.escaped.get(kind, 0) + 1
        self.peak_bytes = max(self.peak_bytes, outcome.peak_bytes)
        self.max_seconds = max(self.max_seconds, outcome.seconds)

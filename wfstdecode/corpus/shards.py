"""The worker side of a corpus decode: one shard in, its JSONL lines and counts out.

`CtcCorpusDecoder` is the picklable description a worker receives (graph path and options); its
`load` runs once per worker and returns the function that decodes shards against the graph it
loaded. Any picklable object with ``load()`` returning ``(shard path, shard name) ->
ShardOutput`` and a ``config()`` describing what changes results can stand in for it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from ..errors import DecodeInputError, InputFileError, OptionsError
from ..metrics import edit_distance
from ..results import Hypothesis, finite_or_none, frame_shift_problem
from ..safe_io import file_sha256, json_line

# Errors a shard raises on every attempt: retrying cannot help, so it fails at once.
PERMANENT_ERRORS = (InputFileError, DecodeInputError, OptionsError)


class ShardChangedError(RuntimeError):
    """The shard's file changed while it was being decoded (retried: the next attempt reads the
    new contents)."""


@dataclass(frozen=True)
class InputId:
    """What identifies a shard's contents: size, modification time and SHA-256."""

    bytes: int
    mtime_ns: int
    sha256: str


@dataclass(frozen=True)
class ShardOutput:
    """A decoded shard: ``text`` its JSONL (one line per utterance, in the shard's order), the
    counts the summary adds up (``errors`` / ``ref_words`` when it has reference texts), and
    ``lattices``, a gzip-compressed Kaldi archive of its lattices when the decoder writes them."""

    text: str
    utterances: int
    frames: int
    input: InputId
    wall_seconds: float
    cpu_seconds: float
    worker: str
    errors: int | None = None
    ref_words: int | None = None
    memory_mb: dict = field(default_factory=dict)  # `worker_memory` after the shard
    lattices: bytes | None = None


@dataclass(frozen=True)
class CtcCorpusDecoder:
    """Decode ``.npz`` log-prob shards, or Kaldi archives (``.ark``, or gzip-compressed
    ``.ark.gz``), as ``wfstdecode decode`` reads them, against a graph.

    graph:       a graph directory or ``TLG.npz``;
    options:     `CtcBeamOptions` (None = defaults); boosts: one ``phrase -> bonus`` mapping (a
                 shard's own ``boosts`` member adds per-utterance lists, `wfstdecode.ctc.npz`);
    backend:     as `decode_ctc` (``"cuda"`` on GPU workers);
    num_threads: Numba threads per worker (cpu backend; the others take none);
    mmap:        map the graph file (pages shared by the workers of a node) instead of reading it;
    frame_shift: seconds per frame: word times in seconds besides frames, and RTFx;
    oov_lexicon: pronunciations of boosted words the graph lacks, for a graph with an oov slot
                 (`decode_ctc`);
    references:  ``{utterance id: transcript}`` (`wfstdecode.ctc.read_reference_texts`) in place
                 of the shards' ``texts``: every utterance of a shard needs one, and the shard
                 ids (an ``.npz`` without ``ids`` fails: its utterances have no names);
    rescoring:   `wfstdecode.rescore.RescoringFiles`: each lattice (``options.lattice_beam``)
                 rescored with a larger LM, which each worker reads once (as ``decode
                 --rescore-lm``);
    lattices:    ``"determinized"`` or ``"state"``: each shard's lattices (rescored, with
                 ``rescoring``) written beside its output as ``NAME.lat.gz``, a gzip-compressed
                 Kaldi archive keyed by utterance id, of CompactLattices determinized on words
                 or of state-level Lattices (as ``decode --write-lattices`` writes them;
                 utterances whose search died have none).
    """

    graph: str
    options: object = None
    boosts: Mapping[str, float] | None = None
    backend: str = "cpu"
    num_threads: int | None = 1
    mmap: bool = True
    frame_shift: float | None = None
    oov_lexicon: Mapping | None = None
    references: Mapping[str, str] | None = None
    rescoring: object = None
    lattices: str | None = None
    _graph_id: str = field(default="", compare=False, repr=False)

    def __post_init__(self):
        from ..ctc import CtcBeamOptions
        from ..ctc.tuning import int_at_least
        from ..decoding_graph import GRAPH_FILE, DecodingGraph

        options = CtcBeamOptions() if self.options is None else self.options
        if not isinstance(options, CtcBeamOptions):
            raise OptionsError(f"options must be a CtcBeamOptions; got {type(options).__name__}")
        if self.frame_shift is not None and (problem := frame_shift_problem(self.frame_shift)):
            raise OptionsError(f"frame_shift {problem}")
        if self.frame_shift is not None:  # (a NumPy float32 is no JSON for the run's config)
            object.__setattr__(self, "frame_shift", float(self.frame_shift))
        # checked here, in the driver: else every shard fails in its worker (any backend's)
        int_at_least("CtcCorpusDecoder", "num_threads", self.num_threads, 1, allow_none=True)
        if self.lattices not in (None, "determinized", "state"):
            raise OptionsError("lattices must be None, 'determinized' or 'state'; got "
                               f"{self.lattices!r}")  # fmt: skip
        if self.lattices is not None:
            from ..ctc.search import check_lattices_kept

            check_lattices_kept(options, "CtcCorpusDecoder(lattices=...)")
        path = Path(self.graph)
        path = path / GRAPH_FILE if path.is_dir() else path
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "graph", str(path.absolute()))
        object.__setattr__(self, "_graph_id", graph_content_id(path))
        # checked here, in the driver, so that what every shard would fail on fails before any
        # worker starts, and unknown boosted words warn once, not per shard
        graph = DecodingGraph.load(self.graph, mmap=True)
        if self.oov_lexicon and "oov_slot" not in graph.metadata:
            raise OptionsError("oov_lexicon needs a graph with an oov slot (build-tlg --oov-slot)")
        self._check_rescoring(graph)
        object.__setattr__(self, "boosts", self._known_boosts(graph))

    def _known_boosts(self, graph) -> dict | None:
        """The boosts of words the graph has (or can spell through its oov slot)."""
        from ..ctc.boost import resolve_boosts, resolve_phrase
        from ..ctc.oov import OovSpeller
        from ..ctc.search import largest_label, output_words

        if not self.boosts:
            return None
        oov = OovSpeller(graph, self.oov_lexicon) if "oov_slot" in graph.metadata else None
        # without a word table, ids beyond the graph's output labels are unknown words
        largest = None if graph.words is not None else largest_label(graph, "olabel")
        words = output_words(graph)  # (the words a boost can name, as decode_ctc has them)
        resolve_boosts(self.boosts, 1, words, oov, largest)  # raises, or warns once

        def known(key) -> bool:
            ids = resolve_phrase(key, words, oov)
            return ids is not None and (largest is None or max(ids) <= largest)

        return {k: float(v) for k, v in self.boosts.items() if known(k)} or None

    def _check_rescoring(self, graph) -> None:
        """What `decode_ctc` would refuse in every shard, and LMs no worker could read."""
        from ..graph.grammar import read_arpa_unigrams
        from ..rescore import RescoringFiles, check_first_pass_lm, check_rescorable

        if self.rescoring is None:
            return
        if not isinstance(self.rescoring, RescoringFiles):
            raise OptionsError("rescoring must be a RescoringFiles; got "
                               f"{type(self.rescoring).__name__}")  # fmt: skip
        if self.options.lattice_beam is None:
            raise OptionsError("rescoring rescores lattices: set options.lattice_beam")
        check_rescorable(graph, f"the graph {self.graph}")
        for path in (self.rescoring.new_lm, self.rescoring.old_lm):
            if path is None:
                continue
            if not os.path.isfile(path):  # (a pipe: read by one worker, and hashed, at most)
                raise InputFileError(path, None, "not a regular file: each worker reads the LM "
                                     "itself and the run's config holds its SHA-256")  # fmt: skip
            # not an ARPA file (a KenLM binary, a words.txt), or not the graph's LM: refused
            # here, not by each worker after run.json names it (its unigrams only: a fraction
            # of the file)
            unigrams = read_arpa_unigrams(path)
            if path == self.rescoring.old_lm:
                words = {word for word, _ in unigrams}
                check_first_pass_lm(graph, words.__contains__, path, f"the graph {self.graph}")

    def config(self) -> dict:
        """Everything that changes the output (the backend and thread count do not): a run's
        outputs are reused only by a run with the same config."""
        lexicon = None
        if self.oov_lexicon:
            from ..ctc.oov import checked_lexicon

            checked = checked_lexicon(self.oov_lexicon)
            lexicon = {w: [list(p) for p in checked[w]] for w in sorted(checked)}
        return {
            "decoder": "ctc",
            "graph_content": self._graph_id,  # not its path: a moved graph is the same graph
            "options": _options_config(self.options),
            "boosts": {str(k): v for k, v in self.boosts.items()} if self.boosts else None,
            "oov_lexicon": lexicon,
            "frame_shift": self.frame_shift,
            "references_sha256": None if self.references is None else hashlib.sha256(
                json.dumps(sorted(self.references.items())).encode()).hexdigest(),
            # (only when set: runs written before these existed keep their config)
            **({} if self.rescoring is None else {"rescoring": self.rescoring.config()}),
            **({} if self.lattices is None else {"lattices": self.lattices}),
        }  # fmt: skip

    shard_suffixes: ClassVar[tuple[str, ...]] = (".npz", ".ark", ".ark.gz")

    def load(self) -> Callable[[Path], ShardOutput]:
        """Load the graph (once per worker) and return the shard decoder."""
        from ..decoding_graph import DecodingGraph

        graph = DecodingGraph.load(self.graph, mmap=self.mmap)
        rescore = None if self.rescoring is None else self.rescoring.load()  # (the LMs read)
        return lambda path, name: self._decode(graph, rescore, Path(path), name)

    def _decode(self, graph, rescore, path: Path, name: str) -> ShardOutput:
        from ..ctc.npz import decode_npz

        # the threads are the cpu search's (a shard's log-probs are on the host: "auto" is cpu);
        # handed to the reference or cuda backend they failed every shard
        threads = self.num_threads if self.backend in ("cpu", "auto") else None

        found = {}

        def run(path):
            has_ids = _has_ids(path)
            if self.references is not None and not has_ids:
                raise InputFileError(path, None, "has no 'ids': the reference texts name "
                                                 "utterances by id")  # fmt: skip
            if not has_ids and _has_member(path, "boosts"):  # (decode's utt0000 ids, not ours)
                raise InputFileError(path, None, "has 'boosts' but no 'ids': its boosts name "
                                                 "utterances by id, and without ids its lines "
                                                 f"are named {name}-INDEX; give the shard "
                                                 "its ids")  # fmt: skip

            def keys(ids):  # the lattices' keys, as the lines name the utterances
                return ids if has_ids else [f"{name}-{i}" for i in range(len(ids))]

            check = None
            if self.lattices is not None:  # keys no archive holds: refused before the search
                from ..lattice_io import check_archive_keys

                def check(ids):
                    check_archive_keys(keys(ids))

            r = decode_npz(path, graph, self.options, self.boosts, backend=self.backend,
                           num_threads=threads, oov_lexicon=self.oov_lexicon,
                           references=self.references, rescore=rescore,
                           lattices=self.lattices is not None, check_ids=check)  # fmt: skip
            if self.lattices is not None:  # (here: timed with the shard)
                found["lattices"] = self._archive(name, keys(r.ids), r.lattices)
            return r.ids, r.hypotheses, r.lengths, r.references

        output = decode_shard(path, name, run, self.frame_shift, nbest=self.options.nbest)
        return dataclasses.replace(output, lattices=found.get("lattices"))

    def _archive(self, name: str, ids: list[str], lattices: list) -> bytes:
        """The gzip-compressed Kaldi archive of a shard's lattices (those whose search lived)."""
        import gzip
        import io

        from ..lattice_io import determinized_on_words, write_kaldi_archive

        kept = {u: lat for u, lat in zip(ids, lattices, strict=True) if lat}
        if self.lattices == "determinized":  # (a lowered beam: said in the worker's log)
            kept = determinized_on_words(kept, self.options.lattice_beam, f"{name}: ")
        buffer = io.BytesIO()
        write_kaldi_archive(kept, buffer)
        return gzip.compress(buffer.getvalue(), mtime=0)


def decode_shard(path: Path, name: str, run, frame_shift, tokens: bool = False,
                 nbest: int = 1, durations: bool = False) -> ShardOutput:  # fmt: skip
    """A shard's `ShardOutput` from ``run(path) -> (ids, hypotheses, frames, references)`` (a
    decoder's reading of the file); ``tokens``: the lines carry the tokens, their frames and
    durations too (token-level decoders; ``durations``: a TDT model's, the key even when empty);
    ``nbest`` > 1: every line has its n-best list."""
    before = input_id(path)
    wall, cpu = time.perf_counter(), time.process_time()
    ids, hypotheses, lengths, references = run(path)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if _stat_id(path) != (before.bytes, before.mtime_ns):
        raise ShardChangedError(f"{path} changed while it was being decoded")
    ids = ids if _has_ids(path) else [f"{name}-{i}" for i in range(len(ids))]
    refs = references or [None] * len(ids)
    records = [
        utterance_record(utt, hyps, frames, ref, frame_shift, tokens, nbest > 1, durations)
        for utt, hyps, frames, ref in zip(ids, hypotheses, lengths, refs, strict=True)
    ]
    lines = "".join(json_line(r) + "\n" for r in records)
    counted = references is not None
    return ShardOutput(
        text=lines, utterances=len(records), frames=sum(lengths), input=before,
        wall_seconds=wall, cpu_seconds=cpu, worker=f"{socket.gethostname()}:{os.getpid()}",
        errors=sum(r["errors"] for r in records) if counted else None,
        ref_words=sum(len(r.split()) for r in refs) if counted else None,
        memory_mb=worker_memory(),
    )  # fmt: skip


def utterance_record(
    utt: str, hyps: list[Hypothesis], frames: int, reference: str | None,
    frame_shift: float | None, tokens: bool = False, ranked: bool = False,
    durations: bool = False,
) -> dict:  # fmt: skip
    """One output line: the utterance's id, its best hypothesis (`Hypothesis.record`), its
    frames, with ``ranked`` its n-best list (however long), and the reference with the word
    errors when the shard has one."""
    best = hyps[0] if hyps else Hypothesis((), (), -math.inf, notes=("no hypothesis",))
    record = {"id": utt, **best.record(frame_shift, tokens, durations), "frames": frames}
    if ranked:
        record["nbest"] = [{"text": h.text, "score": finite_or_none(h.score)} for h in hyps]
    if reference is not None:
        record["ref"] = reference
        record["errors"] = edit_distance(reference.split(), best.text.split())
    return record


def _has_ids(path: Path) -> bool:
    return path.suffix.lower() != ".npz" or _has_member(path, "ids")  # (a Kaldi archive's keys)


def _has_member(path: Path, member: str) -> bool:
    """Whether the ``.npz`` shard ``path`` holds ``member`` (a Kaldi archive holds none)."""
    from ..safe_io import NpzArchive

    if path.suffix.lower() != ".npz":
        return False
    with NpzArchive(path, (member,), lambda m: InputFileError(path, None, m)) as z:
        return member in z.names


def input_id(path: Path) -> InputId:
    """Size, mtime and SHA-256 of ``path``, read in chunks. A file that is missing, a directory
    or not readable raises `InputFileError` (retrying cannot help); other OSErrors pass."""
    try:
        size, mtime = _stat_id(path)
        digest = file_sha256(path)
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        raise InputFileError(path, None, f"cannot read: {exc.strerror}") from None
    return InputId(size, mtime, digest)


def _stat_id(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def worker_memory() -> dict:
    """This process's memory in MB from Linux's ``/proc/self/smaps_rollup`` ({} elsewhere):
    ``rss``; ``pss`` (shared pages split among the processes that map them: what the node
    really spends on this worker); ``anonymous`` (private heap: a graph that was read, not
    mapped, is here); ``file`` (``rss - anonymous``: mapped files, a mapped graph included)."""
    try:
        with open("/proc/self/smaps_rollup") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line and "-" not in line[:12])
    except OSError:
        return {}
    kb = {k: int(v.split()[0]) for k, v in fields.items() if v.strip().endswith("kB")}
    rss, anon = kb.get("Rss", 0), kb.get("Anonymous", 0)
    return {"rss": round(rss / 1024, 1), "pss": round(kb.get("Pss", 0) / 1024, 1),
            "anonymous": round(anon / 1024, 1), "file": round((rss - anon) / 1024, 1)}  # fmt: skip


def graph_content_id(path: Path) -> str:
    """A digest of a graph file's contents from its zip directory (each member's name, size and
    CRC-32), so that identifying a multi-gigabyte graph reads kilobytes, not the file."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            entries = sorted((i.filename, i.file_size, i.CRC) for i in z.infolist())
    except (OSError, zipfile.BadZipFile) as exc:
        raise InputFileError(path, None, f"cannot read the graph ({exc})") from None
    return hashlib.sha256(repr(entries).encode()).hexdigest()


def _options_config(options) -> dict:
    """``options`` as a config's dict; ``blank_skip_threshold`` only when set (runs written
    before it existed keep their config)."""
    config = dataclasses.asdict(options)
    if config["blank_skip_threshold"] is None:
        del config["blank_skip_threshold"]
    return config

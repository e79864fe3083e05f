"""`DecodingGraph`: a TLG (or any decoding WFST) as CSR arrays — the one boundary between
OpenFst-side graph building and the decoders.

Layout (shared by every backend, mirrored on the GPU):

* arcs are stored emitting first (ilabel != 0, grouped by source state; `from_arrays` puts a
  state's ilabels in ascending order, a graph made or loaded from arrays keeps theirs: no
  decoder needs that order, only exact ties follow arc order, alike in every backend), then
  non-emitting (ilabel == 0, grouped by source state);
* state ``s`` owns emitting arcs ``e_offsets[s] : e_offsets[s + 1]`` and non-emitting arcs
  ``ne_offsets[s] : ne_offsets[s + 1]`` (``ne_offsets[0] == number of emitting arcs``);
* per arc: ``next_state`` int32, ``weight`` float32 cost, ``ilabel`` int32, ``olabel`` int32;
* ``final_cost[s]`` (+inf for non-final states), ``start``.

Input label ``k >= 1`` reads column ``k - 1`` of the log-probs (so blank, token id 0, is ilabel 1);
output labels are word ids of ``words`` (0 = epsilon). Costs follow OpenFst: lower is better.

A graph built here also keeps its lexicon (`Pronunciations`): label pushing moves a word's output
label away from its tokens, and the pronunciations say which tokens of a path are the word's.

A graph is a value: its arrays are checked once, when it is made, and the decoders keep values
derived from them per graph (arc costs with the penalties, the largest labels, device copies).
Change a graph by making a new one (``dataclasses.replace`` or `from_arrays`), never its arrays
in place: a decoder that saw the graph before would go on with the old values.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from .errors import GraphError, WfstDecodeError
from .fstio import FstArrays, checked_array, read_openfst, write_openfst
from .safe_io import MAX_JSON_BYTES, NpzArchive, json_object, replacing, write_aligned_npz
from .symbols import EPSILON, SymbolTable, blank_symbol, is_disambig, model_tokens

GRAPH_FILE = "TLG.npz"
FORMAT_VERSION = 1
# The largest cost of an arc or a final state: far beyond any model's (a -log-probability of
# 1e30 is a probability of 0), and a path of up to ~1e8 of them sums to a float32 (3.4e38).
MAX_COST = 1e30


@dataclass(frozen=True, eq=False)
class Pronunciations:
    """Pronunciation ``i`` is word id ``word[i]`` spelled by the token ids
    ``tokens[offsets[i] : offsets[i + 1]]`` (not empty)."""

    word: np.ndarray  # int32 (P,)
    offsets: np.ndarray  # int64 (P + 1,)
    tokens: np.ndarray  # int32

    def __post_init__(self):  # integers that do not fit raise, never wrap
        for name, dtype in (("word", np.int32), ("offsets", np.int64), ("tokens", np.int32)):
            value = checked_array(f"pron_{name}", getattr(self, name), dtype)
            object.__setattr__(self, name, value)

    @classmethod
    def from_lexicon(cls, entries, tokens: SymbolTable, words: SymbolTable) -> Pronunciations:
        """From `LexiconEntry` objects (``word``, ``tokens`` as symbols)."""
        lengths = [len(e.tokens) for e in entries]
        return cls(
            np.array([words.id(e.word) for e in entries], np.int32),
            np.concatenate(([0], np.cumsum(lengths, dtype=np.int64))).astype(np.int64),
            np.array([tokens.id(t) for e in entries for t in e.tokens], np.int32),
        )

    @cached_property
    def by_word(self) -> dict[int, list[tuple[int, ...]]]:
        """word id -> its pronunciations as tuples of token ids."""
        out: dict[int, list[tuple[int, ...]]] = {}
        flat, offsets = self.tokens.tolist(), self.offsets.tolist()
        for i, w in enumerate(self.word.tolist()):
            out.setdefault(w, []).append(tuple(flat[offsets[i] : offsets[i + 1]]))
        return out

    def check(self, num_tokens: int, num_words: int | None) -> None:
        o = self.offsets
        if (len(o) != len(self.word) + 1 or o[0] != 0 or o[-1] != len(self.tokens)
                or (np.diff(o) <= 0).any()):  # fmt: skip
            raise GraphError("pronunciation offsets are not a valid layout of non-empty spellings")
        if len(self.tokens) and (self.tokens.min() < 0 or self.tokens.max() >= num_tokens):
            raise GraphError("a pronunciation holds a token id outside the token table")
        if len(self.word) and (
            self.word.min() < 0 or (num_words is not None and self.word.max() >= num_words)
        ):
            raise GraphError("a pronunciation belongs to a word id outside the word table")


@dataclass(frozen=True, eq=False)
class DecodingGraph:
    """A decoding WFST (a TLG) as CSR arrays, emitting arcs first (the module docstring gives
    the layout), with its token and word tables, lexicon and build metadata. Made by
    `wfstdecode.graph.build_tlg`, `load` (a ``build-tlg`` directory or a saved ``.npz``),
    `from_openfst` or `from_arrays`.

    A graph is a value: the decoders keep what they derive from it per graph (arc costs with
    the penalties, the largest labels, device copies). Change one by making a new one
    (``dataclasses.replace`` or `from_arrays`), never its arrays in place."""

    start: int
    final_cost: np.ndarray
    e_offsets: np.ndarray
    ne_offsets: np.ndarray
    next_state: np.ndarray
    weight: np.ndarray
    ilabel: np.ndarray
    olabel: np.ndarray
    tokens: SymbolTable | None = None
    words: SymbolTable | None = None
    metadata: dict = field(default_factory=dict)
    pronunciations: Pronunciations | None = None

    def __post_init__(self):
        self._validate()

    # ----- construction -------------------------------------------------------------------
    @classmethod
    def from_arrays(
        cls, fst: FstArrays, tokens: SymbolTable | None = None,
        words: SymbolTable | None = None, metadata: dict | None = None,
        pronunciations: Pronunciations | None = None,
    ) -> DecodingGraph:  # fmt: skip
        """Lay out an arc list in CSR order (emitting arcs first, then epsilon-input arcs).

        Arcs of weight +inf (OpenFst's Zero: an arc that can never be taken) are left out."""
        if np.isposinf(fst.weight).any():
            keep = ~np.isposinf(fst.weight)
            fst = FstArrays(fst.start, fst.final, fst.src[keep], fst.dst[keep],
                            fst.ilabel[keep], fst.olabel[keep], fst.weight[keep])  # fmt: skip
        n = fst.num_states
        emitting = fst.ilabel != 0
        # Sort key: emitting block first, then by source state, then by ilabel (stable).
        order = np.lexsort((fst.ilabel, fst.src, ~emitting))
        n_emit = int(emitting.sum())
        e_counts = np.bincount(fst.src[emitting], minlength=n)
        ne_counts = np.bincount(fst.src[~emitting], minlength=n)
        e_offsets = np.concatenate(([0], np.cumsum(e_counts))).astype(np.int64)
        ne_offsets = (n_emit + np.concatenate(([0], np.cumsum(ne_counts)))).astype(np.int64)
        return cls(
            start=int(fst.start), final_cost=fst.final.copy(), e_offsets=e_offsets,
            ne_offsets=ne_offsets, next_state=fst.dst[order], weight=fst.weight[order],
            ilabel=fst.ilabel[order], olabel=fst.olabel[order], tokens=tokens, words=words,
            metadata=dict(metadata or {}), pronunciations=pronunciations,
        )  # fmt: skip

    def to_arrays(self) -> FstArrays:
        """The graph as an arc list (arcs grouped by state, emitting before epsilon arcs)."""
        n = self.num_states
        src_e = np.repeat(np.arange(n, dtype=np.int32), np.diff(self.e_offsets))
        src_ne = np.repeat(np.arange(n, dtype=np.int32), np.diff(self.ne_offsets))
        return FstArrays(
            self.start, self.final_cost, np.concatenate((src_e, src_ne)), self.next_state,
            self.ilabel, self.olabel, self.weight,
        )  # fmt: skip

    @classmethod
    def from_openfst(
        cls, path: str | os.PathLike, tokens: SymbolTable | str | os.PathLike | None = None,
        words: SymbolTable | str | os.PathLike | None = None, *,
        topology: str | None = None, separator: str | None = None, lexicon=None,
    ) -> DecodingGraph:  # fmt: skip
        """Load an OpenFst binary graph (e.g. a TLG.fst / HLG.fst from Kaldi, icefall or riva
        scripts) whose input labels are token id + 1 and output labels are word ids.

        An OpenFst file does not say how its T was built; what the paths need to know is given
        here: ``topology`` "minimal" (every non-blank frame a token: a self-loop is no CTC
        repeat; default: "normal"/"compact" behaviour) and ``separator``, the word-separator
        token (word times from the token runs between separators; needs ``tokens``). A token
        table counting from ``<eps>`` 0 that names its blank (Kaldi's ``<blk>`` 1, riva's ``<blk>``
        after the units) is read one lower, as this graph's input label k reads log-prob column
        k - 1 (k2's tables count from the blank, ``<blk>`` 0); icefall's trailing ``#k`` tokens
        are left out (`model_tokens`). A word table ending with the labels of ``build-tlg
        --oov-slot`` (``<oov>``, ``</oov>``, ``<oov:TOKEN>``…) gives the graph that slot, closed
        unless boosted, its words spelled from the pronunciations given at decode time
        (``oov_lexicon``: the file does not say how the build spelled them). ``lexicon``: the
        build's lexicon (a ``word tok1 tok2 …`` file, or `LexiconEntry` objects), so that word
        times follow the words' pronunciations on a graph without a separator (without it they
        fall back to the spans between output labels, which determinization moves); words the
        word table lacks are left out with a warning."""
        from .graph.oov_slot import OPEN as OOV_OPEN
        from .graph.oov_slot import OovSlot, is_slot_label
        from .graph.topo import TOPOLOGIES

        tokens = SymbolTable.read(tokens) if isinstance(tokens, (str, os.PathLike)) else tokens
        words = SymbolTable.read(words) if isinstance(words, (str, os.PathLike)) else words
        metadata = {"source": str(path)}
        if words is not None and words.has_id(0) and not _special(zero := words.symbol(0)):
            # OpenFst's label 0 is the epsilon: a word there is never output, and a table that
            # lacks its "<eps> 0" line (counting words from 0) names every word one off
            raise GraphError(f"the word table gives id 0 to {zero!r}, but output label 0 is the "
                             f"epsilon (no word): a word table starts with '{EPSILON} 0' and "
                             "counts its words from 1")  # fmt: skip
        if (tokens is not None and tokens.get(EPSILON) == 0
                and blank_symbol(tokens) is not None):  # fmt: skip
            # Kaldi's (EESEN's) tables count from <eps> 0, <blk> 1, riva's from <eps> 0 with
            # <blk> after the units (NeMo's blank last), and their graphs read token id = input
            # label; here input label = id + 1: the same graph, the table one lower. (A table
            # with <eps> 0 and no blank symbol, k2's phones, has its blank at 0: kept.)
            tokens = SymbolTable((s, i - 1) for s, i in tokens if i != 0)
            metadata["tokens_renumbered"] = "the table's <eps> 0 dropped, every id one lower"
        given = tokens  # (its #k names a label the graph should not hold)
        if tokens is not None:
            tokens = model_tokens(tokens)
        if topology is not None:
            if topology not in TOPOLOGIES:
                raise GraphError(f"topology must be one of {TOPOLOGIES}; got {topology!r}")
            metadata["topology"] = topology
        if separator is not None:
            if tokens is None or separator not in tokens:
                raise GraphError(f"separator {separator!r} is not in the token table"
                                 + (" (none given)" if tokens is None else ""))  # fmt: skip
            blank = blank_symbol(tokens)
            if tokens.id(separator) == (0 if blank is None else tokens.id(blank)):
                raise GraphError(f"separator {separator!r} is token "
                                 f"{tokens.id(separator)}, the blank")  # fmt: skip
            metadata["separator"] = separator
        slot_ids = range(words.id(OOV_OPEN), words.next_id) if OOV_OPEN in (words or ()) else ()
        if slot_ids and all(is_slot_label(words.symbol(i)) for i in slot_ids if words.has_id(i)):
            # build-tlg --oov-slot's labels end the table. The file does not say how the slot
            # spelled words: from pronunciations given at decode time (--oov-lexicon); read as
            # words, the slot was open to any spelling at no cost
            metadata["oov_slot"] = {"spelling": "lexicon"}
        fst = read_openfst(path)
        if tokens is not None and (fst.ilabel > tokens.next_id).any():
            label = int(fst.ilabel[fst.ilabel > tokens.next_id][0])
            sym = given.symbol(label - 1) if given.has_id(label - 1) else ""
            if is_disambig(sym):
                raise GraphError(f"{path}: input label {label} is the token table's "
                                 f"disambiguation symbol {sym!r}: the graph still holds its "
                                 "disambiguation symbols; remove them before the import (e.g. "
                                 "fstrmsymbols with their ids, as Kaldi's mkgraph.sh "
                                 "does)")  # fmt: skip
        pronunciations = None
        if lexicon is not None:
            pronunciations = _lexicon_pronunciations(lexicon, tokens, words, path)
        try:
            graph = cls.from_arrays(fst, tokens, words, metadata, pronunciations)
        except GraphError as exc:
            raise GraphError(f"{path}: {exc}") from None
        if "oov_slot" in metadata:
            try:
                OovSlot.of(graph)
            except GraphError as exc:
                raise GraphError(f"{path}: the word table ends with an oov slot's labels, one "
                                 "per token but the word separator, and they do not match the "
                                 "token table: give the graph's separator (--separator) and "
                                 f"its tokens.txt ({exc})") from None  # fmt: skip
        return graph

    def to_openfst(self, path: str | os.PathLike) -> None:
        write_openfst(self.to_arrays(), path)

    # ----- persistence --------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write one self-contained, uncompressed ``.npz`` (symbol tables included) whose arrays
        are aligned in the file, so that ``load(..., mmap=True)`` maps them."""
        arrays = {name: getattr(self, name) for name in _ARRAY_FIELDS}
        for name in ("tokens", "words"):
            table = getattr(self, name)
            if table is not None:
                arrays[f"{name}_symbols"] = np.array([s for s, _ in table], dtype=np.str_)
                arrays[f"{name}_ids"] = np.array([i for _, i in table], dtype=np.int64)
        meta = {**self.metadata, "format_version": FORMAT_VERSION, "start": self.start}
        try:
            text = json.dumps(meta, allow_nan=False, default=_json_scalar)
        except (TypeError, ValueError) as exc:
            raise GraphError(
                f"{path}: the graph's metadata cannot be saved as JSON: {exc}"
            ) from None
        arrays["metadata_json"] = np.array(text)
        if self.pronunciations is not None:
            for name in _PRON_MEMBERS:
                arrays[f"pron_{name}"] = getattr(self.pronunciations, name)
        with replacing(path) as f:  # the old file stays whole for a graph mapped from it
            write_aligned_npz(f, arrays)

    @classmethod
    def load(cls, path: str | os.PathLike, *, mmap: bool = False) -> DecodingGraph:
        """Load a ``.npz`` written by `save`, or a directory from ``wfstdecode build-tlg``.

        A corrupt or hostile file raises `GraphError` naming it; array sizes are checked against
        each other and against the file's size before anything is decompressed (see
        `wfstdecode.safe_io`). With ``mmap`` the per-arc and per-state arrays are memory-mapped
        copy-on-write where the file stores them uncompressed and aligned (`save` does): every
        process that loads one graph file shares its pages. Other arrays are read."""
        path = Path(path)
        if path.is_dir():
            path = path / GRAPH_FILE

        def fail(message: str) -> GraphError:
            return GraphError(f"{path}: {message}")

        with NpzArchive(path, _MEMBERS, fail) as z:
            missing = [k for k in (*_ARRAY_FIELDS, "metadata_json") if k not in z.names]
            if missing:
                raise fail(f"not a wfstdecode graph (missing {', '.join(missing)})")
            meta = _read_metadata(z, fail)
            read = z.map if mmap else z.read
            arrays = {"final_cost": read("final_cost", "f", ndim=1)}
            n = len(arrays["final_cost"])
            for name in ("e_offsets", "ne_offsets"):
                arrays[name] = read(name, "iu", shape=(n + 1,))
            num_arcs = int(arrays["ne_offsets"][-1])  # checked again by _validate
            for name in ("next_state", "weight", "ilabel", "olabel"):
                kinds = "f" if _ARRAY_FIELDS[name] == np.float32 else "iu"
                arrays[name] = read(name, kinds, shape=(num_arcs,))
            prons = _read_pronunciations(z, fail)
            tables = {t: _read_table(z, t, fail) for t in ("tokens", "words")
                      if f"{t}_symbols" in z.names}  # fmt: skip
        try:
            return cls(start=meta.pop("start"), **arrays, metadata=meta, **tables,
                       pronunciations=prons)  # fmt: skip
        except GraphError as exc:
            raise fail(str(exc)) from None

    # ----- properties ---------------------------------------------------------------------
    @property
    def num_states(self) -> int:
        return len(self.final_cost)

    @property
    def num_arcs(self) -> int:
        return len(self.next_state)

    @property
    def num_emitting_arcs(self) -> int:
        return int(self.ne_offsets[0])

    @cached_property
    def arc_source(self) -> np.ndarray:
        """int32 source state of each arc (computed once per graph)."""
        states = np.arange(self.num_states, dtype=np.int32)
        return np.concatenate((
            np.repeat(states, np.diff(self.e_offsets)),
            np.repeat(states, np.diff(self.ne_offsets)),
        ))  # fmt: skip

    @property
    def num_tokens(self) -> int:
        """Number of log-prob columns the graph expects (V): the token table's size if known."""
        if self.tokens is not None:
            return self.tokens.next_id
        return int(self.ilabel.max(initial=0))

    def summary(self) -> dict:
        return {
            "states": self.num_states,
            "arcs": self.num_arcs,
            "emitting_arcs": self.num_emitting_arcs,
            "epsilon_arcs": self.num_arcs - self.num_emitting_arcs,
            "final_states": int(np.isfinite(self.final_cost).sum()),
            "tokens": self.num_tokens,
            "words": len(self.words) if self.words is not None else None,
            "megabytes": round(sum(getattr(self, f).nbytes for f in _ARRAY_FIELDS) / 2**20, 2),
        }

    def _validate(self) -> None:
        for name, dtype in _ARRAY_FIELDS.items():
            object.__setattr__(self, name, checked_array(name, getattr(self, name), dtype))
        meta = self.metadata
        if not isinstance(meta, dict) or not _string_keys(meta):
            raise GraphError("metadata must be a dict with string keys, nested dicts' too (it "
                             "is saved as JSON, which would turn a key 1 into '1')")  # fmt: skip
        reserved = sorted({"start", "format_version"} & self.metadata.keys())
        if reserved:
            raise GraphError(f"metadata keys {reserved} are the graph file's own (its start "
                             "state, its format): give yours other names")  # fmt: skip
        start = self.start
        if isinstance(start, (bool, np.bool_)) or not isinstance(start, (int, np.integer)):
            raise GraphError(f"start state must be an integer; got {start!r}")
        object.__setattr__(self, "start", int(start))
        n, a = self.num_states, self.num_arcs
        if len(self.e_offsets) != n + 1 or len(self.ne_offsets) != n + 1:
            raise GraphError(f"offsets must have {n + 1} entries for {n} states")
        if any(len(getattr(self, f)) != a for f in ("weight", "ilabel", "olabel")):
            raise GraphError("per-arc arrays differ in length")
        if n == 0:
            raise GraphError("graph has no states")
        if not 0 <= self.start < n:
            raise GraphError(f"start state {self.start} outside 0..{n - 1}")
        e, ne = self.e_offsets, self.ne_offsets
        if (
            e[0] != 0
            or e[-1] != ne[0]
            or ne[-1] != a
            or (np.diff(e) < 0).any()
            or (np.diff(ne) < 0).any()
        ):
            raise GraphError("arc offsets are not a valid CSR layout")
        if a and (self.next_state.min() < 0 or self.next_state.max() >= n):
            raise GraphError(f"an arc leads to a state outside 0..{n - 1}")
        if (self.ilabel[: ne[0]] <= 0).any() or (self.ilabel[ne[0] :] != 0).any():
            raise GraphError("emitting arcs must have ilabel > 0 and the others ilabel 0")
        _first_bad("olabel", self.olabel, self.olabel < 0, "word ids cannot be negative")
        if self.tokens is not None and self.ilabel.max(initial=0) > self.tokens.next_id:
            raise GraphError(
                f"ilabel {int(self.ilabel.max())} needs log-prob column "
                f"{int(self.ilabel.max()) - 1}, but the token table has {self.tokens.next_id} ids"
            )
        # (olabel 0 is the epsilon, in the table or not: an empty table takes it too)
        if self.words is not None and self.olabel.max(initial=0) >= max(self.words.next_id, 1):
            raise GraphError(f"olabel {int(self.olabel.max())} is not in the word table")
        if self.words is not None and len(self.words) < self.words.next_id and a:
            listed = np.zeros(self.words.next_id, np.bool_)  # a table with gaps in its ids
            listed[[i for _, i in self.words]] = True
            listed[0] = True  # 0 is the epsilon, a table's or not
            _first_bad("olabel", self.olabel, ~listed[self.olabel],
                       "no word of the word table has this id (a gap in its ids)")  # fmt: skip
        if self.tokens is not None and len(self.tokens) < self.tokens.next_id and ne[0]:
            listed = np.zeros(self.tokens.next_id + 1, np.bool_)  # by input label: id + 1
            listed[[i + 1 for _, i in self.tokens]] = True
            _first_bad("ilabel", self.ilabel[: ne[0]], ~listed[self.ilabel[: ne[0]]],
                       "no token of the token table has this id + 1 (a gap in its ids): the "
                       "model's column has no name")  # fmt: skip
        if self.pronunciations is not None:
            self.pronunciations.check(
                self.num_tokens, self.words.next_id if self.words is not None else None
            )
        _first_bad("weight", self.weight, ~(np.abs(self.weight) <= MAX_COST),
                   f"arc weights must be finite costs of at most {MAX_COST:g} in magnitude "
                   "(a path's sum must stay a float32)")  # fmt: skip
        final = self.final_cost
        _first_bad("final_cost", final, ~(np.abs(final) <= MAX_COST) & ~np.isposinf(final),
                   f"final costs must be at most {MAX_COST:g} in magnitude, or +inf for a "
                   "non-final state")  # fmt: skip


def _lexicon_pronunciations(lexicon, tokens, words, path) -> Pronunciations:
    """`from_openfst`'s ``lexicon`` as the graph's `Pronunciations`."""
    import warnings

    from .graph.lexicon import read_lexicon

    if tokens is None or words is None:
        raise GraphError(f"{path}: a lexicon needs the graph's token and word tables")
    given = isinstance(lexicon, (str, os.PathLike))
    entries = read_lexicon(lexicon, tokens) if given else list(lexicon)
    known = [e for e in entries if e.word in words]
    if missing := sorted({e.word for e in entries} - {e.word for e in known}):
        shown = ", ".join(map(repr, missing[:5])) + (", ..." if len(missing) > 5 else "")
        name = lexicon if given else "lexicon"
        warnings.warn(f"{name}: {len(missing)} words are not in the word table, their "
                      f"pronunciations left out: {shown}", stacklevel=3)  # fmt: skip
    return Pronunciations.from_lexicon(known, tokens, words)


def _special(symbol: str) -> bool:
    """``<eps>``, ``<epsilon>``, …: a name in angle brackets, no word of a transcript."""
    return len(symbol) > 2 and symbol[0] == "<" and symbol[-1] == ">"


def _first_bad(name: str, values: np.ndarray, bad: np.ndarray, why: str) -> None:
    if bad.any():
        i = int(np.argmax(bad))
        v = values[i]
        shown = "NaN" if np.isnan(v) else str(v.item())
        raise GraphError(f"{name}[{i}] is {shown}: {why}")


def _string_keys(value) -> bool:
    """Whether every dict in ``value`` (nested in dicts, lists and tuples) has str keys only."""
    if isinstance(value, dict):
        return all(isinstance(k, str) for k in value) and all(map(_string_keys, value.values()))
    if isinstance(value, (list, tuple)):
        return all(map(_string_keys, value))
    return True


def _json_scalar(value):
    """A NumPy scalar in the metadata (``blank_id=np.int64(0)``) as the Python number it is."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} {value!r} is not a JSON value")


def _read_metadata(z: NpzArchive, fail) -> dict:
    text = str(z.read("metadata_json", "U", shape=(), max_bytes=MAX_JSON_BYTES)[()])
    meta = json_object(text, "metadata_json", fail)
    try:  # (json reads NaN and Infinity, which save refuses to write)
        json.dumps(meta, allow_nan=False)
    except ValueError:
        raise fail("metadata_json holds NaN or Infinity, which JSON does not allow") from None
    if meta.get("format_version") != FORMAT_VERSION:
        raise fail(f"graph format {meta.get('format_version')!r} is not supported")
    del meta["format_version"]
    if "start" not in meta:
        raise fail("metadata_json has no start state")
    return meta


def _read_pronunciations(z: NpzArchive, fail) -> Pronunciations | None:
    present = [n for n in _PRON_MEMBERS if f"pron_{n}" in z.names]
    if not present:
        return None
    if len(present) != len(_PRON_MEMBERS):
        raise fail(f"pronunciations are incomplete (has only {', '.join(present)})")
    word = z.read("pron_word", "iu", ndim=1)
    offsets = z.read("pron_offsets", "iu", shape=(len(word) + 1,))
    tokens = z.read("pron_tokens", "iu", ndim=1)
    try:
        return Pronunciations(word, offsets, tokens)
    except GraphError as exc:
        raise fail(str(exc)) from None


def _read_table(z: NpzArchive, name: str, fail) -> SymbolTable:
    if f"{name}_ids" not in z.names:
        raise fail(f"{name}_symbols has no {name}_ids beside it")
    symbols = z.read(f"{name}_symbols", "U", ndim=1)
    ids = z.read(f"{name}_ids", "iu", shape=symbols.shape)
    try:
        table = SymbolTable(zip(symbols.tolist(), ids.tolist(), strict=True))
    except WfstDecodeError as exc:
        raise fail(f"{name} table: {exc}") from None
    if problem := table.sparse_ids():  # (as SymbolTable.read: the graph's checks allocate by it)
        raise fail(f"{name} table: {problem}")
    return table


_ARRAY_FIELDS = {
    "final_cost": np.float32,
    "e_offsets": np.int64,
    "ne_offsets": np.int64,
    "next_state": np.int32,
    "weight": np.float32,
    "ilabel": np.int32,
    "olabel": np.int32,
}
_PRON_MEMBERS = ("word", "offsets", "tokens")
_MEMBERS = (*_ARRAY_FIELDS, *(f"pron_{n}" for n in _PRON_MEMBERS), "metadata_json",
            "tokens_symbols", "tokens_ids", "words_symbols",
            "words_ids")  # fmt: skip

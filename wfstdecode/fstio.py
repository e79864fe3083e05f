"""OpenFst binary files <-> NumPy arc arrays, without OpenFst.

Reads ``vector`` and ``const`` FSTs with ``standard`` (tropical, float32) arcs, as written by
OpenFst, Kaldi, k2/icefall and riva scripts; writes ``vector`` FSTs that OpenFst, pynini and
kaldifst read. The layouts are OpenFst's (fst/vector-fst.h, fst/const-fst.h, fst/fst.h header).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import numpy as np

from .errors import GraphError
from .safe_io import replacing

FST_MAGIC = 2125659606
SYMBOL_TABLE_MAGIC = 2125658996
_HAS_ISYMBOLS, _HAS_OSYMBOLS, _IS_ALIGNED = 1, 2, 4
_FILE_ALIGN = 16
_PROPS_EXPANDED_MUTABLE = 0x3  # claims nothing else, so OpenFst recomputes what it needs
_PROPS_EXPANDED = 0x1  # a ConstFst's: kMutable would have OpenFst treat it as a MutableFst

ARC_DTYPE = np.dtype(
    [("ilabel", "<i4"), ("olabel", "<i4"), ("weight", "<f4"), ("nextstate", "<i4")]
)
_CONST_STATE_DTYPE = np.dtype(
    [
        ("final", "<f4"),
        ("pos", "<u4"),
        ("narcs", "<u4"),
        ("niepsilons", "<u4"),
        ("noepsilons", "<u4"),
    ]
)
_VECTOR_STATE_HEADER = np.dtype([("final", "<f4"), ("narcs", "<i8")])


def checked_array(name: str, value, dtype, whole_floats: bool = False) -> np.ndarray:
    """``value`` as a 1-D contiguous array of ``dtype``; integers must fit it (no wrap-around).
    ``whole_floats``: an integer ``dtype`` takes floats that are whole numbers (``np.zeros(n)``
    as labels), never rounding one that is not."""
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise GraphError(f"{name} is not an array ({exc})") from None
    if arr.ndim != 1:
        raise GraphError(f"{name} must be 1-D; got shape {arr.shape}")
    target = np.dtype(dtype)
    allowed = "f" if target.kind == "f" or whole_floats else ""
    if arr.size and (arr.dtype.kind not in "iu" + allowed):
        raise GraphError(f"{name} must hold {target.name} values; got dtype {arr.dtype}")
    if target.kind == "i" and arr.dtype.kind == "f" and arr.size:
        with np.errstate(invalid="ignore"):
            fractional = ~np.isfinite(arr) | (arr != np.round(arr))
        if fractional.any():
            i = int(np.argmax(fractional))
            raise GraphError(f"{name}[{i}] is {arr[i]}: not a whole number")
    if target.kind == "i" and arr.size and arr.dtype != target:
        info = np.iinfo(target)
        lo, hi = int(arr.min()), int(arr.max())
        if lo < info.min or hi > info.max:
            raise GraphError(f"{name} holds {lo if lo < info.min else hi}, outside {target.name}")
    return np.ascontiguousarray(arr, dtype=target)


@dataclass
class FstArrays:
    """A weighted FST as flat arrays; costs are OpenFst tropical costs (lower is better).

    ``final[s]`` is +inf for non-final states. Arcs need not be sorted.
    """

    start: int
    final: np.ndarray  # float32 [S]
    src: np.ndarray  # int32 [A]
    dst: np.ndarray  # int32 [A]
    ilabel: np.ndarray  # int32 [A]
    olabel: np.ndarray  # int32 [A]
    weight: np.ndarray  # float32 [A]

    def __post_init__(self):  # integers that do not fit raise, never wrap
        self.final = checked_array("final", self.final, np.float32)
        for name in ("src", "dst", "ilabel", "olabel"):
            setattr(self, name, checked_array(name, getattr(self, name), np.int32, True))
        self.weight = checked_array("weight", self.weight, np.float32)
        n = len(self.src)
        if any(len(a) != n for a in (self.dst, self.ilabel, self.olabel, self.weight)):
            raise GraphError("arc arrays differ in length")
        s = len(self.final)
        if n and (
            self.src.min() < 0 or self.src.max() >= s or self.dst.min() < 0 or self.dst.max() >= s
        ):
            raise GraphError(f"an arc refers to a state outside 0..{s - 1}")
        if s and not 0 <= self.start < s:
            raise GraphError(f"start state {self.start} outside 0..{s - 1}")

    @property
    def num_states(self) -> int:
        return len(self.final)

    @property
    def num_arcs(self) -> int:
        return len(self.src)

    def sorted_by_state(self) -> FstArrays:
        """Arcs grouped by source state (stable: the order within a state is kept): itself when
        they already are, else a copy."""
        if len(self.src) < 2 or bool((self.src[1:] >= self.src[:-1]).all()):
            return self
        order = np.argsort(self.src, kind="stable")
        return FstArrays(
            self.start, self.final, self.src[order], self.dst[order],
            self.ilabel[order], self.olabel[order], self.weight[order],
        )  # fmt: skip


def _pack_string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<i", len(b)) + b


class _Reader:
    def __init__(self, data: bytes | memoryview, path: str):
        self.data, self.pos, self.path = memoryview(data), 0, path

    def unpack(self, fmt: str):
        try:
            values = struct.unpack_from(fmt, self.data, self.pos)
        except struct.error:
            raise GraphError(f"{self.path}: truncated OpenFst file at byte {self.pos}") from None
        self.pos += struct.calcsize(fmt)
        return values if len(values) > 1 else values[0]

    def string(self) -> str:
        n = self.unpack("<i")
        if n < 0 or self.pos + n > len(self.data):
            raise GraphError(f"{self.path}: bad string length {n} at byte {self.pos}")
        s = bytes(self.data[self.pos : self.pos + n]).decode(errors="replace")
        self.pos += n
        return s

    def array(self, dtype: np.dtype, count: int) -> np.ndarray:
        end = self.pos + dtype.itemsize * count
        if count < 0 or end > len(self.data):
            raise GraphError(
                f"{self.path}: truncated OpenFst file ({count} records at byte {self.pos})"
            )
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.pos)
        self.pos = end
        return out

    def align(self) -> None:
        self.pos = -(-self.pos // _FILE_ALIGN) * _FILE_ALIGN

    def skip_symbol_table(self) -> None:
        if self.unpack("<i") != SYMBOL_TABLE_MAGIC:
            raise GraphError(f"{self.path}: bad symbol table magic at byte {self.pos - 4}")
        self.string()  # name
        self.unpack("<q")  # available key
        for _ in range(self.unpack("<q")):
            self.string()
            self.unpack("<q")


def read_openfst_bytes(data: bytes, path: str = "<bytes>") -> FstArrays:
    """Parse an OpenFst binary FST (``vector`` or ``const``, ``standard`` arcs)."""
    r = _Reader(data, path)
    if r.unpack("<i") != FST_MAGIC:
        raise GraphError(f"{path}: not an OpenFst binary file (bad magic number)")
    fst_type, arc_type = r.string(), r.string()
    version, flags, _props, start, num_states, num_arcs = r.unpack("<iiQqqq")
    if arc_type != "standard":
        raise GraphError(f"{path}: arc type {arc_type!r} is not supported (need 'standard')")
    if flags & _HAS_ISYMBOLS:
        r.skip_symbol_table()
    if flags & _HAS_OSYMBOLS:
        r.skip_symbol_table()
    if not 0 <= num_states <= 2**31 - 1:  # state ids are int32
        raise GraphError(f"{path}: bad number of states {num_states} in the header")
    if fst_type == "vector":
        (final,), arc_counts, arcs = _read_vector_body(r, num_states)
    elif fst_type == "const":
        if version == 1:  # OpenFst's kAlignedFileVersion: aligned, flagged or not
            flags |= _IS_ALIGNED
        final, arc_counts, arcs = _read_const_body(r, num_states, num_arcs, flags)
    else:
        raise GraphError(
            f"{path}: FST type {fst_type!r} is not supported (need 'vector' or 'const')"
        )
    src = np.repeat(np.arange(num_states, dtype=np.int32), arc_counts)
    try:
        return FstArrays(
            start=int(start) if num_states else 0, final=final, src=src, dst=arcs["nextstate"],
            ilabel=arcs["ilabel"], olabel=arcs["olabel"], weight=arcs["weight"],
        )  # fmt: skip
    except GraphError as exc:
        raise GraphError(f"{path}: {exc}") from None


def _read_const_body(r: _Reader, num_states: int, num_arcs: int, flags: int):
    """ConstFst stores all state records, then all arcs in state order (each part aligned to 16
    bytes when flagged); a state's ``pos`` is the index of its first arc."""
    if flags & _IS_ALIGNED:
        r.align()
    states = r.array(_CONST_STATE_DTYPE, num_states)
    if flags & _IS_ALIGNED:
        r.align()
    arcs = r.array(ARC_DTYPE, num_arcs)
    counts = states["narcs"].astype(np.int64)
    first = np.cumsum(counts) - counts
    if counts.sum() != num_arcs or (states["pos"] != first).any():
        raise GraphError(f"{r.path}: the state records do not match the {num_arcs} arcs")
    return states["final"], counts, arcs


def _read_vector_body(r: _Reader, num_states: int, final_format: str = "<f",
                      arc_dtype: np.dtype = ARC_DTYPE):  # fmt: skip
    """VectorFst stores per state (final weight, narcs) then its arcs: walk the headers, then
    gather. ``final_format``: the final weight's struct format (its fields are returned, one
    float32 array each), ``arc_dtype``: an arc's record (both as the arc type lays them out).
    Returns ``(final fields, arcs per state, arcs)``."""
    header = struct.Struct(final_format + "q")
    h, a = header.size, arc_dtype.itemsize
    if h * num_states > len(r.data) - r.pos:  # before allocating for them
        raise GraphError(f"{r.path}: truncated OpenFst file ({num_states} states declared)")
    final = np.empty((len(final_format) - 1, num_states), np.float32)
    counts = np.empty(num_states, np.int64)
    starts = np.empty(num_states, np.int64)
    data, pos, size = r.data, r.pos, len(r.data)
    for s in range(num_states):
        if pos + h > size:
            raise GraphError(f"{r.path}: truncated OpenFst file in state {s}")
        fields = header.unpack_from(data, pos)
        final[:, s], narcs = fields[:-1], fields[-1]
        if not 0 <= narcs <= (size - pos - h) // a:
            raise GraphError(f"{r.path}: state {s} claims {narcs} arcs at byte {pos}")
        counts[s], starts[s] = narcs, pos + h
        pos += h + a * narcs
    r.pos = pos
    raw = np.frombuffer(data, np.uint8)
    total = int(counts.sum())
    arcs = np.empty(total, arc_dtype)
    if total:
        first_arc = np.cumsum(counts) - counts
        arc_pos = np.repeat(starts - a * first_arc, counts) + a * np.arange(total, dtype=np.int64)
        out = arcs.view(np.uint8).reshape(total, a)
        for k in range(a):
            out[:, k] = raw[arc_pos + k]
    return final, counts, arcs


def write_openfst_bytes(fst: FstArrays, fst_type: str = "vector") -> bytes:
    """Serialise as an OpenFst ``vector`` or ``const`` (aligned) FST with ``standard`` arcs."""
    return b"".join(bytes(part) for part in _openfst_parts(fst, fst_type))


def _openfst_parts(fst: FstArrays, fst_type: str) -> list:
    """`write_openfst_bytes`' bytes as consecutive parts (bytes or uint8 arrays), so that a file
    is written without joining them (a large TLG's body is hundreds of MB)."""
    if fst_type not in ("vector", "const"):
        raise ValueError(f"fst_type must be 'vector' or 'const'; got {fst_type!r}")
    fst = fst.sorted_by_state()
    n_states, n_arcs = fst.num_states, fst.num_arcs
    version, flags = (2, 0) if fst_type == "vector" else (2, _IS_ALIGNED)
    header = (
        struct.pack("<i", FST_MAGIC) + _pack_string(fst_type) + _pack_string("standard")
        + struct.pack("<iiQqqq", version, flags,
                      _PROPS_EXPANDED_MUTABLE if fst_type == "vector" else _PROPS_EXPANDED,
                      fst.start if n_states else -1, n_states, n_arcs)
    )  # fmt: skip
    counts = np.bincount(fst.src, minlength=n_states).astype(np.int64)
    arcs = np.empty(n_arcs, ARC_DTYPE)
    arcs["ilabel"], arcs["olabel"] = fst.ilabel, fst.olabel
    arcs["weight"], arcs["nextstate"] = fst.weight, fst.dst
    if fst_type == "const":
        return [_const_body(header, fst, counts, arcs)]
    state_headers = np.empty(n_states, _VECTOR_STATE_HEADER)
    state_headers["final"], state_headers["narcs"] = fst.final, counts
    return [header, _vector_body(state_headers, arcs, fst.src, counts)]


_BODY_CHUNK = 1 << 22  # arcs placed per step: bounds the index arrays (32 MB)


def _vector_body(state_headers: np.ndarray, arcs: np.ndarray, src: np.ndarray,
                 counts: np.ndarray) -> np.ndarray:  # fmt: skip
    """VectorFst's body (uint8): each state's header (final weight, arc count) followed by its
    arcs (``arcs`` grouped by state ``src``); any record layouts."""
    n_states, n_arcs = len(state_headers), len(arcs)
    h, a = state_headers.dtype.itemsize, arcs.dtype.itemsize
    body = np.empty(h * n_states + a * n_arcs, np.uint8)
    arcs_before = np.concatenate(([0], np.cumsum(counts)[:-1])) if n_states else counts
    header_pos = h * np.arange(n_states, dtype=np.int64) + a * arcs_before
    hb = state_headers.view(np.uint8).reshape(n_states, h)
    for k in range(h):
        body[header_pos + k] = hb[:, k]
    ab = arcs.view(np.uint8).reshape(n_arcs, a)
    for lo in range(0, n_arcs, _BODY_CHUNK):
        hi = min(lo + _BODY_CHUNK, n_arcs)
        arc_pos = h * (src[lo:hi].astype(np.int64) + 1) + a * np.arange(lo, hi, dtype=np.int64)
        for k in range(a):
            body[arc_pos + k] = ab[lo:hi, k]
    return body


_LATTICE_ARC_DTYPE = np.dtype([("ilabel", "<i4"), ("olabel", "<i4"), ("graph", "<f4"),
                               ("acoustic", "<f4"), ("nextstate", "<i4")])  # fmt: skip
_LATTICE_STATE_HEADER = np.dtype([("graph", "<f4"), ("acoustic", "<f4"), ("narcs", "<i8")])


def write_lattice_bytes(final, src, dst, ilabel, olabel, graph_cost, acoustic_cost,
                        start: int = 0) -> bytes:  # fmt: skip
    """Serialise a lattice as an OpenFst ``vector`` FST with Kaldi's ``lattice4`` arcs (weight:
    graph cost, acoustic cost; a final state's weight is ``(final[s], 0)``, a non-final one's
    Kaldi's zero ``(inf, inf)``). Arcs must be grouped by ``src`` in state order."""
    n_states, n_arcs = len(final), len(src)
    if n_arcs and np.any(np.diff(src) < 0):
        raise ValueError("lattice arcs must be sorted by source state")
    header = (
        struct.pack("<i", FST_MAGIC) + _pack_string("vector") + _pack_string("lattice4")
        + struct.pack("<iiQqqq", 2, 0, _PROPS_EXPANDED_MUTABLE, start if n_states else -1,
                      n_states, n_arcs)
    )  # fmt: skip
    counts = np.bincount(src, minlength=n_states).astype(np.int64)
    states = np.empty(n_states, _LATTICE_STATE_HEADER)
    is_final = np.isfinite(final)
    states["graph"] = final
    states["acoustic"] = np.where(is_final, 0.0, np.inf)
    states["narcs"] = counts
    arcs = np.empty(n_arcs, _LATTICE_ARC_DTYPE)
    arcs["ilabel"], arcs["olabel"], arcs["nextstate"] = ilabel, olabel, dst
    arcs["graph"], arcs["acoustic"] = graph_cost, acoustic_cost
    return header + _vector_body(states, arcs, np.asarray(src), counts).tobytes()


def _const_body(header: bytes, fst: FstArrays, counts: np.ndarray, arcs: np.ndarray) -> bytes:
    states = np.zeros(fst.num_states, _CONST_STATE_DTYPE)
    states["final"], states["narcs"] = fst.final, counts
    states["pos"] = np.cumsum(counts) - counts
    states["niepsilons"] = np.bincount(fst.src[fst.ilabel == 0], minlength=fst.num_states)
    states["noepsilons"] = np.bincount(fst.src[fst.olabel == 0], minlength=fst.num_states)
    parts = [header]
    for block in (states.tobytes(), arcs.tobytes()):
        parts.append(bytes(-sum(map(len, parts)) % _FILE_ALIGN))
        parts.append(block)
    return b"".join(parts)


def compact_lattice_bytes(c) -> bytes:
    """Serialise a `compact_lattice.CompactLattice` as an OpenFst ``vector`` FST with Kaldi's
    ``compactlattice44`` arcs: per state its final weight then its arc count (int64), per arc
    ilabel = olabel = word, the weight, the next state. A weight is (graph cost, acoustic cost)
    as float32, the string's length (int32) and its labels (int32); a non-final state's is
    Kaldi's zero, ``(inf, inf)`` with no string. Arcs must be grouped by ``src`` in state order."""
    n_states, n_arcs = c.num_states, c.num_arcs
    if n_arcs and np.any(np.diff(c.src) < 0):
        raise ValueError("lattice arcs must be sorted by source state")
    parts = [
        struct.pack("<i", FST_MAGIC) + _pack_string("vector") + _pack_string("compactlattice44")
        + struct.pack("<iiQqqq", 2, 0, _PROPS_EXPANDED_MUTABLE, 0 if n_states else -1, n_states,
                      n_arcs)
    ]  # fmt: skip
    first = np.searchsorted(c.src, np.arange(n_states + 1)).tolist()
    for s in range(n_states):
        if np.isfinite(c.final_graph[s]):
            parts.append(_compact_weight(c.final_graph[s], c.final_acoustic[s],
                                         c.final_string_of(s)))  # fmt: skip
        else:
            parts.append(_compact_weight(np.inf, np.inf, ()))
        parts.append(struct.pack("<q", first[s + 1] - first[s]))
        for i in range(first[s], first[s + 1]):
            word = int(c.word[i])
            parts.append(struct.pack("<ii", word, word))
            parts.append(_compact_weight(c.graph_cost[i], c.acoustic_cost[i], c.arc_string(i)))
            parts.append(struct.pack("<i", int(c.dst[i])))
    return b"".join(parts)


def _compact_weight(graph: float, acoustic: float, labels) -> bytes:
    labels = np.asarray(labels, "<i4")
    return struct.pack("<ffi", graph, acoustic, len(labels)) + labels.tobytes()


def read_lattice_bytes(data, offset: int = 0, path: str = "<bytes>") -> tuple[dict, int]:
    """Parse an OpenFst ``vector`` FST with Kaldi's ``lattice4`` arcs starting at ``offset``
    (what `write_lattice_bytes` and Kaldi's ``Lattice`` holder write): ``({start, final, src,
    dst, ilabel, olabel, graph_cost, acoustic_cost}, end offset)``; a final state's acoustic
    part is ignored (Kaldi lattices keep it 0). With ``compactlattice44`` arcs (a
    ``CompactLattice``) the dict has ``compact: True`` and `_read_compact_body`'s fields instead.
    Raises `GraphError` naming the byte."""
    r = _Reader(data, path)
    r.pos = offset
    if r.unpack("<i") != FST_MAGIC:
        raise GraphError(f"{path}: no OpenFst lattice at byte {offset} (bad magic number)")
    fst_type, arc_type = r.string(), r.string()
    if fst_type != "vector" or arc_type not in ("lattice4", "compactlattice44"):
        raise GraphError(
            f"{path}: an FST of type {fst_type!r} with {arc_type!r} arcs at byte {offset}; "
            "expected a Kaldi Lattice (vector, lattice4) or CompactLattice (compactlattice44)"
        )
    _version, flags, _props, start, num_states, num_arcs = r.unpack("<iiQqqq")
    if flags & (_HAS_ISYMBOLS | _HAS_OSYMBOLS):
        raise GraphError(f"{path}: lattice at byte {offset} carries symbol tables (unsupported)")
    if num_states < 0 or num_arcs < 0:
        raise GraphError(f"{path}: lattice at byte {offset} declares {num_states} states, "
                         f"{num_arcs} arcs")  # fmt: skip
    if num_states and not 0 <= start < num_states:
        raise GraphError(f"{path}: the lattice at byte {offset} starts at state {start}")
    if arc_type == "compactlattice44":
        out = _read_compact_body(r, num_states, num_arcs, offset)
        out["start"] = int(start)
        return out, r.pos
    (final, final_acoustic), counts, arcs = _read_vector_body(r, num_states, "<ff",
                                                              _LATTICE_ARC_DTYPE)  # fmt: skip
    if num_arcs and len(arcs) != num_arcs:  # (OpenFst's VectorFst writes 0 there: unknown)
        raise GraphError(f"{path}: the lattice at byte {offset} has {len(arcs)} arcs, not "
                         f"{num_arcs}")  # fmt: skip
    check_weights(f"{path}: the lattice at byte {offset}", (arcs["graph"], arcs["acoustic"]),
                   (final, final_acoustic))  # fmt: skip
    src = np.repeat(np.arange(num_states, dtype=np.int32), counts)
    if num_arcs and (arcs["nextstate"].min() < 0 or arcs["nextstate"].max() >= num_states):
        raise GraphError(f"{path}: an arc of the lattice at byte {offset} leaves the states")
    out = dict(start=int(start), final=final, src=src, dst=arcs["nextstate"].copy(),
               ilabel=arcs["ilabel"].copy(), olabel=arcs["olabel"].copy(),
               graph_cost=arcs["graph"].copy(), acoustic_cost=arcs["acoustic"].copy())  # fmt: skip
    return _final_acoustic_as_arcs(out, final_acoustic), r.pos


def check_weights(what: str, arc_parts, final_parts) -> None:
    """Arc weights (graph, acoustic) must be finite and final weights finite or (+inf, +inf),
    Kaldi's zero (not final): no NaN, no -inf, not one part infinite (read as final, a lattice
    dropped the infinite part). Searches silently skip a NaN arc, and a -inf one makes every
    score through it -inf. ``what`` names the lattice in the message."""
    arc_bad = ~np.isfinite(arc_parts[0]) | ~np.isfinite(arc_parts[1])
    if arc_bad.any():
        i = int(np.flatnonzero(arc_bad)[0])
        weight = (float(arc_parts[0][i]), float(arc_parts[1][i]))
        raise GraphError(f"{what}: arc {i} weighs {weight}; arc weights must be finite")
    final_bad = np.isinf(final_parts[0]) != np.isinf(final_parts[1])  # (Kaldi's Member())
    for part in final_parts:
        final_bad |= np.isnan(part) | (part == -np.inf)
    if final_bad.any():
        s = int(np.flatnonzero(final_bad)[0])
        weight = (float(final_parts[0][s]), float(final_parts[1][s]))
        raise GraphError(f"{what}: state {s} has the final weight {weight}; a final weight "
                         "is finite, or (inf, inf) for a state that is not final")  # fmt: skip


def _final_acoustic_as_arcs(lat: dict, final_acoustic: np.ndarray) -> dict:
    """A final weight with an acoustic part (Kaldi's ConvertLattice keeps one, e.g. after
    lattice-determinize) as an epsilon arc to a new final state carrying the whole weight: the
    `Lattice` keeps graph final costs only, and nothing is dropped."""
    final = lat["final"]
    moved = np.flatnonzero(np.isfinite(final) & np.isfinite(final_acoustic) & (final_acoustic != 0))
    if not len(moved):
        return lat
    n = len(final)
    new = n + np.arange(len(moved), dtype=np.int32)
    zeros = np.zeros(len(moved), np.int32)
    out = dict(lat, final=np.concatenate((final, final[moved])).astype(np.float32))
    out["final"][moved] = np.inf
    out["final"][new] = 0.0
    for name, extra in (("src", moved.astype(np.int32)), ("dst", new), ("ilabel", zeros),
                        ("olabel", zeros), ("graph_cost", final[moved]),
                        ("acoustic_cost", final_acoustic[moved])):  # fmt: skip
        out[name] = np.concatenate((lat[name], extra.astype(lat[name].dtype)))
    return out


def _read_compact_body(r: _Reader, num_states: int, num_arcs: int, offset: int) -> dict:
    """A CompactLattice's states and arcs (variable-length weights: read one by one)."""
    path = r.path
    src, dst, word, g, a, string, starts = [], [], [], [], [], [], [0]
    final_g, final_a, final_string, final_starts = [], [], [], [0]

    def weight():
        graph, acoustic, n = r.unpack("<ffi")
        if not 0 <= n <= (len(r.data) - r.pos) // 4:
            raise GraphError(f"{path}: a weight at byte {r.pos - 12} claims a string of {n}")
        return graph, acoustic, r.array(np.dtype("<i4"), n)

    for s in range(num_states):
        graph, acoustic, labels = weight()
        final_g.append(graph), final_a.append(acoustic)
        final_string.append(labels), final_starts.append(final_starts[-1] + len(labels))
        narcs = r.unpack("<q")
        if not 0 <= narcs <= (len(r.data) - r.pos) // 24:
            raise GraphError(f"{path}: state {s} claims {narcs} arcs at byte {r.pos - 8}")
        for _ in range(narcs):
            ilabel, olabel = r.unpack("<ii")
            if ilabel != olabel:
                raise GraphError(f"{path}: a CompactLattice arc at byte {r.pos - 8} has input "
                                 f"{ilabel} and output {olabel} (must be an acceptor)")  # fmt: skip
            graph, acoustic, labels = weight()
            nxt = r.unpack("<i")
            if not 0 <= nxt < num_states:
                raise GraphError(f"{path}: an arc of the lattice at byte {offset} leaves the "
                                 "states")  # fmt: skip
            src.append(s), dst.append(nxt), word.append(ilabel), g.append(graph)
            a.append(acoustic), string.append(labels), starts.append(starts[-1] + len(labels))
    if num_arcs and len(src) != num_arcs:  # (0: not given, as OpenFst writes vector FSTs)
        raise GraphError(f"{path}: the lattice at byte {offset} has {len(src)} arcs, not "
                         f"{num_arcs}")  # fmt: skip
    final_g = np.array(final_g, np.float64)
    final_a = np.array(final_a, np.float64)
    arc_parts = (np.array(g, np.float64), np.array(a, np.float64))
    check_weights(f"{path}: the lattice at byte {offset}", arc_parts, (final_g, final_a))
    zero = ~np.isfinite(final_g + final_a)  # Kaldi's zero (inf, inf): not final
    final_g[zero], final_a[zero] = np.inf, np.inf

    def joined(parts):
        return np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)

    return dict(compact=True, src=np.array(src, np.int32), dst=np.array(dst, np.int32),
                word=np.array(word, np.int32), graph_cost=np.array(g, np.float64),
                acoustic_cost=np.array(a, np.float64), string=joined(string),
                string_start=np.array(starts, np.int64), final_graph=final_g,
                final_acoustic=final_a, final_string=joined(final_string),
                final_string_start=np.array(final_starts, np.int64))  # fmt: skip


def read_openfst(path: str | os.PathLike) -> FstArrays:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise GraphError(f"cannot read OpenFst file {path}: {exc}") from exc
    return read_openfst_bytes(data, str(path))


def write_openfst(fst: FstArrays, path: str | os.PathLike, fst_type: str = "vector") -> None:
    parts = _openfst_parts(fst, fst_type)
    with replacing(path) as f:
        for part in parts:
            f.write(part)

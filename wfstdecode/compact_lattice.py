"""`CompactLattice`: a lattice determinized on words, as Kaldi's decoders write by default.

A state-level `Lattice` holds one path per alignment; most of them spell the same words. Kaldi
determinizes it on the output (word) labels in the ``CompactLatticeWeight`` semiring: each arc
is a word with a weight *(graph cost, acoustic cost)* and the string of input labels (here token
id + 1, one per frame) it covers, so that every word sequence of the lattice is on exactly one
path, whose weight and string are those of that sequence's best alignment. "Best" is Kaldi's
order: the smaller ``graph + acoustic_scale * acoustic``, then the smaller graph cost, then the
shorter string, then the lexicographically smaller one.

`determinize` is the subset construction of weighted determinization in that semiring, on an
acyclic lattice: a state of the result is a set of lattice nodes, each with the residual weight
and string the emitted arcs have not yet paid; an arc for word ``w`` pays the best element's
weight and the longest common prefix of the elements' strings. Lattices are acyclic, so it
terminates; ``max_states`` bounds the pathological cases (prune with a lattice beam first, as
Kaldi's determinization does).

Written with `kaldi_bytes`, it is an OpenFst ``vector`` FST with ``compactlattice44`` arcs (what
Kaldi's ``CompactLattice`` holder reads; ``lattice-copy``, ``lattice-best-path``,
``lattice-to-ctm-conf`` take it as ``ark:``). `to_lattice` expands it back into a state-level
`Lattice` (one arc per string label, Kaldi's ``ConvertLattice``), which is how `wfstdecode
rescore` reads CompactLattice archives.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, replace

import numpy as np

from .errors import OptionsError
from .lattice import Lattice, first_arcs, lattice_from_fst, topological_order
from .posteriors import position_posteriors, sequence_log_posterior, sequence_posterior

_INF = np.inf
_KEY_RESOLUTION = 1e-6  # residual costs closer than this make the same determinized state
_MIN_RETRY_BEAM = 0.25  # determinize_pruned halves the lattice beam down to this
# Steps (arcs walked, labels carried, subset elements keyed) a determinization may take: ~2 s.
# The OCR and speech lattices of bench/ctc_lattice.md take at most 1.3 M and 6 M at lattice beam
# 8; at 12 a few take 77 M and 367 M (minutes, alignment strings copied along every arc) with
# fewer than 100,000 states.
MAX_WORK = 20_000_000


@dataclass(frozen=True, eq=False)
class CompactLattice:
    """A word lattice determinized on words (module docstring). State 0 is the start; states
    are numbered in topological order (``src[i] < dst[i]``), arcs sorted by ``src``.

    word:           int32 [A] the arc's word id (> 0; Kaldi's ilabel = olabel).
    graph_cost, acoustic_cost: float64 [A] the arc's weight (acoustic cost unscaled).
    string, string_start: int32 labels (token id + 1) and int64 [A + 1] offsets: arc ``i``'s
                    string is ``string[string_start[i] : string_start[i + 1]]``.
    final_graph, final_acoustic: float64 [N] a state's final weight (inf: not final), with
                    ``final_string`` / ``final_string_start`` [N + 1] likewise.
    acoustic_scale: the scale paths rank by.
    """

    src: np.ndarray
    dst: np.ndarray
    word: np.ndarray
    graph_cost: np.ndarray
    acoustic_cost: np.ndarray
    string: np.ndarray
    string_start: np.ndarray
    final_graph: np.ndarray
    final_acoustic: np.ndarray
    final_string: np.ndarray
    final_string_start: np.ndarray
    acoustic_scale: float
    notes: tuple = ()

    @property
    def num_states(self) -> int:
        return len(self.final_graph)

    @property
    def num_arcs(self) -> int:
        return len(self.src)

    def arc_string(self, i: int) -> np.ndarray:
        return self.string[self.string_start[i] : self.string_start[i + 1]]

    def final_string_of(self, s: int) -> np.ndarray:
        return self.final_string[self.final_string_start[s] : self.final_string_start[s + 1]]

    def path_costs(self) -> tuple[np.ndarray, np.ndarray]:
        """float64 ``graph + acoustic_scale * acoustic`` of each arc and of each final weight."""
        scale = self.acoustic_scale
        return (self.graph_cost + scale * self.acoustic_cost,
                self.final_graph + scale * self.final_acoustic)  # fmt: skip

    def word_posteriors(self) -> list[dict[int, float]]:
        """Per word position ``k``, ``{word id: posterior}`` (as `Lattice.word_posteriors`), each
        word sequence weighted by its one path, its best alignment: Kaldi's posteriors on a
        determinized lattice, where no sequence gains from having many alignments or graph
        paths (n-gram backoff, pronunciations)."""
        w, final = self.path_costs()
        return position_posteriors(self.src, self.dst, self.word, w, final)

    def path_posterior(self, words) -> float:
        """Posterior probability of a word sequence (its path's share of the total)."""
        w, final = self.path_costs()
        return sequence_posterior(self.src, self.dst, self.word, w, final, words)

    def path_log_posterior(self, words) -> float:
        """The natural log of `path_posterior` (-inf: no path), without its underflow to 0."""
        w, final = self.path_costs()
        return sequence_log_posterior(self.src, self.dst, self.word, w, final, words)

    def num_paths(self) -> int:
        """How many complete paths (= distinct word sequences) it holds, counted backwards over
        the topological order, not enumerated."""
        count = [0] * self.num_states
        first = first_arcs(self.src, self.num_states).tolist()
        dst = self.dst.tolist()
        for s in range(self.num_states - 1, -1, -1):
            ends = int(np.isfinite(self.final_graph[s]))
            count[s] = ends + sum(count[d] for d in dst[first[s] : first[s + 1]])
        return count[0] if self.num_states else 0

    def paths(self, limit: int = 100_000) -> list[tuple[tuple[int, ...], float, float, tuple]]:
        """Every path as ``(words, graph cost, acoustic cost, string)``, at most ``limit`` of
        them (a determinized lattice has one per word sequence; for tests and small lattices)."""
        out: list = []
        first = first_arcs(self.src, self.num_states)
        stack = [(0, (), 0.0, 0.0, ())] if self.num_states else []
        while stack:
            s, words, g, a, labels = stack.pop()
            if np.isfinite(self.final_graph[s]):
                out.append((words, g + self.final_graph[s], a + self.final_acoustic[s],
                            labels + tuple(self.final_string_of(s).tolist())))  # fmt: skip
                if len(out) >= limit:
                    raise OptionsError(f"the lattice has more than {limit} paths")
            for i in range(first[s], first[s + 1]):
                stack.append((int(self.dst[i]), (*words, int(self.word[i])),
                              g + self.graph_cost[i], a + self.acoustic_cost[i],
                              labels + tuple(self.arc_string(i).tolist())))  # fmt: skip
        return out

    def to_lattice(self) -> Lattice:
        """The state-level `Lattice` of the same paths: each arc becomes a chain with one arc per
        string label (the first carries the word and the weight), a final weight with a string
        or an acoustic cost a chain to a new final state (Kaldi's ``ConvertLattice``). No graph
        arcs or states are known (-1)."""
        n = self.num_states
        final = np.where(np.isfinite(self.final_graph), self.final_graph, _INF)
        chained = np.isfinite(final) & ((np.diff(self.final_string_start) > 0)
                                        | (self.final_acoustic != 0))  # fmt: skip
        ends = np.flatnonzero(chained)
        # Final weights that Lattice cannot hold (graph cost only) become arcs to new states,
        # then every arc (words and finals alike) is expanded into its chain.
        new_final = n + np.arange(len(ends))
        src = np.concatenate((self.src, ends)).astype(np.int64)
        dst = np.concatenate((self.dst, new_final)).astype(np.int64)
        word = np.concatenate((self.word, np.zeros(len(ends), np.int32)))
        g = np.concatenate((self.graph_cost, self.final_graph[ends]))
        a = np.concatenate((self.acoustic_cost, self.final_acoustic[ends]))
        lengths = np.concatenate((np.diff(self.string_start),
                                  np.diff(self.final_string_start)[ends]))  # fmt: skip
        starts = np.concatenate((self.string_start[:-1],
                                 len(self.string) + self.final_string_start[ends]))  # fmt: skip
        labels = np.concatenate((self.string, self.final_string))
        links = np.maximum(lengths, 1)  # an empty string: one arc without a label
        first = np.cumsum(links) - links  # each chain's first arc
        k = np.arange(int(links.sum())) - np.repeat(first, links)  # position in its chain
        chain = np.repeat(np.arange(len(links)), links)
        inner = n + len(ends) + np.cumsum(links - 1) - (links - 1)  # chain's first inner node
        head, last = k == 0, k == links[chain] - 1
        arc_src = np.where(head, src[chain], inner[chain] + k - 1)
        arc_dst = np.where(last, dst[chain], inner[chain] + k)
        has = lengths[chain] > 0
        arc_ilabel = np.zeros(len(k), np.int32)
        arc_ilabel[has] = labels[starts[chain][has] + k[has]]
        total_nodes = n + len(ends) + int((links - 1).sum())
        final_all = np.full(total_nodes, _INF, np.float32)
        final_all[:n] = np.where(chained, _INF, final)
        final_all[new_final] = 0.0
        arrays = dict(start=0, final=final_all, src=arc_src.astype(np.int32),
                      dst=arc_dst.astype(np.int32), ilabel=arc_ilabel.astype(np.int32),
                      olabel=np.where(head, word[chain], 0).astype(np.int32),
                      graph_cost=np.where(head, g[chain], 0.0).astype(np.float32),
                      acoustic_cost=np.where(head, a[chain], 0.0).astype(np.float32))  # fmt: skip
        return lattice_from_fst(arrays, self.acoustic_scale)

    def kaldi_bytes(self) -> bytes:
        """An OpenFst ``vector`` FST with Kaldi's ``compactlattice44`` arcs (ilabel = olabel =
        word; weight: graph cost, acoustic cost (float32), string length (int32), the labels
        (int32); a non-final state's weight is Kaldi's zero, ``(inf, inf)`` with no string)."""
        from .fstio import compact_lattice_bytes

        return compact_lattice_bytes(self)


def determinize(
    lattice: Lattice, beam: float | None = None, max_states: int = 100_000,
    alignments: bool = True, max_work: int | None = None,
) -> CompactLattice:  # fmt: skip
    """``lattice`` determinized on words (module docstring), pruned to ``beam`` first when
    given. Raises `OptionsError` past ``max_states`` states or ``max_work`` steps (None:
    `MAX_WORK`; lower the lattice beam).
    ``alignments=False`` leaves every string empty: the same word sequences and costs (what
    posteriors need) in about 3/4 of the time."""
    if beam is not None:
        lattice = lattice.pruned(beam)
    if not alignments:  # no input labels, no strings to carry
        lattice = replace(lattice, ilabel=np.zeros_like(lattice.ilabel), _cache={})
    scale = lattice.acoustic_scale
    g_arc = lattice.graph_cost.astype(np.float64)
    a_arc = lattice.acoustic_cost.astype(np.float64)
    first = first_arcs(lattice.src, lattice.num_nodes)
    dst, ilabel, olabel = lattice.dst.tolist(), lattice.ilabel.tolist(), lattice.olabel.tolist()
    final = lattice.final.astype(np.float64)
    g_arc, a_arc, first = g_arc.tolist(), a_arc.tolist(), first.tolist()

    # A weight is (cost, graph, string length, string, acoustic): tuples compare in Kaldi's
    # order (the best is the smallest), residuals included.
    def weight(g: float, a: float, labels: tuple) -> tuple:
        return (g + scale * a, g, len(labels), labels, a)

    states: dict = {}  # subset key -> state id
    subsets: list = []  # state id -> {node: residual weight}
    arcs: list = []  # (src, dst, word, g, a, labels)
    finals: dict = {}  # state -> weight

    def state_of(elements: dict) -> int:
        nonlocal work
        work += len(elements)
        key = tuple(sorted((node, round(w[1] / _KEY_RESOLUTION), round(w[4] / _KEY_RESOLUTION),
                            w[3]) for node, w in elements.items()))  # fmt: skip
        s = states.get(key)
        if s is None:
            if len(subsets) >= max_states:
                raise OptionsError(
                    f"word determinization passed {max_states} states: prune the lattice with "
                    "a smaller lattice beam first"
                )
            s = states[key] = len(subsets)
            subsets.append(elements)
        return s

    max_work = MAX_WORK if max_work is None else max_work
    work = 0  # arcs walked, labels carried, subset elements keyed: what the time goes with
    if lattice.num_nodes and np.isfinite(lattice.best_cost):
        state_of({0: weight(0.0, 0.0, ())})
    s = 0
    while s < len(subsets):
        # Within the words' epsilon region: the best residual reaching each node (nodes are in
        # topological order, so popping the smallest settles it).
        best = dict(subsets[s])
        heap = list(best)
        heapq.heapify(heap)
        by_word: dict = {}  # word -> {node after its arc: weight}
        while heap:
            node = heapq.heappop(heap)
            _, g0, _, l0, a0 = best[node]
            if final[node] < _INF:
                w = weight(g0 + final[node], a0, l0)
                if s not in finals or w < finals[s]:
                    finals[s] = w
            work += first[node + 1] - first[node] + len(l0)
            if work > max_work:
                raise OptionsError(
                    f"word determinization passed {max_work:,} steps (arcs walked and labels "
                    "carried): prune the lattice with a smaller lattice beam first"
                )
            for i in range(first[node], first[node + 1]):
                w = weight(g0 + g_arc[i], a0 + a_arc[i], (*l0, ilabel[i]) if ilabel[i] else l0)
                to = dst[i]
                if olabel[i]:
                    table = by_word.setdefault(olabel[i], {})
                    old = table.get(to)
                    if old is None or w < old:
                        table[to] = w
                    continue
                old = best.get(to)
                if old is None:
                    heapq.heappush(heap, to)
                    best[to] = w
                elif w < old:
                    best[to] = w
        for word in sorted(by_word):
            reached = by_word[word]
            _, g_best, _, l_best, a_best = min(reached.values())
            common = _common_prefix([w[3] for w in reached.values()])
            residual = {node: weight(w[1] - g_best, w[4] - a_best, w[3][common:])
                        for node, w in reached.items()}  # fmt: skip
            arcs.append((s, state_of(residual), word, g_best, a_best, l_best[:common]))
        s += 1
    finals = {s: (w[1], w[4], w[3]) for s, w in finals.items()}
    return _assemble(len(subsets), arcs, finals, scale, lattice.notes)


def determinize_pruned(lattice: Lattice, beam: float, max_states: int = 100_000,
                       alignments: bool = True) -> tuple[CompactLattice, float]:  # fmt: skip
    """`determinize` of ``lattice`` pruned to ``beam`` (``math.inf``: unpruned); where that
    passes ``max_states`` states or `MAX_WORK` steps the beam is halved and it is tried again,
    down to 0.25, as Kaldi's decoders lower the lattice beam when determinization runs out of
    memory. Returns the CompactLattice (with a note when the beam was lowered) and the beam it
    was made at."""
    tried, why = beam, ""
    while True:
        try:
            out = determinize(lattice, tried if math.isfinite(tried) else None, max_states,
                              alignments)  # fmt: skip
            break
        except OptionsError as exc:
            if tried <= _MIN_RETRY_BEAM:
                raise
            why = why or ("states" if "states" in str(exc) else "steps")
            if not math.isfinite(tried):  # start from the widest beam the lattice spans
                alpha, beta = lattice.forward(), lattice.backward()
                through = alpha[lattice.src] + lattice.arc_cost() + beta[lattice.dst]
                tried = float(through[np.isfinite(through)].max() - lattice.best_cost)
            tried = max(tried / 2, _MIN_RETRY_BEAM)
    if tried < beam:
        limit = f"{max_states} states" if why == "states" else f"{MAX_WORK:,} steps"
        note = f"determinized at lattice beam {tried:.3g}: beam {beam:g} passed {limit}"
        out = replace(out, notes=(*out.notes, note))
    return out, tried


def _common_prefix(strings: list) -> int:
    """Length of the longest common prefix: that of the lexicographically first and last."""
    lo, hi = min(strings), max(strings)
    for k, (x, y) in enumerate(zip(lo, hi, strict=False)):
        if x != y:
            return k
    return min(len(lo), len(hi))


def _assemble(n: int, arcs: list, finals: dict, scale: float, notes: tuple) -> CompactLattice:
    lengths = [len(arc[5]) for arc in arcs]
    final_labels, final_lengths = [], np.zeros(n, np.int64)
    final_g, final_a = np.full(n, _INF), np.full(n, _INF)
    for s, (g, a, labels) in finals.items():
        final_g[s], final_a[s], final_lengths[s] = g, a, len(labels)
    for s in range(n):
        final_labels += finals.get(s, (0, 0, ()))[2]
    return compact_from_fst(dict(
        start=0, src=np.array([a[0] for a in arcs], np.int32),
        dst=np.array([a[1] for a in arcs], np.int32), word=np.array([a[2] for a in arcs], np.int32),
        graph_cost=np.array([a[3] for a in arcs], np.float64),
        acoustic_cost=np.array([a[4] for a in arcs], np.float64),
        string=np.array([label for arc in arcs for label in arc[5]], np.int32),
        string_start=np.concatenate(([0], np.cumsum(lengths, dtype=np.int64))),
        final_graph=final_g, final_acoustic=final_a,
        final_string=np.array(final_labels, np.int32),
        final_string_start=np.concatenate(([0], np.cumsum(final_lengths))),
    ), scale, notes)  # fmt: skip


def compact_from_fst(f: dict, acoustic_scale: float, notes: tuple = ()) -> CompactLattice:
    """A `CompactLattice` of CompactLattice FST arrays (`fstio.read_lattice_bytes`'s, or
    `determinize`'s): the states reachable from the start renumbered topologically, arcs
    grouped by source."""
    n = len(f["final_graph"])
    order = topological_order(n, f["start"], f["src"], f["dst"])
    rank = np.full(n, -1, np.int64)
    rank[order] = np.arange(len(order))
    keep = np.flatnonzero((rank[f["src"]] >= 0) & (rank[f["dst"]] >= 0))
    keep = keep[np.argsort(rank[f["src"][keep]], kind="stable")]
    spans = [(f["string_start"][i], f["string_start"][i + 1]) for i in keep]
    fspans = [(f["final_string_start"][s], f["final_string_start"][s + 1]) for s in order]

    def gathered(labels, spans_):
        parts = [labels[lo:hi] for lo, hi in spans_]
        lengths = [hi - lo for lo, hi in spans_]
        joined = np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)
        return joined, np.concatenate(([0], np.cumsum(lengths, dtype=np.int64)))

    string, string_start = gathered(f["string"], spans)
    final_string, final_start = gathered(f["final_string"], fspans)
    return CompactLattice(
        src=rank[f["src"][keep]].astype(np.int32), dst=rank[f["dst"][keep]].astype(np.int32),
        word=f["word"][keep].astype(np.int32),
        graph_cost=f["graph_cost"][keep].astype(np.float64),
        acoustic_cost=f["acoustic_cost"][keep].astype(np.float64),
        string=string, string_start=string_start,
        final_graph=f["final_graph"][order].astype(np.float64),
        final_acoustic=f["final_acoustic"][order].astype(np.float64),
        final_string=final_string, final_string_start=final_start,
        acoustic_scale=float(acoustic_scale), notes=notes,
    )  # fmt: skip

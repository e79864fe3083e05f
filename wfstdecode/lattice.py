"""`Lattice`: the alternatives a search kept for one utterance, and what is computed on them.

A lattice here is an acyclic, frame-synchronous graph of the search's tokens: node ``n`` is a
token (graph state ``node_state[n]`` at token frame ``node_frame[n]``), arc ``i`` a decoding-graph
arc ``graph_arc[i]`` taken between two tokens — an emitting arc from token frame ``t`` to
``t + 1`` (consuming log-prob frame ``t``) or an epsilon arc within a frame. It is Kaldi's
state-level lattice (lattice-faster-decoder's tokens and links, before determinization); how the
CTC search makes one is in `wfstdecode.ctc.lattice`.

Costs follow Kaldi's ``LatticeWeight``: each arc keeps its ``graph_cost`` (graph weight,
penalties, phrase bonuses as negative cost) and its ``acoustic_cost`` (``-log_prob``, *not*
scaled) apart; a path ranks by ``graph + acoustic_scale * acoustic``, plus the final cost of its
last node. Written with `kaldi_bytes` (archives: `lattice_io`), Kaldi's ``lattice-*`` tools
read it (``ark:``) with ``--acoustic-scale`` as usual; `compact_lattice` determinizes it on
words.

Operations (float64 throughout): `best_cost` and Viterbi `forward` / `backward` costs, `pruned`
to a lattice beam, `nbest` (the n best distinct word sequences, each with its best alignment),
`arc_posteriors` (forward-backward in the log semiring, the posteriors Kaldi's lattice-to-post
computes).
"""

from __future__ import annotations

import heapq
import math
import numbers
from dataclasses import dataclass, field, replace

import numpy as np
from numba import njit

from .errors import OptionsError
from .lattice_costs import (
    NEVER,
    NO_PARTS,
    SUMMED,
    acoustic_shift,
    arcs_within,
    shifted_cost,
    viterbi_backward,
    viterbi_forward,
)
from .posteriors import (
    log_backward,
    log_forward,
    position_posteriors,
    sequence_log_posterior,
    sequence_posterior,
)

_INF = np.inf
# Below this a path's float64 cost resolves 1e-7: paths are ranked by their costs; beyond it
# (a frame of huge log-probs) by their costs less each frame's best (`Lattice._ranking`).
_EXACT_COSTS = 1e9


@dataclass(frozen=True, eq=False)
class Lattice:
    """One utterance's lattice (module docstring). Nodes are numbered in topological order
    (``src[i] < dst[i]``), node 0 is the start; arcs are sorted by ``src``.

    num_frames:     log-prob frames of the utterance (the last token frame).
    node_frame:     int32 [N] token frame of each node; node_state: int32 [N] its graph state.
    final:          float32 [N] final cost (graph side) of ending at a node; +inf where it may
                    not end (only last-frame nodes may).
    src, dst:       int32 [A] arc ends; graph_arc: int32 [A] the decoding-graph arc.
    ilabel:         int32 [A] token id + 1 (0: epsilon); olabel: int32 [A] word id (0: none).
    frame:          int32 [A] log-prob frame the arc consumes, or for an epsilon arc the frame of
                    the emitting arc before it (-1 before the first), as ``RawResult`` frames.
    graph_cost, acoustic_cost: float32 [A] (module docstring).
    acoustic_scale: the scale the search ranked paths with.
    notes:          what the lattice lacks (e.g. no final state survived, epsilon cycles cut).
    """

    num_frames: int
    node_frame: np.ndarray
    node_state: np.ndarray
    final: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    graph_arc: np.ndarray
    ilabel: np.ndarray
    olabel: np.ndarray
    frame: np.ndarray
    graph_cost: np.ndarray
    acoustic_cost: np.ndarray
    acoustic_scale: float
    notes: tuple = ()
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def num_nodes(self) -> int:
        return len(self.node_frame)

    @property
    def num_arcs(self) -> int:
        return len(self.src)

    # ----- costs -------------------------------------------------------------------------------
    def arc_cost(self, acoustic_scale: float | None = None, lm_scale: float = 1.0) -> np.ndarray:
        """float64 ``lm_scale * graph + acoustic_scale * acoustic`` per arc (default scale: the
        search's)."""
        scale = self.acoustic_scale if acoustic_scale is None else acoustic_scale
        default = scale == self.acoustic_scale and lm_scale == 1.0
        if default and "w" in self._cache:  # every operation below reads them: made once
            return self._cache["w"]
        w = (lm_scale * self.graph_cost.astype(np.float64)
             + scale * self.acoustic_cost.astype(np.float64))  # fmt: skip
        if default:
            w.flags.writeable = False
            self._cache["w"] = w
        return w

    def _posterior_cost(self) -> np.ndarray:
        """`arc_cost` less, on each emitting arc, the scaled acoustic cost of its frame's best
        emitting arc: every complete path consumes each frame once (all end at the last frame),
        so each path's cost drops by one constant and its share of the total does not change,
        while the sums stay exact when one frame's log-probs are huge (a frame of -1e20 made
        every path's float64 cost 1e20 and every share 1: arc posteriors summing to 36 per
        frame). Where some path ends earlier (a lattice read from a file), `arc_cost` itself."""
        if "w_post" in self._cache:
            return self._cache["w_post"]
        shift = self._acoustic_shift()
        if shift is None:
            w = self.arc_cost()
        else:
            w = shifted_cost(self.graph_cost, self.acoustic_cost, shift, self.acoustic_scale)
            w.flags.writeable = False
        self._cache["w_post"] = w
        return w

    def _acoustic_shift(self) -> np.ndarray | None:
        """float64 [A]: on each emitting arc the acoustic cost of its frame's best emitting arc,
        0 on the others (`_posterior_cost`); None where some path ends before the last frame
        or no arc emits."""
        applies, shift = acoustic_shift(self.num_frames, self.final, self.node_frame,
                                         self.ilabel, self.frame, self.acoustic_cost)  # fmt: skip
        return shift if applies else None

    def frame_relative(self) -> Lattice:
        """This lattice with each emitting arc's acoustic cost less that of its frame's best
        emitting arc where its costs are too large to rank paths (`_EXACT_COSTS`): every
        complete path's cost less one constant, so the same ranking and posteriors, with costs
        that stay small (what `compact_lattice.determinize` needs for posteriors); else, or
        where some path ends before the last frame, itself."""
        if not abs(self.best_cost) > _EXACT_COSTS:
            return self
        shift = self._acoustic_shift()
        if shift is None or not shift.any():
            return self
        acoustic = (self.acoustic_cost.astype(np.float64) - shift).astype(np.float32)
        return replace(self, acoustic_cost=acoustic, _cache={})

    def _ranking(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(w, alpha, beta)`` that rank paths — pruning and the best paths go by them:
        `arc_cost` and its Viterbi forward and backward costs, or, where the best path's cost
        is beyond `_EXACT_COSTS` (a frame of -1e20 log-probs made every path's float64 cost
        the same: a lattice beam kept every arc, the n-best came in any order),
        `_posterior_cost` and its own (each complete path less one constant)."""
        if "rank" not in self._cache:
            if not abs(self.best_cost) > _EXACT_COSTS:
                self._cache["rank"] = (self.arc_cost(), self.forward(), self.backward())
            else:
                w = self._posterior_cost()
                alpha = viterbi_forward(self.num_nodes, self.src, self.dst, w, *NO_PARTS, NEVER)
                beta = viterbi_backward(self.final.astype(np.float64), self.src, self.dst, w,
                                        *NO_PARTS, NEVER)  # fmt: skip
                self._cache["rank"] = (w, alpha, beta)
        return self._cache["rank"]

    def forward(self) -> np.ndarray:
        """Viterbi cost of the best path from the start to each node (float64; inf: none)."""
        if "alpha" not in self._cache:
            self._cache["alpha"] = viterbi_forward(self.num_nodes, self.src, self.dst,
                                                   self.arc_cost(), *NO_PARTS, NEVER)  # fmt: skip
        return self._cache["alpha"]

    def backward(self) -> np.ndarray:
        """Viterbi cost of the best way from each node to the end, final cost included."""
        if "beta" not in self._cache:
            self._cache["beta"] = viterbi_backward(self.final.astype(np.float64), self.src,
                                                   self.dst, self.arc_cost(), *NO_PARTS,
                                                   NEVER)  # fmt: skip
        return self._cache["beta"]

    @property
    def best_cost(self) -> float:
        """Cost of the best complete path (inf for an empty lattice)."""
        return float(self.backward()[0]) if self.num_nodes else _INF

    # ----- derived lattices and paths ----------------------------------------------------------
    def with_word_penalty(self, penalty: float) -> Lattice:
        """This lattice with ``penalty`` added to the graph cost of every arc with a word
        (Kaldi's lattice-add-penalty: positive = fewer words)."""
        finite = isinstance(penalty, numbers.Real) and math.isfinite(penalty)
        if isinstance(penalty, bool) or not finite:
            raise OptionsError(f"word penalty must be a finite number; got {penalty!r}")
        if penalty == 0:
            return self
        cost = self.graph_cost + np.float32(penalty) * (self.olabel != 0)
        return replace(self, graph_cost=cost.astype(np.float32), _cache={})

    def pruned(self, beam: float, cancel: np.ndarray | None = None) -> Lattice | None:
        """The arcs and nodes on some complete path within ``beam`` of the best (Kaldi's lattice
        beam, applied exactly with forward and backward costs). ``cancel``: a flag whose ``[0]``
        set (a Ctrl-C) stops the passes early: None is then returned, for a caller that drops
        it."""
        if not beam > 0:
            raise OptionsError(f"lattice beam must be > 0; got {beam}")
        cancel = NEVER if cancel is None else cancel
        if not self.num_nodes:
            return self._subset(*_NOTHING)
        w, alpha, beta = self._pruning_ranking(cancel)
        if cancel[0]:
            return None
        if not beta[0] < _INF:
            return self._subset(*_NOTHING)
        summed = w is SUMMED
        parts = (self.graph_cost, self.acoustic_cost, self.acoustic_scale) if summed else NO_PARTS
        arcs, nodes, src, dst, w_kept = arcs_within(alpha, beta, self.src, self.dst,
                                                    beta[0] + beam, w, *parts, cancel)  # fmt: skip
        if cancel[0]:
            return None
        out = self._subset(nodes, arcs, src, dst)
        # A kept node's best ways from the start and to the end lie within the beam, so they
        # are kept: its forward and backward costs stay what they were, the same sums.
        arc_kept = w_kept if summed else self.arc_cost()[arcs]
        w_kept.flags.writeable = arc_kept.flags.writeable = False
        out._cache.update(w=arc_kept, rank=(w_kept, alpha[nodes], beta[nodes]))
        if summed or w is self.arc_cost():
            out._cache.update(alpha=alpha[nodes], beta=beta[nodes])
        else:  # (the absolute costs' sums are recomputed: their rounding is the kept paths')
            out._cache.update(w_post=w_kept)
        return out

    def _pruning_ranking(self, cancel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`_ranking` for `pruned`; for a lattice whose costs were never summed (fresh from
        the search: nothing else will read them), with ``w`` = `SUMMED`, each pass summing an
        arc's costs as it reads them, the float64 costs of all its arcs never stored."""
        if "rank" in self._cache or "w" in self._cache:
            return self._ranking()
        parts = (self.graph_cost, self.acoustic_cost, self.acoustic_scale)
        beta = viterbi_backward(self.final.astype(np.float64), self.src, self.dst, SUMMED,
                                *parts, cancel)  # fmt: skip
        # (by `_posterior_cost`, as `_ranking`: -inf too, a hand-made lattice's)
        if beta[0] < _INF and abs(beta[0]) > _EXACT_COSTS and not cancel[0]:
            return self._ranking()
        alpha = viterbi_forward(self.num_nodes, self.src, self.dst, SUMMED, *parts, cancel)
        return SUMMED, alpha, beta

    def _subset(self, nodes, arcs, src, dst) -> Lattice:
        """The lattice of the nodes and arcs at these (increasing) indices, ``src`` and
        ``dst`` the arcs' ends numbered among those nodes (`arcs_within`)."""
        return Lattice(self.num_frames, self.node_frame[nodes], self.node_state[nodes],
                       self.final[nodes], src, dst, self.graph_arc[arcs], self.ilabel[arcs],
                       self.olabel[arcs], self.frame[arcs], self.graph_cost[arcs],
                       self.acoustic_cost[arcs], self.acoustic_scale, self.notes)  # fmt: skip

    def best_path(self) -> tuple[np.ndarray, float] | None:
        """A best complete path ``(arc indices, cost)`` (None: there is none): from the start,
        the first arc whose cost plus the backward cost after it equals the backward cost
        before it, until a node whose final cost equals its backward cost (Viterbi traceback;
        `nbest(1)`; among equally good paths not necessarily the first of `nbest(n > 1)`)."""
        if not self.num_nodes or not self.best_cost < _INF:
            return None
        w, _, beta = self._ranking()
        first = first_arcs(self.src, self.num_nodes)
        arcs = _best_path(first, self.dst, w, self.final.astype(np.float64), beta)
        return arcs.astype(np.int32), self.best_cost

    def nbest(self, n: int) -> list[tuple[np.ndarray, float]]:
        """Up to ``n`` paths with distinct word sequences, best first: ``(arc indices, cost)``,
        each the best alignment of its words. An A* search over (node, words so far) with the
        exact backward costs as its heuristic: the first arrival at a pair is its best, so a
        later one is dropped — on-the-fly determinization on words, as n-best strings needs."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise OptionsError(f"nbest must be an int >= 1; got {n!r}")
        if n == 1:  # the Viterbi traceback: the same best, without the search's queue and sets
            return [] if (path := self.best_path()) is None else [path]
        if not self.num_nodes or not self.best_cost < _INF:
            return []
        w, _, beta = self._ranking()
        first = first_arcs(self.src, self.num_nodes)
        arcs, ends, costs = _nbest(n, first, self.dst, self.olabel, w, self.arc_cost(),
                                   self.final.astype(np.float64), beta)  # fmt: skip
        starts = np.concatenate(([0], ends))[:-1]
        return [(arcs[a:b].astype(np.int32), float(c))
                for a, b, c in zip(starts, ends, costs, strict=True)]  # fmt: skip

    def arc_posteriors(self) -> np.ndarray:
        """float64 [A] posterior of each arc: the share of the lattice's total probability
        (``exp(-cost)`` summed over its complete paths) that passes through it."""
        w = self._posterior_cost()
        a = log_forward(self.num_nodes, self.src, self.dst, w)
        b = log_backward(self.final.astype(np.float64), self.src, self.dst, w)
        if not self.num_nodes or not b[0] < _INF:
            return np.zeros(self.num_arcs)
        with np.errstate(invalid="ignore"):
            post = np.exp(b[0] - (a[self.src] + w + b[self.dst]))
        return np.nan_to_num(post, nan=0.0)

    def word_posteriors(self) -> list[dict[int, float]]:
        """Per word position ``k`` (0-based), ``{word id: posterior}``: the probability that a
        path's ``k``-th word is that word (forward-backward over (node, words so far)). Summed
        over words, position ``k`` gives the probability that a path has more than ``k`` words;
        the rest is the probability of fewer. Every alignment (and every graph path, backoff
        ones included) of a word sequence adds to it; `compact_lattice.CompactLattice` counts
        each sequence once, by its best alignment, as Kaldi does."""
        return position_posteriors(self.src, self.dst, self.olabel, self._posterior_cost(),
                                   self.final.astype(np.float64))  # fmt: skip

    def path_posterior(self, words) -> float:
        """Posterior probability of a word sequence: its paths' share of the total."""
        return sequence_posterior(self.src, self.dst, self.olabel, self._posterior_cost(),
                                  self.final.astype(np.float64), words)  # fmt: skip

    def path_log_posterior(self, words) -> float:
        """The natural log of `path_posterior` (-inf: no path), without its underflow to 0."""
        return sequence_log_posterior(self.src, self.dst, self.olabel, self._posterior_cost(),
                                      self.final.astype(np.float64), words)  # fmt: skip

    # ----- output ------------------------------------------------------------------------------
    def kaldi_bytes(self) -> bytes:
        """The lattice as an OpenFst ``vector`` FST with Kaldi's ``lattice4`` arcs (input: token
        id + 1, output: word id, weight: (graph cost, unscaled acoustic cost)): what Kaldi's
        ``Lattice`` holder reads and writes in binary."""
        from .fstio import write_lattice_bytes

        return write_lattice_bytes(self.final, self.src, self.dst, self.ilabel, self.olabel,
                                   self.graph_cost, self.acoustic_cost)  # fmt: skip


# `Lattice._subset`'s arguments for an empty lattice
_NOTHING = (
    np.zeros(0, np.int64),
    np.zeros(0, np.int64),
    np.zeros(0, np.int32),
    np.zeros(0, np.int32),
)


def first_arcs(src: np.ndarray, n_nodes: int) -> np.ndarray:
    """int64 [N + 1]: node ``n``'s arcs are ``first[n]:first[n + 1]`` of arcs sorted by
    ``src``: counted, not searched (a searchsorted of every node was 8x slower and half of
    `wfstdecode.scoring`'s time, one best path per lattice and setting)."""
    counts = np.bincount(src, minlength=n_nodes)
    return np.concatenate(([0], np.cumsum(counts))).astype(np.int64)


def lattice_from_fst(a: dict, acoustic_scale: float) -> Lattice:
    """A `Lattice` of lattice FST arrays (`fstio.read_lattice_bytes`'s): states renumbered
    topologically from the start, node frames counted along the arcs."""
    from .errors import GraphError

    n = len(a["final"])
    order = topological_order(n, a["start"], a["src"], a["dst"])
    rank = np.full(n, -1, np.int64)
    rank[order] = np.arange(len(order))
    keep = (rank[a["src"]] >= 0) & (rank[a["dst"]] >= 0)
    src, dst = rank[a["src"][keep]], rank[a["dst"][keep]]
    by_src = np.argsort(src, kind="stable")
    src, dst = src[by_src], dst[by_src]
    ilabel, olabel = a["ilabel"][keep][by_src], a["olabel"][keep][by_src]
    frames = _frames_along(len(order), src, dst, ilabel)
    if np.any(frames[dst] != frames[src] + (ilabel != 0)):
        raise GraphError("the lattice is not frame-synchronous (paths to a state differ in length)")
    return Lattice(
        int(frames.max(initial=0)), frames.astype(np.int32), np.full(len(order), -1, np.int32),
        a["final"][order], src.astype(np.int32), dst.astype(np.int32),
        np.full(len(src), -1, np.int32), ilabel, olabel, (frames[dst] - 1).astype(np.int32),
        a["graph_cost"][keep][by_src], a["acoustic_cost"][keep][by_src], float(acoustic_scale),
    )  # fmt: skip


@njit(nogil=True, cache=True)
def _frames_along(n_nodes, src, dst, ilabel):
    """Each node's frame: arcs in topological order of their sources, an arc with an input
    label consuming one frame."""
    frames = np.zeros(n_nodes, np.int64)
    for i in range(len(src)):
        frames[dst[i]] = frames[src[i]] + (ilabel[i] != 0)
    return frames


def topological_order(n: int, start: int, src, dst) -> np.ndarray:
    """The states reachable from ``start``, in a topological order (Kahn), or all of them as
    they are when every arc already goes forward from state 0 and reaches every state; a cycle
    raises."""
    from .errors import GraphError

    if not n:
        return np.zeros(0, np.int64)
    if start == 0 and bool(np.all(src < dst)):  # already in order (as written here)
        by_src = np.argsort(src, kind="stable")
        if _reaches_all(n, np.asarray(src)[by_src], np.asarray(dst)[by_src]):
            return np.arange(n, dtype=np.int64)
    succ: list[list[int]] = [[] for _ in range(n)]
    for s, d in zip(src.tolist(), dst.tolist(), strict=True):
        succ[s].append(d)
    seen, stack = {start}, [start]
    while stack:
        for d in succ[stack.pop()]:
            if d not in seen:
                seen.add(d)
                stack.append(d)
    indegree = dict.fromkeys(seen, 0)
    for s in seen:
        for d in succ[s]:
            indegree[d] += 1
    ready, order = [start], []
    while ready:
        s = ready.pop()
        order.append(s)
        for d in succ[s]:
            indegree[d] -= 1
            if indegree[d] == 0:
                ready.append(d)
    if len(order) != len(seen):
        raise GraphError("the lattice has a cycle")
    return np.array(order, np.int64)


@njit(nogil=True, cache=True)
def _reaches_all(n, src, dst):
    """Whether arcs that go forward, sorted by source, reach every state from state 0 (an
    unreachable state kept would be given frame 0: "not frame-synchronous" for a lattice that
    is, and its arcs counted in `lattice_from_fst`'s frames)."""
    reached = np.zeros(n, np.bool_)
    reached[0] = True
    for i in range(src.shape[0]):
        if reached[src[i]]:
            reached[dst[i]] = True
    return reached.all()


@njit(nogil=True, cache=True)
def _best_path(first, dst, w, final, beta):
    """`Lattice.best_path`'s arcs: ``beta`` is exact (the same sums as `viterbi_backward`), so
    an arc on a best path matches it exactly."""
    out = np.empty(dst.shape[0], np.int64)
    n, node = 0, 0
    while final[node] != beta[node]:
        nxt = -1
        for i in range(first[node], first[node + 1]):
            if w[i] + beta[dst[i]] == beta[node]:
                nxt = i
                break
        if nxt < 0:  # not reached with the backward costs of these arcs
            raise ValueError("best_path: the backward costs do not match the arcs")
        out[n] = nxt
        n += 1
        node = dst[nxt]
    return out[:n]


@njit(nogil=True, cache=True)
def _nbest(n, first, dst, olabel, w, cost_w, final, beta):
    """`Lattice.nbest`'s A* search: ``(arcs of every path, where each ends, costs)``, ranked by
    ``w`` (``beta``: its backward costs), each cost summed of ``cost_w``. A queue
    entry is ``(cost + beta, -order, cost, its cost_w sum, node, prefix, step)``: among equal
    estimates the
    newest first (depth-first), so that exactly tied paths (2^n word sequences of one cost when
    n positions each hold two equally likely words) reach an end in one descent, not after
    every tied prefix is expanded breadth-first (exponential); node -1 is the pseudo-node
    after a final node (one arrival per word sequence); a prefix is an id of the words so far
    (0: none), a step the arrival it came from and the arc it took."""
    # prefix << 32 | word -> prefix, and the (node + 1) << 32 | prefix pairs done: int64
    # hash tables (`_slot`), several times faster here than typed dicts
    prefix_keys, prefix_ids = _new_table(64)
    done_keys, _unused = _new_table(256)
    n_prefixes, n_done = 0, 0
    step_before, step_arc = [np.int64(-1)], [np.int64(-1)]  # step 0: the start
    heap = [(beta[0], np.int64(0), 0.0, 0.0, np.int64(0), np.int64(0), np.int64(0))]
    out_arcs, out_ends, out_costs = [np.int64(0) for _ in range(0)], [np.int64(0)], [0.0]
    order = np.int64(1)
    while len(heap) and len(out_costs) - 1 < n:
        _, _, cost, true_cost, node, prefix, step = heapq.heappop(heap)
        key = ((node + 1) << 32) | prefix
        at = _slot(done_keys, key)
        if done_keys[at] == key:
            continue
        done_keys[at] = key
        n_done += 1
        if 2 * n_done > done_keys.shape[0]:
            done_keys, _unused = _doubled(done_keys, _unused)
        if node == -1:
            path = []
            while step > 0:
                path.append(step_arc[step])
                step = step_before[step]
            for k in range(len(path) - 1, -1, -1):
                out_arcs.append(path[k])
            out_ends.append(np.int64(len(out_arcs)))
            out_costs.append(true_cost)
            continue
        if final[node] < np.inf:
            total = cost + final[node]
            heapq.heappush(heap, (total, -order, total, true_cost + final[node], np.int64(-1),
                                  prefix, step))  # fmt: skip
            order += 1
        for i in range(first[node], first[node + 1]):
            d = np.int64(dst[i])
            if not beta[d] < np.inf:
                continue
            nxt = prefix
            if olabel[i] != 0:
                word_key = (prefix << 32) | np.int64(olabel[i])
                at = _slot(prefix_keys, word_key)
                if prefix_keys[at] == word_key:
                    nxt = prefix_ids[at]
                else:
                    n_prefixes += 1
                    nxt = np.int64(n_prefixes)
                    prefix_keys[at], prefix_ids[at] = word_key, nxt
                    if 2 * n_prefixes > prefix_keys.shape[0]:
                        prefix_keys, prefix_ids = _doubled(prefix_keys, prefix_ids)
            next_key = ((d + 1) << 32) | nxt
            if done_keys[_slot(done_keys, next_key)] == next_key:
                continue
            step_before.append(step)
            step_arc.append(np.int64(i))
            c = cost + w[i]
            heapq.heappush(heap, (c + beta[d], -order, c, true_cost + cost_w[i], d, nxt,
                                  np.int64(len(step_arc) - 1)))  # fmt: skip
            order += 1
    arcs = np.empty(len(out_arcs), np.int64)
    for k in range(len(out_arcs)):
        arcs[k] = out_arcs[k]
    ends = np.array(out_ends[1:], np.int64)
    costs = np.array(out_costs[1:], np.float64)
    return arcs, ends, costs


# Open-addressing tables of non-negative int64 keys (-1: an empty slot) with int64 values,
# linear probing, a power-of-two size kept at least twice the number of keys.
@njit(nogil=True, cache=True)
def _new_table(size):
    return np.full(size, -1, np.int64), np.zeros(size, np.int64)


@njit(nogil=True, cache=True)
def _slot(keys, key):
    """Where ``key`` is in ``keys``, or the empty slot where it goes."""
    mask = np.uint64(keys.shape[0] - 1)
    i = np.int64(((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)) & mask)
    while keys[i] != -1 and keys[i] != key:
        i = np.int64((np.uint64(i) + np.uint64(1)) & mask)
    return i


@njit(nogil=True, cache=True)
def _doubled(keys, values):
    """The table at twice the size."""
    new_keys, new_values = _new_table(2 * keys.shape[0])
    for j in range(keys.shape[0]):
        if keys[j] != -1:
            at = _slot(new_keys, keys[j])
            new_keys[at], new_values[at] = keys[j], values[j]
    return new_keys, new_values

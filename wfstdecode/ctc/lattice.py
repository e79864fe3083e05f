"""Lattices from the CTC search: what `reference.py`'s search keeps, turned into a `Lattice`.

The lattice of an utterance is defined on the search's survivors (reference.py step 5), as
Kaldi's lattice-faster-decoder keeps its tokens and the links between them:

* nodes: every token that survived token frame ``f`` (a (graph state, context state) pair), and
  the tokens along the search's own result paths (an epsilon ancestor of a survivor may itself
  have been pruned when a later arc had negative cost; the best path must be in the lattice);
* arcs: every graph arc between two nodes: emitting arcs from frame ``f`` to ``f + 1`` reading
  log-prob frame ``f`` (``-inf`` log-probs left out) out of survivors only (a token the search
  pruned was never expanded: its arcs would give paths the search never saw, better than its
  best), epsilon arcs within a frame, with the arc
  cost and phrase bonus of step 2 (`bundles.arc_cost`) as graph cost and ``-log_prob`` as
  acoustic cost; an epsilon cycle (which no best path uses) is cut where it closes, with a note;
* end: last-frame survivors, at ``final_cost + phi`` (step 6; ``phi`` alone when no final state
  survived, as the search's partial result);

then pruned to the paths within ``lattice_beam`` of the best (`Lattice.pruned`). Survivors come
from the backend's streaming interface (``begin``, then ``advance_keeping``, which runs the
frames as ``advance`` does and keeps each frame's survivors, then ``end``; cpu does the three
in one compiled call per utterance, `CpuStreams.search_keeping`), so every backend with
streaming gives the same lattice, array for array (cuda: the survivors of every frame reach the
host with the records, `cuda.buffers.Records`). The nodes and arcs are then found in one pass
over the kept survivors (`_links`), all of `build_lattice`'s arrays in one compiled call.

n-best (`nbest_results`): the search's best path first — the result without a lattice, bit for
bit — then the lattice's next best distinct word sequences (`Lattice.nbest`), each as the best
alignment of its words.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..backends import ctc_stream_backend
from ..lattice import Lattice
from ..lattice_costs import NEVER
from ..metrics import edit_distance
from ..results import Hypothesis, changed
from ._paths import to_hypotheses
from ._problem import FrameSurvivors, RawResult, SearchProblem
from .bundles import arc_cost, lane_boosts, search_graph
from .scratch import state_maps
from .status import DIED, NO_FINAL

_F32_INF = np.float32(np.inf)
_NO_FINAL_NOTE = "no final state survived the last frame: the lattice ends without final costs"


def lattice_search(problem: SearchProblem, backend: str, tuning) -> tuple[list, list]:
    """Search every utterance on ``backend``'s streaming interface, keeping each frame's
    survivors: ``(RawResult per utterance, Lattice or None per utterance)``, each lattice pruned
    to the lattice beam (None when the search died). Utterances run on the backend's threads,
    searches and lattices alike."""
    streams = ctc_stream_backend(backend)(tuning)
    run = getattr(streams, "run_interruptibly", None)  # (cpu's: a Ctrl-C stops it soon)
    if run is None:
        return _searched(problem, streams, None)
    return run(lambda cancel: _searched(problem, streams, cancel), int(problem.lengths.sum()))


def _searched(problem: SearchProblem, streams, cancel) -> tuple[list, list]:
    """`lattice_search` on ``streams``; ``cancel``: a flag set once a Ctrl-C came (the
    searches, lattice builds and prunings stop: the result is dropped), or None."""
    one = [problem.utterance(b) for b in range(problem.batch_size)]
    searched = getattr(streams, "search_keeping", None)  # (cpu's: each utterance in one call)
    raws, firsts, kepts = (_search_keeping(streams, one) if searched is None
                           else searched(problem))  # fmt: skip

    def lattice_of(b):
        if cancel is not None and cancel[0]:
            return None
        p, first, kept, raw = one[b], firsts[b], kepts[b], raws[b]
        if not raw.paths or first is None or kept.num_frames < p.lengths[0]:  # it died
            return None
        lattice = build_lattice(p, first, kept, raw, cancel)
        if cancel is not None and cancel[0]:  # (cut short: dropped)
            return None
        return lattice.pruned(p.options.lattice_beam, cancel)

    return raws, streams.map(lattice_of, range(len(one)))


def _search_keeping(streams, one: list) -> tuple[list, list, list]:
    """Each of the one-utterance problems ``one`` searched through ``streams``' streaming
    interface: per utterance its `RawResult`, token frame 0's survivors (None where the search
    stopped there) and the later frames' (`FrameSurvivors`)."""
    begun = streams.begin_all(one)
    firsts = [streams.survivors(state) for state in begun]  # before advancing (in place)
    jobs = [(p, state, p.ac[0, : p.lengths[0]]) for p, state in zip(one, begun, strict=True)]
    done = streams.advance_keeping(jobs)
    raws = [streams.end(p, state, b)  # (``b``: the utterance its errors name)
            for b, (p, (state, _)) in enumerate(zip(one, done, strict=True))]  # fmt: skip
    return raws, firsts, [kept for _, kept in done]


def build_lattice(p: SearchProblem, first: tuple, kept: FrameSurvivors, raw: RawResult,
                  cancel=None) -> Lattice:  # fmt: skip
    """Utterance 0 of ``p``'s lattice from its survivors — those of token frame 0 (``first``:
    ``(states, context states)``) and of every later frame (``kept``) — and the search's result
    ``raw`` (module docstring), before pruning. ``cancel``: a flag whose ``[0]`` set stops the
    links' pass at its next frame (the lattice then lacks arcs: for a caller that drops it)."""
    graph, boosts = search_graph(p), lane_boosts(p)
    T = kept.num_frames
    arcs = [arcs for arcs, _, _ in raw.paths]
    offsets = np.cumsum([0] + [len(a) for a in arcs], dtype=np.int64)
    with state_maps(p.graph) as maps:
        node_frame, node_state, final, links, n_cut = _assemble(
            first[0], first[1], kept.state, kept.ctx, kept.ends, _joined(arcs),
            _joined([frames for _, frames, _ in raw.paths]), offsets, graph, boosts,
            p.log_probs[0, :T], maps[0], NEVER if cancel is None else cancel,
            bool(raw.status & NO_FINAL),
        )  # fmt: skip
    notes = []
    if raw.status & NO_FINAL:
        notes.append(_NO_FINAL_NOTE)
    if n_cut:
        notes.append(f"{n_cut} epsilon arcs closing a cycle were left out")
    src, dst, garc, ilabel, olabel, gcost, acost, afr = links
    return Lattice(
        T, node_frame, node_state, final, src, dst, garc, ilabel, olabel, afr, gcost, acost,
        float(p.options.acoustic_scale), tuple(notes),
    )  # fmt: skip


def _joined(arrays: list) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.zeros(0, np.int32)


# n-best asks the lattice for at most this many paths per sequence wanted when paths repeat a
# word sequence (a word spelled through the oov slot in several ways): fewer than n may come back
MAX_NBEST_ASKED = 16


def nbest_results(p: SearchProblem, raws: list, lattices: list, n: int) -> list:
    """Per utterance a `RawResult` with the search's best path, then the (pruned) lattice's
    next best distinct word sequences, up to ``n`` in all."""
    out = []
    for b, (raw, lat) in enumerate(zip(raws, lattices, strict=True)):
        if lat is None or n == 1:
            out.append(RawResult(raw.paths[:1], raw.status, raw.died_frame, raw.notes))
            continue
        first = raw.paths[0]
        asked = n + 1
        while True:  # (more when label sequences are one word sequence: a word spelled twice)
            found = lat.nbest(asked)
            paths, seen = [first], {_word_key(p, p.graph.olabel[first[0]], b)}
            for arcs, cost in found:
                key = _word_key(p, lat.olabel[arcs], b)
                if key in seen:
                    continue
                if len(paths) == n:
                    break
                seen.add(key)
                paths.append((lat.graph_arc[arcs], lat.frame[arcs], cost))
            if len(paths) == n or len(found) < asked or asked > MAX_NBEST_ASKED * n:
                break
            asked *= 2
        out.append(RawResult(paths, raw.status, raw.died_frame, raw.notes))
    return out


def _word_key(p: SearchProblem, labels: np.ndarray, b: int) -> tuple:
    """The word sequence of a path's output ``labels`` (utterance ``b``), as n-best tells
    sequences apart: its word ids; on a graph with an oov slot its words as `to_hypotheses`
    names them (a spelled word's spellings, one per pronunciation, are one word, and it drops
    a hypothesis whose words a better one has)."""
    labels = labels[labels != 0].tolist()
    if p.oov is None:
        return tuple(labels)
    ids, spelled, _ = p.oov.collapse(labels, b)
    symbol = p.graph.words.symbol if p.graph.words is not None else str  # (as it names them)
    return tuple(symbol(w) if s is None else s[0] for w, s in zip(ids, spelled, strict=True))


def lattice_hypotheses(p: SearchProblem, raws: list, lattices: list,
                       n: int) -> list[list[Hypothesis] | None]:  # fmt: skip
    """The ``n`` best distinct word sequences of each lattice of ``p``'s utterances (e.g.
    rescored: `wfstdecode.rescore`) as hypotheses, scored by the lattice's own costs:
    ``graph_score`` is its graph side (a rescoring LM counts there), ``acoustic_score`` the
    scaled acoustic side; status and notes are the search's (``raws``) and the lattice's. None
    where the lattice is None (the search died) or has no path."""
    paths, graph_costs = [], []
    for raw, lat in zip(raws, lattices, strict=True):
        best = lat.nbest(n) if lat is not None else []
        if not best:
            paths.append(RawResult([], DIED))
            graph_costs.append(None)
            continue
        notes = (*raw.notes, *(x for x in lat.notes if x != _NO_FINAL_NOTE))  # said by status
        paths.append(RawResult([(lat.graph_arc[a], lat.frame[a], c) for a, c in best],
                               raw.status, raw.died_frame, notes))  # fmt: skip
        graph_costs.append([float(lat.graph_cost[a].astype(np.float64).sum())
                            + float(lat.final[lat.dst[a[-1]] if len(a) else 0])
                            for a, _ in best])  # fmt: skip
    out: list[list[Hypothesis] | None] = []
    for hyps, costs in zip(to_hypotheses(p, paths), graph_costs, strict=True):
        out.append(None if costs is None else [
            changed(h, graph_score=-c, score=h.acoustic_score - c)
            for h, c in zip(hyps, costs, strict=True)
        ])  # fmt: skip
    return out


def mbr_ranked(p: SearchProblem, hyps: list, lattices: list) -> list:
    """Minimum Bayes risk over each utterance's candidates (``options.mbr_candidates`` best
    word sequences of its lattice): each candidate's expected word errors against the others,
    weighted by their posteriors in ``lattices`` (`Lattice`s, or `CompactLattice`s when
    ``options.posteriors == "determinized"``), normalised over the candidates; candidates ranked
    by it (ties: the lattice's order), the first ``nbest`` kept, each with its expected errors
    in its notes (Stolcke et al.'s n-best MBR). With ``nbest`` above ``mbr_candidates``, the
    lattice's next best sequences follow the ranked candidates, as they came: the candidates,
    and so the ranking, do not depend on how many hypotheses are asked for."""
    n, k = p.options.nbest, p.options.mbr_candidates
    out = []
    for utt, lat in zip(hyps, lattices, strict=True):
        utt, rest = utt[:k], utt[k:]
        if lat is None or len(utt) < 2:
            out.append([*utt, *rest][:n])
            continue
        # in the log domain: over a long lattice every candidate's posterior can underflow to 0
        log_post = np.array([lat.path_log_posterior(h.word_ids) for h in utt])
        if not log_post.max() > -np.inf:  # (none in the lattice: nothing to weigh them by)
            out.append([*utt, *rest][:n])
            continue
        post = np.exp(log_post - log_post.max())
        post /= post.sum()
        risk = [float(sum(q * edit_distance(h.word_ids, g.word_ids)
                          for q, g in zip(post, utt, strict=True))) for h in utt]  # fmt: skip
        order = sorted(range(len(utt)), key=lambda i: (risk[i], i))[:n]
        note = "MBR over {} candidates: expected word errors {:.3f}"
        out.append([*(changed(utt[i], notes=(*utt[i].notes, note.format(len(utt), risk[i])))
                      for i in order), *rest][:n])  # fmt: skip
    return out


NO_CONFIDENCES = "no word confidences: the graph's oov slot spells words as several lattice labels"


def with_confidences(p: SearchProblem, hyps: list, lattices: list) -> list:
    """Each hypothesis with its words' posteriors in its utterance's lattice (``word_posteriors``
    of a `Lattice` or of its `CompactLattice`, as ``options.posteriors`` says); unchanged where
    there is no lattice; with an oov slot, whose spelled words are several lattice labels each,
    none and a note saying so."""
    if p.oov is not None:
        return [utt if lat is None else [changed(h, notes=(*h.notes, NO_CONFIDENCES)) for h in utt]
                for utt, lat in zip(hyps, lattices, strict=True)]  # fmt: skip
    out = []
    for utt, lat in zip(hyps, lattices, strict=True):
        if lat is None:
            out.append(utt)
            continue
        posteriors = lat.word_posteriors()
        out.append([changed(h, word_confidences=tuple(  # in [0, 1] (sums round past 1)
            min(1.0, posteriors[k].get(w, 0.0)) if k < len(posteriors) else 0.0
            for k, w in enumerate(h.word_ids))) for h in utt])  # fmt: skip
    return out


@njit(nogil=True, cache=True)
def _path_tokens(graph, boosts, arcs, path_frames, offsets):
    """``(token frames, keys)`` of the tokens the paths pass (path ``k``: ``arcs[offsets[k]:
    offsets[k + 1]]``, each from the root context state)."""
    n = arcs.shape[0]
    frames = np.empty(n, np.int64)
    keys = np.empty(n, np.int64)
    for k in range(offsets.shape[0] - 1):
        x = 0
        for i in range(offsets[k], offsets[k + 1]):
            a = arcs[i]
            _, x = arc_cost(graph, boosts, 0, a, x)
            frames[i] = path_frames[i] + 1
            keys[i] = (np.int64(graph.next_state[a]) << 32) | np.int64(x)
    return frames, keys


@njit(nogil=True, cache=True)
def _assemble(first_state, first_ctx, kept_state, kept_ctx, kept_ends, path_arcs, path_arc_frames,
              path_offsets, graph, boosts, lp, heads, cancel, no_final):  # fmt: skip
    """`build_lattice`'s arrays in one call: the survivors of token frame 0 (``first``) and
    later (``kept``) and the tokens of the result paths (`_path_tokens`) as nodes in canonical
    order, the arcs between them (`_links`, with ``heads`` a state map: `scratch.state_maps`),
    ranked (`_topological_ranks`) and grouped by source, and the last frame's survivors' final
    costs (``phi`` alone with ``no_final``). Returns ``(node frames, node states, final costs,
    arcs, number of arcs cut)``, nodes in rank order, ``arcs`` as `_by_source`'s with the
    graph arcs' ilabels and olabels after the graph arcs."""
    path_frames, path_keys = _path_tokens(graph, boosts, path_arcs, path_arc_frames, path_offsets)
    T = kept_ends.shape[0]
    n_first, n_kept, n_path = first_state.shape[0], kept_state.shape[0], path_keys.shape[0]
    frames = np.empty(n_first + n_kept + 1 + n_path, np.int64)
    keys = np.empty_like(frames)
    for i in range(n_first):
        frames[i], keys[i] = 0, np.int64(first_state[i]) << 32 | np.int64(first_ctx[i])
    f = 0
    for i in range(n_kept):
        while i >= kept_ends[f]:
            f += 1
        j = n_first + i
        frames[j], keys[j] = f + 1, np.int64(kept_state[i]) << 32 | np.int64(kept_ctx[i])
    start_key = np.int64(graph.start) << 32  # a token's key: state << 32 | context state
    frames[n_first + n_kept], keys[n_first + n_kept] = 0, start_key
    frames[n_first + n_kept + 1 :] = path_frames
    keys[n_first + n_kept + 1 :] = path_keys
    # canonical order (frame, key), duplicates dropped: the same lattice from every backend;
    # the survivors' first, then the start and path tokens that are none (seldom any)
    n_survivors = n_first + n_kept
    all_keys, frame_start = _canonical_nodes(frames[:n_survivors], keys[:n_survivors], T + 1)
    extra = np.zeros(frames.shape[0], np.bool_)
    for i in range(n_survivors, frames.shape[0]):
        extra[i] = _node_at(all_keys, frame_start, frames[i], keys[i]) < 0
    survivor = np.ones(all_keys.shape[0], np.bool_)
    if extra.any():
        extra[:n_survivors] = True  # (every survivor, and the extra tokens)
        all_keys, frame_start = _canonical_nodes(frames[extra], keys[extra], T + 1)
        survivor = np.zeros(all_keys.shape[0], np.bool_)
        for i in range(n_survivors):
            survivor[_node_at(all_keys, frame_start, frames[i], keys[i])] = True
    node_state = (all_keys >> 32).astype(np.int32)
    node_ctx = (all_keys & 0xFFFFFFFF).astype(np.int32)
    src, dst, garc, gcost, acost, afr = _links(node_state, node_ctx, survivor, frame_start,
                                               graph, boosts, lp, heads, cancel)  # fmt: skip
    start = np.searchsorted(all_keys[: frame_start[1]], start_key)
    rank, cut = _topological_ranks(frame_start, src, dst, garc < graph.num_emitting, start)
    arcs = _by_source(rank, cut, src, dst, garc, gcost, acost, afr)
    by_rank = np.empty_like(rank)
    by_rank[rank] = np.arange(rank.shape[0], dtype=rank.dtype)
    node_frame = np.empty(rank.shape[0], np.int32)
    final = np.full(rank.shape[0], np.inf, np.float32)
    slot = boosts.node_offset[0] if boosts.mask[0] >= 0 else -1
    for f in range(T + 1):
        for v in range(frame_start[f], frame_start[f + 1]):
            node_frame[rank[v]] = f
            if f == T and survivor[v]:  # (a phrase's partial match gives its bonus back)
                phi = boosts.phi[slot + node_ctx[v]] if slot >= 0 else np.float32(0.0)
                final[rank[v]] = phi if no_final else graph.final_cost[node_state[v]] + phi
    src, dst, garc, gcost, acost, afr = arcs
    links = (src, dst, garc, graph.ilabel[garc], graph.olabel[garc], gcost, acost, afr)
    return node_frame, node_state[by_rank], final, links, int(cut.sum())


@njit(nogil=True, cache=True)
def _canonical_nodes(frames, keys, n_frames):
    """The distinct ``keys`` of each frame, sorted, frame after frame, and where each frame's
    start (a counting sort by frame, then a sort within each)."""
    start = np.zeros(n_frames + 1, np.int64)
    for f in frames:
        start[f + 1] += 1
    for f in range(n_frames):
        start[f + 1] += start[f]
    grouped = np.empty(keys.shape[0], np.int64)
    fill = start[:-1].copy()
    for i in range(keys.shape[0]):
        grouped[fill[frames[i]]] = keys[i]
        fill[frames[i]] += 1
    out = np.empty(keys.shape[0], np.int64)
    out_start = np.zeros(n_frames + 1, np.int64)
    n = 0
    for f in range(n_frames):
        part = grouped[start[f] : start[f + 1]]
        part.sort()
        for i in range(part.shape[0]):
            if i == 0 or part[i] != part[i - 1]:
                out[n] = part[i]
                n += 1
        out_start[f + 1] = n
    return out[:n], out_start


@njit(nogil=True, cache=True)
def _node_at(keys, frame_start, frame, key):
    """The index of ``key`` among frame ``frame``'s sorted ``keys`` (`_canonical_nodes`), or
    -1."""
    lo, hi = frame_start[frame], frame_start[frame + 1]
    at = lo + np.searchsorted(keys[lo:hi], key)
    return at if at < hi and keys[at] == key else -1


@njit(nogil=True, cache=True)
def _by_source(rank, cut, src, dst, garc, gcost, acost, afr):
    """The arcs not ``cut``, their ends renumbered by ``rank``, grouped by source in rank order
    (a stable counting sort): ``(src, dst, graph arc, graph cost, acoustic cost, frame)``."""
    n_nodes = rank.shape[0]
    first = np.zeros(n_nodes + 1, np.int64)
    for i in range(src.shape[0]):
        if not cut[i]:
            first[rank[src[i]] + 1] += 1
    for v in range(n_nodes):
        first[v + 1] += first[v]
    m = first[n_nodes]
    o_src, o_dst = np.empty(m, np.int32), np.empty(m, np.int32)
    o_arc, o_frame = np.empty(m, np.int32), np.empty(m, np.int32)
    o_gcost, o_acost = np.empty(m, np.float32), np.empty(m, np.float32)
    for i in range(src.shape[0]):
        if cut[i]:
            continue
        s = rank[src[i]]
        k = first[s]
        first[s] += 1
        o_src[k], o_dst[k], o_arc[k] = s, rank[dst[i]], garc[i]
        o_gcost[k], o_acost[k], o_frame[k] = gcost[i], acost[i], afr[i]
    return o_src, o_dst, o_arc, o_gcost, o_acost, o_frame


@njit(nogil=True, cache=True)
def _node_of(head, same_state, node_ctx, state, ctx):
    """The node of (state, ctx) in the frame whose nodes are chained from ``head``, or -1."""
    v = head[state]
    while v >= 0 and node_ctx[v] != ctx:
        v = same_state[v]
    return v


@njit(nogil=True, cache=True)
def _links(node_state, node_ctx, survivor, frame_start, graph, boosts, lp, head, cancel):
    """Every graph arc between two nodes (module docstring), frame by frame: the emitting arcs
    into frame ``f`` (out of ``survivor`` nodes), then the epsilon arcs within it. Returns
    ``(src, dst, graph arc, graph cost, acoustic cost, frame)``. ``head``: -1 per graph state,
    the first node of each state in the frame at hand while it is at hand (-1 again after).
    Stops before the next frame once ``cancel[0]`` is set (Ctrl-C: `lattice_search`)."""
    n_nodes = node_state.shape[0]
    same_state = np.full(n_nodes, -1, np.int32)
    cap = max(16, 4 * n_nodes)
    src = np.empty(cap, np.int32)
    dst = np.empty(cap, np.int32)
    garc = np.empty(cap, np.int32)
    gcost = np.empty(cap, np.float32)
    acost = np.empty(cap, np.float32)
    afr = np.empty(cap, np.int32)
    n = 0
    for f in range(frame_start.shape[0] - 1):
        if cancel[0] != 0:
            break
        lo, hi = frame_start[f], frame_start[f + 1]
        # room for every arc this frame can link, made here: a buffer the arc loops below could
        # rebind would cost Numba's atomic reference counts of all six on every arc
        most = n
        for u in range(frame_start[f - 1] if f > 0 else lo, lo):
            most += graph.e_offsets[node_state[u] + 1] - graph.e_offsets[node_state[u]]
        for u in range(lo, hi):
            most += graph.ne_offsets[node_state[u] + 1] - graph.ne_offsets[node_state[u]]
        if most > cap:
            cap = max(2 * cap, most)
            src, dst, garc = _grown(src, cap), _grown(dst, cap), _grown(garc, cap)
            gcost, acost, afr = _grown(gcost, cap), _grown(acost, cap), _grown(afr, cap)
        for v in range(lo, hi):
            s = node_state[v]
            same_state[v] = head[s]
            head[s] = v
        for emitting in (True, False):
            u_lo, u_hi = (frame_start[f - 1], lo) if emitting else (lo, hi)
            if emitting and f == 0:
                continue
            for u in range(u_lo, u_hi):
                if emitting and not survivor[u]:
                    continue
                s, x = node_state[u], node_ctx[u]
                first = graph.e_offsets[s] if emitting else graph.ne_offsets[s]
                last = graph.e_offsets[s + 1] if emitting else graph.ne_offsets[s + 1]
                for a in range(first, last):
                    if head[graph.next_state[a]] < 0:  # no node of its state here (most arcs)
                        continue
                    ac = np.float32(0.0)
                    if emitting:
                        ac = -lp[f - 1, graph.ilabel[a] - 1]
                        if not ac < _F32_INF:
                            continue
                    c, nx = arc_cost(graph, boosts, 0, a, x)
                    if not c < _F32_INF:
                        continue
                    v = _node_of(head, same_state, node_ctx, graph.next_state[a], nx)
                    if v < 0:
                        continue
                    src[n], dst[n], garc[n] = u, v, a
                    gcost[n], acost[n], afr[n] = c, ac, f - 1
                    n += 1
        for v in range(lo, hi):
            head[node_state[v]] = -1
    return src[:n], dst[:n], garc[:n], gcost[:n], acost[:n], afr[:n]


@njit(nogil=True, cache=True)
def _grown(a, cap):
    out = np.empty(cap, a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(nogil=True, cache=True)
def _topological_ranks(frame_start, src, dst, emitting, start):
    """A topological rank of every node — frame by frame, within a frame in the order of its
    epsilon arcs (Kahn's algorithm, nodes in index order), node ``start`` first — and which
    epsilon arcs close a cycle and are cut: those into ``start`` (every frame-0 token comes from
    it), and when every node left waits on another, the first left is placed anyway and the arcs
    that still reach it are cut."""
    n_nodes, n_arcs = frame_start[-1], src.shape[0]
    indeg = np.zeros(n_nodes, np.int64)
    first = np.zeros(n_nodes + 1, np.int64)
    cut = np.zeros(n_arcs, np.bool_)
    for i in range(n_arcs):
        if dst[i] == start:
            cut[i] = True
        elif not emitting[i]:
            indeg[dst[i]] += 1
            first[src[i] + 1] += 1
    for v in range(n_nodes):
        first[v + 1] += first[v]
    out_arcs = np.empty(first[n_nodes], np.int64)
    fill = first[:-1].copy()
    for i in range(n_arcs):
        if not emitting[i] and not cut[i]:
            out_arcs[fill[src[i]]] = i
            fill[src[i]] += 1
    order = np.empty(n_nodes, np.int64)
    placed = np.zeros(n_nodes, np.bool_)
    order[0] = start
    placed[start] = True
    pos = 1
    for f in range(frame_start.shape[0] - 1):
        lo, hi = frame_start[f], frame_start[f + 1]
        done = lo
        for v in range(lo, hi):
            if indeg[v] == 0 and not placed[v]:
                order[pos] = v
                placed[v] = True
                pos += 1
        forced = lo
        while done < hi:
            if done == pos:  # every node left is on a cycle
                while placed[forced]:
                    forced += 1
                order[pos] = forced
                placed[forced] = True
                pos += 1
            u = order[done]
            done += 1
            for k in range(first[u], first[u + 1]):
                i = out_arcs[k]
                d = dst[i]
                if placed[d]:
                    cut[i] = True
                    continue
                indeg[d] -= 1
                if indeg[d] == 0:
                    order[pos] = d
                    placed[d] = True
                    pos += 1
    rank = np.empty(n_nodes, np.int32)
    for k in range(n_nodes):
        rank[order[k]] = k
    return rank, cut

"""The reference CTC WFST beam search: plain Python token passing. Slow and obviously right; it
defines the semantics every other backend reproduces exactly.

Costs are OpenFst costs (lower is better), accumulated in float32 (``np.float32`` scalars) in the
order written below, so that the Numba CPU and CUDA backends, which use the same order, get
bit-identical costs.

Per utterance, with token frames ``f = 0 .. T`` (frame ``f`` holds the tokens after consuming
log-prob frames ``0 .. f-1``):

1. **Start**: token frame 0 is seeded with the start state at cost 0 (no arc), then step 3–5.
2. **Emitting arcs** (log-prob frame ``t``, building token frame ``t+1``): every surviving token
   ``u`` of frame ``t`` and every emitting arc ``a`` leaving its state gives the candidate
   ``c = cost(u) + (ac[t, ilabel(a) - 1] + arc_cost'(a))`` where ``arc_cost'(a) = arc_cost(a) -
   bonus`` and ``ac`` holds the search costs of `_problem.search_costs` (log-probs relative to
   their frame's best, floored, scaled). Infinite candidates are dropped. A token's state is a
   pair (graph state, context state): the context state is the utterance's phrase automaton's
   (`phrases.py`; always 0 without boosted phrases), which an arc with an output word moves
   along, earning ``bonus`` (`bundles.arc_cost`; an arc without one keeps it, bonus 0).
   **Recombination** (Viterbi) per destination (state, context state) keeps the candidate with
   the smallest key ``(cost, arc index, source context state)`` — the tie-break is independent
   of token order (an arc and a context state identify the source token); on the GPU it is a
   64-bit ``atomicMin`` on ``(order-preserving cost bits << 32) | arc``, then, with phrases, an
   ``atomicMin`` of the source context states that reached the winning key.
   Emitting arcs have lower indices than epsilon arcs, so at equal cost an emitting arc wins.
3. **Closure cutoff** ``C = best emitting cost + beam``, lowered to the ``max_active``-th
   smallest emitting cost if there are at least ``max_active`` emitting tokens, then raised to
   the ``min_active``-th smallest emitting cost if that is larger. Tokens above ``C`` cannot
   survive step 5 (the closure only lowers the best cost and the k-th smallest cost) except
   through negative-cost epsilon arcs, so ``C`` saves work and changes results only there.
   "At least", not "more than": then ``C`` does not depend on the candidates beyond
   ``best + beam``, which faster backends do not create while ``min_active`` are within it.
4. **Epsilon closure**: tokens with ``cost <= C`` relax their epsilon arcs,
   ``c = cost(u) + arc_cost'(a)``, keeping targets with ``c <= C``, with the same key rule,
   repeated until no token improves (the fixed point does not depend on the order). A token whose
   key improves is updated in place, so tokens reached through it trace back through its final
   path. Negative-cost epsilon cycles raise `GraphError`.
5. **Pruning**: ``cutoff = best + beam``; if more than ``max_active`` tokens are within it, the
   cutoff becomes the cost of the ``max_active``-th best token; if fewer than ``min_active``, the
   cost of the ``min_active``-th best (or the worst) token. Tokens with ``cost <= cutoff``
   survive (exact ties at the cutoff all survive). The survivors' costs are then made relative
   to the frame's best, ``cost - best`` in float32 (Kaldi's cost offsets): with the per-frame
   acoustic costs this keeps every cost within a beam or so of zero, so float32 keeps its
   resolution however long the utterance. Scores are recomputed along the final paths.
6. **End**: every surviving token of frame ``T`` gets ``cost + (final_cost(state) +
   phi(context state))`` (float32; ``phi`` gives back the bonus of a phrase match still in
   progress); hypotheses are taken best first by ``(total, state, context state)``, traced back,
   and kept when their word sequence differs from every kept one, up to ``nbest``. If no
   survivor is final, the same is done on ``cost + phi`` alone and the result says so
   (``NO_FINAL``). If every token dies at some
   frame, the utterance has no path (``DIED``).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..errors import GraphError
from ._problem import FrameSurvivors, RawResult, SearchProblem
from .status import DIED, NEGATIVE_CYCLE, NO_FINAL

_F32_INF = np.float32(np.inf)


def decode_reference(problem: SearchProblem, tuning: None = None) -> list[RawResult]:
    """The batch, one utterance after another (the reference has nothing to tune)."""
    results = []
    for b in range(problem.batch_size):
        state = begin(problem, b)
        advance(problem, b, state, problem.ac[b][: int(problem.lengths[b])])
        results.append(end(problem, b, state))
    return results


class _Tok:
    """A token: cost, the arc that reached it (-1 for the start), the token it came from, and
    that token's context state (the recombination tie-break)."""

    __slots__ = ("arc", "cost", "prev", "src")

    def __init__(self, cost, arc, prev, src=0):
        self.cost, self.arc, self.prev, self.src = cost, arc, prev, src

    def key(self):
        return (self.cost, self.arc, self.src)


class SearchState:
    """One utterance between frames (a stream between chunks): the surviving tokens of the
    last token frame (keyed by (state, context state)), the log-prob frames consumed, the
    frame the search died at (or None), and the `GraphError` that stopped it (or None): kept,
    not raised, until `end`, as the fast backends keep theirs in status bits, so that a stream
    fails where theirs do (a bad chunk first, the graph at `finish`)."""

    __slots__ = ("alive", "died", "error", "frames")

    def __init__(self, alive: dict, frames: int = 0, died: int | None = None):
        self.alive, self.frames, self.died, self.error = alive, frames, died, None

    @property
    def stopped(self) -> bool:
        return self.died is not None or self.error is not None


def begin(p: SearchProblem, b: int) -> SearchState:
    """Token frame 0 of utterance (lane) ``b``: step 1, then steps 3-5."""
    toks = {(p.graph.start, 0): _Tok(np.float32(0.0), -1, None)}
    state = SearchState({})
    try:
        state.alive = _settle(p, toks, np.float32(0.0), _costs_of(p, b))
    except GraphError as exc:
        state.error = exc
    return state


def advance(p: SearchProblem, b: int, state: SearchState, ac) -> None:
    """Steps 2-5 for each frame of ``ac`` (search costs, frames x tokens), in place. The steps
    are in the order the CPU backend (`cpu.advance`) and the CUDA kernels run them. Python
    tokens keep their ancestors alive by reference, so the fast backends' keep-ancestors and
    compact-records steps (a backpointer store) have no counterpart here."""
    cost_of = _costs_of(p, b)
    for ac_t in ac:
        if state.stopped:
            return
        toks = _expand(p, state.alive, ac_t, cost_of)
        if not toks:
            state.died = state.frames
        else:
            best_emit = min(tok.cost for tok in toks.values())
            try:
                state.alive = _settle(p, toks, best_emit, cost_of)
            except GraphError as exc:
                state.error = exc
        state.frames += 1


def end(p: SearchProblem, b: int, state: SearchState) -> RawResult:
    """Step 6."""
    if state.error is not None:
        raise state.error
    if state.died is not None:
        return RawResult([], DIED, state.died)
    return _finish(p, b, state.alive, state.frames, p.graph.num_emitting_arcs)


class ReferenceStreams:
    """The streaming interface (`stream.py`) over `begin`, `advance` and `end`, one lane per
    stream."""

    def __init__(self, tuning: None = None):
        pass

    def begin_all(self, problems) -> list[SearchState]:
        return [self.begin(p) for p in problems]

    def begin(self, p: SearchProblem) -> SearchState:
        return begin(p, 0)

    def advance(self, jobs) -> list[SearchState]:
        for p, state, ac in jobs:
            advance(p, 0, state, ac)
        return [state for _, state, _ in jobs]

    def end(self, p: SearchProblem, state: SearchState, utterance: int = 0) -> RawResult:
        return end(p, 0, state)  # (its errors name a state, not ``utterance``)

    def map(self, fn, jobs) -> list:
        """``[fn(job) for job in jobs]`` (the reference has one thread)."""
        return [fn(job) for job in jobs]

    def advance_keeping(self, jobs) -> list[tuple]:
        """`advance` each job frame by frame, keeping every token frame's survivors: ``(state,
        FrameSurvivors)``, fewer frames when the search died."""
        out = []
        for p, state, ac in jobs:
            kept = []
            for t in range(len(ac)):
                advance(p, 0, state, ac[t : t + 1])
                if state.stopped:
                    break
                kept.append(self.survivors(state))
            out.append((state, FrameSurvivors.of_frames(kept)))
        return out

    def survivors(self, state: SearchState):
        """The last token frame's surviving tokens as ``(graph states, context states)``, or
        None once the search died."""
        if state.stopped:
            return None
        keys = np.array(list(state.alive), np.int32).reshape(-1, 2)
        return keys[:, 0], keys[:, 1]

    def partial(self, p: SearchProblem, state: SearchState, since: int = 0):
        """The best surviving path on cost alone (with phrase bonuses in progress given back, as
        at the end), ``(state, arcs, frames, stable arcs)``: the stable arcs end at the deepest
        token every survivor descends from. Arcs and frames start at arc ``since``, a number of
        stable arcs an earlier call returned (the fast backends then skip work; here the whole
        path is traced). Arcs, frames and stable arcs are None when the search stopped."""
        if state.stopped:
            return state, None, None, None
        give_back = _give_back(p, 0)

        def rank(item):
            (s, x), tok = item
            return np.float32(tok.cost + give_back(x)), s, x

        best = min(state.alive.items(), key=rank)[1]
        arcs, frames = _trace(best, state.frames, p.graph.num_emitting_arcs)
        chains = [_ancestry(tok) for tok in state.alive.values()]
        shared = 0
        while all(len(c) > shared for c in chains) and len({id(c[shared]) for c in chains}) == 1:
            shared += 1
        return state, arcs[since:], frames[since:], shared - 1  # (the start carries no arc)


def _ancestry(tok) -> list:
    """The tokens from the start to ``tok``."""
    chain = []
    while tok is not None:
        chain.append(tok)
        tok = tok.prev
    return chain[::-1]


def _costs_of(p: SearchProblem, b: int):
    """Arc cost with utterance ``b``'s phrase bonuses (step 2's ``arc_cost'``): ``cost_of(a, x)
    -> (cost, next context state)``, written out from `phrases.PhraseAutomaton.step`."""
    g = p.graph
    automaton = p.boosts.automata[b]
    slot = p.slot_label

    def cost_of(a, x):
        c = p.arc_cost[a]
        w = int(g.olabel[a])
        if not w:
            return c, x
        if automaton is None:  # an oov slot label without any spelling to follow: forbidden
            return (c if w < slot else _F32_INF), x
        nxt, bonus = automaton.step(x, w)
        return np.float32(c - bonus), nxt

    return cost_of


def _give_back(p: SearchProblem, b: int):
    """Step 6's ``phi``: the cost of ending in a context state."""
    automaton = p.boosts.automata[b]
    return (lambda x: np.float32(0.0)) if automaton is None else (lambda x: automaton.phi[x])


def _settle(p, toks, best_emit, cost_of) -> dict:
    """Steps 3-5 on a token frame: closure cutoff, epsilon closure, pruning; the survivors,
    their costs relative to the frame's best."""
    limit = _closure_cutoff(p, toks, best_emit)
    _epsilon_closure(p, toks, limit, cost_of)
    best, cutoff = _prune_cutoff(p, toks)
    alive = {s: tok for s, tok in toks.items() if tok.cost <= cutoff}
    for tok in alive.values():
        tok.cost = np.float32(tok.cost - best)
    return alive


def _expand(p, alive, ac_t, cost_of) -> dict:
    """Step 2: the survivors' emitting arcs, recombined per destination (state, context)."""
    g = p.graph
    new: dict[tuple[int, int], _Tok] = {}
    for (s, x), u in alive.items():
        for a in range(g.e_offsets[s], g.e_offsets[s + 1]):
            arc_c, nx = cost_of(a, x)
            c = np.float32(u.cost + np.float32(ac_t[g.ilabel[a] - 1] + arc_c))
            if not c < _F32_INF:
                continue
            d = (int(g.next_state[a]), nx)
            old = new.get(d)
            if old is None or (c, a, x) < old.key():
                new[d] = _Tok(c, a, u, x)
    return new


def _closure_cutoff(p, toks, best_emit):
    """Step 3."""
    opts = p.options
    limit = np.float32(best_emit + p.beam)
    costs = sorted(tok.cost for tok in toks.values())
    if len(costs) >= opts.max_active:
        limit = min(limit, costs[opts.max_active - 1])
    if opts.min_active > 1:
        limit = max(limit, costs[min(opts.min_active, len(costs)) - 1])
    return limit


def _epsilon_closure(p, toks, limit, cost_of) -> None:
    """Step 4, in place."""
    g = p.graph
    queue = deque(k for k, tok in toks.items() if tok.cost <= limit)
    queued = set(queue)
    pops, max_pops = 0, _max_relaxations(len(toks), g, p.boosts.automata)
    while queue:
        key = queue.popleft()
        queued.discard(key)
        pops += 1
        if pops > max_pops:
            raise GraphError(f"{NEGATIVE_CYCLE} (through state {key[0]})")
        u = toks[key]
        s, x = key
        for a in range(g.ne_offsets[s], g.ne_offsets[s + 1]):
            arc_c, nx = cost_of(a, x)
            c = np.float32(u.cost + arc_c)
            if not (c <= limit and c < _F32_INF):
                continue
            d = (int(g.next_state[a]), nx)
            old = toks.get(d)
            if old is None:
                toks[d] = _Tok(c, a, u, x)
            elif (c, a, x) < old.key():
                old.cost, old.arc, old.prev, old.src = c, a, u, x
            else:
                continue
            if d not in queued:
                queue.append(d)
                queued.add(d)


def _prune_cutoff(p, toks):
    """Step 5: ``(best, cutoff)``."""
    opts = p.options
    costs = sorted(tok.cost for tok in toks.values())
    cutoff = np.float32(costs[0] + p.beam)
    n_in = sum(1 for c in costs if c <= cutoff)
    if n_in > opts.max_active:
        cutoff = costs[opts.max_active - 1]
    elif n_in < opts.min_active:
        cutoff = costs[min(opts.min_active, len(costs)) - 1]
    return costs[0], cutoff


def _max_relaxations(n_tokens, graph, automata):
    # Bellman-Ford bound with a FIFO queue: each (state, context) is queued at most once per pass.
    contexts = max((a.num_contexts for a in automata if a is not None), default=1)
    n = n_tokens + (graph.num_arcs - graph.num_emitting_arcs) * contexts + 1
    return n * n + 1000


def _finish(p: SearchProblem, b: int, alive, T: int, n_emit: int) -> RawResult:
    g = p.graph
    give_back = _give_back(p, b)
    ranked = sorted(
        (np.float32(tok.cost + np.float32(g.final_cost[s] + give_back(x))), s, x, tok)
        for (s, x), tok in alive.items()
    )
    status = 0
    if not ranked or not ranked[0][0] < _F32_INF:
        status = NO_FINAL
        ranked = sorted((np.float32(tok.cost + give_back(x)), s, x, tok)
                        for (s, x), tok in alive.items())  # fmt: skip
    paths, seen = [], set()
    for total, _s, _x, tok in ranked:
        if len(paths) == p.options.nbest:
            break
        if not total < _F32_INF:
            break
        arcs, frames = _trace(tok, T, n_emit)
        words = tuple(int(w) for w in g.olabel[arcs] if w)
        if words in seen:
            continue
        seen.add(words)
        paths.append((arcs, frames, float(total)))
    return RawResult(paths, status)


def _trace(tok, T, n_emit):
    arcs, frames = [], []
    f, seen = T, set()
    while tok.arc != -1:
        if id(tok) in seen:
            raise GraphError("zero-cost epsilon cycle: the traceback loops")
        seen.add(id(tok))
        arcs.append(tok.arc)
        frames.append(f - 1)
        if tok.arc < n_emit:
            f -= 1
            seen = set()
        tok = tok.prev
    return np.array(arcs[::-1], np.int32), np.array(frames[::-1], np.int32)

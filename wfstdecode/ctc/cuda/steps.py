"""The steps of one frame of the cuda search as device functions, named after `reference.py`'s
steps and the CPU backend's `cpu_steps.py`; `kernels.py` calls them in the reference's order:

- `emitting_candidate`: step 2 for one emitting arc (`kernels.expand_kernel` recombines);
- one block per lane (`kernels.closure_prune_kernel`): `start` (step 1, frame 0 only; a
  stream's next chunk `restore`s its survivors instead),
  `emitting_backpointers` (step 2's winners) or `lane_died`, `closure_cutoff` (step 3),
  `epsilon_closure` (step 4, a round at a time: `relax_queued`), `epsilon_backpointers`,
  `prune_cutoff` (step 5), `keep_ancestors`, `compact_records`, then `adapt_beam` (the beam
  tightened while the lane's table overflows) and `end_frame`.

The block functions are called by every thread of the lane's block and end with a barrier
where a later step reads what they wrote. A frame's candidates are the slots listed in its
table (`buffers.Tables.cand`); ``n`` is how many. ``scratch`` is the block's shared memory
(`primitives.Scratch`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import float32

from .. import bundles
from ..options import LOG_PROB_FLOOR
from ..status import DIED, NEG_CYCLE
from .layout import NO_BEST, NO_SRC
from .primitives import (
    add_candidate,
    block_exclusive_scan,
    clear_table,
    count_at_most,
    find_or_insert,
    key_arc,
    key_cost,
    key_ctx,
    key_state,
    kth_smallest_cost,
    last_at_most,
    lookup,
    min_cost_bits,
    ordered_cost,
    pack,
    token_key,
)
from .target import cuda, mul_rn

_INF = np.float32(np.inf)
_LOG_PROB_FLOOR = np.float32(LOG_PROB_FLOOR)

# The scalar rules every backend shares, compiled from their source as device functions (the
# simulator runs them as Python).
arc_cost = cuda.jit(device=True)(bundles.arc_cost.py_func)


class Frame(NamedTuple):
    """Where a lane's block is: the lane, the token frame ``f`` it builds, the table of frame
    ``f`` and of frame ``f - 1``, and the chunk's record buffer (0 or 1)."""

    lane: int
    f: int
    table: int
    prev_table: int
    half: int


# ---------------------------------------------------------------------------------------------
# step 2: emitting arcs (one thread per arc, see kernels.expand_kernel)


@cuda.jit(device=True)
def acoustic_cost(x, frame_max, neg_scale):
    """`_problem.search_costs` of one log-prob ``x`` (float32) of a frame whose best is
    ``frame_max``: relative, floored, scaled, in the host's float32 steps. For costs the host
    already computed, ``frame_max`` is 0 and ``neg_scale`` 1, which leaves them as they are."""
    if x == -_INF:
        return x * neg_scale
    d = x - frame_max
    if d < _LOG_PROB_FLOOR:
        d = _LOG_PROB_FLOOR
    return mul_rn(d, neg_scale)  # rounded, as on the host


@cuda.jit(device=True)
def emitting_candidate(i, lane, t, acoustics, graph, boosts, survivors, H):
    """Arc-thread ``i`` of a lane at log-prob frame ``t``: its emitting arc (arc ``i - scan[k]``
    of surviving token ``k``), candidate cost, the token's context state and the next one."""
    scan = lane * (H + 1)
    k = last_at_most(survivors.arc_scan, scan, survivors.n[lane], i)
    s = survivors.state[lane * H + k]
    x = survivors.ctx[lane * H + k]
    a = graph.e_offsets[s] + i - survivors.arc_scan[scan + k]
    lp = float32(acoustics.log_probs[lane, t, graph.ilabel[a] - 1])
    ac = acoustic_cost(lp, acoustics.frame_max[lane, t], acoustics.neg_scale)
    arc_c, nx = arc_cost(graph, boosts, lane, a, x)
    return a, survivors.cost[lane * H + k] + (ac + arc_c), x, nx


# ---------------------------------------------------------------------------------------------
# steps 1-5 of one lane (one block per lane, see kernels.closure_prune_kernel)


@cuda.jit(device=True)
def start(graph, tables, frame):
    """Step 1: frame 0's table holds the start state at cost 0, reached by no arc."""
    if cuda.threadIdx.x == 0:
        slot, _ = find_or_insert(tables, frame.table * tables.size, token_key(graph.start, 0))
        tables.cand[frame.table * tables.size] = slot
        tables.n_cand[frame.table] = 1
        tables.key[slot] = pack(float32(0.0), -1)
        tables.src[slot] = 0
        tables.prev[slot] = -1
    cuda.syncthreads()


@cuda.jit(device=True)
def restore(tables, survivors, frame):
    """Frame 0 of a stream's next chunk, instead of step 1: the survivors of its last chunk,
    put back in place by the host (`streams.py`), fill frame 0's table, each slot's ``prev``
    their record in the host's store (encoded below -1: ``-2 - record``), which frame 1's
    emitting backpointers pass on."""
    H = tables.size
    base = frame.table * H
    at = frame.lane * H
    n = survivors.n[frame.lane]
    for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        token = token_key(survivors.state[at + j], survivors.ctx[at + j])
        slot, _ = find_or_insert(tables, base, token)
        tables.cand[base + j] = slot
        tables.prev[slot] = survivors.record[at + j]
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        tables.n_cand[frame.table] = n
    cuda.syncthreads()


@cuda.jit(device=True)
def stop(lanes, lane, frame_index, bit):
    """The lane's search ends at ``frame_index`` with status ``bit`` (one thread)."""
    lanes.status[lane] |= bit
    lanes.died[lane] = frame_index
    lanes.done[lane] = 1


@cuda.jit(device=True)
def lane_died(tables, lanes, frame):
    """No candidate reached frame ``f``: every token died at frame ``f - 1`` (DIED)."""
    clear_table(tables, frame.prev_table)
    if cuda.threadIdx.x == 0:
        stop(lanes, frame.lane, frame.f - 1, DIED)


@cuda.jit(device=True)
def emitting_backpointers(graph, tables, frame, n):
    """Each emitting winner's backpointer: the record of its source token — its arc's source
    state in its source context state — in frame ``f - 1`` (kept in that table's ``prev``). The
    previous table is then cleared."""
    base = frame.table * tables.size
    for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        slot = tables.cand[base + j]
        src = token_key(graph.arc_source[key_arc(tables.key[slot])], tables.src[slot])
        tables.prev[slot] = tables.prev[lookup(tables, frame.prev_table, src)]
    cuda.syncthreads()
    clear_table(tables, frame.prev_table)


@cuda.jit(device=True)
def closure_cutoff(tables, frame, n, beam, limits, scratch):
    """Step 3: ``C`` = best emitting cost + beam, lowered to the ``max_active``-th smallest cost
    when there are at least ``max_active`` candidates, raised to the ``min_active``-th."""
    limit = ordered_cost(min_cost_bits(tables, frame.table, n, scratch)) + beam
    if n >= limits.max_active:  # ">=": C must not depend on the candidates dropped beyond it
        kth = kth_smallest_cost(tables, frame.table, n, limits.max_active, scratch)
        if kth < limit:
            limit = kth
    if limits.min_active > 1:
        k_min = limits.min_active if limits.min_active < n else n
        kth = kth_smallest_cost(tables, frame.table, n, k_min, scratch)
        if kth > limit:
            limit = kth
    return limit


@cuda.jit(device=True)
def epsilon_closure(graph, boosts, tables, lanes, frame, n, limit, scratch):
    """Step 4: rounds of relaxations over a queue of slots (candidates within ``limit`` first),
    until no key improves; False, with the lane stopped (NEG_CYCLE), when the rounds outnumber
    what a fixed point needs."""
    if graph.ne_offsets[graph.ne_offsets.shape[0] - 1] == graph.ne_offsets[0]:
        return True  # the graph has no epsilon arcs
    queued = scratch.counts  # lengths of the queue's two halves
    qb = frame.lane * 2 * tables.size
    base = frame.table * tables.size
    if cuda.threadIdx.x == 0:
        queued[0] = 0
    cuda.syncthreads()
    for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        slot = tables.cand[base + j]
        if key_cost(tables.key[slot]) <= limit:
            tables.mark[slot] = 1
            tables.queue[qb + cuda.atomic.add(queued, 0, 1)] = slot
    cuda.syncthreads()
    rnd = 1
    while True:
        q_in = (rnd - 1) % 2
        qn = queued[q_in]
        if qn == 0:
            return True
        if rnd > tables.n_cand[frame.table] + 2:
            if cuda.threadIdx.x == 0:
                stop(lanes, frame.lane, frame.f, NEG_CYCLE)
            return False
        cuda.syncthreads()
        if cuda.threadIdx.x == 0:
            queued[rnd % 2] = 0
        relax_queued(graph, boosts, tables, lanes, frame, limit, rnd, scratch)
        rnd += 1
        cuda.syncthreads()


@cuda.jit(device=True)
def relax_queued(graph, boosts, tables, lanes, frame, limit, rnd, scratch):
    """One round of step 4: the epsilon arcs of the slots queued in round ``rnd - 1``, a block's
    worth of slots at a time (their arcs shared out through a prefix sum of out-degrees);
    improved targets are queued for round ``rnd + 1``, once (``mark`` = last round queued).
    With boosted phrases a second pass settles each slot's source context state: the smallest
    among the arcs that gave its best ``(cost, arc)`` key (`bundles.improves`' last tie-break;
    an improved key resets it in the first pass)."""
    queued = scratch.counts
    sh_state, sh_ctx, sh_cost, sh_off = scratch.state, scratch.ctx, scratch.cost, scratch.offset
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    q_in = (rnd - 1) % 2
    q_out = rnd % 2
    qn = queued[q_in]  # fixed this round: only the other half grows
    qb = frame.lane * 2 * tables.size
    ne = graph.ne_offsets
    phrases = boosts.contexts[frame.lane] > 1
    for first in range(0, qn, nt):
        e = first + tid
        deg = 0
        if e < qn:
            slot = tables.queue[qb + q_in * tables.size + e]
            s = key_state(tables.state[slot])
            sh_state[tid] = s
            sh_ctx[tid] = key_ctx(tables.state[slot])
            sh_cost[tid] = key_cost(tables.key[slot])
            deg = ne[s + 1] - ne[s]
        off, total = block_exclusive_scan(deg, scratch)
        sh_off[tid] = off
        cuda.syncthreads()
        for second_pass in range(2 if phrases else 1):
            for i in range(tid, total, nt):
                k = last_at_most(sh_off, 0, nt, i)
                a = ne[sh_state[k]] + i - sh_off[k]
                x = sh_ctx[k]
                arc_c, nx = arc_cost(graph, boosts, frame.lane, a, x)
                c = sh_cost[k] + arc_c
                if not (c <= limit and c < _INF):
                    continue
                token = token_key(graph.next_state[a], nx)
                key = pack(c, a)
                if second_pass:
                    slot = lookup(tables, frame.table, token)
                    if slot >= 0 and tables.key[slot] == key:
                        cuda.atomic.min(tables.src, slot, x)
                    continue
                slot = add_candidate(tables, frame.table, token, phrases, lanes.overflow,
                                     frame.lane)  # fmt: skip
                if slot < 0:
                    continue
                if key < cuda.atomic.min(tables.key, slot, key):
                    if phrases:
                        tables.src[slot] = NO_SRC
                    if cuda.atomic.max(tables.mark, slot, rnd + 1) < rnd + 1:
                        q = cuda.atomic.add(queued, q_out, 1)
                        tables.queue[qb + q_out * tables.size + q] = slot
            cuda.syncthreads()


@cuda.jit(device=True)
def epsilon_backpointers(graph, tables, frame, n):
    """Each epsilon winner's backpointer: the slot of its arc's source state in this frame's
    table. Clears the closure's marks."""
    base = frame.table * tables.size
    for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        slot = tables.cand[base + j]
        a = key_arc(tables.key[slot])
        if a >= graph.num_emitting:
            src = token_key(graph.arc_source[a], tables.src[slot])
            tables.prev[slot] = lookup(tables, frame.table, src)
        tables.mark[slot] = 0
    cuda.syncthreads()


@cuda.jit(device=True)
def prune_cutoff(tables, frame, n, beam, limits, scratch):
    """Step 5: ``(cutoff, best)``: best + beam, or the ``max_active``-th smallest cost when more
    are within it, or the ``min_active``-th (or the worst) when fewer."""
    best = ordered_cost(min_cost_bits(tables, frame.table, n, scratch))
    cutoff = best + beam
    n_in = count_at_most(tables, frame.table, n, cutoff, scratch)
    if n_in > limits.max_active:
        cutoff = kth_smallest_cost(tables, frame.table, n, limits.max_active, scratch)
    elif n_in < limits.min_active:
        k_min = limits.min_active if limits.min_active < n else n
        cutoff = kth_smallest_cost(tables, frame.table, n, k_min, scratch)
    return cutoff, best


@cuda.jit(device=True)
def keep_ancestors(graph, tables, frame, n, cutoff):
    """Marks (``mark = 1``) the survivors and their in-frame epsilon ancestors: the records this
    frame keeps."""
    base = frame.table * tables.size
    for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        slot = tables.cand[base + j]
        if key_cost(tables.key[slot]) <= cutoff:
            tables.mark[slot] = 1
    cuda.syncthreads()
    for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        slot = tables.cand[base + j]
        if key_cost(tables.key[slot]) <= cutoff:
            k = slot
            while key_arc(tables.key[k]) >= graph.num_emitting:
                k = tables.prev[k]
                if tables.mark[k] == 1:
                    break
                tables.mark[k] = 1
    cuda.syncthreads()


@cuda.jit(device=True)
def compact_records(graph, tables, survivors, records, frame, n, cutoff, best, scratch):
    """The kept slots' records ``(arc, previous record)``, in candidate order, appended to the
    chunk's record buffer; the survivors (state, cost relative to ``best``, record) and the
    prefix sum of their emitting out-degrees, for the next frame's expand. Each slot's ``prev``
    then holds its record (or -1), which the next frame's emitting backpointers read."""
    number_records(tables, records, frame, n, scratch)
    write_records(graph, tables, survivors, records, frame, n, cutoff, best, scratch)
    base = frame.table * tables.size
    for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        slot = tables.cand[base + j]
        mark = tables.mark[slot]
        tables.prev[slot] = mark - 2 if mark >= 2 else -1
        tables.mark[slot] = 0


@cuda.jit(device=True)
def number_records(tables, records, frame, n, scratch):
    """Reserves the kept slots' records in the chunk's buffer and numbers them in candidate
    order: ``mark = 2 + record index``."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    base = frame.table * tables.size
    kept = 0
    for j in range(tid, n, nt):
        kept += tables.mark[tables.cand[base + j]]
    _, m = block_exclusive_scan(kept, scratch)
    if tid == 0:  # the frame's first record
        scratch.counts[2] = cuda.atomic.add(records.used, frame.half, m)
    cuda.syncthreads()
    run = scratch.counts[2]
    for j0 in range(0, n, nt):
        j = j0 + tid
        keep = 0
        slot = -1
        if j < n:
            slot = tables.cand[base + j]
            keep = tables.mark[slot]
        off, total = block_exclusive_scan(keep, scratch)
        if keep:
            tables.mark[slot] = 2 + run + off
        run += total
    cuda.syncthreads()


@cuda.jit(device=True)
def write_records(graph, tables, survivors, records, frame, n, cutoff, best, scratch):
    """The numbered slots' records, and the survivors in candidate order (block prefix sums of
    the survivor flags and out-degrees give their places)."""
    tid = cuda.threadIdx.x
    H = tables.size
    base = frame.table * H
    rb = frame.half * records.capacity
    lane_at = frame.lane * H
    scan_at = frame.lane * (H + 1)
    run_s = 0
    run_d = 0
    for j0 in range(0, n, cuda.blockDim.x):
        j = j0 + tid
        survivor = 0
        deg = 0
        slot = -1
        s = 0
        x = 0
        c = _INF
        if j < n:
            slot = tables.cand[base + j]
            mark = tables.mark[slot]
            if mark >= 2:
                key = tables.key[slot]
                a = key_arc(key)
                prev = tables.prev[slot]
                if a >= graph.num_emitting:
                    prev = tables.mark[prev] - 2
                records.arc[rb + mark - 2] = a
                records.prev[rb + mark - 2] = prev
                c = key_cost(key)
                if c <= cutoff:
                    survivor = 1
                    s = key_state(tables.state[slot])
                    x = key_ctx(tables.state[slot])
                    deg = graph.e_offsets[s + 1] - graph.e_offsets[s]
                if records.keep:  # lattices: the frame's survivors go to the host too
                    records.lane[rb + mark - 2] = frame.lane
                    records.state[rb + mark - 2] = s if survivor else -1
                    records.ctx[rb + mark - 2] = x
        off_s, total_s = block_exclusive_scan(survivor, scratch)
        off_d, total_d = block_exclusive_scan(deg, scratch)
        if survivor:
            r = run_s + off_s
            survivors.state[lane_at + r] = s
            survivors.ctx[lane_at + r] = x
            survivors.cost[lane_at + r] = c - best  # relative to the frame's best (reference.py)
            survivors.record[lane_at + r] = tables.mark[slot] - 2
            survivors.arc_scan[scan_at + r] = run_d + off_d
        run_s += total_s
        run_d += total_d
    cuda.syncthreads()
    if tid == 0:
        survivors.n[frame.lane] = run_s
        survivors.arc_scan[scan_at + run_s] = run_d


@cuda.jit(device=True)
def adapt_beam(lanes, limits, frame, beam, crowded):
    """The overflow beam (one thread): while the lane's table overflows or is more than half
    full (``crowded``), halve its beam; otherwise widen it back towards ``limits.beam``."""
    lane = frame.lane
    if lanes.overflow[lane] or crowded:
        lanes.overflow[lane] = 0
        if lanes.overflow_frames[lane] == 0:
            lanes.first_overflow[lane] = frame.f
        lanes.overflow_frames[lane] += 1
        lanes.beam[lane] = beam * float32(0.5)
        if lanes.beam[lane] < lanes.min_beam[lane]:
            lanes.min_beam[lane] = lanes.beam[lane]
    elif beam < limits.beam:
        wider = beam * float32(1.25)
        lanes.beam[lane] = wider if wider < limits.beam else limits.beam


@cuda.jit(device=True)
def end_frame(lanes, frame):
    """The lane's next frame starts without a best cost (expand phase 0 finds it); after its
    last frame the lane is done (one thread)."""
    lanes.best_bits[frame.lane] = NO_BEST
    if frame.f == lanes.length[frame.lane]:
        lanes.done[frame.lane] = 1

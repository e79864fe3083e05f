"""Numba-CUDA kernels of the cuda backend: the reference semantics (`reference.py`) as batched
token passing, one frame at a time. Runs on a GPU and, for tests, under Numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``). Imported only by `driver.py` and `finish.py`.

Per frame (lane = utterance; every array is flat, lane regions at ``lane * H``). The frame index
lives on the device (``ctl``), so the same launches serve every frame and a chunk of frames can be
captured once as a CUDA graph:

0. `begin_frame_kernel` (one thread): advances ``ctl`` to the next frame, or marks the step idle
   when the frames are done, the chunk is full, or its record buffer could not hold one more
   frame (the frame then runs in the next chunk).
1. `expand_kernel` phase 0 (grid: blocks x lanes, one thread per arc): the exact best emitting
   cost of the frame, so that no candidate beyond ``best + beam`` is created (as the CPU backend
   does when ``min_active == 1``).
2. `expand_kernel` phase 1 (same grid): ExpandArcs. Thread ``i`` of a lane takes arc
   ``i - scan[k]`` of surviving token ``k`` (``scan`` = exclusive prefix sum of the tokens'
   emitting out-degrees, found by binary search), inserts the destination state in the lane's
   open-addressing hash table (the recombination slot) and does a 64-bit ``atomicMin`` of
   ``(order-preserving cost bits << 32) | (arc + 1)`` on the slot: the reference's
   ``(cost, arc)`` rule in one atomic.
3. `closure_prune_kernel` (one block per lane): backpointers of the emitting winners (looked up
   through the arc's source state in the previous frame's table), the closure cutoff, the epsilon
   closure (rounds of relaxations over the queued slots until none improves), backpointers of the
   epsilon winners, Prune (beam, then max-active / min-active through an exact radix select over
   the cost bits: four 8-bit histogram passes), and compaction of the survivors and their epsilon
   ancestors into the chunk's backpointer records, which the host copies out per chunk.

Two hash tables alternate between frames: frame ``f`` builds table ``f % 2`` and reads table
``(f - 1) % 2`` (the survivors' record indices) before clearing it. Two record buffers alternate
between chunks (``ctl[CTL_HALF]``); a record's index is its position in its chunk's buffer.
"""

from __future__ import annotations

import numpy as np
from numba import config, cuda, float32, int32, uint32

from ..boost import boost_lookup
from ..options import LOG_PROB_FLOOR
from ..status import DIED, NEG_CYCLE

SIM = bool(config.ENABLE_CUDASIM)

EMPTY = -1
NO_KEY = np.uint64(0xFFFFFFFFFFFFFFFF)
NO_BEST = np.uint32(0xFFFFFFFF)
_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
_SIGN = np.uint32(0x80000000)
_MAG = np.uint32(0x7FFFFFFF)
_INF = np.float32(np.inf)
_HASH_MULT = np.int64(2654435761)
_LOG_PROB_FLOOR = np.float32(LOG_PROB_FLOOR)


# ctl: the frame being run, whether this step runs it, the chunk's record buffer (0 or 1), the
# frames the chunk has run (kept here: `info` is mapped host memory, slow to read from the GPU)
CTL_FRAME, CTL_GO, CTL_HALF, CTL_CHUNK_FRAMES = 0, 1, 2, 3
# info[half]: frames run, first frame, record start of each frame ..., records used (last column)
INFO_FRAMES, INFO_FIRST, INFO_STARTS = 0, 1, 2

if SIM:  # the simulator has no libdevice: reinterpret bits with NumPy

    def _float_bits(c):
        return np.float32(c).view(np.uint32)

    def _bits_float(u):
        return np.uint32(u).view(np.float32)

    def _mul_rn(a, b):
        return np.float32(a) * np.float32(b)

else:
    from numba.cuda import libdevice

    @cuda.jit(device=True)
    def _float_bits(c):
        return uint32(libdevice.float_as_int(c))

    @cuda.jit(device=True)
    def _bits_float(u):
        return libdevice.int_as_float(int32(u))

    @cuda.jit(device=True)
    def _mul_rn(a, b):  # a rounded product: never fused into a following add (FMA)
        return libdevice.fmul_rn(a, b)


_boost = cuda.jit(device=True)(boost_lookup.py_func)


@cuda.jit(device=True)
def ordered_bits(c):
    """float32 -> uint32 with the same order (for finite costs and +inf)."""
    u = uint32(_float_bits(c))
    if u & _SIGN:
        return uint32(~u)
    return uint32(u | _SIGN)


@cuda.jit(device=True)
def ordered_cost(u):
    """Inverse of `ordered_bits`."""
    if u & _SIGN:
        return float32(_bits_float(uint32(u & _MAG)))
    return float32(_bits_float(uint32(~u)))


@cuda.jit(device=True)
def pack(cost, arc):
    return (np.uint64(ordered_bits(cost)) << _SHIFT32) | np.uint64(arc + 1)


@cuda.jit(device=True)
def key_cost(key):
    return ordered_cost(uint32(key >> _SHIFT32))


@cuda.jit(device=True)
def key_arc(key):
    return int32(np.int64(key & _LOW32)) - 1


@cuda.jit(device=True)
def arc_cost_of(a, arc_cost, olabel, bkeys, bvals, boff, bmask):
    ca = arc_cost[a]
    if olabel[a] != 0:
        ca = ca - _boost(bkeys, bvals, boff, bmask, olabel[a])
    return ca


@cuda.jit(device=True)
def find_or_insert(h_state, base, mask, state):
    """Slot of ``state`` in the table at ``base``, inserting it; ``(slot, inserted)``; slot -1
    when the table is full."""
    h = (np.int64(state) * _HASH_MULT) & mask
    for _ in range(mask + 1):
        idx = base + h
        cur = h_state[idx]
        if cur == state:
            return idx, False
        if cur == EMPTY:
            old = cuda.atomic.cas(h_state, idx, EMPTY, state)
            if old == EMPTY:
                return idx, True
            if old == state:
                return idx, False
        h = (h + 1) & mask
    return -1, False


@cuda.jit(device=True)
def add_candidate(h_state, c_slot, n_cand, lane_table, base, mask, state, overflow, lane):
    """The recombination slot of ``state`` in the table at ``base``; a new slot joins the
    table's candidate list (``n_cand[lane_table]`` long). -1, and the lane's overflow flag,
    when the table is full."""
    slot, inserted = find_or_insert(h_state, base, mask, state)
    if slot < 0:
        overflow[lane] = 1
    elif inserted:
        c_slot[base + cuda.atomic.add(n_cand, lane_table, 1)] = slot
    return slot


@cuda.jit(device=True)
def find(h_state, base, mask, state):
    """Slot of ``state`` in the table at ``base`` (it must be there)."""
    h = (np.int64(state) * _HASH_MULT) & mask
    while h_state[base + h] != state:
        h = (h + 1) & mask
    return base + h


@cuda.jit(device=True)
def last_at_most(scan, base, n, i):
    """The largest ``k < n`` with ``scan[base + k] <= i`` (``scan[base] == 0 <= i``)."""
    lo = 0
    hi = n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if scan[base + mid] <= i:
            lo = mid
        else:
            hi = mid
    return lo


@cuda.jit(device=True)
def clear_slots(c_slot, base, count, h_state, h_key, h_mark):
    """Empty the ``count`` slots listed at ``c_slot[base:]`` (the block's threads share them);
    clearing just the used slots leaves the whole open-addressing table empty."""
    for j in range(cuda.threadIdx.x, count, cuda.blockDim.x):
        slot = c_slot[base + j]
        h_state[slot] = EMPTY
        h_key[slot] = NO_KEY
        h_mark[slot] = 0


# ---------------------------------------------------------------------------------------------
# block-wide helpers (every thread of the block calls them)


@cuda.jit(device=True)
def block_exclusive_scan(value, tmp):
    """(exclusive prefix sum of ``value`` over the block's threads, block total)."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    tmp[tid] = value
    cuda.syncthreads()
    offset = 1
    while offset < nt:
        x = tmp[tid - offset] if tid >= offset else 0
        cuda.syncthreads()
        tmp[tid] += x
        cuda.syncthreads()
        offset *= 2
    inclusive = tmp[tid]
    total = tmp[nt - 1]
    cuda.syncthreads()
    return inclusive - value, total


@cuda.jit(device=True)
def block_min_u32(value, tmp_u):
    tid = cuda.threadIdx.x
    if tid == 0:
        tmp_u[0] = NO_BEST
    cuda.syncthreads()
    cuda.atomic.min(tmp_u, 0, value)
    cuda.syncthreads()
    out = tmp_u[0]
    cuda.syncthreads()
    return out


@cuda.jit(device=True)
def min_cost_bits(h_key, c_slot, cbase, n, tmp_u):
    """The smallest ordered cost bits over the lane's ``n`` candidates."""
    best = NO_BEST
    for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        u = uint32(h_key[c_slot[cbase + j]] >> _SHIFT32)
        if u < best:
            best = u
    return block_min_u32(best, tmp_u)


@cuda.jit(device=True)
def count_at_most(h_key, c_slot, cbase, n, cutoff, tmp):
    count = 0
    for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        if key_cost(h_key[c_slot[cbase + j]]) <= cutoff:
            count += 1
    _, total = block_exclusive_scan(count, tmp)
    return total


@cuda.jit(device=True)
def kth_smallest_cost(h_key, c_slot, cbase, n, k, hist, tmp_u):
    """The ``k``-th smallest (1-based) candidate cost: radix select, 8 bits of the ordered cost
    bits per pass (a 256-bin histogram of the candidates that match the digits found so far)."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    prefix = uint32(0)
    known = uint32(0)
    rank = k
    for p in range(4):
        shift = uint32(24 - 8 * p)
        for i in range(tid, 256, nt):
            hist[i] = 0
        cuda.syncthreads()
        for j in range(tid, n, nt):
            u = uint32(h_key[c_slot[cbase + j]] >> _SHIFT32)
            if (u & known) == prefix:
                cuda.atomic.add(hist, int32((u >> shift) & uint32(255)), 1)
        cuda.syncthreads()
        if tid == 0:
            below = 0
            d = 0
            while below + hist[d] < rank:
                below += hist[d]
                d += 1
            tmp_u[0] = uint32(prefix | (uint32(d) << shift))
            tmp_u[1] = uint32(rank - below)
        cuda.syncthreads()
        prefix = tmp_u[0]
        rank = int32(tmp_u[1])
        known = uint32(known | (uint32(255) << shift))
        cuda.syncthreads()
    return ordered_cost(prefix)


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
    return _mul_rn(d, neg_scale)  # rounded, as on the host


@cuda.jit(device=True)
def emitting_candidate(
    i, lane, t, n, sbase, H, lp, frame_max, neg_scale, act_state, act_cost, e_scan, e_off, ilabel,
    arc_cost, olabel, bkeys, bvals, boff, bmask,
):  # fmt: skip
    """Arc-thread ``i`` of a lane: its emitting arc (arc ``i - scan[k]`` of surviving token
    ``k``) and candidate cost."""
    k = last_at_most(e_scan, sbase, n, i)
    s = act_state[lane * H + k]
    a = e_off[s] + i - e_scan[sbase + k]
    ca = arc_cost_of(a, arc_cost, olabel, bkeys, bvals, boff[lane], bmask[lane])
    ac = acoustic_cost(float32(lp[lane, t, ilabel[a] - 1]), frame_max[lane, t], neg_scale)
    return a, act_cost[lane * H + k] + (ac + ca)


# ---------------------------------------------------------------------------------------------
# kernels


@cuda.jit
def expand_kernel(
    phase, ctl, lp, frame_max, neg_scale, lengths, done, act_state, act_cost, act_n, e_scan, e_off,
    next_state, ilabel, arc_cost, olabel, bkeys, bvals, boff, bmask, best_bits, lane_beam, early,
    h_state, h_key, c_slot, n_cand, overflow, H,
):  # fmt: skip
    """Steps 1 and 2 over the frame's emitting arcs. Phase 0: ``best_bits[lane] = min`` of the
    candidate costs (ordered bits). Phase 1, ExpandArcs: candidates recombined per state, none
    beyond ``best + beam`` when ``early``."""
    lane = cuda.blockIdx.y
    f = ctl[CTL_FRAME]
    t = f - 1
    if ctl[CTL_GO] == 0 or f == 0 or done[lane] or t >= lengths[lane]:
        return
    B = lengths.shape[0]
    n = act_n[lane]
    sbase = lane * (H + 1)
    total = e_scan[sbase + n]
    par = f % 2
    table = (par * B + lane) * H
    mask = H - 1
    limit = _INF
    if phase == 1 and early:
        limit = ordered_cost(best_bits[lane]) + lane_beam[lane]
    best = NO_BEST
    stride = cuda.gridDim.x * cuda.blockDim.x
    for i in range(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x, total, stride):
        a, c = emitting_candidate(
            i, lane, t, n, sbase, H, lp, frame_max, neg_scale, act_state, act_cost, e_scan, e_off,
            ilabel, arc_cost, olabel, bkeys, bvals, boff, bmask,
        )  # fmt: skip
        if not c < _INF or c > limit:
            continue
        if phase == 0:
            u = ordered_bits(c)
            if u < best:
                best = u
            continue
        slot = add_candidate(h_state, c_slot, n_cand, par * B + lane, table, mask, next_state[a],
                             overflow, lane)  # fmt: skip
        if slot >= 0:
            cuda.atomic.min(h_key, slot, pack(c, a))
    if best != NO_BEST:
        cuda.atomic.min(best_bits, lane, best)


@cuda.jit
def closure_prune_kernel(
    ctl, lengths, done, start, e_off, ne_off, next_state, arc_cost, olabel, arc_src, n_emit,
    bkeys, bvals, boff, bmask, beam, max_active, min_active, lane_beam, h_state, h_key, h_prev,
    h_mark, c_slot, n_cand, queue, act_state, act_cost, act_store, act_n, e_scan, best_bits,
    overflow, status, died, overflow_frames, first_overflow, min_beam, rec_used, rec_arc,
    rec_prev, capacity, H,
):  # fmt: skip
    """Step 3, one block per lane: closure, Prune, compaction (see the module docstring)."""
    lane = cuda.blockIdx.x
    f = ctl[CTL_FRAME]
    if ctl[CTL_GO] == 0 or done[lane] or f > lengths[lane]:
        return
    par = f % 2
    half = ctl[CTL_HALF]
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    tmp = cuda.shared.array(1024, int32)
    tmp_u = cuda.shared.array(2, uint32)
    hist = cuda.shared.array(256, int32)
    sh_slot = cuda.shared.array(1024, int32)
    sh_state = cuda.shared.array(1024, int32)
    sh_cost = cuda.shared.array(1024, float32)
    sh_off = cuda.shared.array(1024, int32)
    sh_n = cuda.shared.array(4, int32)  # queue lengths (2), frame record base

    B = lengths.shape[0]
    mask = H - 1
    cur = par * B + lane
    prv = (1 - par) * B + lane
    tb = cur * H
    pb = prv * H
    bo = boff[lane]
    bm = bmask[lane]
    rb = half * capacity  # this chunk's record buffer

    if f == 0:
        if tid == 0:
            slot, _ = find_or_insert(h_state, tb, mask, start)
            c_slot[tb] = slot
            n_cand[cur] = 1
            h_key[slot] = pack(float32(0.0), -1)
            h_prev[slot] = -1
        cuda.syncthreads()
    n = n_cand[cur]
    if n == 0:  # every token died at frame f - 1
        clear_slots(c_slot, pb, n_cand[prv], h_state, h_key, h_mark)
        cuda.syncthreads()
        if tid == 0:
            n_cand[prv] = 0
            status[lane] |= DIED
            died[lane] = f - 1
            done[lane] = 1
        return

    # ---- backpointers of the emitting winners; then the previous table is cleared
    if f > 0:
        for j in range(tid, n, nt):
            slot = c_slot[tb + j]
            src = arc_src[key_arc(h_key[slot])]
            h_prev[slot] = h_prev[find(h_state, pb, mask, src)]  # its record in frame f - 1
        cuda.syncthreads()
        clear_slots(c_slot, pb, n_cand[prv], h_state, h_key, h_mark)
        cuda.syncthreads()
        if tid == 0:
            n_cand[prv] = 0

    # ---- closure cutoff (reference.py step 3)
    lb = lane_beam[lane]
    limit = ordered_cost(min_cost_bits(h_key, c_slot, tb, n, tmp_u)) + lb
    if n >= max_active:  # ">=": C must not depend on the candidates dropped beyond the beam
        kth = kth_smallest_cost(h_key, c_slot, tb, n, max_active, hist, tmp_u)
        if kth < limit:
            limit = kth
    if min_active > 1:
        k_min = min_active if min_active < n else n
        kth = kth_smallest_cost(h_key, c_slot, tb, n, k_min, hist, tmp_u)
        if kth > limit:
            limit = kth

    # ---- epsilon closure: rounds over a queue of slots (queue[lane], two halves)
    qb = lane * 2 * H
    if tid == 0:
        sh_n[0] = 0
    cuda.syncthreads()
    for j in range(tid, n, nt):
        slot = c_slot[tb + j]
        if key_cost(h_key[slot]) <= limit:
            h_mark[slot] = 1
            queue[qb + cuda.atomic.add(sh_n, 0, 1)] = slot
    cuda.syncthreads()
    rnd = 1
    has_eps = ne_off[ne_off.shape[0] - 1] > ne_off[0]
    while has_eps:
        q_in = (rnd - 1) % 2
        q_out = rnd % 2
        qn = sh_n[q_in]
        if qn == 0:
            break
        if rnd > n_cand[cur] + 2:
            if tid == 0:
                status[lane] |= NEG_CYCLE
                died[lane] = f
                done[lane] = 1
            return
        cuda.syncthreads()
        if tid == 0:
            sh_n[q_out] = 0
        for base in range(0, qn, nt):
            e = base + tid
            deg = 0
            if e < qn:
                slot = queue[qb + q_in * H + e]
                s = h_state[slot]
                sh_slot[tid] = slot
                sh_state[tid] = s
                sh_cost[tid] = key_cost(h_key[slot])
                deg = ne_off[s + 1] - ne_off[s]
            off, total = block_exclusive_scan(deg, tmp)
            sh_off[tid] = off
            cuda.syncthreads()
            for i in range(tid, total, nt):
                k = last_at_most(sh_off, 0, nt, i)
                a = ne_off[sh_state[k]] + i - sh_off[k]
                c = sh_cost[k] + arc_cost_of(a, arc_cost, olabel, bkeys, bvals, bo, bm)
                if not (c <= limit and c < _INF):
                    continue
                slot = add_candidate(h_state, c_slot, n_cand, cur, tb, mask, next_state[a],
                                     overflow, lane)  # fmt: skip
                if slot < 0:
                    continue
                key = pack(c, a)
                # improved: queue it for the next round, once (h_mark = last round queued)
                if key < cuda.atomic.min(h_key, slot, key) and (
                    cuda.atomic.max(h_mark, slot, rnd + 1) < rnd + 1
                ):
                    queue[qb + q_out * H + cuda.atomic.add(sh_n, q_out, 1)] = slot
            cuda.syncthreads()
        rnd += 1
        cuda.syncthreads()
    n = n_cand[cur]

    # ---- backpointers of the epsilon winners: the slot of the arc's source state
    for j in range(tid, n, nt):
        slot = c_slot[tb + j]
        a = key_arc(h_key[slot])
        if a >= n_emit:
            h_prev[slot] = find(h_state, tb, mask, arc_src[a])
        h_mark[slot] = 0
    cuda.syncthreads()

    # ---- Prune (reference.py step 5)
    best = ordered_cost(min_cost_bits(h_key, c_slot, tb, n, tmp_u))
    cutoff = best + lb
    n_in = count_at_most(h_key, c_slot, tb, n, cutoff, tmp)
    if n_in > max_active:
        cutoff = kth_smallest_cost(h_key, c_slot, tb, n, max_active, hist, tmp_u)
    elif n_in < min_active:
        k_min = min_active if min_active < n else n
        cutoff = kth_smallest_cost(h_key, c_slot, tb, n, k_min, hist, tmp_u)

    # ---- keep the survivors and their in-frame epsilon ancestors (h_mark = 1)
    for j in range(tid, n, nt):
        slot = c_slot[tb + j]
        if key_cost(h_key[slot]) <= cutoff:
            h_mark[slot] = 1
    cuda.syncthreads()
    for j in range(tid, n, nt):
        slot = c_slot[tb + j]
        if key_cost(h_key[slot]) <= cutoff:
            k = slot
            while key_arc(h_key[k]) >= n_emit:
                k = h_prev[k]
                if h_mark[k] == 1:
                    break
                h_mark[k] = 1
    cuda.syncthreads()

    # ---- compaction: records (arc, previous record) of the kept, in candidate order
    kept = 0
    for j in range(tid, n, nt):
        kept += h_mark[c_slot[tb + j]]
    _, m = block_exclusive_scan(kept, tmp)
    if tid == 0:
        sh_n[2] = cuda.atomic.add(rec_used, half, m)
    cuda.syncthreads()
    run = sh_n[2]
    for base in range(0, n, nt):  # record index of each kept slot, kept in h_mark as 2 + index
        j = base + tid
        keep = 0
        slot = -1
        if j < n:
            slot = c_slot[tb + j]
            keep = h_mark[slot]
        off, total = block_exclusive_scan(keep, tmp)
        if keep:
            h_mark[slot] = 2 + run + off
        run += total
    cuda.syncthreads()
    abase = lane * H
    sbase = lane * (H + 1)
    run_s = 0
    run_d = 0
    for base in range(0, n, nt):
        j = base + tid
        survivor = 0
        deg = 0
        slot = -1
        s = 0
        c = _INF
        if j < n:
            slot = c_slot[tb + j]
            mark = h_mark[slot]
            if mark >= 2:
                key = h_key[slot]
                a = key_arc(key)
                prev = h_prev[slot]
                if a >= n_emit:
                    prev = h_mark[prev] - 2
                rec_arc[rb + mark - 2] = a
                rec_prev[rb + mark - 2] = prev
                c = key_cost(key)
                if c <= cutoff:
                    survivor = 1
                    s = h_state[slot]
                    deg = e_off[s + 1] - e_off[s]
        off_s, total_s = block_exclusive_scan(survivor, tmp)
        off_d, total_d = block_exclusive_scan(deg, tmp)
        if survivor:
            r = run_s + off_s
            act_state[abase + r] = s
            act_cost[abase + r] = c - best  # relative to the frame's best (reference.py)
            act_store[abase + r] = h_mark[slot] - 2
            e_scan[sbase + r] = run_d + off_d
        run_s += total_s
        run_d += total_d
    cuda.syncthreads()
    # the records' indices were kept in h_mark; h_prev now holds them for the next frame
    for j in range(tid, n, nt):
        slot = c_slot[tb + j]
        mark = h_mark[slot]
        h_prev[slot] = mark - 2 if mark >= 2 else -1
        h_mark[slot] = 0
    if tid == 0:
        act_n[lane] = run_s
        e_scan[sbase + run_s] = run_d
        best_bits[lane] = NO_BEST
        if overflow[lane] or n > H // 2:
            # token buffers (nearly) full: tighten this utterance's beam
            overflow[lane] = 0
            if overflow_frames[lane] == 0:
                first_overflow[lane] = f
            overflow_frames[lane] += 1
            lane_beam[lane] = lb * float32(0.5)
            if lane_beam[lane] < min_beam[lane]:
                min_beam[lane] = lane_beam[lane]
        elif lb < beam:  # no overflow: loosen it again
            wider = lb * float32(1.25)
            lane_beam[lane] = wider if wider < beam else beam
        if f == lengths[lane]:
            done[lane] = 1


@cuda.jit
def begin_chunk_kernel(ctl, rec_used, info):
    """Switch to the other record buffer and empty it."""
    if cuda.grid(1) == 0:
        half = 1 - ctl[CTL_HALF]
        ctl[CTL_HALF] = half
        rec_used[half] = 0
        ctl[CTL_CHUNK_FRAMES] = 0
        info[half, INFO_FRAMES] = 0
        info[half, INFO_FIRST] = ctl[CTL_FRAME] + ctl[CTL_GO]


@cuda.jit
def begin_frame_kernel(ctl, rec_used, info, last_frame, capacity, need):
    """Step 0: move to the next frame if the last step ran one; run it if frames remain, the
    chunk has room for one more frame, and the record buffer for ``need`` more records."""
    if cuda.grid(1) == 0:
        if ctl[CTL_GO]:
            ctl[CTL_FRAME] += 1
        half = ctl[CTL_HALF]
        k = ctl[CTL_CHUNK_FRAMES]
        used = rec_used[half]
        go = (
            ctl[CTL_FRAME] <= last_frame
            and INFO_STARTS + k < info.shape[1] - 1
            and used <= capacity - need
        )
        ctl[CTL_GO] = 1 if go else 0
        if go:
            ctl[CTL_CHUNK_FRAMES] = k + 1
            info[half, INFO_STARTS + k] = used
            info[half, INFO_FRAMES] = k + 1


@cuda.jit
def end_chunk_kernel(ctl, rec_used, info):
    if cuda.grid(1) == 0:
        half = ctl[CTL_HALF]
        info[half, info.shape[1] - 1] = rec_used[half]


@cuda.jit
def gather_survivors_kernel(
    act_n, offsets, act_state, act_cost, act_store, out_state, out_cost, out_store, H
):
    """Lane ``b``'s ``act_n[b]`` survivors to ``out_*[offsets[b]:]``."""
    lane = cuda.blockIdx.y
    lo = offsets[lane]
    stride = cuda.gridDim.x * cuda.blockDim.x
    for i in range(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x, act_n[lane], stride):
        out_state[lo + i] = act_state[lane * H + i]
        out_cost[lo + i] = act_cost[lane * H + i]
        out_store[lo + i] = act_store[lane * H + i]


@cuda.jit
def fill_kernel(arr, value):
    """``arr[:] = value`` on the device (large buffers start empty without a host copy)."""
    for i in range(cuda.grid(1), arr.shape[0], cuda.gridsize(1)):
        arr[i] = value

"""Numba-CUDA kernels of the cuda backend: the reference semantics (`reference.py`) as batched
token passing, one frame at a time. Runs on a GPU and, for tests, under Numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``). Imported only by the cuda package's host modules.

Which function runs which step of `reference.py` (the CPU backend's `cpu_steps.py` has one of
the same name for each, where it has the step):

====================================  ==========================================================
reference.py                          cuda backend
====================================  ==========================================================
1. start                              `steps.start`
2. emitting arcs, recombination       `expand_kernel` (one thread per arc:
                                      `steps.emitting_candidate`, one 64-bit atomicMin), then
                                      `steps.emitting_backpointers`
3. closure cutoff                     `steps.closure_cutoff`
4. epsilon closure                    `steps.epsilon_closure` (a round: `steps.relax_queued`),
                                      then `steps.epsilon_backpointers`
5. prune cutoff, relative costs       `steps.prune_cutoff`, `steps.keep_ancestors`,
                                      `steps.compact_records`
   (tables overflowing)               `steps.adapt_beam` (the tightened beam)
6. end                                on the host: `finish.py` (`_traceback.finish_paths`)
====================================  ==========================================================

`primitives.py` holds what the steps are built from (cost keys, the hash tables, block-wide
scan / min / count / radix select), `buffers.py` the argument bundles, `target.py` what differs
under the simulator.

Per frame step (lane = utterance; every array is flat, lane regions at ``lane * H``). The frame
index lives on the device (``ctl``), so the same launches serve every frame and a chunk of
frames can be captured once as a CUDA graph:

0. `begin_frame_kernel` (one thread): advances ``ctl`` to the next frame, or marks the step idle
   when the frames are done, the chunk is full, or its record buffer could not hold one more
   frame (the frame then runs in the next chunk).
1. `expand_kernel` phase 0 (grid: blocks x lanes, one thread per arc): the exact best emitting
   cost of the frame, so that no candidate beyond ``best + beam`` is created (as the CPU backend
   does when ``min_active == 1``).
2. `expand_kernel` phase 1 (same grid): thread ``i`` of a lane takes arc ``i - scan[k]`` of
   surviving token ``k`` (``scan`` = exclusive prefix sum of the tokens' emitting out-degrees,
   found by binary search), inserts the destination token (state, context state) in the lane's
   open-addressing hash table and does a 64-bit ``atomicMin`` of ``(order-preserving cost bits
   << 32) | (arc + 1)`` on its slot: the reference's ``(cost, arc)`` rule in one atomic.
   `expand_kernel` phase 2 (lanes with boosted phrases only): the threads whose candidate equals
   its slot's final key take the smallest source context state (``atomicMin``), the rule's last
   tie-break, so that the backpointer finds the source token; without phrases every token is in
   context state 0 and the phase is not launched.
3. `closure_prune_kernel` (one block per lane): step 1 (frame 0; a stream's next chunk
   instead puts its last survivors back: `steps.restore`), step 2's backpointers to step 5 as
   listed above; the kept tokens' records go to the chunk's record buffer, which the
   host copies out.

Two hash tables alternate between frames: frame ``f`` builds table ``f % 2`` and reads table
``(f - 1) % 2`` (the survivors' record indices) before clearing it. Two record buffers alternate
between chunks (``ctl[CTL_HALF]``); a record's index is its position in its chunk's buffer.
"""

from __future__ import annotations

import numpy as np
from numba import float32, int32, uint32

from . import steps
from .layout import (
    CTL_CHUNK_FRAMES,
    CTL_FRAME,
    CTL_GO,
    CTL_HALF,
    INFO_FIRST,
    INFO_FRAMES,
    INFO_STARTS,
    NO_BEST,
)
from .primitives import (
    Scratch,
    add_candidate,
    lookup,
    ordered_bits,
    ordered_cost,
    pack,
    token_key,
)
from .target import cuda

_INF = np.float32(np.inf)


@cuda.jit
def expand_kernel(phase, control, acoustics, graph, boosts, limits, lanes, survivors, tables):
    """Step 2 over the frame's emitting arcs. Phase 0: ``lanes.best_bits = min`` of the candidate
    costs (ordered bits). Phase 1: candidates recombined per token (state, context state), none
    beyond ``best + beam`` when phase 0 ran (``min_active <= 1``). Phase 2 (lanes with boosted
    phrases): each slot's source context state, the smallest among the arcs that gave its best
    ``(cost, arc)`` key (`bundles.improves`' last tie-break). Grid row ``y`` takes lanes ``y``,
    ``y + gridDim.y``, ... (`layout.grid_rows`: a batch may have more lanes than rows)."""
    f = control.ctl[CTL_FRAME]
    if control.ctl[CTL_GO] == 0 or f == 0:
        return
    for lane in range(cuda.blockIdx.y, lanes.length.shape[0], cuda.gridDim.y):
        expand_lane(phase, lane, f, acoustics, graph, boosts, limits, lanes, survivors, tables)


@cuda.jit(device=True)
def expand_lane(phase, lane, f, acoustics, graph, boosts, limits, lanes, survivors, tables):
    """`expand_kernel` for one lane at token frame ``f``."""
    t = f - 1
    if lanes.done[lane] or t >= lanes.length[lane]:
        return
    phrases = boosts.contexts[lane] > 1
    if phase == 2 and not phrases:
        return
    H = tables.size
    total = survivors.arc_scan[lane * (H + 1) + survivors.n[lane]]
    table = (f % 2) * lanes.length.shape[0] + lane
    limit = _INF
    if phase >= 1 and limits.min_active <= 1:
        limit = ordered_cost(lanes.best_bits[lane]) + lanes.beam[lane]
    best = NO_BEST
    stride = cuda.gridDim.x * cuda.blockDim.x
    for i in range(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x, total, stride):
        a, c, x, nx = steps.emitting_candidate(i, lane, t, acoustics, graph, boosts, survivors,
                                               H)  # fmt: skip
        if not c < _INF or c > limit:
            continue
        if phase == 0:
            u = ordered_bits(c)
            if u < best:
                best = u
            continue
        token = token_key(graph.next_state[a], nx)
        if phase == 2:
            slot = lookup(tables, table, token)
            if slot >= 0 and tables.key[slot] == pack(c, a):
                cuda.atomic.min(tables.src, slot, x)
            continue
        slot = add_candidate(tables, table, token, phrases, lanes.overflow, lane)
        if slot >= 0:
            cuda.atomic.min(tables.key, slot, pack(c, a))
    if best != NO_BEST:
        cuda.atomic.min(lanes.best_bits, lane, best)


@cuda.jit
def closure_prune_kernel(control, graph, boosts, limits, lanes, tables, survivors, records):
    """Token frame ``f`` of each lane after its expand, one block per lane: reference.py's steps
    in its order (`steps` has one function per step, see the module docstring)."""
    lane = cuda.blockIdx.x
    f = control.ctl[CTL_FRAME]
    if control.ctl[CTL_GO] == 0 or lanes.done[lane] or f > lanes.length[lane]:
        return
    B = lanes.length.shape[0]
    frame = steps.Frame(lane, f, (f % 2) * B + lane, (1 - f % 2) * B + lane, control.ctl[CTL_HALF])
    beam = lanes.beam[lane]
    scratch = shared_scratch()
    if f == 0:
        if lanes.resumed[lane]:  # a stream's next chunk goes on from its last survivors
            steps.restore(tables, survivors, frame)
            if cuda.threadIdx.x == 0:
                steps.end_frame(lanes, frame)
            return
        steps.start(graph, tables, frame)  # step 1
    n = tables.n_cand[frame.table]
    if n == 0:
        steps.lane_died(tables, lanes, frame)
        return
    if f > 0:  # step 2's winners (expand_kernel recombined them)
        steps.emitting_backpointers(graph, tables, frame, n)
    limit = steps.closure_cutoff(tables, frame, n, beam, limits, scratch)  # step 3
    # step 4 (False: a negative-cost epsilon cycle stopped the lane)
    if not steps.epsilon_closure(graph, boosts, tables, lanes, frame, n, limit, scratch):
        return
    n = tables.n_cand[frame.table]
    steps.epsilon_backpointers(graph, tables, frame, n)
    cutoff, best = steps.prune_cutoff(tables, frame, n, beam, limits, scratch)  # step 5
    steps.keep_ancestors(graph, tables, frame, n, cutoff)
    steps.compact_records(graph, tables, survivors, records, frame, n, cutoff, best, scratch)
    if cuda.threadIdx.x == 0:
        steps.adapt_beam(lanes, limits, frame, beam, n > tables.size // 2)
        steps.end_frame(lanes, frame)


@cuda.jit(device=True)
def shared_scratch():
    """The closure/prune block's shared memory (`primitives.Scratch`), declared in this one
    function that one kernel calls (see `primitives.Scratch` for why)."""
    scan = cuda.shared.array(1024, int32)
    words = cuda.shared.array(2, uint32)
    hist = cuda.shared.array(256, int32)
    counts = cuda.shared.array(4, int32)
    state = cuda.shared.array(1024, int32)
    ctx = cuda.shared.array(1024, int32)
    cost = cuda.shared.array(1024, float32)
    offset = cuda.shared.array(1024, int32)
    return Scratch(scan, words, hist, counts, state, ctx, cost, offset)


@cuda.jit
def begin_chunk_kernel(control, records):
    """Switch to the other record buffer and empty it."""
    if cuda.grid(1) == 0:
        ctl, info = control.ctl, control.info
        half = 1 - ctl[CTL_HALF]
        ctl[CTL_HALF] = half
        records.used[half] = 0
        ctl[CTL_CHUNK_FRAMES] = 0
        info[half, INFO_FRAMES] = 0
        info[half, INFO_FIRST] = ctl[CTL_FRAME] + ctl[CTL_GO]


@cuda.jit
def begin_frame_kernel(control, records, last_frame, need):
    """Step 0: move to the next frame if the last step ran one; run it if frames remain, the
    chunk has room for one more frame, and the record buffer for ``need`` more records."""
    if cuda.grid(1) == 0:
        ctl, info = control.ctl, control.info
        if ctl[CTL_GO]:
            ctl[CTL_FRAME] += 1
        half = ctl[CTL_HALF]
        k = ctl[CTL_CHUNK_FRAMES]
        used = records.used[half]
        go = (
            ctl[CTL_FRAME] <= last_frame
            and INFO_STARTS + k < info.shape[1] - 1
            and used <= records.capacity - need
        )
        ctl[CTL_GO] = 1 if go else 0
        if go:
            ctl[CTL_CHUNK_FRAMES] = k + 1
            info[half, INFO_STARTS + k] = used
            info[half, INFO_FRAMES] = k + 1


@cuda.jit
def end_chunk_kernel(control, records):
    if cuda.grid(1) == 0:
        half = control.ctl[CTL_HALF]
        control.info[half, control.info.shape[1] - 1] = records.used[half]


@cuda.jit
def gather_survivors_kernel(survivors, counts, offsets, out, H):
    """Lane ``b``'s first ``counts[b]`` survivors to ``out`` (state, context state, cost, record)
    at ``offsets[b]`` (grid rows loop over the lanes, as `expand_kernel`'s)."""
    out_state, out_ctx, out_cost, out_record = out
    stride = cuda.gridDim.x * cuda.blockDim.x
    for lane in range(cuda.blockIdx.y, counts.shape[0], cuda.gridDim.y):
        lo = offsets[lane]
        for i in range(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x, counts[lane],
                       stride):  # fmt: skip
            out_state[lo + i] = survivors.state[lane * H + i]
            out_ctx[lo + i] = survivors.ctx[lane * H + i]
            out_cost[lo + i] = survivors.cost[lane * H + i]
            out_record[lo + i] = survivors.record[lane * H + i]


@cuda.jit
def restore_survivors_kernel(survivors, counts, offsets, packed, scan, H):
    """`gather_survivors_kernel` backwards, for a stream's next chunk: lane ``b``'s
    ``counts[b]`` survivors from ``packed`` (state, context state, cost, record) at
    ``offsets[b]``, and the prefix sum of their emitting out-degrees (``counts[b] + 1`` values)
    from ``scan`` at ``offsets[b] + b``."""
    in_state, in_ctx, in_cost, in_record = packed
    stride = cuda.gridDim.x * cuda.blockDim.x
    for lane in range(cuda.blockIdx.y, counts.shape[0], cuda.gridDim.y):
        lo = offsets[lane]
        n = counts[lane]
        for i in range(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x, n + 1, stride):
            survivors.arc_scan[lane * (H + 1) + i] = scan[lo + lane + i]
            if i < n:
                survivors.state[lane * H + i] = in_state[lo + i]
                survivors.ctx[lane * H + i] = in_ctx[lo + i]
                survivors.cost[lane * H + i] = in_cost[lo + i]
                survivors.record[lane * H + i] = in_record[lo + i]
        if cuda.blockIdx.x == 0 and cuda.threadIdx.x == 0:
            survivors.n[lane] = n


@cuda.jit
def fill_kernel(arr, value):
    """``arr[:] = value`` on the device (large buffers start empty without a host copy)."""
    for i in range(cuda.grid(1), arr.shape[0], cuda.gridsize(1)):
        arr[i] = value

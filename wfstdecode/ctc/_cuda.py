"""The cuda backend, host side: device buffers, the per-frame kernel sequence of
`_cuda_kernels`, each frame's backpointer records copied to pinned host memory on a second
stream (double-buffered: frame ``f``'s copy overlaps frame ``f + 1``'s kernels), traceback on the
host with the CPU backend's `finish_paths`.

Memory is sized from the options (`table_size`, `device_bytes`); an utterance whose frame needs
more than its table holds keeps going with a tightened beam and says so in its notes.
"""

from __future__ import annotations

import logging
import weakref

import numpy as np

from ..errors import GraphError
from ._problem import RawResult, SearchProblem
from ._traceback import CYCLE, OVERFLOW, finish_paths

log = logging.getLogger(__name__)

_GRAPHS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def table_size(num_states: int, options) -> int:
    """Slots of one utterance's recombination hash table (a power of two): twice the candidate
    capacity ``options.max_candidates`` (default ``max(2 * max_active, 256)``), but no more
    than needed for every state of the graph at once."""
    cap = options.max_candidates or max(2 * options.max_active, 256)
    cap = min(cap, num_states)
    return 1 << max(4, (2 * cap - 1).bit_length())


def device_bytes(batch_size: int, num_states: int, num_arcs: int, options) -> int:
    """Device memory the search allocates: per-utterance buffers plus the graph's arrays."""
    H = table_size(num_states, options)
    per_lane = H * (2 * (4 + 8 + 4 + 4) + 2 * 4 + 3 * 4 + 4 + 2 * 2 * 4) + 64
    graph = num_arcs * (4 * 5) + (num_states + 1) * 16
    return batch_size * per_lane + graph


def decode_cuda(problem: SearchProblem) -> list[RawResult]:
    from numba import cuda

    from . import _cuda_kernels as K

    g, opts = problem.graph, problem.options
    B = problem.batch_size
    T = int(problem.lengths.max(initial=0))
    H = table_size(g.num_states, opts)
    log.info(
        "cuda search: %d utterances, table of %d slots each, %.1f MB of device memory",
        B, H, device_bytes(B, g.num_states, g.num_arcs, opts) / 2**20,
    )  # fmt: skip
    dg = _device_graph(g, problem.arc_cost)
    d = _Buffers(B, H, problem)
    threads = 8 if K.SIM else 256
    expand_blocks = 1 if K.SIM else max(1, min(128, (8 * opts.max_active) // threads))
    early = np.int32(opts.min_active <= 1)
    beam = np.float32(problem.beam)

    stream, copy_stream = cuda.stream(), cuda.stream()
    computed = [cuda.event(), cuda.event()]
    copied = [cuda.event(), cuda.event()]
    out = _RecordCopier(d, B * H, copy_stream, computed, copied)
    lanes = (d.lengths, d.done)
    boost = (d.bkeys, d.bvals, d.boff, d.bmask)
    for f in range(T + 1):
        par = np.int32(f % 2)
        if f > 0:
            emit = (d.act_state, d.act_cost, d.act_n, d.e_scan, dg["e_off"])
            if early:
                K.best_emitting_kernel[(expand_blocks, B), threads, stream](
                    f, d.ac, *lanes, *emit, dg["ilabel"], dg["arc_cost"], dg["olabel"], *boost,
                    d.best_bits, H,
                )  # fmt: skip
            K.expand_emitting_kernel[(expand_blocks, B), threads, stream](
                f, par, d.ac, *lanes, *emit, dg["next_state"], dg["ilabel"], dg["arc_cost"],
                dg["olabel"], *boost, d.best_bits, d.lane_beam, early, d.h_state, d.h_key,
                d.c_slot, d.n_cand, d.overflow, H,
            )  # fmt: skip
        K.reset_frame_total_kernel[1, 1, stream](d.frame_total, par)
        if f >= 2:
            copied[f % 2].wait(stream)  # frame f - 2's records have left this buffer
        K.closure_prune_kernel[B, threads, stream](
            f, par, *lanes, np.int32(g.start), dg["e_off"], dg["ne_off"], dg["next_state"],
            dg["arc_cost"], dg["olabel"], dg["arc_src"], np.int32(g.num_emitting_arcs), *boost,
            beam, np.int32(opts.max_active), np.int32(opts.min_active), d.lane_beam, d.h_state,
            d.h_key, d.h_prev, d.h_mark, d.c_slot, d.n_cand, d.queue, d.act_state, d.act_cost,
            d.act_store, d.act_n, d.e_scan, d.best_bits, d.overflow, d.status, d.died,
            d.overflow_frames, d.first_overflow, d.min_beam, d.frame_total, d.rec_arc,
            d.rec_prev, H,
        )  # fmt: skip
        d.frame_total[f % 2 : f % 2 + 1].copy_to_host(out.totals[f % 2], stream=stream)
        computed[f % 2].record(stream)
        if f >= 1:
            out.start_copy(f - 1)
    out.start_copy(T)
    out.drain()
    stream.synchronize()
    return _finish(problem, d, H, out.chunks)


class _Buffers:
    """Every per-search device array (flat; lane ``b``'s region starts at ``b * H``)."""

    def __init__(self, B: int, H: int, p: SearchProblem):
        from numba import cuda

        from . import _cuda_kernels as K

        def full(n, value, dtype):
            return cuda.to_device(np.full(n, value, dtype))

        self.ac = cuda.to_device(p.ac)
        self.lengths = cuda.to_device(p.lengths.astype(np.int32))
        self.done = full(B, 0, np.int32)
        self.bkeys, self.bvals = cuda.to_device(p.boosts.keys), cuda.to_device(p.boosts.values)
        self.boff, self.bmask = cuda.to_device(p.boosts.offset), cuda.to_device(p.boosts.mask)
        # two recombination tables (frames alternate), their candidate lists
        self.h_state = full(2 * B * H, K.EMPTY, np.int32)
        self.h_key = full(2 * B * H, K.NO_KEY, np.uint64)
        self.h_prev = full(2 * B * H, -1, np.int32)
        self.h_mark = full(2 * B * H, 0, np.int32)
        self.c_slot = full(2 * B * H, -1, np.int32)
        self.n_cand = full(2 * B, 0, np.int32)
        self.queue = full(2 * B * H, -1, np.int32)
        # the surviving tokens of the last frame and their emitting out-degree prefix sums
        self.act_state = full(B * H, 0, np.int32)
        self.act_cost = full(B * H, 0, np.float32)
        self.act_store = full(B * H, 0, np.int32)
        self.act_n = full(B, 0, np.int32)
        self.e_scan = full(B * (H + 1), 0, np.int32)
        # per lane: pruning state and what happened
        self.best_bits = full(B, K.NO_BEST, np.uint32)
        self.lane_beam = full(B, p.beam, np.float32)
        self.min_beam = full(B, p.beam, np.float32)
        self.overflow = full(B, 0, np.int32)
        self.overflow_frames = full(B, 0, np.int32)
        self.first_overflow = full(B, -1, np.int32)
        self.status = full(B, 0, np.int32)
        self.died = full(B, -1, np.int32)
        # each frame's backpointer records, double-buffered
        self.frame_total = full(2, 0, np.int32)
        self.rec_arc = full(2 * B * H, 0, np.int32)
        self.rec_prev = full(2 * B * H, 0, np.int32)


class _RecordCopier:
    """Frame ``f``'s records go to pinned buffer ``f % 2`` on the copy stream once frame ``f``'s
    kernels are done; the host moves them out before that buffer takes frame ``f + 2``."""

    def __init__(self, d: _Buffers, half: int, copy_stream, computed, copied):
        from numba import cuda

        self.d, self.half, self.stream = d, half, copy_stream
        self.computed, self.copied = computed, copied
        self.totals = [cuda.pinned_array(1, np.int32) for _ in range(2)]
        self.pinned: list = [None, None]
        self.pending: list = [None, None]  # (frame, count) in flight per buffer
        self.chunks: list = []

    def start_copy(self, f: int) -> None:
        from numba import cuda

        i = f % 2
        self.computed[i].synchronize()
        n = int(self.totals[i][0])
        self._collect(i)
        if self.pinned[i] is None or self.pinned[i][0].shape[0] < n:
            size = max(n, 1024, 0 if self.pinned[i] is None else 2 * self.pinned[i][0].shape[0])
            self.pinned[i] = (cuda.pinned_array(size, np.int32), cuda.pinned_array(size, np.int32))
        self.computed[i].wait(self.stream)
        if n:
            base = i * self.half
            self.d.rec_arc[base : base + n].copy_to_host(self.pinned[i][0][:n], stream=self.stream)
            self.d.rec_prev[base : base + n].copy_to_host(self.pinned[i][1][:n], stream=self.stream)
        self.copied[i].record(self.stream)
        self.pending[i] = (f, n)

    def _collect(self, i: int) -> None:
        if self.pending[i] is None:
            return
        f, n = self.pending[i]
        self.copied[i].synchronize()
        assert f == len(self.chunks), "records arrive in frame order"
        self.chunks.append((self.pinned[i][0][:n].copy(), self.pinned[i][1][:n].copy()))
        self.pending[i] = None

    def drain(self) -> None:
        order = sorted((p[0], i) for i, p in enumerate(self.pending) if p is not None)
        for _, i in order:
            self._collect(i)


def _device_graph(g, arc_cost: np.ndarray) -> dict:
    """The graph's arrays on the device, cached per graph (and per arc-cost array)."""
    from numba import cuda

    cached = _GRAPHS.get(g)
    if cached is None:
        arc_src = np.concatenate((
            np.repeat(np.arange(g.num_states, dtype=np.int32), np.diff(g.e_offsets)),
            np.repeat(np.arange(g.num_states, dtype=np.int32), np.diff(g.ne_offsets)),
        ))  # fmt: skip
        cached = {
            "e_off": cuda.to_device(g.e_offsets),
            "ne_off": cuda.to_device(g.ne_offsets),
            "next_state": cuda.to_device(g.next_state),
            "ilabel": cuda.to_device(g.ilabel),
            "olabel": cuda.to_device(g.olabel),
            "arc_src": cuda.to_device(arc_src),
            "costs": {},
        }
        _GRAPHS[g] = cached
    costs = cached["costs"]
    if id(arc_cost) not in costs:
        if len(costs) > 4:
            costs.clear()
        costs[id(arc_cost)] = (arc_cost, cuda.to_device(arc_cost))  # keeps the id valid
    return {**cached, "arc_cost": costs[id(arc_cost)][1]}


def _finish(problem: SearchProblem, d: _Buffers, H: int, chunks) -> list[RawResult]:
    """Survivors and records to paths, on the host."""
    from . import _cuda_kernels as K

    g = problem.graph
    B = problem.batch_size
    counts = np.array([len(a) for a, _ in chunks], np.int64)
    base = np.concatenate(([0], np.cumsum(counts)))
    st_arc = np.concatenate([a for a, _ in chunks]).astype(np.int64)
    prev = np.concatenate([p for _, p in chunks]).astype(np.int64)
    frame = np.repeat(np.arange(len(chunks)), counts)
    emitting = (st_arc >= 0) & (st_arc < g.num_emitting_arcs)
    # an emitting arc's record points into the previous frame, an epsilon arc's into its own
    prev_frame_base = np.where(emitting, base[np.maximum(frame - 1, 0)], base[frame])
    st_prev = np.where(prev < 0, -1, prev + prev_frame_base)

    act_n = d.act_n.copy_to_host()
    status, died = d.status.copy_to_host(), d.died.copy_to_host()
    act_state, act_cost = d.act_state.copy_to_host(), d.act_cost.copy_to_host()
    act_store = d.act_store.copy_to_host()
    over_frames, first_over = d.overflow_frames.copy_to_host(), d.first_overflow.copy_to_host()
    min_beam = d.min_beam.copy_to_host()
    T_max = int(problem.lengths.max(initial=0))
    results = []
    for b in range(B):
        notes = ()
        if over_frames[b]:
            notes = (
                f"token table full on {int(over_frames[b])} frame(s), first at frame "
                f"{int(first_over[b])}: beam tightened to as low as {float(min_beam[b]):.3g} "
                f"(raise CtcBeamOptions.max_candidates for the exact search)",
            )
        if status[b] & K.NEG_CYCLE:
            raise GraphError(f"negative-cost epsilon cycle (utterance {b}, frame {died[b]})")
        if status[b] & K.DIED:
            results.append(RawResult([], K.DIED, int(died[b]), notes))
            continue
        n = int(act_n[b])
        lo = b * H
        a_store = act_store[lo : lo + n] + base[int(problem.lengths[b])]
        cap = 2 * T_max + 16
        while True:
            arcs = np.zeros((problem.options.nbest, cap), np.int32)
            frames = np.zeros_like(arcs)
            lens = np.zeros(problem.options.nbest, np.int64)
            costs = np.zeros(problem.options.nbest, np.float32)
            n_paths, st = finish_paths(
                act_state[lo : lo + n], act_cost[lo : lo + n], a_store, n, st_prev, st_arc,
                len(st_arc), int(problem.lengths[b]), g.final_cost, g.olabel,
                g.num_emitting_arcs, problem.options.nbest, arcs, frames, lens, costs,
            )  # fmt: skip
            if not st & OVERFLOW:
                break
            cap *= 4
        if st & CYCLE:
            raise GraphError("zero-cost epsilon cycle: the traceback loops")
        paths = [
            (arcs[p, : lens[p]].copy(), frames[p, : lens[p]].copy(), float(costs[p]))
            for p in range(n_paths)
        ]
        results.append(RawResult(paths, st & 3, -1, notes))
    return results

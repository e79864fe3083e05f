"""End of a cuda search: the survivors gathered on the device into one short array per field
(not the whole B x H token buffers), the chunks' records joined into global backpointers, and
each utterance traced back on the host by the CPU backend's `finish_paths`."""

from __future__ import annotations

import numpy as np

from .._problem import RawResult, SearchProblem
from .._traceback import PathRows, Records, Survivors, finish_paths
from ..status import DIED, RETRY_BITS, raise_graph_errors


def finish(problem: SearchProblem, d, chunks, T: int) -> list[RawResult]:
    """``d``: the search's `buffers.SearchBuffers`; ``chunks``: per chunk ``(first frame, record
    start of each frame, arcs, prevs)``, record indices local to the chunk (an emitting arc's
    ``prev`` points into the previous frame's chunk, an epsilon arc's into its own frame's)."""

    g = problem.graph
    B = problem.batch_size
    st_arc, st_prev, frame_base = _global_records(chunks, g.num_emitting_arcs, T)
    records = Records(st_prev, st_arc)

    lanes = d.lanes
    status, died = lanes.status.copy_to_host(), lanes.died.copy_to_host()
    over_frames = lanes.overflow_frames.copy_to_host()
    first_over, min_beam = lanes.first_overflow.copy_to_host(), lanes.min_beam.copy_to_host()
    act_n = np.where(status & DIED, 0, d.survivors.n.copy_to_host()).astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(act_n)))
    state, ctx, cost, store = _gather_survivors(d.survivors, act_n, offsets, d.tables.size)
    boosts = problem.boosts
    results = []
    for b in range(B):
        notes = ()
        if over_frames[b]:
            notes = (
                f"token table full on {int(over_frames[b])} frame(s), first at frame "
                f"{int(first_over[b])}: beam tightened to as low as {float(min_beam[b]):.3g} "
                f"(raise CtcBeamOptions.max_candidates for the exact search)",
            )
        raise_graph_errors(int(status[b]), b, int(died[b]))
        if status[b] & DIED:
            results.append(RawResult([], DIED, int(died[b]), notes))
            continue
        length = int(problem.lengths[b])
        lo, n = offsets[b], int(act_n[b])
        a_store = store[lo : lo + n].astype(np.int64) + frame_base[length]
        out = PathRows.first(1, problem.options.nbest, T)
        while True:
            n_paths, st = finish_paths(
                Survivors(state[lo : lo + n], ctx[lo : lo + n], cost[lo : lo + n], a_store),
                records, len(st_arc), length, g.final_cost,
                boosts.phi[boosts.node_offset[b] :], g.olabel, g.num_emitting_arcs,
                problem.options.nbest, out.lane(0),
            )  # fmt: skip
            if not st & RETRY_BITS:
                break
            out = out.grown(1, st, problem.options.nbest)
        results.append(out.result(0, n_paths, st, b, notes=notes))
    return results


def _global_records(chunks, n_emit: int, T: int):
    """(arcs, global backpointers, global index of each frame's chunk start) over all chunks."""
    used = np.array([len(arcs) for *_, arcs, _ in chunks], np.int64)
    chunk_base = np.concatenate(([0], np.cumsum(used)))
    frame_base = np.zeros(T + 1, np.int64)  # global index of record 0 of the frame's chunk
    frame_parts, prev_parts, arc_parts = [], [], []
    for c, (first, starts, arcs, prevs) in enumerate(chunks):
        n = len(starts)
        frame_base[first : first + n] = chunk_base[c]
        counts = np.diff(np.append(starts, len(arcs)))
        frame_parts.append(np.repeat(np.arange(first, first + n), counts))
        arc_parts.append(arcs)
        prev_parts.append(prevs)
    if not chunks:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), frame_base
    st_arc = np.concatenate(arc_parts).astype(np.int64)
    prev = np.concatenate(prev_parts).astype(np.int64)
    frame = np.concatenate(frame_parts)
    emitting = (st_arc >= 0) & (st_arc < n_emit)
    prev_base = np.where(emitting, frame_base[np.maximum(frame - 1, 0)], frame_base[frame])
    st_prev = np.where(prev < 0, -1, prev + prev_base)
    return st_arc, st_prev, frame_base


def _gather_survivors(survivors, act_n: np.ndarray, offsets: np.ndarray, H):
    """Each lane's ``act_n`` survivors (state, context state, cost, record), packed by a kernel
    and copied."""
    from numba import cuda

    from . import kernels as K
    from .target import SIM

    total = int(offsets[-1])
    out = tuple(cuda.device_array(max(total, 1), dt)
                for dt in (np.int32, np.int32, np.float32, np.int32))  # fmt: skip
    B = len(act_n)
    if total:
        threads = 8 if SIM else 256
        blocks = 1 if SIM else max(1, min(64, int(act_n.max()) // threads + 1))
        K.gather_survivors_kernel[(blocks, B), threads](
            survivors, cuda.to_device(act_n.astype(np.int32)),
            cuda.to_device(offsets.astype(np.int64)), out, np.int32(H),
        )  # fmt: skip
    return tuple(o.copy_to_host()[:total] for o in out)

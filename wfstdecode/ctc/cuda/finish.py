"""End of a cuda search: the survivors gathered on the device into one short array per field
(not the whole B x H token buffers), the records (joined into global backpointers as the chunks
arrived, `records.JoinedRecords`) traced back per utterance on the host by the CPU backend's
`finish_paths`."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._problem import RawResult, SearchProblem
from .._traceback import PathRows, Records, Survivors, finish_paths
from ..status import DIED, RETRY_BITS, STOPPED_BITS, raise_graph_errors
from .layout import grid_rows


def finish(problem: SearchProblem, d, joined, T: int) -> list[RawResult]:
    """``d``: the search's `buffers.SearchBuffers`; ``joined``: its `records.JoinedRecords`."""

    g = problem.graph
    B = problem.batch_size
    records = Records(joined.prev[: joined.n], joined.arc[: joined.n])
    frame_base = joined.frame_base

    e = lane_ends(d)
    boosts = problem.boosts
    results = []
    for b in range(B):
        notes = overflow_notes(int(e.overflow_frames[b]),
                               input_token_frame(problem, b, int(e.first_overflow[b])),
                               float(e.min_beam[b]))  # fmt: skip
        raise_graph_errors(int(e.status[b]), b, int(e.died[b]))
        if e.status[b] & DIED:
            results.append(RawResult([], DIED, int(e.died[b]), notes))
            continue
        length = int(problem.lengths[b])
        alive = e.survivors(b)
        alive = alive._replace(record=alive.record.astype(np.int64) + frame_base[length])
        out = PathRows.first(1, problem.options.nbest, T)
        while True:
            n_paths, st = finish_paths(
                alive, records, joined.n, length, g.final_cost,
                boosts.phi[boosts.node_offset[b] :], g.olabel, g.num_emitting_arcs,
                problem.options.nbest, out.lane(0),
            )  # fmt: skip
            if not st & RETRY_BITS:
                break
            out = out.grown(1, st, problem.options.nbest)
        results.append(out.result(0, n_paths, st, b, notes=notes))
    return results


class LaneEnds(NamedTuple):
    """The lanes as a search left them, on the host: per lane its status bits, the frame it
    stopped at, its beam (in force, lowest), its overflow counts, and its survivors (none for
    a stopped lane), packed: lane ``b``'s at ``offsets[b] : offsets[b + 1]``."""

    status: np.ndarray
    died: np.ndarray
    beam: np.ndarray
    min_beam: np.ndarray
    overflow_frames: np.ndarray
    first_overflow: np.ndarray
    offsets: np.ndarray
    packed: Survivors  # records: the survivors' chunk-local record indices

    def survivors(self, b: int) -> Survivors:
        lo, hi = self.offsets[b], self.offsets[b + 1]
        return Survivors(*(x[lo:hi] for x in self.packed))


def lane_ends(d) -> LaneEnds:
    """`LaneEnds` of the search buffers ``d`` (`finish`, and the streams' bookkeeping)."""
    lanes = d.lanes
    status = lanes.status.copy_to_host()
    n = np.where(status & STOPPED_BITS, 0, d.survivors.n.copy_to_host()).astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(n)))
    packed = Survivors(*gather_survivors(d.survivors, n, offsets, d.tables.size))
    return LaneEnds(
        status, lanes.died.copy_to_host(), lanes.beam.copy_to_host(),
        lanes.min_beam.copy_to_host(), lanes.overflow_frames.copy_to_host(),
        lanes.first_overflow.copy_to_host(), offsets, packed,
    )  # fmt: skip


def input_token_frame(problem, b: int, f: int) -> int:
    """Token frame ``f`` of utterance ``b``'s search (the prefix of ``f`` frames searched) as
    the caller numbers the input: they differ where blank frames were skipped
    (`SearchProblem.input_frame`)."""
    return problem.input_frame(b, f - 1) + 1 if f >= 0 else f


def overflow_notes(frames: int, first: int, min_beam: float) -> tuple[str, ...]:
    """The note of a lane whose token table overflowed on ``frames`` frames (none if 0)."""
    if not frames:
        return ()
    return (
        f"token table full on {frames} frame(s), first at frame {first}: beam tightened to as "
        f"low as {min_beam:.3g} (raise CtcBeamOptions.max_candidates for the exact search)",
    )


def gather_survivors(survivors, act_n: np.ndarray, offsets: np.ndarray, H):
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
        K.gather_survivors_kernel[(blocks, grid_rows(B)), threads](
            survivors, cuda.to_device(act_n.astype(np.int32)),
            cuda.to_device(offsets.astype(np.int64)), out, np.int32(H),
        )  # fmt: skip
    return tuple(o.copy_to_host()[:total] for o in out)

"""The cuda search's device arrays, grouped into argument bundles (named tuples) that the kernels
take whole, next to `bundles.SearchGraph`, `LaneBoosts` and `Limits`, which the CPU backend shares.
Every array is flat: lane ``b``'s region of a per-lane array of ``H`` entries starts at
``b * H``. `allocate` makes a search's buffers; `device_graph` keeps each graph's device copy.

Importing this module loads no GPU module: the named tuples are plain Python, and the functions
import Numba's CUDA support when they run.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .. import bundles
from .layout import EMPTY, NO_BEST, NO_KEY


class Acoustics(NamedTuple):
    """What the frames cost: log-probs read in place (or the host's search costs), each frame's
    largest log-prob and ``-acoustic_scale`` (0 and 1 for host costs: `steps.acoustic_cost`)."""

    log_probs: object  # (B, T, V) float16/32/64
    frame_max: object  # float32 (B, T)
    neg_scale: np.float32


class Lanes(NamedTuple):
    """Per lane (utterance): its length and the state of its search."""

    length: object  # int32 [B]: frames
    done: object  # int32 [B]: finished (or died)
    beam: object  # float32 [B]: the beam in force (tightened while the tables overflow)
    min_beam: object  # float32 [B]: the lowest it went
    best_bits: object  # uint32 [B]: the frame's best emitting cost, ordered bits (expand phase 0)
    overflow: object  # int32 [B]: a candidate found its table full this frame
    overflow_frames: object  # int32 [B]: frames that overflowed
    first_overflow: object  # int32 [B]: the first of them, or -1
    status: object  # int32 [B]: `status` bits
    died: object  # int32 [B]: the frame of DIED / NEG_CYCLE, or -1
    resumed: object  # int32 [B]: 1 when frame 0 puts back a stream's survivors (`streams.py`)


class Tables(NamedTuple):
    """Two recombination hash tables per lane (frame ``f`` builds table ``f % 2`` and clears the
    other); table ``k = parity * B + lane`` is ``state[k * size : (k + 1) * size]``, and so on."""

    state: object  # int64 [2BH]: the slot's token (`primitives.token_key`), or EMPTY
    key: object  # uint64 [2BH]: the best (cost, arc) key so far (`primitives.pack`), or NO_KEY
    src: object  # int32 [2BH]: the best key's source context state (the tie-break), or NO_SRC
    prev: object  # int32 [2BH]: backpointer (record in frame f - 1, or slot of this frame)
    mark: object  # int32 [2BH]: closure round queued / kept flag / 2 + record index
    cand: object  # int32 [2BH]: the slots in use, in insertion order (the candidates)
    n_cand: object  # int32 [2B]: how many
    queue: object  # int32 [2BH]: the epsilon closure's queue, two halves of H per lane
    size: np.int32  # H, slots per table (a power of two)


class Survivors(NamedTuple):
    """The tokens that survived the last frame, per lane at ``lane * H``."""

    state: object  # int32 [BH]
    ctx: object  # int32 [BH]: its context state
    cost: object  # float32 [BH]: relative to the frame's best
    record: object  # int32 [BH]: its record in the chunk's buffer
    n: object  # int32 [B]
    arc_scan: object  # int32 [B(H + 1)]: prefix sum of emitting out-degrees, at lane * (H + 1)


class Records(NamedTuple):
    """Backpointer records ``(arc, previous record)``, two buffers that alternate between chunks
    (the host copies one out while the other fills). With ``keep`` (lattices), each record also
    names its lane and, for a surviving token, the token (state, context state): every frame's
    survivors reach the host with the records (``state`` -1: a token kept only as an ancestor);
    without, those three arrays hold one unused entry."""

    used: object  # int32 [2]: records in each buffer
    arc: object  # int32 [2 * capacity]
    prev: object  # int32 [2 * capacity]
    capacity: np.int32
    keep: np.int32
    lane: object  # int32 [2 * capacity] with keep
    state: object  # int32 [2 * capacity] with keep
    ctx: object  # int32 [2 * capacity] with keep


class Control(NamedTuple):
    """Frame control on the device (``ctl``: CTL_*) and what each chunk ran, in mapped host
    memory (``info``: INFO_*)."""

    ctl: object  # int32 [4]
    info: object  # int32 (2, frames_per_chunk + 3), mapped


class SearchBuffers(NamedTuple):
    """Every per-search device array."""

    acoustics: Acoustics
    boosts: bundles.LaneBoosts
    lanes: Lanes
    tables: Tables
    survivors: Survivors
    records: Records
    control: Control


def allocate(p, H: int, capacity: int, frames_per_chunk: int, stream,
             keep_survivors: bool = False) -> SearchBuffers:  # fmt: skip
    """The device arrays of a search of ``p`` with tables of ``H`` slots and record buffers of
    ``capacity`` records (``keep_survivors``: with each record's lane and token, `Records`);
    large ones are filled on the device (`kernels.fill_kernel`)."""
    from numba import cuda

    from . import kernels as K
    from .target import SIM

    B = p.batch_size

    def put(x):
        return cuda.to_device(x, stream=stream)

    def full(n, value, dtype):  # small: from the host
        return put(np.full(n, value, dtype))

    def filled(n, value, dtype):  # large: allocated and filled on the device
        arr = cuda.device_array(n, dtype, stream=stream)
        blocks = 1 if SIM else min(4096, (n + 255) // 256)
        K.fill_kernel[blocks, 8 if SIM else 256, stream](arr, dtype(value))
        return arr

    def scratch(n, dtype):  # written before it is read
        return cuda.device_array(n, dtype, stream=stream)

    if p.device_lp is not None:
        acoustics = Acoustics(p.device_lp, p.device_frame_max, p.neg_scale)
    else:  # search costs from the host: kept as they are (see steps.acoustic_cost)
        zeros = np.zeros(p.ac.shape[:2], np.float32)
        acoustics = Acoustics(put(p.ac), put(zeros), np.float32(1.0))
    lanes = Lanes(
        length=put(p.lengths.astype(np.int32)), done=full(B, 0, np.int32),
        beam=full(B, p.beam, np.float32), min_beam=full(B, p.beam, np.float32),
        best_bits=full(B, NO_BEST, np.uint32), overflow=full(B, 0, np.int32),
        overflow_frames=full(B, 0, np.int32), first_overflow=full(B, -1, np.int32),
        status=full(B, 0, np.int32), died=full(B, -1, np.int32), resumed=full(B, 0, np.int32),
    )  # fmt: skip
    tables = Tables(
        state=filled(2 * B * H, EMPTY, np.int64), key=filled(2 * B * H, NO_KEY, np.uint64),
        src=scratch(2 * B * H, np.int32),
        prev=filled(2 * B * H, -1, np.int32), mark=filled(2 * B * H, 0, np.int32),
        cand=scratch(2 * B * H, np.int32), n_cand=full(2 * B, 0, np.int32),
        queue=scratch(2 * B * H, np.int32), size=np.int32(H),
    )  # fmt: skip
    survivors = Survivors(
        state=scratch(B * H, np.int32), ctx=scratch(B * H, np.int32),
        cost=scratch(B * H, np.float32),
        record=scratch(B * H, np.int32), n=full(B, 0, np.int32),
        arc_scan=scratch(B * (H + 1), np.int32),
    )  # fmt: skip
    kept = 2 * capacity if keep_survivors else 1
    records = Records(
        used=full(2, 0, np.int32), arc=scratch(2 * capacity, np.int32),
        prev=scratch(2 * capacity, np.int32), capacity=np.int32(capacity),
        keep=np.int32(keep_survivors), lane=scratch(kept, np.int32),
        state=scratch(kept, np.int32), ctx=scratch(kept, np.int32),
    )  # fmt: skip
    # frame -1 "ran", buffer 1 was last: the first chunk starts frame 0 in buffer 0
    info = cuda.mapped_array((2, frames_per_chunk + 3), np.int32)
    info[:] = 0
    control = Control(put(np.array([-1, 1, 1, 0], np.int32)), info)
    boosts = bundles.lane_boosts(p, None, put)
    return SearchBuffers(acoustics, boosts, lanes, tables, survivors, records, control)


# The graphs' device copies: per graph (dropped with it), its arrays and the arc costs of the
# last few option settings, keyed as `search.arc_costs` keys its host cache.
_GRAPHS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_GRAPHS_LOCK = threading.Lock()
_COSTS_PER_GRAPH = 4


@dataclass
class _DeviceGraph:
    graph: bundles.SearchGraph  # arc_cost None: it depends on the options
    arc_costs: dict = field(default_factory=dict)  # arc_cost_key -> device arc costs


def arc_cost_key(p) -> tuple:
    """What ``p.arc_cost`` is computed from besides the graph (`search.arc_costs`)."""
    o = p.options
    return float(o.blank_penalty), float(o.word_insertion_penalty), int(p.blank_ilabel)


def device_graph(p) -> bundles.SearchGraph:
    """``p``'s graph as a `bundles.SearchGraph` of device arrays (int32 scalars), uploaded once
    per graph, with the device copy of ``p``'s arc costs."""
    from numba import cuda

    key = arc_cost_key(p)
    with _GRAPHS_LOCK:
        cached = _GRAPHS.get(p.graph)
        fresh = cached is None or key not in cached.arc_costs
        if cached is None:
            graph = bundles.search_graph(p, put=cuda.to_device, index=np.int32)
            cached = _GRAPHS[p.graph] = _DeviceGraph(graph._replace(arc_cost=None))
            cached.arc_costs[key] = graph.arc_cost
        elif key not in cached.arc_costs:
            if len(cached.arc_costs) >= _COSTS_PER_GRAPH:
                del cached.arc_costs[next(iter(cached.arc_costs))]  # the oldest
            cached.arc_costs[key] = cuda.to_device(p.arc_cost)
        graph = cached.graph._replace(arc_cost=cached.arc_costs[key])
    if fresh:  # a pageable upload may still be in flight; the capture stream does not wait for it
        cuda.synchronize()
    return graph

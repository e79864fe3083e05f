"""What the threads of a parallel CPU search share or keep apart: the work counter they take
utterances from (`take_next`), and the state maps. State maps: the arrays of one int32 entry per
graph state, -1 between uses, that the CPU search recombines tokens through (`cpu_steps`) and
the lattice links nodes through (`lattice._links`). Each use sets entries and clears them again
before it returns, so the arrays are made once per graph and Python thread and reused: filling
one per call costs more than searching a short utterance on a large graph (0.13 ms for the
speech graph's 934k states, 1.2 ms for the full en-us TLG's 8.2 M). They are kept weakly, freed
with the graph or the thread.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["state_maps", "take_next"]


@intrinsic
def take_next(typingctx, counter):
    """``counter[0]``, incremented by one atomically (a fetch-and-add): the threads of a
    ``prange`` take their next item from it, so that none idles while another has a long queue
    (Numba's loops split their iterations statically, in contiguous blocks)."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None

    def codegen(context, builder, sig, args):
        array = context.make_array(sig.args[0])(context, builder, args[0])
        first = cgutils.get_item_pointer(context, builder, sig.args[0], array,
                                         [context.get_constant(types.intp, 0)])  # fmt: skip
        one = context.get_constant(types.int64, 1)
        return builder.atomic_rmw("add", first, one, "monotonic")

    return types.int64(counter), codegen


# graph -> {Python thread: (maps, graph states) int32}
_MAPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@contextmanager
def state_maps(graph, count: int = 1) -> Iterator[np.ndarray]:
    """At least ``count`` state maps of ``graph`` for the calling thread, all -1, as the rows of
    one array (one per Numba thread of a parallel search), for one use: a use that raises may
    leave entries set, so its maps are dropped (the next use makes new ones)."""
    per_thread = _MAPS.get(graph)
    if per_thread is None:
        per_thread = _MAPS[graph] = weakref.WeakKeyDictionary()
    thread = threading.current_thread()
    maps = per_thread.get(thread)
    if maps is None or maps.shape[0] < count:
        maps = per_thread[thread] = np.full((count, graph.num_states), -1, np.int32)
    try:
        yield maps
    except BaseException:
        per_thread.pop(thread, None)
        raise

"""Memory of the cuda backend: the GPU memory a batch needs (`cuda_memory_bytes`) and the largest
batch that fits in a budget (`max_cuda_batch_size`), sized from the options alone (no GPU needed
to ask), and `release_cuda_buffers` for the pinned host memory it keeps between calls."""

from __future__ import annotations

import math
import numbers
import sys

import numpy as np

from ...decoding_graph import DecodingGraph
from ...errors import OptionsError
from ..options import CtcBeamOptions

_INT32_RECORDS = 2**31 - 3  # record indices are int32: two buffers of 2 * B * H records + 2


def table_size(num_states: int, options: CtcBeamOptions, contexts: int = 1) -> int:
    """Slots of one utterance's recombination hash table (a power of two): twice the candidate
    capacity ``options.max_candidates`` (default ``max(2 * max_active, 256)``), but no more
    than needed for every token at once (each state in each of ``contexts`` context states: the
    most an utterance's boosted phrases give)."""
    cap = options.max_candidates or max(2 * options.max_active, 256)
    cap = min(cap, num_states * contexts)
    return 1 << max(4, (2 * cap - 1).bit_length())


def record_capacity(batch_size: int, H: int) -> int:
    """Records one chunk buffer holds: two worst-case frames (every slot of every table)."""
    return 2 * batch_size * H


def int32_records_fit(batch_size: int, H: int) -> bool:
    """Whether the search's two record buffers (and their two sentinels) stay within int32
    indices."""
    return 2 * record_capacity(batch_size, H) <= _INT32_RECORDS


def _per_utterance_and_fixed(graph: DecodingGraph, options: CtcBeamOptions, frames: int,
                             contexts: int, lattice: bool):  # fmt: skip
    H = table_size(graph.num_states, options, contexts)
    # two tables: token, key, source context, prev, mark, slot, queue
    tables = 2 * H * (8 + 8 + 4 + 4 + 4 + 4 + 4)
    survivors = H * (4 + 4 + 4 + 4) + (H + 1) * 4
    records = 2 * 2 * H * (4 + 4)  # per utterance's share of the two record buffers
    if lattice:  # each record's lane, state and context state too (`Records`)
        records += 2 * 2 * H * (4 + 4 + 4)
    log_probs = frames * (graph.num_tokens + 1) * 4  # float32 upload of host log-probs, maxima
    # the graph's arrays (`bundles.SearchGraph`): 5 of int32/float32 per arc, the two int64
    # offsets and the float32 final cost per state
    fixed = graph.num_arcs * (4 * 5) + (graph.num_states + 1) * 16 + graph.num_states * 4
    return tables + survivors + records + log_probs + 64, fixed


def _whole(name: str, value, low: int) -> int:
    """``value`` as an int (NumPy's too) of at least ``low``; else `OptionsError` naming it (a
    float batch size gave a float "largest batch")."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise OptionsError(f"{name} must be an integer >= {low}; got {value!r}")
    if value < low:
        raise OptionsError(f"{name} must be >= {low}; got {value}")
    return int(value)


def cuda_memory_bytes(
    graph: DecodingGraph, options: CtcBeamOptions | None = None, batch_size: int = 1,
    frames: int = 0, *, contexts: int = 1,
) -> int:  # fmt: skip
    """Device bytes ``decode_ctc(..., backend="cuda")`` allocates for ``batch_size``
    utterances: token tables, survivors, backpointer record buffers (with ``options.lattice_beam``
    each record's lane, state and context state as well) and the graph's arrays (uploaded once
    per graph), plus, with ``frames`` > 0, the float32 upload of log-probs given on the host
    (``frames`` per utterance, ``graph.num_tokens`` columns, and each frame's maximum; log-probs
    already on the GPU are read in place, with 4 bytes per frame for the maxima). ``contexts``:
    the most context states an utterance's boosted phrases give (`PhraseAutomaton.num_contexts`;
    1 for words alone), which can widen the tables of a graph with few states."""
    options = CtcBeamOptions() if options is None else options
    batch_size, frames = _whole("batch_size", batch_size, 0), _whole("frames", frames, 0)
    return search_bytes(graph, options, batch_size, frames, _whole("contexts", contexts, 1),
                        options.lattice_beam is not None)  # fmt: skip


def search_bytes(graph: DecodingGraph, options: CtcBeamOptions, batch_size: int, frames: int,
                 contexts: int, lattice: bool) -> int:  # fmt: skip
    """`cuda_memory_bytes` of a search that keeps every record's survivor (``lattice``) or not,
    whatever the options say (the driver's own sizing)."""
    per_utterance, fixed = _per_utterance_and_fixed(graph, options, frames, contexts, lattice)
    return batch_size * per_utterance + fixed


def max_cuda_batch_size(
    graph: DecodingGraph, options: CtcBeamOptions | None = None, *, memory_bytes: int,
    frames: int = 0, contexts: int = 1,
) -> int:  # fmt: skip
    """The largest batch whose `cuda_memory_bytes` fits in ``memory_bytes`` (e.g. the free
    memory of the GPU, less what the model keeps), within the search's int32 record indices;
    0 when not even the graph fits."""
    options = CtcBeamOptions() if options is None else options
    frames, contexts = _whole("frames", frames, 0), _whole("contexts", contexts, 1)
    if (
        isinstance(memory_bytes, bool)
        or not isinstance(memory_bytes, numbers.Real)
        or not (math.isfinite(memory_bytes) and memory_bytes >= 0)
    ):
        raise OptionsError(f"memory_bytes must be a number of bytes >= 0; got {memory_bytes!r}")
    memory_bytes = int(memory_bytes)  # (80e9 too)
    per_utterance, fixed = _per_utterance_and_fixed(
        graph, options, frames, contexts, options.lattice_beam is not None
    )
    H = table_size(graph.num_states, options, contexts)
    by_index = _INT32_RECORDS // (2 * record_capacity(1, H))
    return max(0, min((memory_bytes - fixed) // per_utterance, by_index))


def release_cuda_buffers() -> None:
    """Free the host memory the cuda backend keeps between calls for its backpointers: the
    pinned copies (they grow to the largest chunk of a batch: hundreds of MB for batches of
    hundreds) and the arrays the chunks are joined into (16 bytes per record).
    Buffers of calls running now stay until the next release."""
    records = sys.modules.get("wfstdecode.ctc.cuda.records")  # nothing kept if it never ran
    if records is not None:
        records.release_kept_buffers()

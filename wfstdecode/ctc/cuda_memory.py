"""GPU memory of the cuda backend, sized from the options alone (no GPU needed to ask): what a
batch needs (`cuda_memory_bytes`) and the largest batch that fits in a budget
(`max_cuda_batch_size`)."""

from __future__ import annotations

from ..decoding_graph import DecodingGraph
from ..errors import OptionsError
from .options import CtcBeamOptions

_INT32_RECORDS = 2**31 - 3  # record indices are int32: two buffers of 2 * B * H records + 2


def table_size(num_states: int, options: CtcBeamOptions) -> int:
    """Slots of one utterance's recombination hash table (a power of two): twice the candidate
    capacity ``options.max_candidates`` (default ``max(2 * max_active, 256)``), but no more
    than needed for every state of the graph at once."""
    cap = options.max_candidates or max(2 * options.max_active, 256)
    cap = min(cap, num_states)
    return 1 << max(4, (2 * cap - 1).bit_length())


def record_capacity(batch_size: int, H: int) -> int:
    """Records one chunk buffer holds: two worst-case frames (every slot of every table)."""
    return 2 * batch_size * H


def _per_utterance_and_fixed(graph: DecodingGraph, options: CtcBeamOptions, frames: int):
    H = table_size(graph.num_states, options)
    tables = 2 * H * (4 + 8 + 4 + 4 + 4 + 4)  # two tables: state, key, prev, mark, slot, queue
    survivors = H * (4 + 4 + 4) + (H + 1) * 4
    records = 2 * 2 * H * (4 + 4)  # per utterance's share of the two record buffers
    log_probs = frames * graph.num_tokens * 4  # float32 upload of host log-probs
    fixed = graph.num_arcs * (4 * 5) + (graph.num_states + 1) * 16  # the graph's arrays
    return tables + survivors + records + log_probs + 64, fixed


def cuda_memory_bytes(
    graph: DecodingGraph, options: CtcBeamOptions | None = None, batch_size: int = 1,
    frames: int = 0,
) -> int:  # fmt: skip
    """Device bytes ``decode_ctc(..., backend="cuda")`` allocates for ``batch_size``
    utterances: token tables, survivors, backpointer record buffers and the graph's arrays
    (uploaded once per graph), plus, with ``frames`` > 0, the float32 upload of log-probs given
    on the host (``frames`` per utterance; log-probs already on the GPU are read in place)."""
    options = CtcBeamOptions() if options is None else options
    if batch_size < 0 or frames < 0:
        raise OptionsError(f"batch_size and frames must be >= 0; got {batch_size}, {frames}")
    per_utterance, fixed = _per_utterance_and_fixed(graph, options, frames)
    return batch_size * per_utterance + fixed


def max_cuda_batch_size(
    graph: DecodingGraph, options: CtcBeamOptions | None, memory_bytes: int, frames: int = 0
) -> int:
    """The largest batch whose `cuda_memory_bytes` fits in ``memory_bytes`` (e.g. the free
    memory of the GPU, less what the model keeps), within the search's int32 record indices;
    0 when not even the graph fits."""
    options = CtcBeamOptions() if options is None else options
    per_utterance, fixed = _per_utterance_and_fixed(graph, options, frames)
    H = table_size(graph.num_states, options)
    by_index = _INT32_RECORDS // (2 * record_capacity(1, H))
    return max(0, min((memory_bytes - fixed) // per_utterance, by_index))

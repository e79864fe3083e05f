"""CTC WFST beam search: `decode_ctc` with `CtcBeamOptions`, per-utterance word boosting, and
`decode_npz` for emissions stored in ``.npz`` files or Kaldi matrix tables (the ``wfstdecode
decode`` command), and the
cuda backend's memory (`cuda_memory_bytes`, `max_cuda_batch_size`, `release_cuda_buffers`);
`clear_phrase_cache` forgets the phrase lists kept compiled between calls."""

from .cuda.memory import cuda_memory_bytes, max_cuda_batch_size, release_cuda_buffers
from .npz import (
    NpzDecodeResult,
    decode_npz,
    greedy_ctc_texts,
    load_emissions,
    load_log_probs_npz,
    read_reference_texts,
)
from .options import CtcBeamOptions
from .phrase_cache import clear_phrase_cache
from .search import ctc_lattices, decode_ctc
from .stream import CtcStreamDecoder, EndpointRule, EndpointRules
from .tuning import CpuTuning, CudaTuning

__all__ = [
    "CpuTuning",
    "CtcBeamOptions",
    "CtcStreamDecoder",
    "CudaTuning",
    "EndpointRule",
    "EndpointRules",
    "NpzDecodeResult",
    "clear_phrase_cache",
    "ctc_lattices",
    "cuda_memory_bytes",
    "decode_ctc",
    "decode_npz",
    "greedy_ctc_texts",
    "load_emissions",
    "load_log_probs_npz",
    "max_cuda_batch_size",
    "read_reference_texts",
    "release_cuda_buffers",
]

"""wfstdecode: WFST decoding for speech recognition.

Importing this package needs neither a GPU, CuPy, torch nor pynini; graph building
(``wfstdecode.graph``) imports pynini, transducer decoding (``wfstdecode.transducer``) torch.
"""

from . import _numba_cache  # noqa: F401  (first: a place for Numba's cache; see there)
from .ctc import (
    CpuTuning,
    CtcBeamOptions,
    CtcStreamDecoder,
    CudaTuning,
    EndpointRules,
    decode_ctc,
    decode_npz,
)
from .decoding_graph import DecodingGraph
from .errors import (
    BackendUnavailableError,
    DecodeInputError,
    DeviceMemoryError,
    GraphError,
    InputFileError,
    OptionsError,
    SymbolError,
    WfstDecodeError,
)
from .results import Hypothesis
from .symbols import SymbolTable

__all__ = [
    "BackendUnavailableError",
    "CpuTuning",
    "CtcBeamOptions",
    "CtcStreamDecoder",
    "CudaTuning",
    "DecodeInputError",
    "DecodingGraph",
    "DeviceMemoryError",
    "EndpointRules",
    "GraphError",
    "Hypothesis",
    "InputFileError",
    "OptionsError",
    "SymbolError",
    "SymbolTable",
    "WfstDecodeError",
    "decode_ctc",
    "decode_npz",
]
__version__ = "0.1.0"

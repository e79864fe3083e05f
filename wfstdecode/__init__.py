"""wfstdecode: WFST decoding for speech recognition.

Importing this package needs neither a GPU nor pynini; graph building (``wfstdecode.graph``)
imports pynini when used.
"""

from .decoding_graph import DecodingGraph
from .errors import (
    BackendUnavailableError,
    DecodeInputError,
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
    "DecodeInputError",
    "DecodingGraph",
    "GraphError",
    "Hypothesis",
    "InputFileError",
    "OptionsError",
    "SymbolError",
    "SymbolTable",
    "WfstDecodeError",
]
__version__ = "0.1.0"

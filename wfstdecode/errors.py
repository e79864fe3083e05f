"""Exceptions raised by wfstdecode.

Each one also inherits the builtin a caller would catch without knowing this package
(``GraphError`` is a ``ValueError``), so ``except ValueError`` keeps working.
"""


class WfstDecodeError(Exception):
    """Base class of every error raised on purpose by wfstdecode."""


class InputFileError(WfstDecodeError, ValueError):
    """A user-supplied file is malformed; the message names the file and the line."""

    def __init__(self, path, line_no: int | None, message: str):
        self.path = str(path)
        self.line_no = line_no
        where = f"{self.path}:{line_no}" if line_no is not None else self.path
        super().__init__(f"{where}: {message}")


class SymbolError(WfstDecodeError, ValueError):
    """A symbol table is inconsistent or a symbol is missing from it."""


class GraphError(WfstDecodeError, ValueError):
    """A graph is malformed or does not fit the arrays it is used with."""


class DecodeInputError(WfstDecodeError, ValueError):
    """Decoder inputs have the wrong rank, dtype, shape or values; ``utterance``: the batch
    index of the utterance at fault where one is (a caller with ids names it by its id)."""

    def __init__(self, message: str, utterance: int | None = None):
        super().__init__(message)
        self.utterance = utterance


class OptionsError(WfstDecodeError, ValueError):
    """An options dataclass holds an impossible value or combination."""


class BackendUnavailableError(WfstDecodeError, RuntimeError):
    """A backend was asked for explicitly but this machine cannot run it."""


class DeviceMemoryError(WfstDecodeError, MemoryError):
    """A search needs more GPU memory than is free; the message says how much and what to lower."""

"""Symbol tables in the k2 / icefall text format (``symbol id`` per line), disambig symbols.

Pure Python: usable without pynini, so decoders can map ids to words.
"""

from __future__ import annotations

import logging
import numbers
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator

from .errors import GraphError, InputFileError, SymbolError
from .safe_io import replacing
from .textfiles import quoted, text_lines

log = logging.getLogger(__name__)

EPSILON = "<eps>"
BLANK = "<blk>"
BACKOFF_DISAMBIG = "#0"
# Token names that spell nothing: the CTC blank (either usual name) and epsilon.
NOT_TOKENS = (BLANK, "<blank>", EPSILON)


def blank_symbol(tokens: SymbolTable) -> str | None:
    """The blank's name in a token table: ``<blk>``, else ``<blank>`` (NeMo's, hama's)."""
    return next((sym for sym in (BLANK, "<blank>") if sym in tokens), None)


# Graph labels are int32, and token labels (id + 1) are followed by the disambiguation labels.
MAX_ID = 2**31 - 2**20
_ID = re.compile(r"-?[0-9]{1,10}", re.ASCII)  # longer is out of range anyway
_MAX_ID_PER_SYMBOL, _MAX_ID_SLACK = 16, 2**16


def is_disambig(symbol: str) -> bool:
    """True for ``#0``, ``#1``, … — the auxiliary symbols that make L∘G determinizable."""
    return len(symbol) > 1 and symbol[0] == "#" and symbol[1:].isascii() and symbol[1:].isdigit()


def _odd_space(line: str) -> str:
    """What to add to a refusal of ``line`` when a space other than ' ' and tab split it (as
    wfstdecode splits every word list; Kaldi and OpenFst split symbol files at those two only)."""
    odd = sorted({c for c in line.strip() if c.isspace() and c not in " \t"})
    if not odd:
        return ""
    named = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, 'a space')}" for c in odd)
    return (
        f": it holds {named}, whitespace to wfstdecode (which splits words, transcripts "
        "too, at any whitespace), so no symbol may hold it"
    )


class SymbolTable:
    """A bijection between symbols and non-negative integer ids."""

    def __init__(self, symbols: Iterable[tuple[str, int]] = ()):
        self._id_of: dict[str, int] = {}
        self._symbol_of: dict[int, str] = {}
        self._next_id = 0  # the largest id + 1, kept as symbols are added (no scan per call)
        for symbol, idx in symbols:
            self.add(symbol, idx)

    @classmethod
    def from_list(cls, symbols: Iterable[str], start: int = 0) -> SymbolTable:
        return cls((s, i) for i, s in enumerate(symbols, start))

    @classmethod
    def read(cls, path: str | os.PathLike) -> SymbolTable:
        """Read a ``symbol id`` file (UTF-8, plain or gzip); a malformed line, a duplicate symbol
        or id, or an id out of range raises `InputFileError` naming the line."""
        table = cls()
        largest = (-1, 0)  # (id, line)
        for line_no, line in text_lines(path, "symbol table"):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 2 or not _ID.fullmatch(fields[1]):
                got = f"got {quoted(line)}{_odd_space(line)}"
                expected = f"expected 'symbol id' (id in [0, {MAX_ID}])"
                raise InputFileError(path, line_no, f"{expected}, {got}")
            try:
                idx = table.add(fields[0], int(fields[1]))
            except SymbolError as exc:
                raise InputFileError(path, line_no, str(exc)) from None
            if idx > largest[0]:
                largest = (idx, line_no)
        if not len(table):
            raise InputFileError(path, None, "symbol table is empty")
        if problem := table.sparse_ids():
            raise InputFileError(path, largest[1], problem)
        return table

    def sparse_ids(self) -> str | None:
        """Why the largest id is out of all proportion to the table (a corrupt file), or None.
        Ids index arrays (log-prob columns, label maps), so memory follows the largest id. Gaps
        are fine (a pruned table); an id far above the table's size is not."""
        largest = self.next_id - 1
        if largest < _MAX_ID_PER_SYMBOL * len(self) + _MAX_ID_SLACK:
            return None
        return (
            f"id {largest:,} is far above the table's {len(self):,} symbols (at most "
            f"{_MAX_ID_PER_SYMBOL} x symbols + {_MAX_ID_SLACK:,}); renumber the table"
        )

    def write(self, path: str | os.PathLike) -> None:
        """Write ``SYMBOL ID`` lines, whole or not at all (`safe_io.replacing`)."""
        text = "".join(f"{self._symbol_of[idx]} {idx}\n" for idx in sorted(self._symbol_of))
        with replacing(path) as f:
            f.write(text.encode("utf-8"))

    def add(self, symbol: str, idx: int | None = None) -> int:
        """Add ``symbol`` (at ``idx``, or after the largest id) and return its id."""
        if idx is None:
            idx = self.next_id
        if type(idx) is not int:  # (the usual case, checked first: a file's million lines)
            if isinstance(idx, bool) or not isinstance(idx, numbers.Integral):
                raise SymbolError(f"symbol {quoted(symbol)} has id {idx!r}: ids are integers")
            idx = int(idx)
        if not 0 <= idx <= MAX_ID:
            raise SymbolError(f"symbol {quoted(symbol)} has id {idx}: ids must be in [0, {MAX_ID}]")
        if not isinstance(symbol, str):
            raise SymbolError(f"symbol {symbol!r} is a {type(symbol).__name__}, not a str")
        if symbol.split() != [symbol]:  # empty, or whitespace in it
            raise SymbolError(f"symbol {quoted(symbol)} is empty or contains whitespace")
        # neither a NUL nor a lone surrogate is written and read back as it is
        if "\0" in symbol or not (symbol.isascii() or _utf8(symbol)):
            raise SymbolError(f"symbol {quoted(symbol)} holds a NUL or a lone surrogate")
        if symbol in self._id_of:
            raise SymbolError(
                f"duplicate symbol {quoted(symbol)} (ids {self._id_of[symbol]} and {idx})"
            )
        if idx in self._symbol_of:
            raise SymbolError(
                f"duplicate id {idx} ({quoted(self._symbol_of[idx])} and {quoted(symbol)})"
            )
        self._id_of[symbol] = idx
        self._symbol_of[idx] = symbol
        self._next_id = max(self._next_id, idx + 1)
        return idx

    @property
    def next_id(self) -> int:
        return self._next_id

    def id(self, symbol: str) -> int:
        try:
            return self._id_of[symbol]
        except KeyError:
            raise SymbolError(f"symbol {symbol!r} is not in the table") from None

    def symbol(self, idx: int) -> str:
        try:
            return self._symbol_of[idx]
        except KeyError:
            raise SymbolError(f"id {idx} is not in the table") from None

    def has_id(self, idx: int) -> bool:
        return idx in self._symbol_of

    def symbols_of(self, ids: Iterable[int]) -> list[str]:
        """The symbol of each id, looked up in bulk; an id not in the table raises."""
        try:
            return list(map(self._symbol_of.__getitem__, ids))
        except KeyError as exc:
            raise SymbolError(f"id {exc.args[0]} is not in the table") from None

    def get(self, symbol: str, default: int | None = None) -> int | None:
        return self._id_of.get(symbol, default)

    def ids(self, symbols: Iterable[str]) -> list[int | None]:
        """The id of each symbol (None for one not in the table), looked up in bulk."""
        return list(map(self._id_of.get, symbols))

    def __contains__(self, symbol: object) -> bool:
        return symbol in self._id_of

    def __len__(self) -> int:
        return len(self._id_of)

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return ((self._symbol_of[i], i) for i in sorted(self._symbol_of))

    def symbols(self) -> list[str]:
        return [s for s, _ in self]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SymbolTable) and self._id_of == other._id_of

    def __repr__(self) -> str:
        return f"SymbolTable({len(self)} symbols)"


def _utf8(symbol: str) -> bool:
    """Whether ``symbol`` can be written as UTF-8 (no lone surrogates)."""
    try:
        symbol.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def model_tokens(tokens: SymbolTable) -> SymbolTable:
    """The token table without the disambiguation symbols icefall's prepare_lang*.py append to
    tokens.txt: no model emits them (a graph build adds its own; a graph read from OpenFst has
    them removed), and kept they would give the graph more columns than the model's log-probs
    have. Refused between the model's tokens."""
    disambig = [(s, i) for s, i in tokens if is_disambig(s)]
    if not disambig:
        return tokens
    model = [(s, i) for s, i in tokens if not is_disambig(s)]
    symbol, first = min(disambig, key=lambda item: item[1])
    if any(i > first for _, i in model):
        raise GraphError(f"the token table holds the disambiguation symbol {symbol!r} (id {first}) "
                         "before some of the model's tokens: no model emits it, so the columns "
                         "would not be the model's; give the model's tokens only")  # fmt: skip
    log.warning("left out the token table's %d disambiguation symbols (%s, ids %d-%d): no model "
                "emits them; graphs have their own or none", len(disambig), symbol, first,
                max(i for _, i in disambig))  # fmt: skip
    return SymbolTable(model)

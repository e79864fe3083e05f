"""Checks shared by the decoders' readers of arrays they are given (CTC log-probs and lengths,
transducer lengths): what NumPy would read without complaint, and wrongly."""

from __future__ import annotations

import numpy as np

from .errors import DecodeInputError


def refuse_misread(given, name: str, integers: bool = False) -> None:
    """`DecodeInputError` for a masked array (NumPy drops the mask: masked frames would be
    decoded) and, where ``integers`` are wanted (lengths), a bool in a list (NumPy reads True
    as 1)."""
    if isinstance(given, np.ma.MaskedArray):
        raise DecodeInputError(f"{name} is a masked array, whose mask the search would ignore: "
                               f"pass its data (np.ma.getdata), with lengths for the frames "
                               f"that count")  # fmt: skip
    if integers and isinstance(given, (list, tuple)):
        flags = [i for i, n in enumerate(given) if isinstance(n, (bool, np.bool_))]
        if flags:
            raise DecodeInputError(f"{name} must be integers, not bools; got "
                                   f"{name}[{flags[0]}] = {given[flags[0]]!r}")  # fmt: skip

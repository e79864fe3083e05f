"""Transducer (RNN-T, TDT) decoding with PyTorch models supplied by the caller.

`greedy_decode` with `GreedyOptions`: frame-looping (the batched baseline), label-looping,
WIND windowed search, optionally as CUDA graphs. `beam_decode` with `BeamOptions`: standard,
token-wise, MAES, ALSD and WIND beam searches, batched (`beam/`). The model protocol is in
`model.py`; `rnnt_loss` / `tdt_loss` train such models (plain PyTorch, autograd for the
gradient).
"""

from .beam import BeamOptions, beam_decode, beam_reference
from .greedy import greedy_decode
from .loss import rnnt_loss, tdt_loss
from .model import TransducerModel
from .options import GreedyOptions
from .reference import greedy_reference

__all__ = [
    "BeamOptions",
    "GreedyOptions",
    "TransducerModel",
    "beam_decode",
    "beam_reference",
    "greedy_decode",
    "greedy_reference",
    "rnnt_loss",
    "tdt_loss",
]

"""Transducer (RNN-T, TDT) decoding with PyTorch models supplied by the caller.

`greedy_decode` with `GreedyOptions`: frame-looping (the batched baseline), label-looping,
WIND windowed search, optionally as CUDA graphs. The model protocol is in `model.py`.
"""

from .greedy import greedy_decode
from .model import TransducerModel
from .options import GreedyOptions
from .reference import greedy_reference

__all__ = ["GreedyOptions", "TransducerModel", "greedy_decode", "greedy_reference"]

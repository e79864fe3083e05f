"""What every backend receives (`SearchProblem`) and returns (`RawResult`): the backend-neutral
inputs and outputs of the CTC WFST beam search. Built only by `search.py`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..decoding_graph import DecodingGraph
from .boost import BoostTables
from .options import CtcBeamOptions

# RawResult.status bits
NO_FINAL = 1  # no surviving token was in a final state: best partial path returned
DIED = 2  # every token was pruned (or had infinite cost) at ``died_frame``


@dataclass(frozen=True)
class SearchProblem:
    """Inputs of one batched search, already validated and converted.

    ac:        float32 (B, T, V) acoustic costs, ``-acoustic_scale * log_probs`` (float32 product);
               None when the log-probs stay on the GPU (cuda backend only).
    device_lp: the caller's (B, T, V) log-probs as a Numba device view when they stay on the
               GPU, else None; their costs are ``float32(log_prob) * neg_scale``.
    neg_scale: float32 ``-acoustic_scale``.
    lengths:   int64 (B,) frames per utterance.
    arc_cost:  float32 (A,) static cost of each arc: ``weight`` (+ ``blank_penalty`` on blank
               arcs) (+ ``word_insertion_penalty`` on arcs with an output word), in that order,
               in float32.
    beam:      float32.
    """

    ac: np.ndarray | None
    lengths: np.ndarray
    graph: DecodingGraph
    arc_cost: np.ndarray
    boosts: BoostTables
    options: CtcBeamOptions
    blank_ilabel: int
    device_lp: object = None

    @property
    def neg_scale(self) -> np.float32:
        return np.float32(-self.options.acoustic_scale)

    def acoustic_costs(self, b, t, k) -> np.ndarray:
        """float32 acoustic costs at ``(b[i], t[i], k[i])``, wherever the log-probs live."""
        if self.ac is not None:
            return self.ac[b, t, k]
        from ._cuda_inputs import gather_acoustic_costs

        return gather_acoustic_costs(self.device_lp, self.neg_scale, b, t, k)

    @property
    def batch_size(self) -> int:
        return len(self.lengths)

    @property
    def beam(self) -> np.float32:
        return np.float32(self.options.beam)


@dataclass(frozen=True)
class RawResult:
    """Backend output for one utterance.

    paths:      best first, up to ``nbest``: ``(arcs, frames, cost)`` with ``arcs`` int32 arc
                indices along the path, ``frames`` int32 the log-prob frame each arc belongs to
                (an emitting arc consumed that frame; an epsilon arc follows it in the same frame;
                -1 for epsilon arcs before the first frame), ``cost`` the float32 search cost
                (final cost included when the path ends in a final state).
    status:     bits NO_FINAL, DIED.
    died_frame: the frame at which the search died (status DIED), else -1.
    notes:      what the backend had to change (e.g. a beam tightened on overflow), for every
                hypothesis of the utterance.
    """

    paths: list
    status: int = 0
    died_frame: int = -1
    notes: tuple = ()

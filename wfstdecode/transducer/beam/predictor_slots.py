"""The predictor of the compiled CPU beam searches ("alsd", "wind", and the frame-synchronous
"standard", "tokenwise", "maes"), kept in slots: each hypothesis row names the slot that holds
its predictor output and state.

A row that takes another row's predictor (a hypothesis continuing its parent) takes that row's
slot number: nothing is copied. A row that appends a label runs the predictor from its slot into
a free one. A slot no row names is free; there are twice as many slots as rows, so even a step
that feeds every row finds enough. Copying rows instead (each hypothesis its own predictor row,
moved whenever the beam reorders) and starting the predictor on every row cost ALSD and WIND
6-12 % of their time, MAES ~20 % (`bench/transducer_beam.md`). Reusing the slot of a label
history fed before (17-29 % of the rows fed repeat one, on the flite set) was tried: its
bookkeeping in Python cost more than the predictor rows it saved.

Models that pick their state's rows themselves (`ModelAdapter.own_state_rows`: the predictor
then runs on every row at once) keep one row per hypothesis: `take` gathers the tables.
"""

from __future__ import annotations

import numpy as np
import torch

from ..model import clone_state, index_state, state_rows, write_state_rows_
from .rows import compacts, predict_masked, start_predictor

__all__ = ["PredictorSlots"]


class PredictorSlots:
    """The predictor outputs and states of ``n_rows`` hypothesis rows (host row numbers in
    every call), all starting after the start-of-sequence blank."""

    def __init__(self, adapter, n_rows: int):
        self.adapter = adapter
        self.indirect = compacts(adapter, torch.device("cpu"))
        if not self.indirect:  # one row per hypothesis
            self.pred, self.state = start_predictor(adapter, n_rows)
            self.slot = np.arange(n_rows)
            return
        # every row starts in slot 0, the predictor run once; the free slots hold anything
        first = torch.zeros(1, dtype=torch.long)
        pred, state = start_predictor(adapter, 1)
        self.pred = pred.new_empty((2 * n_rows, pred.shape[1]))
        self.pred[0] = pred[0]
        self.state = clone_state(adapter.model.init_state(2 * n_rows, torch.device("cpu")))
        write_state_rows_(self.state, adapter.state_batch_dim, first, state)
        self.slot = np.zeros(n_rows, np.int64)

    def output(self, rows: np.ndarray) -> torch.Tensor:
        """The predictor outputs of ``rows``, one tensor row each."""
        return self.pred.index_select(0, torch.from_numpy(self.slot[rows]))

    def take(self, parent: np.ndarray) -> None:
        """Row ``i`` takes row ``parent[i]``'s predictor output and state, for every row."""
        if self.indirect:
            self.slot = self.slot[parent]
        elif (parent != self.slot).any():
            rows = torch.from_numpy(np.ascontiguousarray(parent))
            model = self.adapter.model
            self.pred, self.state = (
                self.pred.index_select(0, rows),
                index_state(model, self.state, rows),
            )

    def feed(self, rows: np.ndarray, labels: np.ndarray) -> None:
        """Rows ``rows`` (distinct) append ``labels``: the predictor runs from their states."""
        if rows.size == 0:
            return
        adapter = self.adapter
        labels = torch.from_numpy(labels.copy())
        if not self.indirect:  # every row runs; those not fed keep theirs
            where = torch.from_numpy(rows.copy())
            n = self.pred.shape[0]
            mask = torch.zeros(n, dtype=torch.bool).index_fill(0, where, True)
            every = torch.full((n,), adapter.blank_id, dtype=torch.long).index_copy(
                0, where, labels
            )
            self.pred, self.state = predict_masked(adapter, self.pred, self.state, mask, every)
            return
        named = np.zeros(self.pred.shape[0], np.bool_)
        named[self.slot] = True
        free = np.flatnonzero(~named)[: rows.size]
        dim = adapter.state_batch_dim
        new_pred, new_state = adapter.predict(
            labels, state_rows(self.state, dim, torch.from_numpy(self.slot[rows]))
        )
        to = torch.from_numpy(free)
        self.pred.index_copy_(0, to, new_pred)
        write_state_rows_(self.state, dim, to, new_state)
        self.slot[rows] = free

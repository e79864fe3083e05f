"""Beam hypotheses of a batch as fixed-shape rows: utterance b owns rows b*K .. b*K+K-1.

`BeamRows` keeps what every beam search carries per hypothesis — the token history
(`BatchedSequences`: labels, timestamps, TDT durations; the scores), a hash of the labels for
recombination, the predictor output and state — and moves it as one: `reorder_` makes each row
a copy of a parent row, `emit_` appends a label where a mask says and runs the predictor for
those rows only. Nothing here reads a device value on the host except where it says so.
"""

from __future__ import annotations

import math

import torch

from ...buffers import BatchedSequences
from ...errors import DecodeInputError
from ...results import Hypothesis
from ..model import (
    ModelAdapter,
    clone_state,
    copy_state_,
    index_state,
    select_state,
    write_state_rows_,
)

__all__ = [
    "HASH_BASE",
    "BeamRows",
    "best_distinct",
    "best_hypotheses",
    "compacts",
    "encoder_rows",
    "non_finite_logits",
    "predict_masked",
    "predict_rows",
    "recombine",
    "start_predictor",
    "traced_hypotheses",
]

# On CPU the predictor runs on the emitting rows only; False runs it on all rows, as on CUDA
# (the tests' proof that the loop bodies never read a device value on the host).
COMPACT_ON_CPU = True

# Rolling hash of a label sequence: h' = h * HASH_BASE + label + 1 (int64, wrapping). Two
# sequences recombine only if their hashes and lengths agree.
HASH_BASE = 1_000_003


class BeamRows:
    def __init__(self, adapter: ModelAdapter, batch: int, width: int, device, tdt: bool):
        self.adapter, self.B, self.K = adapter, batch, width
        n = batch * width
        self.n = n
        fields = {"labels": torch.long, "timestamps": torch.long}
        if tdt:
            fields["durations"] = torch.long
        self.seqs = BatchedSequences(n, 16, fields, device, score_dtype=torch.float64)
        self.hash = torch.zeros(n, dtype=torch.long, device=device)
        # Only the first row of each utterance starts alive (the empty hypothesis).
        first = torch.arange(n, device=device) % width == 0
        self.seqs.scores = torch.where(first, 0.0, -math.inf).to(torch.float64)
        self.pred, self.state = start_predictor(adapter, n, device)
        # Labels appended but not yet fed to the predictor (`emit_(..., lazy=True)`).
        self.pending = torch.zeros(n, dtype=torch.bool, device=device)

    @property
    def scores(self) -> torch.Tensor:
        return self.seqs.scores

    @scores.setter
    def scores(self, value: torch.Tensor) -> None:
        self.seqs.scores = value

    @property
    def lengths(self) -> torch.Tensor:
        return self.seqs.lengths

    def reorder_(self, rows: torch.Tensor) -> None:
        """Row i becomes a copy of row ``rows[i]``."""
        self.seqs.reorder_(rows)
        self.hash = self.hash.index_select(0, rows)
        self.pred = self.pred.index_select(0, rows)
        self.state = index_state(self.adapter.model, self.state, rows)
        self.pending = self.pending.index_select(0, rows)

    def emit_(self, mask: torch.Tensor, labels: torch.Tensor, lazy=False, **fields) -> None:
        """Append ``labels`` (and the other fields) where ``mask`` and feed them to the
        predictor — or, ``lazy``, only mark them pending (`feed_pending_` feeds them when the
        row is about to be expanded: WIND creates many hypotheses it never expands)."""
        self.seqs.append_(mask, labels=labels, **fields)
        self.hash = torch.where(mask, self.hash * HASH_BASE + labels + 1, self.hash)
        self.pending |= mask
        if not lazy:
            self.feed_pending_(torch.arange(self.n, device=mask.device))

    def feed_pending_(self, rows: torch.Tensor) -> None:
        """Run the predictor on the pending labels of ``rows``.

        On CPU the predictor runs on the pending rows only (finding them reads the mask);
        on CUDA, or for a model with its own state layout, it runs on all ``rows`` and the
        pending ones are kept (`torch.where`): no host sync.
        """
        last = (self.seqs.lengths - 1).clamp(min=0).unsqueeze(1)
        if COMPACT_ON_CPU and compacts(self.adapter, rows.device):
            rows = rows[self.pending[rows]]  # (a host sync: fine on CPU)
            if rows.numel() == 0:
                return
            labels = self.seqs["labels"].gather(1, last).squeeze(1).index_select(0, rows)
            self.pred, self.state = predict_rows(self.adapter, self.pred, self.state, rows, labels)
            self.pending = self.pending.index_fill(0, rows, False)
            return
        labels = self.seqs["labels"].gather(1, last).squeeze(1)
        mask = torch.zeros_like(self.pending).index_fill(0, rows, True) & self.pending
        self.pred, self.state = predict_masked(self.adapter, self.pred, self.state, mask, labels)
        self.pending = self.pending & ~mask

    def results(self, options, notes, first: int, count: int) -> list[list[Hypothesis]]:
        """Each utterance's ``nbest`` best distinct label sequences among its rows
        ``first .. first + count - 1`` (the finished ones); one host copy."""
        lengths, scores, fields = self.seqs.to_lists()
        per_utt = [range(b * self.K + first, b * self.K + first + count) for b in range(self.B)]
        return best_hypotheses(per_utt, lengths, scores, fields, options, notes)


def best_hypotheses(per_utt, lengths, scores, fields, options, notes) -> list[list[Hypothesis]]:
    """Per utterance, the ``options.nbest`` best distinct label sequences among the entries
    ``per_utt[b]`` (indices into ``lengths``, ``scores`` and each of ``fields``' lists: labels,
    timestamps, TDT durations; -inf scores are empty slots), ranked by score or, with
    ``length_norm``, score per label."""
    out = []
    for b, entries in enumerate(per_utt):
        best: dict[tuple, int] = {}
        for i in entries:
            if scores[i] == -math.inf:
                continue  # an empty slot
            tokens = tuple(fields["labels"][i])
            if tokens not in best or scores[i] > scores[best[tokens]]:
                best[tokens] = i
        if not best:  # (the tensor searches drop NaN rows too: either cause is named)
            raise no_finished_path(b)
        if any(not math.isfinite(scores[i]) for i in best.values()):
            raise non_finite_logits(b)

        def rank(i: int) -> float:
            return scores[i] / max(lengths[i], 1) if options.length_norm else scores[i]

        chosen = sorted(best.values(), key=rank, reverse=True)[: options.nbest]
        durs = fields.get("durations")
        out.append(
            [
                Hypothesis(
                    tokens=tuple(fields["labels"][i]),
                    timestamps=tuple(fields["timestamps"][i]),
                    durations=tuple(durs[i]) if durs else (),
                    score=scores[i],
                    acoustic_score=scores[i],
                    notes=tuple(notes),
                )
                for i in chosen
            ]
        )
    return out


def traced_hypotheses(traced, offsets, names, scores, utterances, B, options, notes):
    """`best_hypotheses` from label histories traced back from the compiled searches' finished
    entries: entry i's ``names`` (labels, timestamps[, durations]) are the first rows of
    ``traced`` over columns ``offsets[i] .. offsets[i+1]``; ``scores[i]`` its score and
    ``utterances[i]`` its utterance (of B)."""
    rows = traced.tolist()
    fields = {
        name: [rows[f][offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
        for f, name in enumerate(names)
    }
    per_utt = [[] for _ in range(B)]
    for i, b in enumerate(utterances):
        per_utt[b].append(i)
    sizes = [offsets[i + 1] - offsets[i] for i in range(len(offsets) - 1)]
    return best_hypotheses(per_utt, sizes, scores, fields, options, notes)


def encoder_rows(adapter, enc):
    """The encoder output (B, T, J) projected once (`ModelAdapter.encoder`), as B*T rows: row
    ``b*T + t`` is frame t of utterance b (no rows when there are no frames)."""
    projected = adapter.encoder(enc)
    return projected.reshape(-1, projected.shape[-1])


def non_finite_logits(utterance: int) -> DecodeInputError:
    return DecodeInputError(
        f"model.joint returned non-finite logits (NaN, +inf, or -inf for every token) in the "
        f"beam search of utterance {utterance}, from finite encoder output: check the model's "
        "predictor, projections and joint"
    )


def no_finished_path(utterance: int) -> DecodeInputError:
    return DecodeInputError(
        f"no hypothesis of the beam search of utterance {utterance} reached its last frame: "
        "every path went through a -inf log-probability (e.g. a blank the joint made "
        "impossible at a frame), or model.joint returned non-finite logits (NaN, +inf, or -inf "
        "for every token); check the model's predictor, projections and joint"
    )


def compacts(adapter, device) -> bool:
    """Whether the predictor can run on some rows only: on CPU (picking them reads a mask on
    the host) and for states `index_state` / `_index_copy` understand."""
    return device.type == "cpu" and not adapter.own_state_rows


def predict_rows(adapter, pred, state, rows, labels):
    """``pred`` and ``state`` after feeding ``labels`` to the predictor at the rows ``rows``
    (1-D; the predictor runs on those rows only)."""
    model = adapter.model
    new_pred, new_state = adapter.predict(labels, index_state(model, state, rows))
    return pred.index_copy(0, rows, new_pred), _index_copy(model, state, rows, new_state)


def predict_masked(adapter, pred, state, mask, labels):
    """The same where ``mask``, ``labels`` one per row: the predictor runs on every row and the
    others keep theirs (`torch.where`; no host sync)."""
    new_pred, new_state = adapter.predict(labels, state)
    pred = torch.where(mask.unsqueeze(1), new_pred, pred)
    return pred, select_state(adapter.model, mask, new_state, state)


def start_predictor(adapter, n, device=None):
    """The predictor's output and state for ``n`` rows after the start-of-sequence blank (on
    the CPU unless ``device``), as tensors of the search's own (the compiled searches write
    into them), the state's shapes checked against ``init_state``'s."""
    device = torch.device("cpu") if device is None else device
    blank = torch.full((n,), adapter.blank_id, dtype=torch.long, device=device)
    init = adapter.model.init_state(n, device)
    pred, state = adapter.predict(blank, init)
    own = clone_state(init)
    copy_state_(own, state)
    return pred.clone(), own


def _index_copy(model, state, rows, sub):
    """A copy of ``state`` with rows ``rows`` replaced by ``sub`` (shapes checked)."""
    out = clone_state(state)
    write_state_rows_(out, getattr(model, "state_batch_dim", 0), rows, sub)
    return out


_MIX = -7046029254386353131  # 0x9E3779B97F4A7C15 (the golden-ratio constant) as an int64


def recombine(values, keys, merge: str, vectors=None):
    """Recombine hypotheses with equal keys: each group is represented by its best member
    (ties: the earlier), scored by the best ("max": Viterbi) or the log-sum-exp ("sum") of the
    group; the other members get -inf.

    values: (B, M) scores (-inf: none); keys: tuple of (B, M) integer tensors that together
    identify a hypothesis. Two stable sorts (by score, then by key) put each group together,
    best member first: O(M log M), where comparing all pairs would be O(M^2).

    vectors ("sum" only): (B, M, W) log masses whose log-sum-exp over W is ``values`` (TDT:
    where each hypothesis lands); returns ``(scores, vectors)``, each group's vectors summed
    position by position at its representative.
    """
    B, M = values.shape
    dev = values.device
    key = torch.zeros_like(keys[0])
    for part in keys:  # one int64 per hypothesis (a collision merges two: ~M^2 / 2^64)
        key = key * _MIX + part
    by_score = values.argsort(dim=1, descending=True, stable=True)
    key_sorted, by_key = key.gather(1, by_score).sort(dim=1, stable=True)
    order = by_score.gather(1, by_key)  # positions grouped by key, best of each group first
    first = torch.ones(B, M, dtype=torch.bool, device=dev)
    first[:, 1:] = key_sorted[:, 1:] != key_sorted[:, :-1]
    ordered = values.gather(1, order)
    group = first.long().cumsum(1) - 1  # group index of each sorted position
    if merge == "sum":
        ordered = _group_logsumexp(ordered.unsqueeze(2), group).squeeze(2)
    kept = torch.where(first, ordered, -math.inf)
    scores = torch.full_like(values, -math.inf).scatter(1, order, kept)
    if vectors is None:
        return scores
    if merge != "sum":
        raise ValueError("vectors are summed: merge must be 'sum'")
    W = vectors.shape[2]
    at = order.unsqueeze(2).expand(B, M, W)
    summed = _group_logsumexp(vectors.gather(1, at), group)
    summed = torch.where(first.unsqueeze(2), summed, -math.inf)
    return scores, torch.full_like(vectors, -math.inf).scatter(1, at, summed)


def _group_logsumexp(ordered, group):
    """(B, M, W): each position's log-sum-exp over its group (``group``: (B, M), groups
    numbered from 0 along M), one column of W at a time, -inf for empty sums."""
    B, M, W = ordered.shape
    index = group.unsqueeze(2).expand(B, M, W)
    peak = torch.full_like(ordered, -math.inf).scatter_reduce(1, index, ordered, "amax")
    base = peak.gather(1, index)
    safe = torch.where(base > -math.inf, base, 0.0)
    mass = torch.zeros_like(ordered).scatter_add(1, index, (ordered - safe).exp())
    total = (mass.log() + torch.where(peak > -math.inf, peak, 0.0)).gather(1, index)
    return torch.where(base > -math.inf, total, -math.inf)


def best_distinct(values, keys, k: int, merge: str):
    """`recombine`, then the ``k`` best per utterance: (B, k) scores, best first, and their
    positions in M."""
    return recombine(values, keys, merge).topk(k, dim=1)

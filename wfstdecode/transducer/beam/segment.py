"""Batched frame-synchronous beam search with prefix merging: "standard", "tokenwise", "maes",
for B utterances x (K done + E active) hypotheses in fixed-shape rows (`BeamRows`).

Utterance b owns rows b*R .. b*R+R-1, R = K + E: the first K hold the hypotheses that finished
the current segment with a blank ("done", merged by log-sum-exp, the K best kept), the other E
the hypotheses still expanding in it ("active"). Per segment of S frames (S = 1 except for
"tokenwise"), rounds of (`reference._segment_search` is the same per utterance):
  1. one joint call for every active hypothesis and every frame of the segment;
  2. `_expansions`: Eq. 3-7 of the token-wise paper on those log-probs — ``reach[t]``, the
     probability of the hypothesis with blanks up to frame t; its blank expansion (to the
     segment's end) and its label expansions (summed over the frame of emission);
  3. `_merge_done_`: blank expansions merge into the done rows (same labels: log-sum-exp, the
     better contribution's timestamps), the K best stay;
  4. `_expand_`: the E best label expansions that beat the K-th done score become the active
     rows and run the predictor. The last round takes blanks only.
One host read per round (whether any hypothesis is still active).

TDT (segments of one frame): a done row holds ``ahead``, its log mass landing on each of the
next frames (`Landing`: a token's duration says where; RNN-T is the case of one frame, the
next), scored by their log-sum-exp; a frame starts from the mass that lands on it, and a label
expansion's mass with duration 0 stays active while the rest lands ahead among the done rows.
"""

from __future__ import annotations

import math

import torch

from ..programs import host_flag
from .rows import BeamRows, recombine

__all__ = ["segment_search"]


def segment_search(adapter, enc, lengths, options, vocab, notes):
    B, T, _ = enc.shape
    K, E, S = options.beam_size, options.expansions, options.segment_for(T)
    dev = enc.device
    land = Landing(options.durations, dev, options.landing_width(T))
    rows = BeamRows(adapter, B, K + E, dev, tdt=land.tdt)
    # The done rows' log mass landing on each of the next frames (RNN-T: one, the next).
    ahead = torch.full((B, K, land.width), -math.inf, dtype=torch.float64, device=dev)
    ahead[:, 0, 0] = 0.0  # the empty hypothesis, at frame 0
    enc_p = adapter.encoder(enc)
    for start in range(0, T, S):
        frames = start + torch.arange(S, device=dev)
        valid = frames < lengths.unsqueeze(1)  # (B, S)
        enc_seg = enc_p[:, frames.clamp(max=T - 1)]  # (B, S, J)
        reach_from, ahead = _start_segment_(rows, ahead, K, E, S, lengths > start)
        for round_ in range(options.rounds + 1):
            live = rows.scores.view(B, -1)[:, K:] > -math.inf  # (B, E)
            if not host_flag(live.any()):
                break
            lp, lpd = _log_probs(adapter, rows, K, enc_seg, valid, vocab, land)
            blank_land = land.of(lpd, land.blank)  # (B, E, width + 1)
            blank_score, label_score, emit = _expansions(lp, reach_from, adapter.blank_id)
            blank_score = torch.where(live, blank_score, -math.inf)
            ahead = _merge_done_(rows, ahead, K, blank_score.unsqueeze(2) + blank_land[..., 1:])
            if round_ == options.rounds:
                break
            label_score = torch.where(live.unsqueeze(2), label_score, -math.inf)
            if options.gamma != math.inf:  # MAES: labels within gamma of the best expansion
                top = torch.maximum(label_score.amax(2), blank_score)
                near = label_score >= (top - options.gamma).unsqueeze(2)
                label_score = torch.where(near, label_score, -math.inf)
            reach_from, picked = _expand_(rows, K, label_score, emit, start, lpd, land)
            if land.tdt:  # the mass that lands on a later frame joins the done rows
                scores = rows.scores.view(B, K + E)
                score, kth_done = scores[:, K:], scores[:, :K].amin(1, keepdim=True)
                ahead = _merge_done_(rows, ahead, K, score.unsqueeze(2) + picked[..., 1:])
                # duration 0: still active, while that mass alone beats the K-th done score
                stay = reach_from + picked[..., :1]
                kept = ((score > -math.inf) & (stay[..., 0] > kth_done)).unsqueeze(2)
                reach_from = torch.where(kept, stay, -math.inf)
                scores = rows.scores.view(B, K + E)
                rows.scores = torch.cat([scores[:, :K], reach_from[..., 0]], 1).view(-1)
    return rows.results(options, notes, first=0, count=K)


class Landing:
    """Where an emitted label and a blank land: log-probs over the frames ``0 .. width`` ahead
    of the one they are emitted at (0: the same frame; `reference._landing`). TDT: from the
    duration head's log-probs (a blank moves at least one frame); RNN-T: a label stays, a
    blank moves one frame. A duration beyond ``width`` (`BeamOptions.landing_width`: at most
    the batch's T) lands past the end of every utterance from any frame, as ``width`` does."""

    def __init__(self, durations, device, width):
        self.tdt = durations is not None
        self.durations = None if durations is None else torch.tensor(durations, device=device)
        self.width = width
        offsets = torch.arange(self.width + 1, device=device)
        if self.tdt:  # (D, width + 1): 0 where duration d lands, -inf elsewhere
            landed = self.durations.clamp(max=self.width)
            lands = landed.unsqueeze(1) == offsets
            blank_lands = landed.clamp(min=1).unsqueeze(1) == offsets
        else:
            lands, blank_lands = (offsets == 0).unsqueeze(0), (offsets == 1).unsqueeze(0)
        self.label = torch.where(lands, 0.0, -math.inf).double()
        self.blank = torch.where(blank_lands, 0.0, -math.inf).double()

    def of(self, lpd, lands):
        """The landings (..., width + 1) of a label (``lands``: ``self.label``) or a blank
        (``self.blank``) for duration log-probs ``lpd`` (..., D); RNN-T (``lpd`` None): the
        fixed ones. One at a time: each is a few kernels on a GPU, where the loop is launch-
        bound."""
        if lpd is None:
            return lands[0]
        return _logsumexp(lpd.unsqueeze(-1) + lands, -2)


def _start_segment_(rows: BeamRows, ahead, K, E, S, in_segment):
    """The done rows' mass landing on the segment's first frame becomes the active rows
    (utterances that have frames in the segment); the rest moves one frame closer. Returns the
    active rows' emission-frame log-probs, all mass on the segment's first frame, and the done
    rows' new ``ahead``."""
    B, dev = rows.B, in_segment.device
    slots = torch.arange(K, device=dev)
    order = torch.cat([slots, slots, torch.zeros(E - K, dtype=torch.long, device=dev)])
    rows.reorder_((torch.arange(B, device=dev) * (K + E)).unsqueeze(1).add(order).view(-1))
    starts = in_segment.view(B, 1, 1)
    arriving = torch.where(starts[..., 0], ahead[..., 0], -math.inf)  # (B, K)
    active = torch.full((B, E), -math.inf, dtype=torch.float64, device=dev)
    active[:, :K] = arriving
    later = torch.cat([ahead[..., 1:], torch.full_like(ahead[..., :1], -math.inf)], 2)
    ahead = torch.where(starts, later, ahead)
    rows.scores = torch.cat([_logsumexp(ahead, 2), active], 1).view(-1)
    reach_from = torch.full((B, E, S), -math.inf, dtype=torch.float64, device=dev)
    reach_from[:, :, 0] = active
    return reach_from, ahead


def _log_probs(adapter, rows: BeamRows, K, enc_seg, valid, vocab, land):
    """Token log-probs (B, E, S, V) of the active rows at the segment's frames, and TDT's
    duration log-probs at its one frame (B, E, D; None for RNN-T); past an utterance's end a
    frame passes everything through as blank (log-prob 0), its duration log-probs 0 (not the
    NaN that NaN padding gives: the rows' -inf plus NaN would be NaN)."""
    B, S = valid.shape
    pred = rows.pred.view(B, rows.K, -1)[:, K:]  # (B, E, J)
    E, J = pred.shape[1], pred.shape[2]
    enc_rows = enc_seg.unsqueeze(1).expand(B, E, S, enc_seg.shape[-1]).reshape(B * E * S, -1)
    pred_rows = pred.unsqueeze(2).expand(B, E, S, J).reshape(B * E * S, J)
    logits = adapter.joint(enc_rows, pred_rows).view(B, E, S, -1).double()
    lp = logits[..., :vocab].log_softmax(-1)
    lpd = None
    if land.tdt:  # (past the end: finite, whatever the padding gave; no row is live there)
        lpd = torch.where(valid[:, :1, None], logits[:, :, 0, vocab:].log_softmax(-1), 0.0)
    is_blank = torch.arange(vocab, device=lp.device) == adapter.blank_id
    padding = torch.where(is_blank, 0.0, -math.inf).to(lp.dtype)
    return torch.where(valid.view(B, 1, S, 1), lp, padding), lpd


def _expansions(lp, reach_from, blank):
    """Eq. 3-7: the blank expansion (B, E), the label expansions (B, E, V) and the label
    emission log-probs by frame (B, E, S, V). ``reach[t]``: the hypothesis with its last label
    at some frame <= t and blanks from there to t (exclusive)."""
    S = lp.shape[2]
    blank_lp = lp[..., blank]
    # reach[t] = reach[t-1] + blank[t-1] (+) reach_from[t], frame by frame (S is small): the
    # paper's logcumsumexp of reach_from - cumsum(blank) is NaN after a -inf blank log-prob
    reach = [reach_from[..., 0]]
    for t in range(1, S):
        reach.append(torch.logaddexp(reach[-1] + blank_lp[..., t - 1], reach_from[..., t]))
    reach = torch.stack(reach, -1)
    blank_score = reach[..., -1] + blank_lp[..., -1]
    emit = reach.unsqueeze(-1) + lp
    label_score = _logsumexp(emit, 2)
    if S == 1:  # a view of emit, which is returned: the blank's column is overwritten below
        label_score = label_score.clone()
    label_score[..., blank] = -math.inf
    return blank_score, label_score, emit


def _merge_done_(rows: BeamRows, ahead, K, landing) -> torch.Tensor:
    """Merge the active rows' contributions — ``landing`` (B, E, width): log mass landing on
    each of the next frames — into the done rows: equal labels sum frame by frame, the
    best-scoring contribution stays as the representative; the K best remain done. Returns the
    done rows' new ``ahead``."""
    B, R = rows.B, rows.K
    scores = rows.scores.view(B, R)
    vectors = torch.cat([ahead, landing], 1)
    keys = (rows.hash.view(B, R), rows.lengths.view(B, R))
    merged, vectors = recombine(_logsumexp(vectors, 2), keys, "sum", vectors)
    best, pick = merged.topk(K, dim=1)
    order = torch.cat([pick, torch.arange(K, R, device=pick.device).expand(B, R - K)], 1)
    rows.reorder_((torch.arange(B, device=pick.device) * R).unsqueeze(1).add(order).view(-1))
    rows.scores = torch.cat([best, scores[:, K:]], 1).view(-1)
    return vectors.gather(1, pick.unsqueeze(2).expand(B, K, vectors.shape[2]))


def _expand_(rows: BeamRows, K, label_score, emit, start, lpd, land):
    """The E best label expansions that beat the K-th done score become the active rows;
    returns their emission-frame log-probs, the next round's ``reach_from``, and where each
    lands (B, E, width + 1; TDT: its parent's duration log-probs)."""
    B, E, V = label_score.shape
    S, dev = emit.shape[2], label_score.device
    values, index = label_score.view(B, E * V).topk(E, dim=1)
    done = rows.scores.view(B, K + E)[:, :K]
    keep = values > done.amin(1, keepdim=True)  # the K-th done score (-inf while fewer)
    parent, label = index // V, index % V
    by_label = emit.permute(0, 1, 3, 2).reshape(B, E * V, S)
    reach_from = by_label.gather(1, index.unsqueeze(2).expand(B, E, S))  # (B, E, S)
    frame = start + reach_from.argmax(2)  # the most probable frame of emission
    slots = torch.arange(K, device=dev).expand(B, K)
    order = torch.cat([slots, K + parent], 1)
    rows.reorder_((torch.arange(B, device=dev) * (K + E)).unsqueeze(1).add(order).view(-1))
    rows.scores = torch.cat([done, torch.where(keep, values, -math.inf)], 1).view(-1)
    none = torch.zeros(B, K, dtype=torch.long, device=dev)
    mask = torch.cat([none.bool(), keep], 1).view(-1)
    fields = {"timestamps": torch.cat([none, frame], 1).view(-1)}
    picked = None
    if land.tdt:
        parent_lpd = lpd.gather(1, parent.unsqueeze(2).expand(B, E, lpd.shape[2]))
        picked = land.of(parent_lpd, land.label)
        duration = land.durations[parent_lpd.argmax(2)]  # the most probable one
        fields["durations"] = torch.cat([none, duration], 1).view(-1)
    rows.emit_(mask, torch.cat([none, label], 1).view(-1), **fields)
    return reach_from, picked


def _logsumexp(x, dim):
    """The log-sum-exp of ``x`` over ``dim``, as `reference._logsumexp` adds: log-add-exp of the
    entries in order, one kernel each after the first (``Tensor.logsumexp`` is ~9 kernels a
    call, and on a GPU these loops are launch-bound); with one entry, the entry itself (a
    view)."""
    n = x.shape[dim]
    if n > 8:
        return x.logsumexp(dim)
    out = x.select(dim, 0)
    for i in range(1, n):
        out = torch.logaddexp(out, x.select(dim, i))
    return out

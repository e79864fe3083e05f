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
"""

from __future__ import annotations

import math

import torch

from ..programs import host_flag
from .rows import BeamRows, best_distinct

__all__ = ["segment_search"]


def segment_search(adapter, enc, lengths, options, vocab, notes):
    B, T, _ = enc.shape
    K, E, S = options.beam_size, options.expansions, options.effective_segment
    dev = enc.device
    rows = BeamRows(adapter, B, K + E, dev, tdt=False)
    enc_p = adapter.encoder(enc)
    for start in range(0, T, S):
        frames = start + torch.arange(S, device=dev)
        valid = frames < lengths.unsqueeze(1)  # (B, S)
        enc_seg = enc_p[:, frames.clamp(max=T - 1)]  # (B, S, J)
        reach_from = _start_segment_(rows, K, E, S, lengths > start)
        for round_ in range(options.rounds + 1):
            live = rows.scores.view(B, -1)[:, K:] > -math.inf  # (B, E)
            if not host_flag(live.any()):
                break
            lp = _log_probs(adapter, rows, K, enc_seg, valid, vocab)
            blank_score, label_score, emit = _expansions(lp, reach_from, adapter.blank_id)
            _merge_done_(rows, K, torch.where(live, blank_score, -math.inf))
            if round_ == options.rounds:
                break
            label_score = torch.where(live.unsqueeze(2), label_score, -math.inf)
            if options.gamma != math.inf:  # MAES: labels within gamma of the best expansion
                top = torch.maximum(label_score.amax(2), blank_score)
                near = label_score >= (top - options.gamma).unsqueeze(2)
                label_score = torch.where(near, label_score, -math.inf)
            reach_from = _expand_(rows, K, label_score, emit, start)
    return rows.results(options, notes, first=0, count=K)


def _start_segment_(rows: BeamRows, K, E, S, in_segment) -> torch.Tensor:
    """The done rows become the active rows of the new segment (utterances that have frames
    in it); returns their emission-frame log-probs, all mass on the segment's first frame."""
    B, dev = rows.B, in_segment.device
    slots = torch.arange(K, device=dev)
    order = torch.cat([slots, slots, torch.zeros(E - K, dtype=torch.long, device=dev)])
    rows.reorder_((torch.arange(B, device=dev) * (K + E)).unsqueeze(1).add(order).view(-1))
    scores = rows.scores.view(B, K + E)
    starts = in_segment.unsqueeze(1)
    active = torch.where(starts, scores[:, K:], -math.inf)
    active[:, K:] = -math.inf
    rows.scores = torch.cat([torch.where(starts, -math.inf, scores[:, :K]), active], 1).view(-1)
    reach_from = torch.full((B, E, S), -math.inf, dtype=torch.float64, device=dev)
    reach_from[:, :, 0] = active
    return reach_from


def _log_probs(adapter, rows: BeamRows, K, enc_seg, valid, vocab) -> torch.Tensor:
    """Token log-probs (B, E, S, V) of the active rows at the segment's frames; past an
    utterance's end a frame passes everything through as blank (log-prob 0)."""
    B, S = valid.shape
    pred = rows.pred.view(B, rows.K, -1)[:, K:]  # (B, E, J)
    E, J = pred.shape[1], pred.shape[2]
    enc_rows = enc_seg.unsqueeze(1).expand(B, E, S, enc_seg.shape[-1]).reshape(B * E * S, -1)
    pred_rows = pred.unsqueeze(2).expand(B, E, S, J).reshape(B * E * S, J)
    lp = adapter.joint(enc_rows, pred_rows).view(B, E, S, -1)[..., :vocab]
    lp = lp.double().log_softmax(-1)
    is_blank = torch.arange(vocab, device=lp.device) == adapter.blank_id
    padding = torch.where(is_blank, 0.0, -math.inf).to(lp.dtype)
    return torch.where(valid.view(B, 1, S, 1), lp, padding)


def _expansions(lp, reach_from, blank):
    """Eq. 3-7: the blank expansion (B, E), the label expansions (B, E, V) and the label
    emission log-probs by frame (B, E, S, V). ``reach[t]``: the hypothesis with its last label
    at some frame <= t and blanks from there to t (exclusive)."""
    S = lp.shape[2]
    blank_lp = lp[..., blank]
    cum = torch.cat([torch.zeros_like(blank_lp[..., :1]), blank_lp.cumsum(-1)], -1)
    reach = (reach_from - cum[..., :S]).logcumsumexp(-1) + cum[..., :S]
    blank_score = reach[..., -1] + blank_lp[..., -1]
    emit = reach.unsqueeze(-1) + lp
    label_score = emit.logsumexp(2)
    label_score[..., blank] = -math.inf
    return blank_score, label_score, emit


def _merge_done_(rows: BeamRows, K, blank_score) -> None:
    """Merge the active rows' blank expansions into the done rows: equal labels sum, the
    best-scoring contribution stays as the representative; the K best remain done."""
    B, R = rows.B, rows.K
    scores = rows.scores.view(B, R)
    merged = torch.cat([scores[:, :K], blank_score], 1)
    keys = (rows.hash.view(B, R), rows.lengths.view(B, R))
    best, pick = best_distinct(merged, keys, K, merge="sum")
    order = torch.cat([pick, torch.arange(K, R, device=pick.device).expand(B, R - K)], 1)
    rows.reorder_((torch.arange(B, device=pick.device) * R).unsqueeze(1).add(order).view(-1))
    rows.scores = torch.cat([best, scores[:, K:]], 1).view(-1)


def _expand_(rows: BeamRows, K, label_score, emit, start) -> torch.Tensor:
    """The E best label expansions that beat the K-th done score become the active rows;
    returns their emission-frame log-probs, the next round's ``reach_from``."""
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
    rows.emit_(
        mask, torch.cat([none, label], 1).view(-1), timestamps=torch.cat([none, frame], 1).view(-1)
    )
    return reach_from

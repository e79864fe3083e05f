"""Batched alignment-synchronous beam search: "alsd" (alignment-length synchronous, RNN-T and
TDT) and "wind" (WIND beam, Algorithm 3's window expansions), one step at a time for B x K
hypotheses in fixed-shape rows (`BeamRows`).

Utterance b owns rows b*R .. b*R+R-1, R = 2K: the first K hold the beam, the other K the final
set (hypotheses that reached the last frame; Saon et al.'s F). A step, for every beam
hypothesis at once (`reference._alignment_search` is the same per utterance):
  1. `_moves`: score its moves — RNN-T with window W: a label at frame t+j after blanks at
     t..t+j-1, or blanks over the whole window; TDT: each token with each duration.
  2. `_step_`: moves that reach the last frame merge into the final set (one hypothesis per
     label sequence, the better alignment: Viterbi), which keeps its K best; the others are
     recombined by (labels, frame, labels emitted at that frame), and the K best that beat the
     K-th final score form the new beam — a score is one alignment's log-probability. A key
     comes from at most D moves of each of the K parents (D durations, 1 for RNN-T), so the
     K best distinct keys of either kind lie among its K*K*D best moves: only those are
     compared by key.
  3. the new rows take their parents' rows; those that moved by a label append it and run
     the predictor.
The loop ends when the beam is empty: one host read per step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..programs import host_flag
from .rows import HASH_BASE, BeamRows, best_distinct

__all__ = [
    "Beam",
    "alignment_search",
    "decode_moves",
    "finishes",
    "merge_final",
    "score_moves",
]


@dataclass
class Beam:
    """Per-row tensors of the search besides `BeamRows`, all (B*R,)."""

    length: torch.Tensor  # the frame count of the row's utterance
    frame: torch.Tensor  # the next frame to read
    count: torch.Tensor  # labels emitted at that frame so far

    @classmethod
    def start(cls, rows: BeamRows, lengths, per_utt: int, final: int) -> Beam:
        """Row 0 of each utterance reads frame 0; an utterance without frames is finished
        before it starts: its empty hypothesis goes to row ``final`` (the final set)."""
        dev = lengths.device
        utt = torch.arange(rows.n, device=dev) // per_utt
        zeros = torch.zeros(rows.n, dtype=torch.long, device=dev)
        scores = rows.scores.view(rows.B, per_utt)
        empty = lengths == 0
        scores[:, final] = torch.where(empty, 0.0, -math.inf)
        scores[:, 0] = torch.where(empty, -math.inf, scores[:, 0])
        return cls(lengths.index_select(0, utt), zeros, zeros.clone())


def alignment_search(adapter, enc, lengths, options, vocab, notes):
    B, T, _ = enc.shape
    K, dev = options.beam_size, enc.device
    rows = BeamRows(adapter, B, 2 * K, dev, tdt=options.durations is not None)
    s = Beam.start(rows, lengths, 2 * K, final=K)
    enc_p = adapter.encoder(enc)
    durations = None if options.durations is None else torch.tensor(options.durations, device=dev)
    window = 1 if durations is not None else min(options.effective_window, max(T, 1))
    beam = (torch.arange(B, device=dev) * 2 * K).unsqueeze(1) + torch.arange(K, device=dev)
    while host_flag((rows.scores.view(B, 2 * K)[:, :K] > -math.inf).any()):
        score = rows.scores[beam.view(-1)]
        moves = score_moves(adapter, rows, s, beam, score, enc_p, options, vocab, window, durations)
        _step_(rows, s, beam, moves, vocab, window, durations)
    return rows.results(options, notes, first=K, count=K)


def score_moves(
    adapter, rows, s, expand, score, enc_p, options, vocab, window, durations, greedy=False
):
    """Scores of every move of the rows ``expand`` (B, K) whose scores are ``score`` (B*K;
    -inf: nothing to expand), (B*K, W, V) for RNN-T — slot [.., 0, blank] is the blank-window
    move — or (B*K, V, D) for TDT; -inf for moves not allowed. With ``greedy`` (RNN-T) also
    each row's greedy move (`reference._greedy_move`) as an index into its W * V moves."""
    T, blank = enc_p.shape[1], adapter.blank_id
    beam = expand.reshape(-1)
    n = beam.shape[0]
    frame, count = s.frame[beam], s.count[beam]
    length, live = s.length[beam], score > -math.inf
    pred = rows.pred.index_select(0, beam)
    may_grow = live  # a label is allowed at all: within max_tokens
    if options.max_tokens is not None:
        may_grow = live & (rows.lengths[beam] < options.max_tokens)
    can_label = may_grow & (count < options.max_symbols_per_frame)  # ... at frame t
    frames = frame.unsqueeze(1) + torch.arange(window, device=enc_p.device)  # (n, W)
    valid = frames < length.unsqueeze(1)
    utt = beam // rows.K
    enc_rows = enc_p[utt.unsqueeze(1), frames.clamp(max=T - 1)]
    pred_rows = pred.unsqueeze(1).expand(n, window, pred.shape[-1])
    logits = adapter.joint(enc_rows.reshape(n * window, -1), pred_rows.reshape(n * window, -1))
    logits = logits.view(n, window, -1).double()
    lp = logits[..., :vocab].log_softmax(-1)  # (n, W, V)
    if durations is not None:
        lpd = logits[:, 0, vocab:].log_softmax(-1)  # (n, D)
        moves = score.view(n, 1, 1) + lp[:, 0, :, None] + lpd[:, None, :]  # (n, V, D)
        is_blank = (torch.arange(vocab, device=enc_p.device) == blank).view(1, vocab, 1)
        allowed = torch.where(is_blank, live.view(n, 1, 1), can_label.view(n, 1, 1))
        return torch.where(allowed, moves, -math.inf)
    blank_lp = torch.where(valid, lp[..., blank], 0.0)
    before = blank_lp.cumsum(1) - blank_lp  # blanks at the window's frames before j
    moves = score.view(n, 1, 1) + before.unsqueeze(2) + lp  # (n, W, V): label k at t + j
    # At a frame after t the label count starts again; at t it must stay within the limit.
    label_ok = valid & may_grow.unsqueeze(1)
    label_ok[:, 0] &= can_label
    moves = torch.where(label_ok.unsqueeze(2), moves, -math.inf)
    moves[:, :, blank] = -math.inf
    moves[:, 0, blank] = torch.where(live, score + blank_lp.sum(1), -math.inf)
    if not greedy:
        return moves
    top = lp.argmax(2)  # (n, W): the first of equals, as greedy decoding takes it
    emits = label_ok & (top != blank)
    j = emits.int().argmax(1)  # the first frame whose best is a label it may emit
    index = torch.where(emits.any(1), j * vocab + top.gather(1, j.unsqueeze(1)).squeeze(1), blank)
    return moves, index


def _step_(rows, s, beam, moves, vocab, window, durations) -> None:
    """Apply the best moves: the final set and the new beam (see the module docstring)."""
    B, R = rows.B, rows.K
    K = R // 2
    D = 1 if durations is None else len(durations)
    f_values, f_move = finishes(rows, s, beam, moves, vocab, window, durations)
    final_rows = beam + K
    final_best, final_pick = merge_final(rows, final_rows, f_values, f_move)
    # The beam: moves that go on and beat the K-th final score (-inf while fewer are final).
    flat = moves.view(B, -1)  # the finishing moves now -inf
    g_values, g_move = decode_moves(
        rows, s, beam, flat, None, min(K * K * D, flat.shape[1]), vocab, window, durations
    )
    g_values = torch.where(g_values > final_best[:, -1:], g_values, -math.inf)
    keys = (g_move["hash"], g_move["length"], g_move["frame"], g_move["count"])
    beam_best, beam_pick = best_distinct(g_values, keys, K, merge="max")
    # The 2K new rows: beam rows from their moves, final rows from an old final row or a move.
    kept = Kept(g_move, beam_pick, beam_best)
    apply_step_(rows, s, kept, f_move, final_pick, final_best, final_rows, durations is not None)


@dataclass
class Kept:
    """The candidates ``moves`` (name -> (B, M)) a step keeps: positions and scores (B, k)."""

    moves: dict
    pick: torch.Tensor
    best: torch.Tensor


def apply_step_(rows, s, kept, f_move, final_pick, final_best, final_rows, tdt, lazy=False) -> None:
    """Rebuild the rows: each utterance's first rows from the kept candidates, its last K
    from the final set (an unchanged final row where ``final_pick < K``, else a finishing
    move); rows that moved by a label append it and run the predictor (``lazy``: later)."""
    K = final_rows.shape[1]
    from_final = final_pick < K
    f_pick = (final_pick - K).clamp(min=0)

    def new_rows(name, unchanged):
        going = kept.moves[name].gather(1, kept.pick)
        final = torch.where(from_final, unchanged, f_move[name].gather(1, f_pick))
        return torch.cat([going, final], 1).view(-1)

    zeros = torch.zeros_like(final_pick)
    rows.reorder_(new_rows("parent", final_rows.gather(1, final_pick.clamp(max=K - 1))))
    rows.scores = torch.cat([kept.best, final_best], 1).view(-1)
    emit = new_rows("is_label", zeros.bool()) & (rows.scores > -math.inf)
    fields = {"timestamps": new_rows("emit_frame", zeros)}
    if tdt:
        fields["durations"] = new_rows("duration", zeros)
    rows.emit_(emit, new_rows("label", zeros), lazy=lazy, **fields)
    s.frame = new_rows("frame", s.length.view(rows.B, rows.K)[:, :K])
    s.count = new_rows("count", zeros)


def merge_final(rows, final_rows, f_values, f_move):
    """The final set after a step: the rows ``final_rows`` (B, K) and the moves that finish
    (`finishes`), Viterbi-merged by labels, the K best. Returns their scores and positions (< K:
    an old final row, else a finishing move)."""
    K = final_rows.shape[1]
    final_values = torch.cat([rows.scores[final_rows], f_values], 1)
    final_keys = (
        torch.cat([rows.hash[final_rows], f_move["hash"]], 1),
        torch.cat([rows.lengths[final_rows], f_move["length"]], 1),
    )
    return best_distinct(final_values, final_keys, K, merge="max")


def finishes(rows, s, expand, moves, vocab, window, durations):
    """The moves of the rows ``expand`` (B, K) that reach the last frame, as `decode_moves`
    gives them ((B, m) scores and what each does), taken out of ``moves`` (set to -inf there).
    RNN-T: only a row's blank-window move (slot [.., 0, blank]) can finish — labels stay in
    frames — so the K candidates are those slots, in row order (-inf: the row does not finish).
    TDT: the K*K*D best of the moves whose step reaches the end."""
    B, K = expand.shape
    beam = expand.reshape(-1)
    p_frame, length = s.frame[beam], s.length[beam]
    left = length - p_frame  # frames still to read
    if durations is None:
        blank = rows.adapter.blank_id
        slot = moves[:, 0, blank]
        done = left <= window
        values = torch.where(done, slot, -math.inf).view(B, K)
        moves[:, 0, blank] = torch.where(done, -math.inf, slot)
        zeros = torch.zeros_like(expand)
        move = {
            "parent": expand,
            "label": torch.full_like(expand, blank),
            "is_label": zeros.bool(),
            "emit_frame": p_frame.view(B, K),
            "duration": zeros,
            "frame": (p_frame + left.clamp(max=window)).view(B, K),
            "count": zeros,
            "hash": rows.hash[expand],
            "length": rows.lengths[expand],
        }
        return values, move
    finishing = _tdt_finishing(rows, moves, left.view(-1, 1, 1), durations)
    values, move = decode_moves(rows, s, expand, moves.view(B, -1), finishing.view(B, -1),
                                K * K * len(durations), vocab, window, durations)  # fmt: skip
    moves.masked_fill_(finishing, -math.inf)
    return values, move


def _tdt_finishing(rows, moves, left, durations) -> torch.Tensor:
    """TDT: which moves (n, V, D) reach the last frame, ``left`` (n, 1, 1) frames before it."""
    label = torch.arange(moves.shape[1], device=moves.device) != rows.adapter.blank_id
    step = torch.where(
        label.view(1, -1, 1), durations.view(1, 1, -1), durations.clamp(min=1).view(1, 1, -1)
    )
    return step >= left


def decode_moves(rows, s, expand, flat, allowed, m, vocab, window, durations):
    """The ``m`` best moves per utterance (B, m) of the rows ``expand`` (B, K), among those
    ``allowed`` (a mask like ``flat``; None: all), and what each does: its parent row, label,
    whether it emits, the emission frame, the TDT duration, the frame and label count after it,
    and the label hash and length it leads to."""
    m = min(m, flat.shape[1])
    if allowed is not None:
        flat = torch.where(allowed, flat, -math.inf)
    values, index = flat.topk(m, dim=1)  # best first
    per_row = flat.shape[1] // expand.shape[1]
    parent = expand.gather(1, index // per_row)
    c = index % per_row
    p_frame, p_count, length = s.frame[parent], s.count[parent], s.length[parent]
    if durations is None:
        j, label = c // vocab, c % vocab
        is_label = label != rows.adapter.blank_id
        frame = torch.where(is_label, p_frame + j, p_frame + (length - p_frame).clamp(max=window))
        count = torch.where(is_label, torch.where(j == 0, p_count + 1, 1), 0)
        emit_frame, duration = p_frame + j, torch.zeros_like(c)
    else:
        D = len(durations)
        label, duration = c // D, durations[c % D]
        is_label = label != rows.adapter.blank_id
        frame = p_frame + torch.where(is_label, duration, duration.clamp(min=1))
        count = torch.where(is_label & (duration == 0), p_count + 1, 0)
        emit_frame = p_frame
    p_hash = rows.hash[parent]
    move = {
        "parent": parent,
        "label": label,
        "is_label": is_label,
        "emit_frame": emit_frame,
        "duration": duration,
        "frame": frame,
        "count": count,
        "hash": torch.where(is_label, p_hash * HASH_BASE + label + 1, p_hash),
        "length": rows.lengths[parent] + is_label,
    }
    return values, move

"""Per-utterance beam searches, written to be read: the specification the batched searches
(`segment.py`, `alignment.py`) are tested against, hypothesis for hypothesis.

One utterance at a time, Python lists and dicts, the model's plain ``predict`` / ``joint``
(never the precomputed projections), log-probabilities in float64. Ties between equal scores
are broken arbitrarily here and in the batched searches; tests use random models, where exact
ties do not occur.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch

from ...results import Hypothesis
from ..inputs import check_inputs
from .options import BeamOptions

__all__ = ["beam_reference"]


def beam_reference(model, enc, enc_lengths, options: BeamOptions) -> list[list[Hypothesis]]:
    """Decode each utterance of ``enc`` (B, T, D) alone; see `beam_decode` for the results
    (and the input checks, the same)."""
    enc, enc_lengths = check_inputs(model, enc, enc_lengths)
    search = {"alsd": _alignment_search, "wind": _window_search}.get(
        options.algorithm, _segment_search
    )
    results = []
    with torch.inference_mode():
        for b in range(enc.shape[0]):
            found = search(_Model(model, enc.device), enc[b, : int(enc_lengths[b])], options)
            results.append(_best(found, options))
    return results


@dataclass(frozen=True)
class _Hyp:
    tokens: tuple[int, ...]
    score: float
    timestamps: tuple[int, ...] = ()
    durations: tuple[int, ...] = ()
    frame: int = 0  # alignment search: the next frame to read
    count: int = 0  # alignment search: labels emitted at that frame so far
    ahead: tuple[float, ...] = ()  # segment search: log mass landing on each next frame


class _Model:
    """The model's predictor output for a label prefix (computed once) and its log-probs."""

    def __init__(self, model, device):
        self.model, self.blank, self.device = model, model.blank_id, device
        self.cache = {}

    def pred(self, prefix: tuple[int, ...]):
        if prefix not in self.cache:
            if prefix:
                _, state = self.pred(prefix[:-1])
            else:
                state = self.model.init_state(1, self.device)
            label = prefix[-1] if prefix else self.blank
            self.cache[prefix] = self.model.predict(
                torch.tensor([label], device=self.device), state
            )
        return self.cache[prefix]

    def log_probs(self, prefix, enc_rows, n_dur=0):
        """Token log-probs (rows, V) and duration log-probs (rows, D) as nested lists."""
        pred, _ = self.pred(prefix)
        logits = self.model.joint(enc_rows, pred.expand(enc_rows.shape[0], -1)).double()
        vocab = logits.shape[1] - n_dur
        lpd = logits[:, vocab:].log_softmax(-1).tolist() if n_dur else None
        return logits[:, :vocab].log_softmax(-1).tolist(), lpd


def _segment_search(model: _Model, enc, options: BeamOptions) -> list[_Hyp]:
    """ "standard", "tokenwise", "maes": segment by segment, rounds of label expansions.

    Each active hypothesis carries ``d``: log-probabilities that its last label was emitted at
    each frame of the segment (at the start of a segment, all mass on its first frame). A blank
    expansion finishes the hypothesis' segment (``done``, merged by log-sum-exp, the best
    ``beam_size`` kept); label expansions compete for ``options.expansions`` places and must
    beat the ``beam_size``-th finished score.

    TDT (``options.durations``; segments of one frame): a token's duration says where it lands,
    so a done hypothesis holds ``ahead``, its log mass at each of the next frames (`_landing`),
    and scores their log-sum-exp; a segment starts from the mass that lands on its frame. A label
    expansion's mass with duration 0 stays active (while it alone beats the ``beam_size``-th
    finished score), the rest lands ahead among the done ones.
    RNN-T is the case where a blank lands one frame on and a label stays.
    """
    T, blank, S, K = enc.shape[0], model.blank, options.segment_for(enc.shape[0]), options.beam_size
    n_dur = len(options.durations or ())
    width = options.landing_width(T)
    done = {(): _Hyp((), 0.0, ahead=(0.0,) + (-math.inf,) * (width - 1))}
    for start in range(0, T, S):
        frames = enc[start : start + S]
        n = frames.shape[0]
        active, done = [], {h.tokens: h for h in _top(done.values(), K)}
        for h in list(done.values()):
            active.append((h, [h.ahead[0]] + [-math.inf] * (n - 1)))
            ahead = (*h.ahead[1:], -math.inf)
            done[h.tokens] = _Hyp(h.tokens, _logsumexp(ahead), h.timestamps, h.durations,
                                  ahead=ahead)  # fmt: skip
        done = {y: h for y, h in done.items() if h.score > -math.inf}
        for round_ in range(options.rounds + 1):
            expansions = []
            for h, d in active:
                if max(d) == -math.inf:
                    continue
                lp, lpd = model.log_probs(h.tokens, frames, n_dur)
                label_land, blank_land = _landing(options, lpd[0] if n_dur else None, width)
                # reach[t2] = log sum_{t1 <= t2} d[t1] * blanks(t1 .. t2-1)  (Eq. 3-5), as
                # reach[t] = reach[t-1] + blank[t-1] (+) d[t]: a -inf blank stays -inf (the
                # paper's d[t] - cum[t] would be NaN)
                reach, acc = [], -math.inf
                for t in range(n):
                    if t:
                        acc += lp[t - 1][blank]
                    acc = _logaddexp(acc, d[t])
                    reach.append(acc)
                blank_score = reach[-1] + lp[n - 1][blank]  # Eq. 7
                ahead = tuple(blank_score + x for x in blank_land[1:])
                _merge(done, _Hyp(h.tokens, blank_score, h.timestamps, h.durations, ahead=ahead))
                if round_ == options.rounds:
                    continue
                candidates = []
                for k in range(len(lp[0])):
                    if k == blank:
                        continue
                    emit = [reach[t] + lp[t][k] for t in range(n)]  # Eq. 4-5
                    candidates.append((k, _logsumexp(emit), emit))  # Eq. 6
                best = max([blank_score] + [c[1] for c in candidates])
                for k, score, emit in candidates:
                    if score >= best - options.gamma:
                        expansions.append((score, h, k, emit, label_land, lpd))
            done = dict(_top_items(done, K))
            if round_ == options.rounds:
                break
            threshold = _kth(done, K)
            expansions.sort(key=lambda e: -e[0])
            active = []
            for score, h, k, emit, land, lpd in expansions[: options.expansions]:
                if score > threshold:
                    frame = start + max(range(n), key=lambda t: emit[t])
                    durations = h.durations
                    if n_dur:  # the label's most probable duration
                        best_d = max(range(n_dur), key=lambda i: lpd[0][i])
                        durations = (*durations, options.durations[best_d])
                    new = _Hyp((*h.tokens, k), score, (*h.timestamps, frame), durations)
                    if n_dur:  # the mass that lands on a later frame joins the done ones
                        ahead = tuple(score + x for x in land[1:])
                        _merge(done, dataclasses.replace(new, score=_logsumexp(ahead), ahead=ahead))
                    stay = [e + land[0] for e in emit]  # TDT: what duration 0 keeps here
                    if not n_dur or stay[0] > threshold:
                        active.append((new, stay))
            done = dict(_top_items(done, K))
            if not active:
                break
    return list(done.values())


def _landing(options: BeamOptions, lpd, width: int):
    """Where an emitted label and a blank land, as log-probs over frames ``0 .. width`` ahead
    (0: the same frame; `BeamOptions.landing_width`: a longer duration lands past the end as
    ``width`` does): TDT from the duration log-probs ``lpd`` (a blank moves at least one
    frame), RNN-T a label stays and a blank moves one frame."""
    label, blank = [-math.inf] * (width + 1), [-math.inf] * (width + 1)
    if lpd is None:
        label[0], blank[1] = 0.0, 0.0
        return label, blank
    for d, x in zip(options.durations, lpd, strict=True):
        d = min(d, width)
        label[d] = _logaddexp(label[d], x)
        blank[max(d, 1)] = _logaddexp(blank[max(d, 1)], x)
    return label, blank


def _alignment_search(model: _Model, enc, options: BeamOptions) -> list[_Hyp]:
    """ "alsd": every step extends each beam hypothesis by one move (Saon et al.'s ALSD).

    Hypotheses that reach the last frame leave the beam for the final set (Saon et al.'s F),
    which keeps its ``beam_size`` best (Viterbi: one hypothesis per label sequence). A beam
    hypothesis that does not beat the ``beam_size``-th final score is dropped: scores only fall.
    """
    T, K = enc.shape[0], options.beam_size
    beam = [_Hyp((), 0.0)] if T else []
    final = {} if T else {(): _Hyp((), 0.0)}
    while beam:
        candidates: dict[tuple, _Hyp] = {}
        for h in beam:
            for new in _moves(model, enc, h, options):
                _offer(final, candidates, new, T)
        final = {h.tokens: h for h in _top(final.values(), K)}
        threshold = _kth(final, K)
        beam = [h for h in _top(candidates.values(), K) if h.score > threshold]
    return list(final.values())


def _window_search(model: _Model, enc, options: BeamOptions) -> list[_Hyp]:
    """ "wind": WIND Algorithm 3. Hypotheses wait in buckets by the frame they read next; each
    step takes the bucket of the earliest frame, keeps its ``beam_size`` best that beat the
    ``beam_size``-th final score and the ``beam_size``-th score waiting at later frames (Graves'
    rule, the paper's safeguard against staying at a frame: labels emitted at frame t bring
    hypotheses back to t), and extends each by its ``beam_size`` best window moves and its
    greedy move (`_window_moves`).
    Recombination and the final set as in `_alignment_search`."""
    T, K = enc.shape[0], options.beam_size
    buckets = {0: {((), 0): _Hyp((), 0.0)}} if T else {}
    final = {} if T else {(): _Hyp((), 0.0)}
    while buckets:
        t = min(buckets)
        here = buckets.pop(t)
        later = [h.score for bucket in buckets.values() for h in bucket.values()]
        threshold = max(_kth(final, K), _kth_score(later, K))
        for h in _top(here.values(), K):
            if h.score <= threshold:
                continue
            for new in _window_moves(model, enc, h, options, K):
                bucket = buckets.setdefault(new.frame, {}) if new.frame < T else {}
                _offer(final, bucket, new, T)
        final = {h.tokens: h for h in _top(final.values(), K)}
    return list(final.values())


def _window_moves(model: _Model, enc, h: _Hyp, options: BeamOptions, k: int) -> list[_Hyp]:
    """WIND's moves of ``h``: its ``k`` best (Algorithm 3, line 13), best first, then its
    greedy move (`_greedy_move`) when it is not among them. The top k compares moves over
    different numbers of frames: blanks over the whole window pay W blank log-probs, a label
    at the window's first frame one label's, so on an unsure model the all-blank move drops
    out and with it the greedy path, which the beam then often ends below; kept, the greedy
    path stays in the search space."""
    top = _top(_moves(model, enc, h, options), k)
    greedy = _greedy_move(model, enc, h, options)
    if all((m.tokens, m.frame) != (greedy.tokens, greedy.frame) for m in top):
        top.append(greedy)
    return top


def _greedy_move(model: _Model, enc, h: _Hyp, options: BeamOptions) -> _Hyp:
    """The move greedy decoding makes from ``h`` in its window: blanks up to the first frame
    whose most probable token (the first of equals) is a label ``h`` may emit there, then that
    label; else blanks over the whole window. Scored as `_moves` scores it."""
    T, blank, t, c = enc.shape[0], model.blank, h.frame, h.count
    n = min(options.effective_window, T - t)
    lp, _ = model.log_probs(h.tokens, enc[t : t + n])
    can_label = options.max_tokens is None or len(h.tokens) < options.max_tokens
    blanks = 0.0
    for j in range(n):
        k = max(range(len(lp[j])), key=lp[j].__getitem__)
        if k != blank and can_label and (j > 0 or c < options.max_symbols_per_frame):
            tokens, times = (*h.tokens, k), (*h.timestamps, t + j)
            count = c + 1 if j == 0 else 1
            return _Hyp(tokens, h.score + blanks + lp[j][k], times, frame=t + j, count=count)
        blanks += lp[j][blank]
    return _Hyp(h.tokens, h.score + blanks, h.timestamps, frame=t + n)


def _offer(final: dict, candidates: dict, h: _Hyp, T: int) -> None:
    """Viterbi recombination: a finished hypothesis per label sequence, an unfinished one per
    (labels, frame, labels emitted at that frame)."""
    if h.frame >= T:
        if h.tokens not in final or h.score > final[h.tokens].score:
            final[h.tokens] = h
        return
    key = (h.tokens, h.frame, h.count)
    if key not in candidates or h.score > candidates[key].score:
        candidates[key] = h


def _moves(model: _Model, enc, h: _Hyp, options: BeamOptions) -> list[_Hyp]:
    """Every move of ``h``: TDT — each token with each duration; RNN-T with a window of W
    frames (1 for "alsd") — a label at frame t+j after blanks at t..t+j-1, or blanks over the
    whole window."""
    T, blank, t, c = enc.shape[0], model.blank, h.frame, h.count
    durations = options.durations
    can_label = options.max_tokens is None or len(h.tokens) < options.max_tokens
    moves = []
    if durations:
        lp, lpd = model.log_probs(h.tokens, enc[t : t + 1], len(durations))
        for k, lp_k in enumerate(lp[0]):
            for d, lp_d in zip(durations, lpd[0], strict=True):
                score = h.score + lp_k + lp_d
                if k == blank:
                    moves.append(_Hyp(h.tokens, score, h.timestamps, h.durations, t + max(d, 1)))
                elif can_label and c < options.max_symbols_per_frame:
                    count = c + 1 if d == 0 else 0
                    tokens, times, durs = (*h.tokens, k), (*h.timestamps, t), (*h.durations, d)
                    moves.append(_Hyp(tokens, score, times, durs, t + d, count))
        return moves
    n = min(options.effective_window, T - t)
    lp, _ = model.log_probs(h.tokens, enc[t : t + n])
    blanks = 0.0  # log-prob of blanks at the window's frames before j
    for j in range(n):
        if can_label and (j > 0 or c < options.max_symbols_per_frame):
            for k, lp_k in enumerate(lp[j]):
                if k != blank:
                    count = c + 1 if j == 0 else 1
                    tokens, times = (*h.tokens, k), (*h.timestamps, t + j)
                    score = h.score + blanks + lp_k
                    moves.append(_Hyp(tokens, score, times, frame=t + j, count=count))
        blanks += lp[j][blank]
    moves.append(_Hyp(h.tokens, h.score + blanks, h.timestamps, frame=t + n))
    return moves


def _best(hyps: list[_Hyp], options: BeamOptions) -> list[Hypothesis]:
    """The ``nbest`` best distinct token sequences (alignment searches can hold one sequence
    twice, e.g. finished at different steps: the better alignment counts)."""
    best: dict[tuple[int, ...], _Hyp] = {}
    for h in hyps:
        if h.tokens not in best or h.score > best[h.tokens].score:
            best[h.tokens] = h

    def rank(h: _Hyp) -> float:
        return h.score / max(len(h.tokens), 1) if options.length_norm else h.score

    ordered = sorted(best.values(), key=rank, reverse=True)[: options.nbest]
    return [
        Hypothesis(
            tokens=h.tokens,
            timestamps=h.timestamps,
            durations=h.durations,
            score=h.score,
            acoustic_score=h.score,
        )
        for h in ordered
    ]


def _merge(done: dict, h: _Hyp) -> None:
    """Add a finished hypothesis, summing with the same token sequence (timestamps: the
    better contribution's)."""
    old = done.get(h.tokens)
    if old is None:
        done[h.tokens] = h
        return
    better = h if h.score > old.score else old
    ahead = tuple(_logaddexp(a, b) for a, b in zip(old.ahead, h.ahead, strict=True))
    done[h.tokens] = _Hyp(
        h.tokens, _logaddexp(old.score, h.score), better.timestamps, better.durations, ahead=ahead
    )


def _top(hyps, k: int) -> list[_Hyp]:
    return sorted(hyps, key=lambda h: -h.score)[:k]


def _top_items(done: dict, k: int):
    return sorted(done.items(), key=lambda item: -item[1].score)[:k]


def _kth(done: dict, k: int) -> float:
    """The k-th best finished score, -inf while fewer than k are finished."""
    if len(done) < k:
        return -math.inf
    return min(h.score for h in done.values())


def _kth_score(scores: list[float], k: int) -> float:
    """The k-th best of ``scores``, -inf while there are fewer than k."""
    return sorted(scores, reverse=True)[k - 1] if len(scores) >= k else -math.inf


def _logaddexp(a: float, b: float) -> float:
    return float(np.logaddexp(a, b))


def _logsumexp(values) -> float:
    out = -math.inf
    for v in values:
        out = _logaddexp(out, v)
    return out

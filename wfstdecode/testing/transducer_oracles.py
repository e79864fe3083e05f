"""Exhaustive oracles for transducer beam searches on tiny problems.

`exhaustive_sequences` enumerates every alignment a transducer can take through ``T`` frames
(one utterance) and returns, for every label sequence, the log-sum-exp of its alignments'
log-probabilities ("sum": the forward algorithm) or the best one ("max": Viterbi). Alignments
are bounded the way the beam searches bound them: at most ``max_labels`` labels in each block of
``block`` consecutive frames (``block=1``: per frame). RNN-T: a label stays at its frame, a
blank moves one frame on; TDT: a token moves its duration on, a blank at least one frame. The
search over label prefixes calls the model's plain ``predict`` / ``joint`` once per prefix.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["exhaustive_sequences"]


def exhaustive_sequences(
    model, enc, durations=None, max_labels: int = 2, block: int = 1, merge: str = "sum"
) -> dict[tuple[int, ...], float]:
    """{label sequence: log-probability} over every bounded alignment of ``enc`` (T, D)."""
    if merge not in ("sum", "max"):
        raise ValueError(f"merge must be 'sum' or 'max'; got {merge!r}")
    combine = _logaddexp if merge == "sum" else max
    T, blank = enc.shape[0], model.blank_id
    n_dur = len(durations or ())
    finished: dict[tuple[int, ...], float] = {}
    # prefix -> {(frame, labels in the frame's block): log-prob}, and the predictor after it
    frontier = {(): {(0, 0): 0.0}}
    with torch.inference_mode():
        preds = {(): model.predict(torch.tensor([blank]), model.init_state(1, enc.device))}
        while frontier:
            grown: dict[tuple[int, ...], dict] = {}
            for prefix, states in frontier.items():
                pred, pred_state = preds[prefix]
                logits = model.joint(enc, pred.expand(T, -1)).double() if T else None
                vocab = logits.shape[1] - n_dur if T else 0
                lp = logits[:, :vocab].log_softmax(-1).tolist() if T else []
                lpd = logits[:, vocab:].log_softmax(-1).tolist() if T and n_dur else []
                todo = dict(states)
                while todo:  # blanks move forward in time: take the earliest state first
                    t, c = min(todo)
                    score = todo.pop((t, c))
                    if t >= T:
                        finished[prefix] = combine(finished.get(prefix, -math.inf), score)
                        continue
                    moves = _moves(t, c, lp[t], lpd[t] if n_dur else None, durations, blank)
                    for label, new_t, labelled, delta in moves:
                        if labelled and c >= max_labels:
                            continue
                        same_block = new_t // block == t // block and new_t < T
                        new_c = (c + labelled if same_block else 0) if new_t < T else 0
                        key, value = (min(new_t, T), new_c), score + delta
                        if label is None:
                            todo[key] = combine(todo.get(key, -math.inf), value)
                        else:
                            target = grown.setdefault((*prefix, label), {})
                            target[key] = combine(target.get(key, -math.inf), value)
                for label in {p[-1] for p in grown if p[:-1] == prefix}:
                    preds[(*prefix, label)] = model.predict(torch.tensor([label]), pred_state)
            frontier = grown
    return finished


def _moves(t, c, lp, lpd, durations, blank):
    """(label or None for blank, next frame, 1 if a label, log-prob) of every move from t."""
    for k, lp_k in enumerate(lp):
        if durations is None:
            if k == blank:
                yield None, t + 1, 0, lp_k
            else:
                yield k, t, 1, lp_k
            continue
        for d, lp_d in zip(durations, lpd, strict=True):
            if k == blank:
                yield None, t + max(d, 1), 0, lp_k + lp_d
            else:
                yield k, t + d, 1, lp_k + lp_d


def _logaddexp(a: float, b: float) -> float:
    return float(np.logaddexp(a, b))

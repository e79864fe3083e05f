"""Per-utterance greedy decoding, written to be obviously right: the oracle of the tests.

One utterance at a time, one joint call per decision, Python control flow, the model's plain
``joint`` (never the precomputed projections). RNN-T is the case ``durations=None``: a label
keeps the frame, a blank moves one frame on.
"""

from __future__ import annotations

import torch

from ..results import Hypothesis
from .inputs import check_inputs

__all__ = ["greedy_reference"]


def greedy_reference(
    model, enc, enc_lengths, durations=None, max_symbols_per_frame: int = 10
) -> list[Hypothesis]:
    """Decode each utterance of ``enc`` (B, T, D) alone; see `greedy_decode` for the outputs
    (and the input checks, the same)."""
    enc, enc_lengths = check_inputs(model, enc, enc_lengths)
    hyps = []
    with torch.inference_mode():
        for b in range(enc.shape[0]):
            hyps.append(
                _one(model, enc[b, : int(enc_lengths[b])], durations, max_symbols_per_frame)
            )
    return hyps


def _one(model, enc, durations, max_symbols):
    blank = model.blank_id
    n_dur = len(durations) if durations else 0
    tokens, times, durs, score = [], [], [], 0.0
    state = model.init_state(1, enc.device)
    pred, state = model.predict(torch.tensor([blank], device=enc.device), state)
    t, count = 0, 0  # count: labels emitted at frame t
    while t < enc.shape[0]:
        logits = model.joint(enc[t : t + 1], pred)[0].double()
        vocab = logits.shape[0] - n_dur
        token_lp = logits[:vocab].log_softmax(-1)
        label = int(logits[:vocab].argmax())  # the first maximum
        score += float(token_lp[label])
        if durations:
            dur_lp = logits[vocab:].log_softmax(-1)
            k = int(logits[vocab:].argmax())
            score += float(dur_lp[k])
            dur = durations[k]
        else:
            dur = 0 if label != blank else 1
        if label == blank:
            t += max(dur, 1)
            count = 0
            continue
        tokens.append(label)
        times.append(t)
        durs.append(dur)
        pred, state = model.predict(torch.tensor([label], device=enc.device), state)
        if dur > 0:
            t += dur
            count = 0
        else:
            count += 1
            if count >= max_symbols:
                t += 1
                count = 0
    return Hypothesis(
        tokens=tuple(tokens),
        timestamps=tuple(times),
        durations=tuple(durs) if durations else (),
        score=score,
        acoustic_score=score,
    )

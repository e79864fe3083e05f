"""Reference RNN-T / TDT models for tests and benchmarks: an LSTM predictor and a ReLU joint.

An untrained random network either emits almost nothing or fires on ``max_symbols_per_frame``
labels in every frame it fires, which makes a poor workload. `planted_transducer` instead sets
the weights so that greedy decoding follows a *planted alignment* carried by the encoder
output (`planted_batch`), like a trained model does: mostly blanks, sometimes two or three
labels in one frame, TDT durations that skip the blank frames in between.

How the plant works. Every non-blank token k has a sparse binary code c_k (``code_weight`` ones
among ``m`` dimensions shared by the predictor and the joint). The LSTM is set up as a decaying
memory of the codes it was fed (forget gate 0.7, input and output gates open), so the predictor
output h holds the recently emitted labels. The joint computes
``relu(enc_proj(x_t) - S h)`` and reads token k out of its code dimensions: frame t's encoder
output plants ``A_i c_{y_i}`` for its labels y_1, y_2, ... (decreasing strengths, so they come
out in order), and the memory suppresses each label once emitted. With nothing left, the
constant blank logit wins and the decoder moves on. TDT duration logits read reserved joint
dimensions that the encoder output sets to the planted duration. Encoder noise perturbs all of
it, so a few planted labels are missed or replaced; use `label_statistics` to see the result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..models.transducer import LstmTransducer

__all__ = [
    "PlantedBatch",
    "ReferenceTransducer",
    "greedy_variants",
    "label_statistics",
    "planted_batch",
    "planted_transducer",
    "random_transducer",
]


# The networks of the planted and random models; trained models use the same class.
ReferenceTransducer = LstmTransducer


def random_transducer(
    vocab_size=32, enc_dim=24, pred_dim=16, joint_dim=20, n_durations=0, seed=0, blank_id=0
) -> ReferenceTransducer:
    """A plainly random model (PyTorch's default initialisation), with a raised blank bias so
    that it emits on a minority of frames. Useful for shape and error tests."""
    torch.manual_seed(seed)
    model = ReferenceTransducer(vocab_size, enc_dim, pred_dim, joint_dim, n_durations, blank_id)
    with torch.no_grad():
        model.out.bias[blank_id] += 1.0
    return model.eval()


class BareProtocol:
    """Another model seen through the bare `TransducerModel` protocol only (no projection or
    state hooks; LSTM state, batch dim 1): what a user's own model offers at the least."""

    state_batch_dim = 1

    def __init__(self, inner):
        self.inner, self.blank_id, self.vocab_size = inner, inner.blank_id, inner.vocab_size

    def init_state(self, batch_size, device):
        return self.inner.init_state(batch_size, device)

    def predict(self, labels, state):
        return self.inner.predict(labels, state)

    def joint(self, enc, pred):
        return self.inner.joint(enc, pred)


@dataclass
class _Plant:
    codes: torch.Tensor  # (V, m) float 0/1, blank row zero
    enc_pinv: torch.Tensor  # (D, J): maps wanted joint pre-activations to encoder outputs
    strength: float
    code_dims: int
    durations: tuple[int, ...]


def planted_transducer(
    vocab_size: int = 1025,
    enc_dim: int = 640,
    pred_dim: int = 640,
    joint_dim: int = 640,
    durations: tuple[int, ...] | None = None,
    code_weight: int | None = None,
    blank_id: int = 0,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> ReferenceTransducer:
    """A `ReferenceTransducer` whose greedy output follows `planted_batch` alignments.

    Needs ``enc_dim >= joint_dim`` (the encoder outputs are solved through ``enc_proj``).
    Defaults are benchmark sizes (predictor 640, joint 640, vocabulary 1025).
    """
    n_dur = len(durations or ())
    m = min(pred_dim, joint_dim - n_dur)
    if enc_dim < joint_dim or m < 4:
        raise ValueError(
            f"planted_transducer needs enc_dim >= joint_dim and min(pred_dim, joint_dim - "
            f"n_durations) >= 4; got enc_dim={enc_dim}, pred_dim={pred_dim}, "
            f"joint_dim={joint_dim}, n_durations={n_dur}"
        )
    w = code_weight or max(2, min(8, m // 8))
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = ReferenceTransducer(vocab_size, enc_dim, pred_dim, joint_dim, n_dur, blank_id)
    codes = torch.zeros(vocab_size, m)
    for k in range(vocab_size):
        if k != blank_id:
            codes[k, torch.randperm(m, generator=gen)[:w]] = 1.0

    def noise(*shape, scale):
        return torch.randn(*shape, generator=gen) * scale

    A, gamma, beta = 6.0, 3.0, 3.0  # label strength, logit scale, blank logit / gamma
    S = A / 0.45  # suppresses a label even after two more emissions (memory 0.7**2 -> tanh 0.45)
    H, J = pred_dim, joint_dim
    with torch.no_grad():
        emb = torch.zeros(vocab_size, H)
        emb[:, :m] = 3.0 * codes
        model.embedding.weight.copy_(emb)
        lstm = model.lstm
        # Noise on the gates; little on the cell input g, whose errors the memory accumulates.
        w_ih, w_hh = noise(4 * H, H, scale=0.01), noise(4 * H, H, scale=0.01)
        w_ih[2 * H : 3 * H] *= 0.05
        w_hh[2 * H : 3 * H] *= 0.05
        w_ih[2 * H : 2 * H + m, :m] += torch.eye(m)  # cell input g = tanh(3 code)
        lstm.weight_ih_l0.copy_(w_ih)
        lstm.weight_hh_l0.copy_(w_hh)
        bias = torch.zeros(4 * H)
        bias[:H], bias[H : 2 * H], bias[3 * H :] = 8.0, math.log(0.7 / 0.3), 8.0  # i, f, o
        lstm.bias_ih_l0.copy_(bias)
        lstm.bias_hh_l0.zero_()
        p = noise(J, H, scale=0.01)
        p[:m, :m] -= S * torch.eye(m)
        model.pred_proj.weight.copy_(p)
        model.pred_proj.bias.fill_(-0.5)  # a threshold that keeps encoder noise out of the joint
        # Orthonormal rows: well conditioned, so encoder outputs keep the targets' scale.
        w_e = torch.linalg.qr(noise(enc_dim, J, scale=1.0))[0].T.contiguous()
        model.enc_proj.weight.copy_(w_e)
        model.enc_proj.bias.zero_()
        out = noise(vocab_size + n_dur, J, scale=0.02)
        out[:vocab_size, :m] += gamma / w * codes
        out_bias = torch.zeros(vocab_size + n_dur)
        out_bias[blank_id] = gamma * beta
        for i in range(n_dur):
            out[vocab_size + i, m + i] += gamma
        model.out.weight.copy_(out)
        model.out.bias.copy_(out_bias)
    model._plant = _Plant(codes, w_e.T.contiguous(), A, m, tuple(durations or ()))
    return model.to(dtype).eval()


@dataclass
class PlantedBatch:
    enc: torch.Tensor  # (B, T, D)
    lengths: torch.Tensor  # (B,)
    labels: list[list[list[int]]]  # planted labels of each frame of each utterance


def planted_batch(
    model: ReferenceTransducer,
    batch_size: int,
    max_frames: int,
    min_frames: int | None = None,
    label_probs: tuple[float, ...] = (0.72, 0.2, 0.06, 0.02),
    noise: float = 0.3,
    seed: int = 0,
    device="cpu",
) -> PlantedBatch:
    """Encoder outputs (B, T, D) whose greedy decoding follows planted alignments.

    label_probs[n]: probability that a frame carries n labels (default: 72% blank frames,
    then 1, 2, 3 labels). Lengths are drawn from [min_frames, max_frames] (default
    max_frames // 2); the first utterance has ``max_frames``. No label repeats one of the last
    eight, so the predictor's memory never suppresses a planted label.
    """
    plant: _Plant = model._plant
    gen = torch.Generator().manual_seed(seed)
    lo = max_frames // 2 if min_frames is None else min_frames
    lengths = torch.randint(lo, max_frames + 1, (batch_size,), generator=gen)
    if batch_size:
        lengths[0] = max_frames
    V, m, A = model.vocab_size, plant.code_dims, plant.strength
    J = model.out.in_features
    probs = torch.tensor(label_probs)
    target = torch.zeros(batch_size, max_frames, J)
    planted = []
    for b in range(batch_size):
        frames, recent = [], []
        counts = torch.multinomial(probs, int(lengths[b]), replacement=True, generator=gen)
        for t, n in enumerate(counts.tolist()):
            labels = []
            while len(labels) < n:
                k = int(torch.randint(V, (1,), generator=gen))
                if k != model.blank_id and k not in recent[-8:] and k not in labels:
                    labels.append(k)
            for i, k in enumerate(labels):
                target[b, t, :m] += A * (1.0 - 0.08 * i) * plant.codes[k]
            recent += labels
            frames.append(labels)
        if plant.durations:
            _plant_durations(target[b], frames, plant.durations, m, A)
        planted.append(frames)
    target += torch.randn(target.shape, generator=gen) * noise
    enc = target @ plant.enc_pinv.T
    dtype = model.out.weight.dtype
    return PlantedBatch(enc.to(device, dtype), lengths.to(device), planted)


def _plant_durations(target, frames, durations, m, strength):
    """Frames with several labels: duration 0; others: the largest duration <= the distance to
    the next labelled frame (skipping the blank frames between)."""
    positive = sorted(d for d in durations if d > 0)
    labelled = [t for t, labels in enumerate(frames) if labels] + [len(frames)]
    nxt = 0
    for t, labels in enumerate(frames):
        while labelled[nxt] <= t:
            nxt += 1
        if len(labels) >= 2 and 0 in durations:
            d = 0
        else:
            gap = labelled[nxt] - t
            d = max((x for x in positive if x <= gap), default=positive[0])
        target[t, m + durations.index(d)] += strength


def label_statistics(hyps, lengths) -> dict:
    """Label statistics of decoded hypotheses: how trained-like the workload is.

    frames, labels, labels_per_frame; frames_with_labels: fraction of frames with >= 1 label;
    labels_in_frame: {0: n, 1: n, 2: n, "3+": n} over frames; max_labels_in_frame; for TDT the
    histogram of durations.
    """
    lengths = [int(x) for x in lengths]
    hist = {0: 0, 1: 0, 2: 0, "3+": 0}
    total_labels, max_in_frame, durs = 0, 0, {}
    for hyp, n in zip(hyps, lengths, strict=True):
        per_frame = {}
        for t in hyp.timestamps:
            per_frame[t] = per_frame.get(t, 0) + 1
        for c in per_frame.values():
            hist[c if c < 3 else "3+"] += 1
            max_in_frame = max(max_in_frame, c)
        hist[0] += n - len(per_frame)
        total_labels += len(hyp.tokens)
        for d in hyp.durations:
            durs[d] = durs.get(d, 0) + 1
    frames = sum(lengths)
    stats = {
        "utterances": len(lengths),
        "frames": frames,
        "labels": total_labels,
        "labels_per_frame": total_labels / max(frames, 1),
        "frames_with_labels": 1.0 - hist[0] / max(frames, 1),
        "labels_in_frame": hist,
        "max_labels_in_frame": max_in_frame,
    }
    if durs:
        stats["durations"] = dict(sorted(durs.items()))
    return stats


def greedy_variants(durations: tuple[int, ...]) -> tuple[list, list[str]]:
    """The greedy searches transducer tests run on every case — frame-looping, label-looping,
    WIND (window 4) and TDT with ``durations`` — and their pytest ids."""
    from ..transducer.options import GreedyOptions

    options = [
        GreedyOptions("frame_looping"),
        GreedyOptions("label_looping"),
        GreedyOptions("wind", window=4),
        GreedyOptions("label_looping", durations=durations),
    ]
    return options, ["frame", "label", "wind", "tdt"]

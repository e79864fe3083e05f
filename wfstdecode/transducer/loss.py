"""RNN-T and TDT training losses in plain PyTorch; autograd supplies the gradient.

Both compute the forward variables alpha in log space. Unreachable cells hold the finite
`_NEG` instead of -inf: logaddexp/logsumexp of all -inf inputs has a NaN gradient, a
finite stand-in has a harmless one. Padding beyond the lengths is overwritten before the
recursion, so garbage there (even NaN) changes neither the loss nor the gradient.
"""

import numbers

import torch
from torch import Tensor

_NEG = -1.0e30  # "log 0"; finite so that every backward stays NaN-free
# A d = 0 label's log weight below this counts as this (exp(-1e4) is 0 in any float): the
# prefix sums of `tdt_loss`'s chain subtract sums of weights, which -inf (a masked logit) or
# `_NEG` would turn into NaN or into a cancellation of every digit.
_CHAIN_FLOOR = -1.0e4


def _prepare(logits, targets, logit_lengths, target_lengths, blank_id, classes):
    """Check the shapes, lengths and blank (``classes``: the token logits' count), upcast half
    precision, mask padded frames/labels; returns (logits, targets, logit_lengths,
    target_lengths), the targets and lengths as int64 (uint8 ones would index as masks)."""
    if logits.dim() != 4 or targets.dim() != 2:
        raise ValueError("expected logits [B, T, U+1, V] and targets [B, U]")
    if targets.is_floating_point() or targets.is_complex() or targets.dtype == torch.bool:
        raise ValueError(f"targets must be an integer tensor; got {targets.dtype}")
    B, T, U1, _ = logits.shape
    if targets.shape != (B, U1 - 1):
        raise ValueError(f"targets shape {tuple(targets.shape)} != {(B, U1 - 1)}")
    for name, lengths, low, high in (("logit_lengths", logit_lengths, 1, T),
                                     ("target_lengths", target_lengths, 0, U1 - 1)):  # fmt: skip
        if (not isinstance(lengths, Tensor) or lengths.shape != (B,)
                or lengths.is_floating_point() or lengths.dtype == torch.bool):  # fmt: skip
            raise ValueError(f"{name} must be an integer tensor of shape ({B},); got "
                             f"{getattr(lengths, 'dtype', type(lengths).__name__)} of shape "
                             f"{tuple(getattr(lengths, 'shape', ()))}")  # fmt: skip
        if B and not bool(((lengths >= low) & (lengths <= high)).all()):
            raise ValueError(f"{name} must be in [{low}, {high}] (the logits' padded size); "
                             f"got {lengths.tolist()}")  # fmt: skip
    if (
        isinstance(blank_id, bool)
        or not isinstance(blank_id, numbers.Integral)
        or not (0 <= blank_id < classes)
    ):
        raise ValueError(f"blank_id must be a token index in [0, {classes}); got {blank_id!r}")
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()  # the alpha sums need more than 8-11 mantissa bits
    logit_lengths, target_lengths = logit_lengths.long(), target_lengths.long()
    dev = logits.device
    t_ok = torch.arange(T, device=dev)[None, :] < logit_lengths[:, None]
    u_ok = torch.arange(U1, device=dev)[None, :] <= target_lengths[:, None]
    ok = (t_ok[:, :, None] & u_ok[:, None, :])[..., None]
    # Zeros (not the caller's padding) beyond the lengths: keeps NaN/inf padding out of
    # the unused cells, whose zero gradients would otherwise multiply a NaN.
    logits = torch.where(ok, logits, torch.zeros((), dtype=logits.dtype, device=dev))
    targets = targets.long()  # (gather takes int64 only: int32 is torchaudio's convention)
    targets = torch.where(u_ok[:, 1:], targets, torch.zeros_like(targets))
    # Checked here, not left to gather: its message names no label, and on a GPU an index out
    # of range is a device-side assert that ends the process's CUDA context.
    outside = (targets < 0) | (targets >= classes)
    if bool(outside.any()):
        b, u = (int(i) for i in outside.nonzero()[0])
        raise ValueError(
            f"targets[{b}, {u}] = {int(targets[b, u])} (within target_lengths[{b}]"
            f" = {int(target_lengths[b])}) is not a token index in [0, {classes})"
        )
    return logits, targets, logit_lengths, target_lengths


def _log_softmax(x: Tensor) -> Tensor:
    """log_softmax over the last axis with a masked logit's -inf raised to `_NEG`: -inf in a
    cell would reach logaddexp/logsumexp as -inf + -inf wherever every way into a cell is
    masked, and their NaN gradient would spread to every logit (finite loss, NaN gradient)."""
    return x.log_softmax(-1).clamp(min=_NEG)


def _label_logp(logp: Tensor, targets: Tensor) -> Tensor:
    """log p(y_{u+1} | t, u) as [B, T, U+1]; the last column (no next label) is `_NEG`."""
    B, T, U1, _ = logp.shape
    idx = targets[:, None, :, None].expand(B, T, U1 - 1, 1)
    emit = logp[:, :, :-1].gather(-1, idx).squeeze(-1)
    return torch.nn.functional.pad(emit, (0, 1), value=_NEG)


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"unknown reduction {reduction!r}")


def _shift_u(x: Tensor) -> Tensor:
    """x[:, u] -> x[:, u-1] along the label axis: a label emission moves u to u+1."""
    return torch.nn.functional.pad(x[:, :-1], (1, 0), value=_NEG)


def rnnt_loss(
    logits: Tensor,
    targets: Tensor,
    logit_lengths: Tensor,
    target_lengths: Tensor,
    blank_id: int,
    reduction: str = "mean",
) -> Tensor:
    """RNN-T negative log-likelihood (Graves 2012), summed over all alignments.

    logits: [B, T, U+1, V] unnormalised joint outputs (log_softmax is applied here);
    targets: int64 [B, U]; logit_lengths, target_lengths: int64 [B] with
    1 <= T_b <= T and 0 <= U_b <= U; blank_id: the blank's column (targets never hold
    it). A label keeps the frame, a blank advances it:
    alpha[t, u] = logaddexp(alpha[t-1, u] + blank(t-1, u), alpha[t, u-1] + y_u(t, u-1)),
    loss_b = -(alpha[T_b-1, U_b] + blank(T_b-1, U_b)). reduction: "mean" (of the
    per-utterance losses), "sum" or "none" ([B]). Half inputs are computed in float32. A
    masked logit (-inf) is a probability of 0 with finite gradients; an utterance every path
    of which takes one gets a loss of about 1e30 (not inf).
    """
    logits, targets, logit_lengths, target_lengths = _prepare(
        logits, targets, logit_lengths, target_lengths, blank_id, logits.shape[-1]
    )
    B, T, U1, _ = logits.shape
    logp = _log_softmax(logits)
    blank = logp[..., blank_id]
    emit = _label_logp(logp, targets)

    # Skew to anti-diagonals: row n, column u holds cell (t = n - u, u). Every cell of
    # diagonal n depends only on diagonal n-1, so one vector step per diagonal.
    dev = logits.device
    n_diag = T + U1 - 1
    u = torch.arange(U1, device=dev)
    t = torch.arange(n_diag, device=dev)[:, None] - u[None, :]
    valid = (t >= 0) & (t < T)
    tc = t.clamp(0, T - 1)
    blank_d = torch.where(valid, blank[:, tc, u], _NEG)
    emit_d = torch.where(valid, emit[:, tc, u], _NEG)

    zero_col = torch.where(u == 0, 0.0, _NEG).to(logp.dtype)
    diags = [zero_col.expand(B, U1)]
    for n in range(1, n_diag):
        prev = diags[-1]
        # Blank from (t-1, u): same column; label from (t, u-1): previous column.
        cur = torch.logaddexp(prev + blank_d[:, n - 1], _shift_u(prev + emit_d[:, n - 1]))
        # Off-grid cells (t < 0 or t >= T) back to _NEG, not drifting to n * _NEG.
        diags.append(torch.where(valid[n], cur, _NEG))
    alpha = torch.stack(diags, 1)  # [B, n_diag, U+1]

    b = torch.arange(B, device=dev)
    last_t = logit_lengths - 1
    ll = alpha[b, last_t + target_lengths, target_lengths] + blank[b, last_t, target_lengths]
    return _reduce(-ll, reduction)


def tdt_loss(
    logits: Tensor,
    targets: Tensor,
    logit_lengths: Tensor,
    target_lengths: Tensor,
    blank_id: int,
    durations: tuple[int, ...],
    sigma: float = 0.0,
    reduction: str = "mean",
    final_blank: bool = True,
) -> Tensor:
    """Token-and-duration transducer loss (Xu et al. 2023), summed over all alignments.

    logits: [B, T, U+1, V + len(durations)]: the first V are token logits (blank among
    them, column ``blank_id``), the rest duration logits, each group log-softmaxed on its
    own; the token log-probs are then lowered by `sigma` (the paper's logit
    under-normalisation, blank included). Shapes and reductions as in `rnnt_loss`.

    From state (t, u) with t < T_b, emitting k-th duration d = durations[k] costs
    log p_tok + log p_dur[k] and moves a label y_{u+1} to (t + d, u + 1) (any d, 0
    included) and a blank to (t + d, u) (d >= 1 only). Nothing may jump past T_b; the
    utterance ends in (T_b, U_b). final_blank=True (NeMo's convention) counts only paths
    whose last step is a blank landing on frame T_b; False also accepts a last label
    landing there. RNN-T is the special case where labels always take d = 0 and blanks
    d = 1, which no label-independent duration head expresses, so the losses differ for
    every `durations`. Utterances no path fits (no 0 in `durations` and T_b too short)
    get a loss of about 1e30. A d = 0 label's log weight below -1e4 counts as -1e4 (a masked
    logit's -inf included: see `_CHAIN_FLOOR`), which only paths that must take such a label
    (probability below exp(-1e4)) feel.
    """
    durations = tuple(int(d) for d in durations)
    if (not durations or len(set(durations)) != len(durations) or min(durations) < 0
            or max(durations) < 1):  # fmt: skip
        raise ValueError(f"durations must be distinct, >= 0 and include one >= 1: {durations}")
    n_dur = len(durations)
    logits, targets, logit_lengths, target_lengths = _prepare(
        logits, targets, logit_lengths, target_lengths, blank_id, logits.shape[-1] - n_dur
    )
    B, T, U1, _ = logits.shape
    logp = _log_softmax(logits[..., :-n_dur]) - sigma
    dur = _log_softmax(logits[..., -n_dur:])
    blank_w = logp[..., blank_id, None] + dur  # [B, T, U+1, K]
    label_w = _label_logp(logp, targets)[..., None] + dur
    k0 = durations.index(0) if 0 in durations else None
    jumps = [(k, d) for k, d in enumerate(durations) if d >= 1]

    def chain(pre: Tensor, t: int) -> Tensor:
        # Labels with d = 0 stay in row t, so alpha[t, u] = logsumexp over u' <= u of
        # pre[u'] + w[u'] + ... + w[u-1]: one logcumsumexp against the prefix sums C, in
        # float64 (C - C' cancels the sums' digits) over weights floored at _CHAIN_FLOOR.
        w = label_w[:, t, :-1, k0].double().clamp(min=_CHAIN_FLOOR)
        c = torch.nn.functional.pad(w.cumsum(-1), (1, 0))
        return (c + torch.logcumsumexp(pre.double() - c, -1)).to(pre.dtype)

    dev = logits.device
    start = torch.where(torch.arange(U1, device=dev) == 0, 0.0, _NEG).to(logp.dtype)
    rows = [start.expand(B, U1)]
    if k0 is not None:
        rows[0] = chain(rows[0], 0)
    ends = [torch.full_like(rows[0], _NEG)]  # arrivals from earlier frames, per row
    for t in range(1, T + 1):
        src = [(k, t - d) for k, d in jumps if d <= t]
        if not src:  # every jump is longer than t (durations without 1): nothing arrives
            by_blank = by_label = torch.full_like(rows[0], _NEG)
        else:
            by_blank = torch.stack([rows[s] + blank_w[:, s, :, k] for k, s in src]).logsumexp(0)
            by_label = torch.stack([rows[s] + label_w[:, s, :, k] for k, s in src]).logsumexp(0)
        pre = torch.logaddexp(by_blank, _shift_u(by_label))
        ends.append(by_blank if final_blank else pre)
        # Frame t itself may still emit labels with d = 0 (a no-op past the last frame).
        rows.append(chain(pre, t) if k0 is not None and t < T else pre)

    # Loss from the arrivals only: a d = 0 label emitted at frame T_b would be past the end.
    end = torch.stack(ends, 1)  # [B, T+1, U+1]
    ll = end[torch.arange(B, device=dev), logit_lengths, target_lengths]
    return _reduce(-ll, reduction)

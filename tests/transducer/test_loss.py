"""RNN-T and TDT losses against an oracle that enumerates every alignment one by one."""

import math
import time

import numpy as np
import pytest
import torch

from wfstdecode.transducer.loss import rnnt_loss, tdt_loss


def _log_softmax(row):
    m = max(row)
    z = m + math.log(sum(math.exp(v - m) for v in row))
    return [v - z for v in row]


def _rnnt_paths(T, U):
    """Every RNN-T alignment of a T-frame, U-label utterance: steps (t, u, is_label)."""

    def walk(t, u):
        if u < U:  # a label keeps the frame
            for rest in walk(t, u + 1):
                yield [(t, u, True), *rest]
        if t + 1 < T:  # a blank moves to the next frame
            for rest in walk(t + 1, u):
                yield [(t, u, False), *rest]
        elif u == U:  # the closing blank on the last frame
            yield [(t, u, False)]

    return list(walk(0, 0))


def _tdt_paths(T, U, durations, final_blank):
    """Every TDT alignment: steps (t, u, is_label, k) landing exactly on (T, U)."""

    def walk(t, u):
        for k, d in enumerate(durations):
            if u < U and t + d <= T:
                if t + d < T:
                    for rest in walk(t + d, u + 1):
                        yield [(t, u, True, k), *rest]
                elif u + 1 == U and not final_blank:
                    yield [(t, u, True, k)]
            if d >= 1 and t + d <= T:
                if t + d < T:
                    for rest in walk(t + d, u):
                        yield [(t, u, False, k), *rest]
                elif u == U:
                    yield [(t, u, False, k)]

    return list(walk(0, 0))


def brute_rnnt(logits, targets, T, U, blank):
    x = logits.tolist()
    total = 0.0
    for path in _rnnt_paths(T, U):
        lp = 0.0
        for t, u, is_label in path:
            ls = _log_softmax(x[t][u])
            lp += ls[targets[u]] if is_label else ls[blank]
        total += math.exp(lp)
    return -math.log(total)


def brute_tdt(logits, targets, T, U, blank, durations, sigma, final_blank):
    x, n_dur = logits.tolist(), len(durations)
    total = 0.0
    for path in _tdt_paths(T, U, durations, final_blank):
        lp = 0.0
        for t, u, is_label, k in path:
            tok = _log_softmax(x[t][u][:-n_dur])
            lp += (tok[targets[u]] if is_label else tok[blank]) - sigma
            lp += _log_softmax(x[t][u][-n_dur:])[k]
        total += math.exp(lp)
    return -math.log(total) if total > 0 else math.inf


def _batch(seed, B, T, U, V, extra=0, lengths=None):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, U + 1, V + extra, generator=g, dtype=torch.float64) * 2
    targets = torch.randint(0, V, (B, U), generator=g)
    if lengths is None:
        tl = torch.randint(1, T + 1, (B,), generator=g)
        ul = torch.randint(0, U + 1, (B,), generator=g)
        tl[0], ul[0] = T, U  # the full padded size at least once
    else:
        tl, ul = (torch.tensor(v) for v in zip(*lengths, strict=True))
    return logits, targets, tl, ul


EDGES = [(1, 0), (1, 3), (4, 0), (2, 1), (3, 2), (4, 3)]  # (T_b, U_b), T = 1 and U = 0


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("blank", [0, 2])
def test_rnnt_matches_brute_force(seed, blank):
    for lengths in (EDGES, None):
        logits, targets, tl, ul = _batch(seed, 6, 4, 3, 3 + seed % 2, lengths=lengths)
        got = rnnt_loss(logits, targets, tl, ul, blank, reduction="none")
        for b in range(len(tl)):
            T, U = int(tl[b]), int(ul[b])
            want = brute_rnnt(logits[b], targets[b].tolist(), T, U, blank)
            assert got[b].item() == pytest.approx(want, rel=1e-9), (T, U)


@pytest.mark.parametrize(
    "durations", [(0, 1, 2), (0, 1, 2, 3, 4), (1, 2), (2, 0, 1), (0, 2), (2, 3)]
)  # (no 1: frames where no jump fits)
@pytest.mark.parametrize("sigma", [0.0, 0.05])
@pytest.mark.parametrize("final_blank", [True, False])
def test_tdt_matches_brute_force(durations, sigma, final_blank):
    for seed, lengths in enumerate((EDGES, None, None)):
        V = 3 + seed % 2
        logits, targets, tl, ul = _batch(seed, 6, 4, 3, V, len(durations), lengths)
        got = tdt_loss(
            logits, targets, tl, ul, 1, durations, sigma, "none", final_blank=final_blank
        )
        for b in range(len(tl)):
            T, U = int(tl[b]), int(ul[b])
            want = brute_tdt(logits[b], targets[b].tolist(), T, U, 1, durations, sigma, final_blank)
            if math.isinf(want):  # no alignment fits (durations without 0)
                assert got[b].item() > 1e29
            else:
                assert got[b].item() == pytest.approx(want, rel=1e-9), (T, U)


def test_reductions():
    logits, targets, tl, ul = _batch(0, 4, 4, 3, 3)
    none = rnnt_loss(logits, targets, tl, ul, 0, reduction="none")
    assert none.shape == (4,)
    assert torch.allclose(rnnt_loss(logits, targets, tl, ul, 0), none.mean())
    assert torch.allclose(rnnt_loss(logits, targets, tl, ul, 0, reduction="sum"), none.sum())
    with pytest.raises(ValueError):
        rnnt_loss(logits, targets, tl, ul, 0, reduction="max")
    with pytest.raises(ValueError):
        tdt_loss(logits, targets, tl, ul, 0, durations=(0,))


@pytest.mark.parametrize("kind", ["rnnt", "tdt"])
def test_a_masked_logit_is_a_zero_probability(kind):
    """A logit of -inf (masking a token or a duration) gives the limit of ever lower logits
    (-1e3: exp(-1e3) is 0 next to the other paths, in float64 too) and finite gradients: TDT's
    chain of d = 0 labels subtracted prefix sums, -inf - -inf."""
    durations, extra = ((0, 1, 2), 3) if kind == "tdt" else ((), 0)

    def loss(z):
        if kind == "rnnt":
            return rnnt_loss(z, targets, tl, ul, 0, "none")
        return tdt_loss(z, targets, tl, ul, 0, durations, reduction="none")

    logits, targets, tl, ul = _batch(0, 1, 3, 2, 4, extra, [(3, 2)])
    for cell in ((0, 2, 0, int(targets[0, 0])), (0, 1, 1, 4)):  # a label; TDT: duration 0
        if kind == "rnnt" and cell[3] == 4:
            continue
        masked, low = logits.clone(), logits.clone()
        masked[cell], low[cell] = -math.inf, -1e3
        masked.requires_grad_()
        value = loss(masked)
        value.sum().backward()
        assert value.item() == pytest.approx(loss(low).item(), rel=1e-12)
        assert torch.isfinite(masked.grad).all()


@pytest.mark.parametrize("kind", ["rnnt", "tdt"])
def test_a_cell_whose_every_way_in_is_masked_keeps_gradients_finite(kind):
    """RNN-T: blank(0, 1) and the label at (1, 0) masked, the only two ways into cell (1, 1);
    TDT: the blank at (0, 0) masked, T = 1, so every duration's blank from frame 0 is -inf.
    The loss stays finite (other paths), so must every gradient: -inf + -inf into logaddexp /
    logsumexp had a NaN gradient that spread to every logit."""
    if kind == "rnnt":
        logits, targets, tl, ul = _batch(5, 1, 3, 2, 3, 0, [(3, 2)])
        cells = ((0, 0, 1, 0), (0, 1, 0, max(1, int(targets[0, 0]))))
    else:
        logits, targets, tl, ul = _batch(5, 1, 1, 1, 3, 2, [(1, 1)])
        cells = ((0, 0, 0, 0),)
    targets = targets.clamp(min=1)  # (not the blank: the blank masked is no label masked)

    def loss(z):
        if kind == "rnnt":
            return rnnt_loss(z, targets, tl, ul, 0, "sum")
        return tdt_loss(z, targets, tl, ul, 0, (0, 1), reduction="sum")

    masked, low = logits.clone(), logits.clone()
    for cell in cells:
        masked[cell], low[cell] = -math.inf, -1e3
    masked.requires_grad_()
    value = loss(masked)
    value.backward()
    assert math.isfinite(value.item())
    assert value.item() == pytest.approx(loss(low).item(), rel=1e-12)
    assert torch.isfinite(masked.grad).all()


def test_bad_lengths_and_blank_raise():
    logits, targets, tl, ul = _batch(0, 2, 3, 2, 4, 3)
    for args, match in (
        ((tl, torch.tensor([-1, 0])), r"target_lengths must be in \[0, 2\]"),
        ((tl, torch.tensor([3, 0])), r"target_lengths must be in \[0, 2\]"),
        ((torch.tensor([0, 3]), ul), r"logit_lengths must be in \[1, 3\]"),
        ((torch.tensor([3]), ul), r"logit_lengths must be an integer tensor of shape \(2,\)"),
        ((tl.float(), ul), "logit_lengths must be an integer tensor"),
    ):
        with pytest.raises(ValueError, match=match):
            tdt_loss(logits, targets, *args, 0, (0, 1, 2))
        with pytest.raises(ValueError, match=match):
            rnnt_loss(logits[..., :4], targets, *args, 0)
    with pytest.raises(ValueError, match="target_lengths must be an integer tensor"):
        tdt_loss(logits, targets, tl, ul.bool(), 0, (0, 1, 2))
    assert torch.isfinite(tdt_loss(logits, targets, tl, ul, np.int64(0), (0, 1, 2)))
    small = tdt_loss(logits, targets, tl.to(torch.uint8), ul.to(torch.int16), 0, (0, 1, 2))
    assert small == tdt_loss(logits, targets, tl, ul, 0, (0, 1, 2))  # (uint8 indexed as masks)
    for blank in (-1, 4, True):
        with pytest.raises(ValueError, match=r"blank_id must be a token index in \[0, 4\)"):
            tdt_loss(logits, targets, tl, ul, blank, (0, 1, 2))


def test_bad_targets_raise_naming_the_label_and_int32_ones_are_read():
    """A label outside the token range (within the target lengths) raised gather's "index 5 is
    out of bounds for dimension 3" (on a GPU a device-side assert); int32 targets (torchaudio's
    type) raised gather's dtype error; no durations at all raised min()'s."""
    logits, targets, tl, ul = _batch(0, 2, 3, 2, 4, 3, [(3, 2), (3, 1)])
    for bad in (4, -1):
        tgt = targets.clone()
        tgt[0, 1] = bad
        match = rf"targets\[0, 1\] = {bad} .* not a token index in \[0, 4\)"
        with pytest.raises(ValueError, match=match):
            tdt_loss(logits, tgt, tl, ul, 0, (0, 1, 2))
        with pytest.raises(ValueError, match=match):
            rnnt_loss(logits[..., :4], tgt, tl, ul, 0)
    tgt = targets.clone()
    tgt[1, 1] = -1  # beyond target_lengths[1] = 1: padding, ignored
    assert rnnt_loss(logits, tgt, tl, ul, 0) == rnnt_loss(logits, targets, tl, ul, 0)
    assert rnnt_loss(logits, targets.int(), tl, ul, 0) == rnnt_loss(logits, targets, tl, ul, 0)
    with pytest.raises(ValueError, match="targets must be an integer tensor"):
        rnnt_loss(logits, targets.float(), tl, ul, 0)
    with pytest.raises(ValueError, match=r"durations must be .*: \(\)"):
        tdt_loss(logits, targets, tl, ul, 0, ())


def test_gradcheck():
    logits, targets, tl, ul = _batch(1, 3, 3, 2, 3, 3, lengths=[(3, 2), (2, 1), (1, 0)])
    x = logits[..., :3].clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda z: rnnt_loss(z, targets, tl, ul, 0, "sum"), (x,))
    x = logits.clone().requires_grad_()
    assert torch.autograd.gradcheck(
        lambda z: tdt_loss(z, targets, tl, ul, 0, (0, 1, 2), 0.05, "sum"), (x,)
    )


@pytest.mark.parametrize("kind", ["rnnt", "tdt"])
def test_padding_is_ignored_and_gradients_finite(kind):
    durations = (0, 1, 2, 3, 4)
    extra = len(durations) if kind == "tdt" else 0

    def loss(z, tgt):
        if kind == "rnnt":
            return rnnt_loss(z, tgt, tl, ul, 0, "none")
        return tdt_loss(z, tgt, tl, ul, 0, durations, 0.05, "none")

    logits, targets, tl, ul = _batch(2, 4, 12, 5, 6, extra, [(12, 5), (7, 2), (3, 0), (1, 4)])
    x = logits.float().requires_grad_()
    base = loss(x, targets)
    base.sum().backward()
    assert torch.isfinite(x.grad).all()

    # Garbage beyond the lengths: huge values, inf, NaN, out-of-range labels.
    pad = x.detach().clone()
    tgt = targets.clone()
    for b, (T, U) in enumerate(zip(tl.tolist(), ul.tolist(), strict=True)):
        pad[b, T:] = 1e4
        pad[b, :, U + 1 :] = float("nan")
        tgt[b, U:] = -1
    pad[3, 2:, 0, 0] = float("inf")
    pad.requires_grad_()
    padded = loss(pad, tgt)
    padded.sum().backward()
    assert torch.equal(padded, base)
    assert torch.equal(pad.grad, x.grad)


def test_large_batch_runs():
    """Not a speed test: B=8, T=100, U=30, V=30 forward + backward, both losses."""
    logits, targets, tl, ul = _batch(3, 8, 100, 30, 30, 5)
    for kind in ("rnnt", "tdt"):
        x = (logits[..., :30] if kind == "rnnt" else logits).float().requires_grad_()
        start = time.perf_counter()
        if kind == "rnnt":
            loss = rnnt_loss(x, targets, tl, ul, 0)
        else:
            loss = tdt_loss(x, targets, tl, ul, 0, (0, 1, 2, 3, 4))
        loss.backward()
        elapsed = time.perf_counter() - start
        print(f"{kind}: forward + backward {elapsed * 1e3:.0f} ms")
        assert torch.isfinite(loss) and torch.isfinite(x.grad).all()


def test_matches_torchaudio():
    taf = pytest.importorskip("torchaudio.functional")
    logits, targets, tl, ul = _batch(4, 5, 20, 6, 8)
    targets = targets.clamp(min=1)  # torchaudio rejects blank inside the targets
    x = logits.float()
    want = taf.rnnt_loss(x, targets.int(), tl.int(), ul.int(), blank=0, reduction="none")
    got = rnnt_loss(x, targets, tl, ul, 0, reduction="none")
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-4)

"""The loop programs of batched greedy transducer decoding (frame-looping, label-looping,
WIND): fixed-shape tensors plus four in-place steps

    init_();  while outer_flag: { outer_begin_();  while inner_flag: inner_step_();  outer_end_() }

The steps never read a device value on the host and never rebind their tensors, so the same
code runs eagerly (`run_eager`: the flags read once per iteration, the only host syncs), as
captured CUDA graphs driven from Python, or as one CUDA graph whose loops are conditional
while-nodes (`graphs.py`). `greedy.py` checks the inputs and picks the driver.
"""

from __future__ import annotations

import math
import os

import torch

from ..buffers import BatchedSequences
from ..errors import DecodeInputError, DeviceMemoryError
from ..results import Hypothesis
from .model import ModelAdapter, clone_state, copy_state_, select_state
from .options import GreedyOptions

__all__ = ["FrameLooping", "LabelLooping", "host_flag", "make_program", "run_eager"]


def make_program(adapter, enc, lengths, options, vocab, fixed):
    cls = FrameLooping if options.algorithm == "frame_looping" else LabelLooping
    return cls(adapter, enc, lengths, options, vocab, fixed=fixed)


def host_flag(flag: torch.Tensor) -> bool:
    """Read a loop condition: the one deliberate host sync per eager loop iteration.

    Under ``torch.cuda.set_sync_debug_mode`` the check is exempted here so that the debug mode
    flags any *other* sync in the loop bodies (the "full" CUDA-graph mode has none at all).
    """
    if flag.device.type != "cuda":
        return bool(flag)
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode(0)
    try:
        return bool(flag)
    finally:
        torch.cuda.set_sync_debug_mode(previous)


def run_eager(p) -> None:
    p.init_()
    while host_flag(p.outer_flag):
        p.outer_begin_()
        while host_flag(p.inner_flag):
            p.inner_step_()
        p.outer_end_()


class _Program:
    """Tensors and steps shared by both loop programs."""

    def __init__(self, adapter: ModelAdapter, enc, lengths, options: GreedyOptions, vocab, fixed):
        B, T, _ = enc.shape
        dev = enc.device
        self.adapter, self.blank, self.vocab = adapter, adapter.blank_id, vocab
        self.B, self.T = B, T
        self.max_symbols = options.max_symbols_per_frame
        durs = options.durations
        self.width = vocab + len(durs or ())  # of the joint's logits, as probed
        self.durations = None if durs is None else torch.tensor(durs, device=dev)
        # In graph modes these are the static inputs the caller refills before each replay.
        self.enc_in = enc.clone() if fixed else enc
        self.lengths = lengths.clone() if fixed else lengths
        self.enc = None  # projected encoder output, set by init_()
        self.rows = torch.arange(B, device=dev)
        self.outer_flag = torch.zeros((), dtype=torch.bool, device=dev)
        self.inner_flag = torch.zeros((), dtype=torch.bool, device=dev)
        self.sym_count = torch.zeros(B, dtype=torch.long, device=dev)  # labels at current frame
        fields = {"labels": torch.long, "timestamps": torch.long}
        if durs is not None:
            fields["durations"] = torch.long
        # Proven bound for graph modes (storage must not move): at most max_symbols per frame.
        capacity = max(T * self.max_symbols, 1) if fixed else max(T + T // 2, 16)
        if fixed:
            check_memory(
                dev,
                B * (capacity + 1) * 8 * len(fields),
                f"the CUDA-graph label buffers ({B} utterances x {T} frames x "
                f"max_symbols_per_frame={self.max_symbols})",
                "lower max_symbols_per_frame, or use cuda_graphs='off' (its buffers grow as "
                "labels come)",
            )
        self.hyps = BatchedSequences(
            B, capacity, fields, dev, score_dtype=torch.float64, growable=not fixed
        )
        self.state = clone_state(adapter.model.init_state(B, dev))
        self.pred = None  # projected predictor output, allocated on first use

    def load_(self, enc, lengths) -> None:
        """Refill the static inputs (graph modes)."""
        self.enc_in.copy_(enc)
        self.lengths.copy_(lengths)

    def _hold_(self, name: str, value: torch.Tensor) -> None:
        """Bind on first use, copy in place afterwards: graph replays need fixed addresses."""
        current = getattr(self, name)
        if current is None:
            setattr(self, name, value)
        elif current is not value:
            current.copy_(value)

    def _set_pred_(self, pred: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        want = (self.B, pred.shape[-1]) if self.pred is None else tuple(self.pred.shape)
        _check_shape("model.predict (after any projection) returned an output", pred, want)
        if self.pred is None:
            self.pred = torch.zeros_like(pred)
        self.pred.copy_(pred if mask is None else torch.where(mask.unsqueeze(1), pred, self.pred))

    def _joint(self, enc_rows: torch.Tensor, pred_rows: torch.Tensor) -> torch.Tensor:
        """The joint's logits, held to the probed width (in graph modes checked at capture:
        replays cannot change shapes)."""
        logits = self.adapter.joint(enc_rows, pred_rows)
        _check_shape("model.joint returned logits", logits, (enc_rows.shape[0], self.width))
        return logits

    def _choose(self, logits: torch.Tensor):
        """Greedy choice over the last dim: (label, its log-prob [+ duration's], duration).

        The argmax reads the logits as they are (first maximum wins, in every algorithm alike);
        the log-probabilities are computed in float64 so that scores summed in different orders
        by different algorithms agree to well under 1e-4.
        """
        label, lp = _argmax_logprob(logits[..., : self.vocab])
        if self.durations is None:
            return label, lp, None
        idx, dur_lp = _argmax_logprob(logits[..., self.vocab :])
        return label, lp + dur_lp, self.durations[idx]

    def _append_(self, mask, labels, timestamps, durations=None) -> None:
        values = {"labels": labels, "timestamps": timestamps}
        if self.durations is not None:
            values["durations"] = durations
        self.hyps.append_(mask, **values)

    def hypotheses(self, notes=()) -> list[Hypothesis]:
        """The results; raises if a choice the search used was made on non-finite logits.

        Every used choice adds its log-probability to the score: finite logits give a finite
        one (>= -log V), NaN, +inf, or -inf for every token give NaN. So the one check is here,
        on scores the host reads anyway: no flag, no sync in the loops, the same in every
        algorithm and graph mode. Rows the search computes but does not use (padding, finished
        utterances) do not count, and -inf for tokens a model rules out is fine.
        """
        _, scores, fields = self.hyps.to_lists()
        bad = [b for b, score in enumerate(scores) if not math.isfinite(score)]
        if bad:
            raise DecodeInputError(
                f"model.joint returned non-finite logits (NaN, +inf, or -inf for every token) "
                f"in the search of utterance {bad[0]} ({len(bad)} of {self.B} utterances), from "
                "finite encoder output: check the model's predictor, projections and joint"
            )
        durs = fields.get("durations", [()] * self.B)
        return [
            Hypothesis(
                tokens=tuple(fields["labels"][b]),
                timestamps=tuple(fields["timestamps"][b]),
                durations=tuple(durs[b]),
                score=scores[b],
                acoustic_score=scores[b],
                notes=tuple(notes),
            )
            for b in range(self.B)
        ]


class FrameLooping(_Program):
    """The batched baseline (label-looping paper, Algorithm 2), RNN-T only.

    All utterances sit at the same frame; the inner loop runs the predictor for the whole batch
    whenever any utterance emitted, keeping the new state only where it did (`torch.where`).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        dev = self.rows.device
        self.frame = torch.zeros((), dtype=torch.long, device=dev)
        self.pending = torch.zeros(self.B, dtype=torch.bool, device=dev)  # joint due at frame
        self.emit = torch.zeros(self.B, dtype=torch.bool, device=dev)  # label to feed back
        self.label = torch.full((self.B,), self.blank, dtype=torch.long, device=dev)
        self.enc_f = None

    def init_(self) -> None:
        a = self.adapter
        self._hold_("enc", a.encoder(self.enc_in))
        self.frame.zero_()
        self.sym_count.zero_()
        self.hyps.reset_()
        self.label.fill_(self.blank)
        copy_state_(self.state, a.model.init_state(self.B, self.rows.device))
        pred, state = a.predict(self.label, self.state)
        self._set_pred_(pred)
        copy_state_(self.state, state)
        self.outer_flag.copy_((self.lengths > 0).any())

    def outer_begin_(self) -> None:
        # index_select, not enc[:, frame]: indexing by a 0-dim tensor syncs (pytorch#105641).
        self._hold_("enc_f", self.enc.index_select(1, self.frame.view(1)).squeeze(1))
        self.pending.copy_(self.frame < self.lengths)
        self._joint_step_()

    def inner_step_(self) -> None:
        pred, state = self.adapter.predict(self.label, self.state)
        self._set_pred_(pred, self.emit)
        copy_state_(self.state, select_state(self.adapter.model, self.emit, state, self.state))
        self.pending.copy_(self.emit & (self.sym_count < self.max_symbols))
        self._joint_step_()

    def _joint_step_(self) -> None:
        label, lp, _ = self._choose(self._joint(self.enc_f, self.pred))
        self.hyps.add_scores_(self.pending, lp)
        self.emit.copy_(self.pending & (label != self.blank))
        self.label.copy_(label)
        self._append_(self.emit, label, self.frame.expand(self.B))
        self.sym_count += self.emit
        self.inner_flag.copy_(self.emit.any())

    def outer_end_(self) -> None:
        self.frame += 1
        self.sym_count.zero_()
        self.outer_flag.copy_((self.frame < self.lengths).any())


class LabelLooping(_Program):
    """Label-looping (Algorithm 3) for RNN-T and TDT, with an optional WIND window.

    Outer loop: one predictor call per emitted label for the whole batch (no state masking
    needed: every live utterance emitted). Inner loop: utterances whose choice was blank move on
    — one frame (RNN-T), the predicted duration (TDT), or a whole window of blank frames (WIND:
    the joint scores ``window`` frames at once and the first non-blank wins) — until each has a
    label or has run out of frames.
    """

    def __init__(self, adapter, enc, lengths, options, vocab, fixed):
        super().__init__(adapter, enc, lengths, options, vocab, fixed)
        dev = self.rows.device
        B = self.B
        self.window = options.window_for(self.T)
        self.offsets = torch.arange(self.window, device=dev)
        self.t = torch.zeros(B, dtype=torch.long, device=dev)
        self.labels = torch.full((B,), self.blank, dtype=torch.long, device=dev)  # last emitted
        self.next_label = torch.zeros(B, dtype=torch.long, device=dev)
        self.next_dur = torch.zeros(B, dtype=torch.long, device=dev)
        self.active = torch.zeros(B, dtype=torch.bool, device=dev)
        self.searching = torch.zeros(B, dtype=torch.bool, device=dev)

    def init_(self) -> None:
        self._hold_("enc", self.adapter.encoder(self.enc_in))
        self.t.zero_()
        self.sym_count.zero_()
        self.labels.fill_(self.blank)
        self.hyps.reset_()
        copy_state_(self.state, self.adapter.model.init_state(self.B, self.rows.device))
        self.active.copy_(self.lengths > 0)
        self.outer_flag.copy_(self.active.any())

    def outer_begin_(self) -> None:
        pred, state = self.adapter.predict(self.labels, self.state)
        self._set_pred_(pred)
        copy_state_(self.state, state)
        self.searching.copy_(self.active)
        self.inner_step_()

    def inner_step_(self) -> None:
        if self.window == 1:
            self._one_frame_step_()
        else:
            self._window_step_()

    def _one_frame_step_(self) -> None:
        """Label-looping proper (RNN-T and TDT): one joint call per searching utterance."""
        enc_rows = self.enc[self.rows, self.t.clamp(max=self.T - 1)]
        label, lp, dur = self._choose(self._joint(enc_rows, self.pred))
        searching = self.searching
        found = searching & (label != self.blank)
        if self.durations is None:
            steps = (~found).long()  # a blank moves one frame on
        else:
            steps = torch.where(found, 0, dur.clamp(min=1))  # a blank moves its duration, >= 1
            self.next_dur.copy_(torch.where(found, dur, self.next_dur))
        self.hyps.add_scores_(searching, lp)
        self.t += torch.where(searching, steps, 0)
        self.sym_count.masked_fill_(searching & (steps > 0), 0)
        self.next_label.copy_(torch.where(found, label, self.next_label))
        searching &= ~found & (self.t < self.lengths)
        self.inner_flag.copy_(searching.any())

    def _window_step_(self) -> None:
        """WIND (RNN-T): score ``window`` frames at once; the first non-blank one wins."""
        B, W = self.B, self.window
        frames = self.t.unsqueeze(1) + self.offsets  # (B, W)
        valid = frames < self.lengths.unsqueeze(1)
        enc_rows = self.enc[self.rows.unsqueeze(1), frames.clamp(max=self.T - 1)]
        pred_rows = self.pred.unsqueeze(1).expand(B, W, self.pred.shape[-1])
        logits = self._joint(enc_rows.reshape(B * W, -1), pred_rows.reshape(B * W, -1))
        label, lp, _ = self._choose(logits.view(B, W, -1))
        nonblank = (label != self.blank) & valid
        found = nonblank.any(1) & self.searching
        first = nonblank.int().argmax(1, keepdim=True)  # first non-blank frame (0 if none)
        label_lp = torch.where(found, lp.gather(1, first).squeeze(1), 0.0)
        # Blank frames consumed: those before the first non-blank, else every valid one.
        steps = torch.where(found, first.squeeze(1), valid.sum(1))
        blanks = self.offsets < steps.unsqueeze(1)
        delta = torch.where(blanks, lp, 0.0).sum(1) + label_lp
        searching = self.searching
        self.hyps.add_scores_(searching, delta)
        self.t += torch.where(searching, steps, 0)
        self.sym_count.masked_fill_(searching & (steps > 0), 0)
        self.next_label.copy_(
            torch.where(found, label.gather(1, first).squeeze(1), self.next_label)
        )
        searching &= ~found & (self.t < self.lengths)
        self.inner_flag.copy_(searching.any())

    def outer_end_(self) -> None:
        emit = self.t < self.lengths  # still live after the search: found a label
        self._append_(emit, self.next_label, self.t, self.next_dur)
        self.labels.copy_(torch.where(emit, self.next_label, self.labels))
        sym = self.sym_count
        if self.durations is None:
            sym += emit
        else:
            advance = torch.where(emit, self.next_dur, 0)
            sym.copy_(torch.where(advance > 0, 0, sym + emit))
            self.t += advance
        # max_symbols_per_frame reached: leave the frame without a blank (as frame-looping does).
        force = emit & (sym >= self.max_symbols)
        self.t += force
        sym.masked_fill_(force, 0)
        self.active.copy_(self.t < self.lengths)
        self.outer_flag.copy_(self.active.any())


def _argmax_logprob(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    best = logits.argmax(-1, keepdim=True)
    logp = logits.gather(-1, best).double() - logits.double().logsumexp(-1, keepdim=True)
    return best.squeeze(-1), logp.squeeze(-1)


def _check_shape(what: str, tensor: torch.Tensor, want: tuple) -> None:
    """Torch would broadcast a wrong shape silently; shapes are host metadata, so no sync."""
    if tuple(tensor.shape) != tuple(want):
        raise DecodeInputError(
            f"{what} of shape {tuple(tensor.shape)}; expected {tuple(want)} (the model must "
            "return the same shapes on every call)"
        )


def check_memory(device: torch.device, needed: int, what: str, remedy: str) -> None:
    """Raise before allocating ``needed`` bytes that cannot fit (a clean error, not an OOM kill).

    CUDA: the free memory plus what torch's allocator holds unused. CPU: physical memory, a bound
    that never refuses what could fit (free memory would count the page cache as used).
    """
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        kind = "free GPU memory"
    else:
        try:
            free = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, OSError, ValueError):  # no sysconf (Windows): no check
            return
        kind = "physical memory"
    if needed > free:
        raise DeviceMemoryError(
            f"{what} need {needed / 2**20:,.0f} MiB but there are {free / 2**20:,.0f} MiB of "
            f"{kind}: {remedy}"
        )

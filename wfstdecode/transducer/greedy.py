"""Batched greedy decoding of RNN-T and TDT models: frame-looping, label-looping, WIND.

Each algorithm is a *loop program*: fixed-shape tensors plus four in-place steps

    init_();  while outer_flag: { outer_begin_();  while inner_flag: inner_step_();  outer_end_() }

The steps never read a device value on the host and never rebind their tensors, so the same
code runs eagerly (the flags read once per iteration: the only host syncs), as captured CUDA
graphs driven from Python, or as one CUDA graph whose loops are conditional while-nodes
(`graphs.py`). CPU tests therefore cover the code the GPU modes replay.
"""

from __future__ import annotations

import dataclasses
import math
import os

import torch

from ..buffers import BatchedSequences
from ..errors import DecodeInputError, DeviceMemoryError, OptionsError
from ..results import Hypothesis
from .model import ModelAdapter, clone_state, copy_state_, select_state
from .options import GreedyOptions

__all__ = ["FrameLooping", "LabelLooping", "greedy_decode", "run_eager"]


def greedy_decode(model, enc, enc_lengths, options: GreedyOptions | None = None):
    """Greedy-decode a batch of encoder outputs with an RNN-T or TDT model.

    model:       a `TransducerModel` (see `wfstdecode.transducer.model`).
    enc:         encoder output, float tensor (B, T, D), on the model's device.
    enc_lengths: valid frames per utterance, integer tensor (B,) on enc's device, 0 <= len <= T.
    options:     `GreedyOptions` (algorithm, window, durations, max_symbols_per_frame,
                 cuda_graphs).

    Returns one `Hypothesis` per utterance: tokens, timestamps (frame of each token),
    durations (TDT only), score (sum of the log-probabilities of every greedy choice, blanks
    included; TDT adds the chosen duration's log-probability), and notes naming the algorithm,
    the WIND window used and the CUDA-graph mode.

    Raises `DecodeInputError` for NaN / inf in a valid frame of ``enc`` (padding beyond a
    length may hold anything) and for non-finite logits that the search used.
    """
    from . import graphs  # the GPU drivers; importing them needs no GPU

    if options is None:
        options = GreedyOptions()
    if not isinstance(options, GreedyOptions):
        raise OptionsError(f"options must be GreedyOptions; got {type(options).__name__}")
    enc, lengths = _check_inputs(model, enc, enc_lengths)
    adapter = ModelAdapter(model)
    window = options.window_for(enc.shape[1])
    if options.algorithm == "wind" and window != options.effective_window:
        # Cut here, not only in the program: the notes and the graph cache see what runs.
        options = dataclasses.replace(options, window=window)
    mode = graphs.resolve_mode(options.cuda_graphs, enc.device)
    notes = (f"algorithm={options.algorithm}", f"window={options.effective_window}")
    notes += (f"cuda_graphs={mode}" + (" (auto)" if options.cuda_graphs == "auto" else ""),)
    if enc.shape[0] == 0:
        return []
    with torch.inference_mode():
        vocab = _check_joint(adapter, enc, options)
        if mode == "off":
            program = make_program(adapter, enc, lengths, options, vocab, fixed=False)
            run_eager(program)
        else:
            program = graphs.run(mode, adapter, enc, lengths, options, vocab)
        return program.hypotheses(notes)


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
            _check_memory(
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


def _check_inputs(model, enc, enc_lengths):
    for name in ("blank_id", "init_state", "predict", "joint"):
        if not hasattr(model, name):
            raise DecodeInputError(f"model lacks {name!r}; see wfstdecode.transducer.model")
    if not isinstance(enc, torch.Tensor) or enc.dim() != 3:
        shape = tuple(enc.shape) if isinstance(enc, torch.Tensor) else type(enc).__name__
        raise DecodeInputError(f"enc must be a tensor (B, T, D); got {shape}")
    if not enc.is_floating_point():
        raise DecodeInputError(f"enc must be a float tensor; got {enc.dtype}")
    B, T, _ = enc.shape
    if not isinstance(enc_lengths, torch.Tensor):
        enc_lengths = torch.as_tensor(enc_lengths, device=enc.device)
    if enc_lengths.shape != (B,):
        raise DecodeInputError(
            f"enc_lengths must be (B,) = ({B},) for enc {tuple(enc.shape)}; "
            f"got {tuple(enc_lengths.shape)}"
        )
    if enc_lengths.is_floating_point() or enc_lengths.dtype == torch.bool:
        raise DecodeInputError(f"enc_lengths must be an integer tensor; got {enc_lengths.dtype}")
    if enc_lengths.device != enc.device:
        raise DecodeInputError(
            f"enc_lengths is on {enc_lengths.device} but enc is on {enc.device}; "
            "put both on the model's device"
        )
    params = getattr(model, "parameters", None)
    param = next(iter(params()), None) if callable(params) else None
    if param is not None and param.device != enc.device:
        raise DecodeInputError(f"enc is on {enc.device} but the model is on {param.device}")
    lengths = enc_lengths.long()
    bad_lengths = (lengths < 0) | (lengths > T)
    # NaN / inf only in valid frames: padding beyond a length may hold anything. aminmax
    # propagates NaN and, unlike isfinite(enc), allocates (B, T), not (B, T, D).
    if enc.shape[2]:
        low, high = torch.aminmax(enc.detach(), dim=-1)
        valid = torch.arange(T, device=enc.device) < lengths.unsqueeze(1)
        bad_frames = ~(low.isfinite() & high.isfinite()) & valid
    else:  # no features: nothing to check (aminmax needs a non-empty dim)
        bad_frames = torch.zeros((B, T), dtype=torch.bool, device=enc.device)
    # The one host sync before the search (the loops have none).
    any_bad_lengths, any_bad_frames = torch.stack([bad_lengths.any(), bad_frames.any()]).tolist()
    if any_bad_lengths:
        b = int(bad_lengths.nonzero()[0])
        raise DecodeInputError(
            f"enc_lengths must lie in [0, T={T}] for enc {tuple(enc.shape)}; "
            f"got enc_lengths[{b}] = {int(lengths[b])}"
        )
    if any_bad_frames:
        b, t = bad_frames.nonzero()[0].tolist()
        raise DecodeInputError(
            f"enc holds NaN or inf in frame {t} of utterance {b} (enc[{b}, {t}], within "
            f"enc_lengths[{b}] = {int(lengths[b])}); non-finite valid frames in all: "
            f"{int(bad_frames.sum())}, in {int(bad_frames.any(1).sum())} utterance(s)"
        )
    return enc, lengths


def _check_shape(what: str, tensor: torch.Tensor, want: tuple) -> None:
    """Torch would broadcast a wrong shape silently; shapes are host metadata, so no sync."""
    if tuple(tensor.shape) != tuple(want):
        raise DecodeInputError(
            f"{what} of shape {tuple(tensor.shape)}; expected {tuple(want)} (the model must "
            "return the same shapes on every call)"
        )


def _check_memory(device: torch.device, needed: int, what: str, remedy: str) -> None:
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


def _check_joint(adapter: ModelAdapter, enc, options) -> int:
    """Probe the model once and return the token vocabulary size (blank included)."""
    model, B = adapter.model, enc.shape[0]
    n_dur = len(options.durations or ())
    labels = torch.full((B,), adapter.blank_id, dtype=torch.long, device=enc.device)
    pred, _ = model.predict(labels, model.init_state(B, enc.device))
    if pred.dim() != 2 or pred.shape[0] != B:
        raise DecodeInputError(
            f"model.predict must return pred (B={B}, H); got {tuple(pred.shape)}"
        )
    if enc.shape[1] == 0:
        return adapter.blank_id + 1 if adapter.vocab_size is None else adapter.vocab_size
    enc_p = adapter.encoder(enc[:, :1])[:, 0]
    logits = adapter.joint(enc_p, adapter.prediction(pred))
    if logits.dim() != 2 or logits.shape[0] != B:
        raise DecodeInputError(
            f"model.joint must return (B={B}, V + len(durations)); got {tuple(logits.shape)}"
        )
    width = logits.shape[1]
    vocab = width - n_dur if adapter.vocab_size is None else adapter.vocab_size
    if width != vocab + n_dur:
        raise DecodeInputError(
            f"joint width {width} != vocab_size {vocab} + len(durations) {n_dur} "
            f"(durations={options.durations}); logits shape {tuple(logits.shape)}"
        )
    if not 0 <= adapter.blank_id < vocab:
        raise DecodeInputError(
            f"blank_id {adapter.blank_id} is outside the vocabulary [0, {vocab})"
        )
    return vocab

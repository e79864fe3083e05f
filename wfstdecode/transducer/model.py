"""The `TransducerModel` protocol, and the thin adapter the greedy loops call it through.

A model supplies the prediction network and the joint; the encoder output is given. The first
``predict`` call of every utterance receives ``blank_id`` as the start-of-sequence label (the
NeMo / ESPnet / icefall convention).

Optional, for speed (label-looping paper §3.4): ``project_encoder(enc[B, T, D]) -> [B, T, J]``,
``project_prediction(pred[B, H]) -> [B, J]`` and ``joint_after_projection(enc_p[N, J],
pred_p[N, J]) -> [N, V (+ len(durations))]``; with all three, the encoder projection runs once
per batch and the predictor projection once per predictor call, not once per joint call.

Optional ``vocab_size``: the number of token logits, blank included; with it the joint width is
checked against ``vocab_size + len(durations)``, without it the width minus the durations is
taken as the vocabulary.

State: whatever ``init_state`` returns — a tensor or a (nested) tuple / list (namedtuples too)
/ dict of tensors whose batch dimension is ``model.state_batch_dim`` (default 0; ``nn.LSTM``
states use 1). A model with another layout provides ``select_state(mask, new, old)`` and, for
beam search, ``index_state(state, rows)`` (the state of the given batch rows). ``predict`` must
return a new state of the same structure and shapes, leaving the one it was given as it was
(the loops keep the old state of utterances that did not emit, and copy the new one into fixed
tensors), and ``predict`` and ``joint`` outputs of the same shapes on every call: a changed
shape raises `DecodeInputError` (torch would broadcast it). For the CUDA-graph modes,
``predict`` and ``joint`` must not synchronise with the host (no ``.item()``, no boolean masks).
"""

from __future__ import annotations

import operator
from typing import Any, Protocol, runtime_checkable

import torch

from ..errors import DecodeInputError

__all__ = [
    "TransducerModel",
    "clone_state",
    "copy_state_",
    "index_state",
    "select_state",
    "state_rows",
    "write_state_rows_",
]


@runtime_checkable
class TransducerModel(Protocol):
    """What `greedy_decode` needs from a user's RNN-T / TDT model (encoder output given)."""

    blank_id: int

    def init_state(self, batch_size: int, device: torch.device) -> Any: ...

    def predict(self, labels: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]: ...

    def joint(self, enc: torch.Tensor, pred: torch.Tensor) -> torch.Tensor: ...


def select_state(model, mask: torch.Tensor, new: Any, old: Any) -> Any:
    """Per-utterance choice ``new[b] if mask[b] else old[b]``, by `torch.where` (no host sync)."""
    custom = getattr(model, "select_state", None)
    if custom is not None:
        return custom(mask, new, old)
    dim = getattr(model, "state_batch_dim", 0)
    return _map2(new, old, lambda n, o: torch.where(_bcast(mask, _same(n, o), dim), n, o))


def index_state(model, state: Any, rows: torch.Tensor) -> Any:
    """The state of rows ``rows`` (beam searches: each hypothesis takes its parent's state).

    A model whose state has no batch dimension at ``state_batch_dim`` provides
    ``index_state(state, rows)``.
    """
    custom = getattr(model, "index_state", None)
    if custom is not None:
        return custom(state, rows)
    return state_rows(state, getattr(model, "state_batch_dim", 0), rows)


def copy_state_(dst: Any, src: Any) -> None:
    """Copy ``src`` into the tensors of ``dst`` in place (CUDA graphs need fixed addresses)."""
    _map2(dst, src, lambda d, s: d.copy_(_same(s, d)))


def clone_state(state: Any) -> Any:
    """A copy of every tensor of ``state`` (contiguous where a tensor was expanded)."""
    return _map2(state, state, lambda s, _: s.clone())


def state_rows(state: Any, dim: int, rows: torch.Tensor) -> Any:
    """`index_state` of a state whose batch dimension is ``dim`` (no model hook)."""
    return _map2(state, state, lambda s, _: s.index_select(dim, rows))


def write_state_rows_(state: Any, dim: int, rows: torch.Tensor, sub: Any) -> None:
    """Write ``sub``, the state of rows ``rows``, into ``state`` (batch dimension ``dim``) in
    place."""

    def write(s, u):
        _check_shape(u.shape, (*s.shape[:dim], len(rows), *s.shape[dim + 1 :]))
        s.index_copy_(dim, rows, u)

    _map2(state, sub, write)


def _same(new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """``new``, if it has ``old``'s shape: `torch.where` and `copy_` would broadcast it."""
    _check_shape(new.shape, old.shape)
    return new


def _check_shape(got, want) -> None:
    if tuple(got) != tuple(want):
        raise DecodeInputError(
            f"model.predict returned a state tensor of shape {tuple(got)} where "
            f"init_state gave {tuple(want)}: the state must keep its shapes"
        )


def _bcast(mask: torch.Tensor, like: torch.Tensor, dim: int) -> torch.Tensor:
    if like.dim() <= dim or like.shape[dim] != mask.shape[0]:
        raise DecodeInputError(
            f"a state tensor of shape {tuple(like.shape)} has no batch dimension of size "
            f"{mask.shape[0]} at model.state_batch_dim = {dim} (nn.LSTM states need 1)"
        )
    shape = [1] * like.dim()
    shape[dim] = mask.shape[0]
    return mask.view(shape)


def _map2(a: Any, b: Any, fn) -> Any:
    if isinstance(a, torch.Tensor):
        return fn(a, b)
    if isinstance(a, tuple | list):
        items = [_map2(x, y, fn) for x, y in zip(a, b, strict=True)]
        if hasattr(a, "_fields"):  # a namedtuple's constructor takes its fields one by one
            return type(a)(*items)
        return type(a)(items)
    if isinstance(a, dict):
        return {k: _map2(a[k], b[k], fn) for k in a}
    if a is None:
        return None
    raise TypeError(f"transducer state must be tensors in tuples/lists/dicts; got {type(a)}")


class ModelAdapter:
    """Calls the model the same way from every loop: 2-D rows in, 2-D logits out."""

    def __init__(self, model):
        self.model = model
        self.blank_id = _int_attr(model, "blank_id")
        has_vocab = getattr(model, "vocab_size", None) is not None
        self.vocab_size = _int_attr(model, "vocab_size") if has_vocab else None
        self.projected = all(
            callable(getattr(model, name, None))
            for name in ("project_encoder", "project_prediction", "joint_after_projection")
        )
        # the model picks and merges its state's rows itself (`index_state`, `select_state`)
        self.own_state_rows = hasattr(model, "select_state") or hasattr(model, "index_state")
        self.state_batch_dim = getattr(model, "state_batch_dim", 0)

    def encoder(self, enc: torch.Tensor) -> torch.Tensor:
        return self.model.project_encoder(enc) if self.projected else enc

    def prediction(self, pred: torch.Tensor) -> torch.Tensor:
        return self.model.project_prediction(pred) if self.projected else pred

    def joint(self, enc_rows: torch.Tensor, pred_rows: torch.Tensor) -> torch.Tensor:
        if self.projected:
            return self.model.joint_after_projection(enc_rows, pred_rows)
        return self.model.joint(enc_rows, pred_rows)

    def predict(self, labels: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
        pred, state = self.model.predict(labels, state)
        return self.prediction(pred), state


def _int_attr(model, name: str) -> int:
    value = getattr(model, name)
    try:  # int() would take 0.5 or "0"
        return operator.index(value)
    except TypeError:
        raise DecodeInputError(f"model.{name} must be an int; got {value!r}") from None

"""The frame-synchronous searches with prefix merging ("standard", "tokenwise", "maes") on the
CPU, RNN-T: the model's calls in torch, each round's bookkeeping in one compiled call per batch
(`segment_step`), labels kept as a traceback.

`segment.segment_search` runs the same searches in tensor operations that never wait on the
device; on a CPU core their fixed costs are most of a round. Here a round is: the joint on the
live active hypotheses only (at every frame of the segment), the log-softmax, one compiled call
(blank expansions merged into the done hypotheses, label expansions competing for the active
places), and the predictor on the new active hypotheses. Same hypotheses as `segment_search`
and `reference._segment_search` (tests). TDT models run `segment_search`.
"""

from __future__ import annotations

import numpy as np
import torch

from ..model import index_state
from .rows import advance_predictor, best_hypotheses, non_finite_logits, start_predictor

__all__ = ["segment_search_cpu"]


def segment_search_cpu(adapter, enc, lengths, options, vocab, notes):
    from .segment_step import begin_segment, segment_round, trace_nodes  # compiled on first use

    B, T, _ = enc.shape
    K, E, S = options.beam_size, options.expansions, options.effective_segment
    R = K + E
    length = lengths.numpy().astype(np.int64)
    # the done hypotheses (score, label hash, labels, traceback node): the empty one to start
    done = (np.full(B * R, -np.inf), *(np.zeros(B * R, dtype=np.int64) for _ in range(3)))
    done[0][::R], done[3][::R] = 0.0, -1
    done_n = np.ones(B, dtype=np.int64)
    active = tuple(np.zeros(B * E, dtype=np.int64) for _ in range(3))
    stay = np.full((B * E, S), -np.inf)
    nodes, n_nodes = np.empty((3, 1024), dtype=np.int64), 0
    source = np.empty(B * R, dtype=np.int64)
    emit_rows, emit_labels = np.empty(B * E, dtype=np.int64), np.empty(B * E, dtype=np.int64)

    enc_rows = adapter.encoder(enc).reshape(B * T, -1)
    pred, state = start_predictor(adapter, B * R)
    model, offsets = adapter.model, np.arange(S)
    for start in range(0, T, S):
        begin_segment(start, length, K, E, done_n, done, active, stay, source)
        pred, state = _gather(model, pred, state, source)
        frames = np.clip(length - start, 0, S)
        at = np.minimum(start + offsets, T - 1)
        for round_ in range(options.rounds + 1):
            live = np.flatnonzero((stay > -np.inf).any(1))  # active slot b*E + e
            if live.size == 0:
                break
            n = live.size
            utt = live // E
            enc_at = torch.from_numpy((utt * T)[:, None] + at[None, :]).view(-1)
            pred_at = torch.from_numpy(utt * R + K + live % E)
            J = pred.shape[1]
            logits = adapter.joint(
                enc_rows.index_select(0, enc_at),
                pred.index_select(0, pred_at).unsqueeze(1).expand(n, S, J).reshape(n * S, J),
            )
            lp = logits.view(n, S, -1).double()[..., :vocab].log_softmax(-1).numpy()
            if n_nodes + B * E > nodes.shape[1]:
                nodes = np.concatenate([nodes, np.empty_like(nodes)], 1)
            n_emit, n_nodes, bad = segment_round(
                lp, live, frames, start, K, E, adapter.blank_id, options.gamma,
                round_ == options.rounds, done_n, done, active, stay, nodes, n_nodes, source,
                emit_rows, emit_labels,
            )  # fmt: skip
            if bad >= 0:
                raise non_finite_logits(bad)
            pred, state = advance_predictor(
                adapter, pred, state, source, emit_rows[:n_emit], emit_labels[:n_emit]
            )
            if n_emit == 0:
                break
    slots = [b * R + j for b in range(B) for j in range(done_n[b])]
    out, offsets = trace_nodes(nodes, done[3][slots])
    fields = {"labels": [], "timestamps": []}
    for i in range(len(slots)):
        fields["labels"].append(out[0, offsets[i] : offsets[i + 1]].tolist())
        fields["timestamps"].append(out[1, offsets[i] : offsets[i + 1]].tolist())
    per_utt, i = [], 0
    for b in range(B):
        per_utt.append(range(i, i + done_n[b]))
        i += done_n[b]
    sizes = np.diff(offsets).tolist()
    return best_hypotheses(per_utt, sizes, done[0][slots].tolist(), fields, options, notes)


def _gather(model, pred, state, source):
    """Row i of the predictor table takes row ``source[i]``."""
    rows = torch.from_numpy(source)
    return pred.index_select(0, rows), index_state(model, state, rows)

"""An LSTM prediction network and a ReLU joint with precomputed projections: the decoder half of
the toolkit's transducers (the planted test models and the trained speech models)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["LstmTransducer"]


_LSTM_PARAMS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


class LstmTransducer(nn.Module):
    """LSTM predictor + ReLU joint with precomputed projections (label-looping paper §3.4).

    Satisfies `wfstdecode.transducer.TransducerModel`. ``vocab_size`` counts blank; the joint
    returns ``vocab_size + n_durations`` logits (tokens first). The state is the LSTM's
    ``(h, c)``, each (layers, B, H): batch dimension 1.
    """

    state_batch_dim = 1

    def __init__(
        self,
        vocab_size: int,
        enc_dim: int,
        pred_dim: int,
        joint_dim: int,
        n_durations: int = 0,
        blank_id: int = 0,
        num_layers: int = 1,
    ):
        super().__init__()
        self.vocab_size, self.blank_id, self.n_durations = vocab_size, blank_id, n_durations
        self.embedding = nn.Embedding(vocab_size, pred_dim, padding_idx=blank_id)
        self.lstm = nn.LSTM(pred_dim, pred_dim, num_layers=num_layers)
        self.enc_proj = nn.Linear(enc_dim, joint_dim)
        self.pred_proj = nn.Linear(pred_dim, joint_dim)
        self.out = nn.Linear(joint_dim, vocab_size + n_durations)

    def init_state(self, batch_size: int, device):
        p = self.lstm.weight_hh_l0
        shape = (self.lstm.num_layers, batch_size, self.lstm.hidden_size)
        return (
            torch.zeros(shape, dtype=p.dtype, device=device),
            torch.zeros(shape, dtype=p.dtype, device=device),
        )

    def predict(self, labels: torch.Tensor, state):
        # One step per layer with the nn.LSTM weights: on CPU, nn.LSTM's oneDNN path repacks
        # the weights on every call, ten times slower for a single step.
        x, (h, c) = self.embedding(labels), state
        hs, cs = [], []
        for layer in range(self.lstm.num_layers):
            weights = [getattr(self.lstm, f"{n}_l{layer}") for n in _LSTM_PARAMS]
            hl, cl = torch.lstm_cell(x, (h[layer], c[layer]), *weights)
            hs.append(hl)
            cs.append(cl)
            x = hl
        return x, (torch.stack(hs), torch.stack(cs))

    def project_encoder(self, enc: torch.Tensor) -> torch.Tensor:
        return self.enc_proj(enc)

    def project_prediction(self, pred: torch.Tensor) -> torch.Tensor:
        return self.pred_proj(pred)

    def joint_after_projection(self, enc_p: torch.Tensor, pred_p: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(enc_p + pred_p))

    def joint(self, enc: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        return self.joint_after_projection(self.enc_proj(enc), self.pred_proj(pred))

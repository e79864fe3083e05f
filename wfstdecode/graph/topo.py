"""CTC topologies T: input = per-frame token labels, output = the token sequence.

``normal``  the exact CTC rules: blank is not emitted, a repeated token is emitted once unless a
            blank separates the repeats (one state for blank plus one per token; ~V² arcs).
``compact`` (Laptev et al., "CTC variations through new WFST topologies", paper Fig. 3): a token
            state loops on its own token and returns to the blank state by an epsilon arc, so
            ``a a`` may also read as two tokens (a superset of CTC; ~3V arcs).
``minimal`` one state: blank loops without output, every token frame emits its token (for models
            trained to emit each token for exactly one frame).
"""

from __future__ import annotations

import numpy as np

from ..errors import GraphError
from ..fstio import FstArrays

TOPOLOGIES = ("normal", "compact", "minimal")


def ctc_topology(
    num_tokens: int, kind: str = "normal", blank_id: int = 0, num_disambig: int = 0
) -> FstArrays:
    """Build T for token ids ``0 .. num_tokens - 1`` (labels are id + 1, see `wfstdecode.graph`).

    ``num_disambig`` token-level disambiguation symbols get a pass-through self-loop on every state
    so that T composes with a disambiguated LG. Every state is final with cost 0.
    """
    if kind not in TOPOLOGIES:
        raise GraphError(f"topology must be one of {TOPOLOGIES}; got {kind!r}")
    if num_tokens < 2 or not 0 <= blank_id < num_tokens:
        raise GraphError(
            f"need >= 2 tokens with blank id inside; got {num_tokens}, blank {blank_id}"
        )
    blank = blank_id + 1
    labels = np.array([t + 1 for t in range(num_tokens) if t != blank_id], dtype=np.int64)
    n = len(labels)
    arcs: list[tuple[np.ndarray, ...]] = []  # (src, dst, ilabel, olabel)

    def add(src, dst, ilabel, olabel):
        src, dst, ilabel, olabel = np.broadcast_arrays(src, dst, ilabel, olabel)
        arcs.append((src.ravel(), dst.ravel(), ilabel.ravel(), olabel.ravel()))

    if kind == "minimal":
        num_states = 1
        add(0, 0, blank, 0)
        add(0, 0, labels, labels)
    else:
        # State 0: last frame was blank (also the start); state i (1..n): last token labels[i-1].
        num_states = n + 1
        token_state = np.arange(1, n + 1)
        add(0, 0, blank, 0)
        add(0, token_state, labels, labels)
        add(token_state, token_state, labels, 0)  # repeat of the same token: no new output
        if kind == "normal":
            add(token_state, 0, blank, 0)
            src, dst = np.meshgrid(token_state, token_state, indexing="ij")
            other = src != dst
            add(src[other], dst[other], labels[dst[other] - 1], labels[dst[other] - 1])
        else:
            add(token_state, 0, 0, 0)  # compact: epsilon back to the blank state
    disambig = num_tokens + 1 + np.arange(num_disambig)
    states = np.arange(num_states)
    add(np.repeat(states, num_disambig), np.repeat(states, num_disambig),
        np.tile(disambig, num_states), np.tile(disambig, num_states))  # fmt: skip
    src, dst, ilabel, olabel = (np.concatenate(parts) for parts in zip(*arcs, strict=True))
    return FstArrays(0, np.zeros(num_states, np.float32), src, dst, ilabel, olabel,
                     np.zeros(len(src), np.float32))  # fmt: skip

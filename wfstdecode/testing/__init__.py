"""Helpers for tests and benchmarks: random and tiny decoding graphs, a CTC emission simulator,
assert helpers. Importing this package needs neither torch nor pynini."""

from ..metrics import edit_distance, word_error_rate
from .ctc import (
    assert_hypotheses_equal,
    fast_backends,
    lexicon_graph,
    random_graph,
    random_log_probs,
    raw_backend,
    simulate_ctc,
    spell,
)

__all__ = [
    "assert_hypotheses_equal",
    "edit_distance",
    "fast_backends",
    "lexicon_graph",
    "random_graph",
    "random_log_probs",
    "raw_backend",
    "simulate_ctc",
    "spell",
    "word_error_rate",
]

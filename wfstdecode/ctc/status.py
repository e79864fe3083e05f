"""Status bits of one utterance's search: the one definition every backend and the host use.

A backend's frame loop (Numba CPU or CUDA) returns an int of these bits; `raise_graph_errors`
turns the ones that mean a broken graph into errors, the retry bits ask the host to run the
utterance again with larger output buffers, and `RawResult.status` keeps ``RESULT_BITS``.
"""

from __future__ import annotations

from ..errors import GraphError

NO_FINAL = 1  # no surviving token was in a final state: best partial path returned
DIED = 2  # every token was pruned (or had infinite cost) at the died frame
OVERFLOW = 4  # a path was longer than the output buffer: rerun with a longer one
CYCLE = 8  # a traceback looped (zero-cost epsilon cycle)
NEG_CYCLE = 16  # the epsilon closure did not converge (negative-cost epsilon cycle)
MORE_PATHS = 32  # the output buffer's rows ran out before nbest: rerun with more rows
CANCELLED = 64  # stopped on request (KeyboardInterrupt in the calling thread)

# why the epsilon closure cannot end: the graph's weights alone, or the options and boosts
NEGATIVE_CYCLE = ("negative-cost epsilon cycle: a cycle of epsilon-input arcs whose costs, with "
                  "the word insertion penalty and boosts on its words, sum below zero")  # fmt: skip

RESULT_BITS = NO_FINAL | DIED  # what a RawResult reports
RETRY_BITS = OVERFLOW | MORE_PATHS
STOPPED_BITS = DIED | NEG_CYCLE | CANCELLED  # the search ran no further frames


def raise_graph_errors(status: int, utterance: int, frame: int) -> None:
    """Raise `GraphError` for the bits that mean the graph cannot be searched."""
    if status & NEG_CYCLE:
        raise GraphError(f"{NEGATIVE_CYCLE} (utterance {utterance}, frame {frame})")
    if status & CYCLE:
        raise GraphError("zero-cost epsilon cycle: the traceback loops")

"""The cuda backend's entry (`backends`): a batch searched on the GPU in one call
(`driver.run_search`, traced back on the host by `finish`) or, when an utterance is longer than
`CudaTuning.max_frames_per_call`, in calls of that many frames one after another — the streaming
path (`streams.CudaStreams`), whose records wait on the host between calls, only those the
survivors trace back through, collected as they double. One call keeps every frame's records
until the end; calls keep memory to the active tokens, whatever the length. The results are the
same, bit for bit (tests/ctc/test_cuda_backend.py).

Log-probs already on the GPU are searched in one call (their costs are computed there, frame by
frame, and the calls take host costs).
"""

from __future__ import annotations

from .._problem import RawResult, SearchProblem
from ..tuning import CudaTuning
from .driver import run_search
from .finish import finish
from .streams import CudaStreams


def decode_cuda(problem: SearchProblem, tuning: CudaTuning | None = None) -> list[RawResult]:
    """The batched search on the GPU; `CudaTuning` changes its speed and memory, never its
    results."""
    tuning = tuning or CudaTuning()
    longest = int(problem.lengths.max(initial=0))
    if longest <= tuning.max_frames_per_call or problem.ac is None:
        d, copier, T = run_search(problem, tuning)
        results = finish(problem, d, copier.joined, T)  # copies out the paths it traces
        copier.joined.give_back()
        return results
    return _decode_in_calls(problem, tuning)


def _decode_in_calls(problem: SearchProblem, tuning: CudaTuning) -> list[RawResult]:
    """Every utterance as a stream of ``max_frames_per_call``-frame chunks, all lanes in each
    call (frame 0 first, as `CudaStreams.begin` runs it)."""
    streams = CudaStreams(tuning)
    one = [problem.utterance(b) for b in range(problem.batch_size)]
    states = streams.begin_all(one)
    step = tuning.max_frames_per_call
    for lo in range(0, int(problem.lengths.max()), step):
        states = streams.advance([(p, state, p.ac[0, lo : min(lo + step, int(p.lengths[0]))])
                                  for p, state in zip(one, states, strict=True)])  # fmt: skip
    return [streams.end(p, state, b) for b, (p, state) in enumerate(zip(one, states, strict=True))]

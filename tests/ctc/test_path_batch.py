"""`PathBatch`, the flat form of a batch's `RawResult`s: built from them, merged from the parts
of a backend's retries, and what the cpu backend returns when some utterances retry."""

import numpy as np
import pytest

from wfstdecode.ctc import CtcBeamOptions
from wfstdecode.ctc._problem import PathBatch, RawResult
from wfstdecode.ctc.cpu import decode_cpu
from wfstdecode.ctc.reference import decode_reference
from wfstdecode.testing import random_graph


def _random_raws(rng, B: int) -> list[RawResult]:
    raws = []
    for b in range(B):
        paths = []
        for _ in range(rng.integers(0, 4)):  # some utterances have no path
            n = int(rng.integers(0, 6))  # and some paths no arc
            paths.append((rng.integers(0, 50, n).astype(np.int32),
                          rng.integers(-1, 9, n).astype(np.int32),
                          float(np.float32(rng.normal()))))  # fmt: skip
        raws.append(RawResult(paths, int(rng.integers(0, 4)), int(rng.integers(-1, 9)),
                              (f"note {b}",) if rng.random() < 0.3 else ()))  # fmt: skip
    return raws


def _assert_same(got, want) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert (g.status, g.died_frame, g.notes, len(g.paths)) == (
            w.status, w.died_frame, w.notes, len(w.paths))  # fmt: skip
        for (ga, gf, gc), (wa, wf, wc) in zip(g.paths, w.paths, strict=True):
            assert ga.dtype == np.int32 and gf.dtype == np.int32
            assert np.array_equal(ga, wa) and np.array_equal(gf, wf) and gc == wc


@pytest.mark.parametrize("seed", range(20))
def test_a_batch_reads_back_as_its_raw_results(seed):
    rng = np.random.default_rng(seed)
    raws = _random_raws(rng, int(rng.integers(0, 7)))
    batch = PathBatch.of(raws)
    _assert_same(list(batch), raws)
    if raws:
        _assert_same([batch[-1]], raws[-1:])
    assert PathBatch.of(batch) is batch
    with pytest.raises(IndexError, match="of a batch of"):
        batch[len(raws)]


@pytest.mark.parametrize("seed", range(20))
def test_merged_parts_put_every_utterance_back_in_its_place(seed):
    """Parts as retries make them: each a subset of the utterances, in any order."""
    rng = np.random.default_rng(seed)
    B = int(rng.integers(1, 9))
    raws = _random_raws(rng, B)
    order = rng.permutation(B)
    cuts = np.sort(rng.choice(np.arange(1, B), size=min(B - 1, int(rng.integers(0, 3))),
                              replace=False)) if B > 1 else []  # fmt: skip
    parts = [(ids, PathBatch.of([raws[i] for i in ids])) for ids in np.split(order, cuts)]
    _assert_same(list(PathBatch.merged(parts, B)), raws)


def test_cpu_results_where_only_some_utterances_retry_are_the_references():
    """nbest above the 16 rows the cpu backend tries first: utterances with more paths run
    again with more rows, the others are done in the first run; the merged batch holds each
    utterance's paths as the reference finds them, in the batch's order."""
    from wfstdecode.ctc.search import prepare_problem

    g = random_graph(5, num_states=60, num_tokens=6, num_words=40, word_prob=0.8, final_prob=1)
    rng = np.random.default_rng(5)
    lp = rng.normal(0, 0.5, size=(5, 12, 6)).astype(np.float32)
    p = prepare_problem(lp, [12, 2, 12, 1, 9], g, CtcBeamOptions(beam=50.0, nbest=40), None)
    want = decode_reference(p)
    counts = [len(r.paths) for r in want]
    assert max(counts) > 16 and min(counts) <= 16, counts  # both kinds in the batch
    _assert_same(list(decode_cpu(p)), want)

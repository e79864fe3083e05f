"""CPU proof that the loop bodies never read a tensor on the host.

On a GPU, ``torch.cuda.set_sync_debug_mode(2)`` catches syncs (tests/transducer/
test_transducer_gpu.py). On CPU there is no device to wait for, so a dispatch mode raises on the
operators that would sync there: ``.item()`` / ``bool()`` (``_local_scalar_dense``), ``nonzero``,
``masked_select`` and boolean-mask indexing. The bodies run under it; only the loop flags,
read between the bodies, touch the host — exactly what the CUDA-graph modes replay.
"""

import pytest
import torch

from wfstdecode.buffers import BatchedSequences
from wfstdecode.testing.host_sync import NoHostSync
from wfstdecode.testing.transducer_models import planted_batch, planted_transducer
from wfstdecode.transducer import GreedyOptions, greedy_reference
from wfstdecode.transducer.greedy import make_program
from wfstdecode.transducer.model import ModelAdapter


def test_the_mode_catches_syncs():
    x = torch.arange(4)
    for fn in (lambda: bool(x.any()), lambda: x.sum().item(), lambda: x[x > 1], x.nonzero):
        with pytest.raises(AssertionError, match="host sync"), NoHostSync():
            fn()


def run_checked(p):
    with NoHostSync():
        p.init_()
    while bool(p.outer_flag):
        with NoHostSync():
            p.outer_begin_()
        while bool(p.inner_flag):
            with NoHostSync():
                p.inner_step_()
        with NoHostSync():
            p.outer_end_()


@pytest.mark.parametrize("fixed", [False, True], ids=["eager", "static"])
@pytest.mark.parametrize(
    "opts",
    [
        GreedyOptions("frame_looping", max_symbols_per_frame=2),
        GreedyOptions("label_looping", max_symbols_per_frame=2),
        GreedyOptions("wind", window=3, max_symbols_per_frame=2),
        GreedyOptions("label_looping", durations=(0, 1, 2, 3), max_symbols_per_frame=2),
    ],
    ids=["frame", "label", "wind", "tdt"],
)
def test_loop_bodies_never_sync(opts, fixed):
    model = planted_transducer(30, 64, 64, 64, durations=opts.durations, seed=5)
    pb = planted_batch(model, 4, 30, min_frames=0, seed=5)
    with torch.inference_mode():
        program = make_program(ModelAdapter(model), pb.enc, pb.lengths, opts, 30, fixed=fixed)
        if not fixed:  # start tiny: the doubling runs inside the checked bodies too
            fields = {name: buf.dtype for name, buf in program.hyps.data.items()}
            program.hyps = BatchedSequences(4, 1, fields, score_dtype=torch.float64)
        run_checked(program)
    ref = greedy_reference(model, pb.enc, pb.lengths, opts.durations, opts.max_symbols_per_frame)
    got = program.hypotheses()
    assert [h.tokens for h in got] == [h.tokens for h in ref]
    assert [h.timestamps for h in got] == [h.timestamps for h in ref]

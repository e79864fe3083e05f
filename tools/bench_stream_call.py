"""What one `CtcStreamDecoder` call costs on the main thread: one stream fed 4-frame chunks
(a small lexicon graph, simulated emissions), microseconds per `advance` and per `partial`, wall
and CPU, three rounds. For A/B runs of two trees: ``PYTHONPATH=TREE python
tools/bench_stream_call.py``."""

import argparse
import time

from wfstdecode.ctc import CpuTuning, CtcBeamOptions, CtcStreamDecoder
from wfstdecode.testing import lexicon_graph, simulate_ctc

argparse.ArgumentParser(description=__doc__).parse_args()  # (--help: say, not run)

words = ["ant", "bee", "cat", "dog", "elk", "pig", "rat"]
g = lexicon_graph(words)
seq = [[g.tokens.id(c) for c in "antbeecat" * 30]]
lp, ln = simulate_ctc(seq, g.num_tokens, seed=0)
d = CtcStreamDecoder(g, CtcBeamOptions(beam=8.0), tuning=CpuTuning(num_threads=1))
for _ in range(3):
    s = d.open()
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    for t in range(0, int(ln[0]) - 4, 4):
        d.advance({s: lp[0, t : t + 4]})
        n += 1
    t1, c1 = time.perf_counter(), time.process_time()
    for _ in range(200):
        d.partial(s)
    t2, c2 = time.perf_counter(), time.process_time()
    print(
        f"advance (4 frames) {1e6 * (t1 - t0) / n:.0f} us wall {1e6 * (c1 - c0) / n:.0f} us cpu; partial {1e6 * (t2 - t1) / 200:.0f} us wall {1e6 * (c2 - c1) / 200:.0f} us cpu"
    )
    d.close(s)

"""What endpoint checks add to a long stream's `advance` calls: one stream of a 7-word lexicon
graph (simulated emissions, 31,500 frames) fed 16-frame chunks, with an endpoint rule that never
fires (so every call checks) and without rules; CPU microseconds per call, averaged over the 200
calls before each stream length. For A/B runs of two trees: ``PYTHONPATH=TREE python
tools/bench_stream_endpoint.py``."""

import argparse
import time

from wfstdecode.ctc import CpuTuning, CtcBeamOptions, CtcStreamDecoder
from wfstdecode.ctc.stream import EndpointRule, EndpointRules
from wfstdecode.testing import lexicon_graph, simulate_ctc

argparse.ArgumentParser(description=__doc__).parse_args()  # (--help: say, not run)

words = ["ant", "bee", "cat", "dog", "elk", "pig", "rat"]
g = lexicon_graph(words)
lp, ln = simulate_ctc([[g.tokens.id(c) for c in "antbeecat" * 1000]], g.num_tokens, seed=0)
chunk, marks = 16, (4_000, 8_000, 16_000, 30_400)
never = EndpointRules(0.04, (EndpointRule(True, 1e6),))  # 1e6 s of silence: checked, never met
rows = {}
for name, rules in (("no endpoint rules", None), ("endpoint rules", never)):
    d = CtcStreamDecoder(g, CtcBeamOptions(beam=8.0), tuning=CpuTuning(num_threads=1),
                         endpoint=rules)  # fmt: skip
    s = d.open()
    spent = []
    for t in range(0, marks[-1], chunk):
        c0 = time.process_time()
        d.advance({s: lp[0, t : t + chunk]})
        spent.append(time.process_time() - c0)
    rows[name] = [1e6 * sum(spent[m // chunk - 200 : m // chunk]) / 200 for m in marks]
print("| stream frames | " + " | ".join(f"{m:,}" for m in marks) + " |")
print("|---|" + "---:|" * len(marks))
for name, cells in rows.items():
    print(f"| {name}, us per call | " + " | ".join(f"{c:.0f}" for c in cells) + " |")

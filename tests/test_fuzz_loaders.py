"""Fuzz every file loader (ARPA, lexicon, tokens, words, TLG.npz, OpenFst binary, build.json,
log-prob .npz) with truncations, bit flips, byte insertions, deletions and overwrites of valid
files (Hypothesis, derandomized): only `WfstDecodeError` may come out (for ``wfstdecode info``:
exit 2 with one error line), and each input allocates less than `MEMORY_LIMIT`.
``tools/fuzz_loaders.py`` runs the same mutations on many more inputs."""

import io
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wfstdecode.testing.fuzz import (
    INTERESTING,
    KINDS,
    MEMORY_LIMIT,
    TARGET_NAMES,
    Case,
    Mutation,
    Target,
    make_targets,
    run,
)

EXAMPLES = 250  # per loader: 18 loaders x 250 inputs
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])  # fmt: skip

mutations = st.builds(
    Mutation,
    kind=st.sampled_from(KINDS),
    pos=st.integers(0, 2**24),
    value=st.integers(0, 63),
    payload=st.sampled_from(INTERESTING) | st.binary(min_size=1, max_size=8),
)
cases = st.builds(
    Case,
    mutations=st.lists(mutations, min_size=1, max_size=3).map(tuple),
    member=st.none() | st.integers(0, 15),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=4),
    max_leaves=12,
)  # fmt: skip


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    targets = {t.name: t for t in make_targets(tmp_path_factory.mktemp("fuzz"))}
    for t in targets.values():  # the seeds are valid, and imports happen before tracing
        outcome = run(t, t.seed, trace=False)
        assert outcome.status == "accepted", (t.name, outcome.error)
    return targets


def check(target: Target, data: bytes) -> None:
    outcome = run(target, data)
    if outcome.status == "escaped":
        raise outcome.error
    assert outcome.peak_bytes < MEMORY_LIMIT


@pytest.mark.parametrize("name", TARGET_NAMES)
@FUZZ
@given(case=cases)
def test_loader_survives_mutations(targets, name, case):
    check(targets[name], targets[name].mutate(case))


@FUZZ
@given(
    stages=json_values
    | st.lists(
        st.dictionaries(
            st.sampled_from(["stage", "states", "arcs", "seconds", "peak_rss_mb", "x"]), json_values
        )
    )
)
def test_build_json_of_any_shape(targets, stages):  # fmt: skip
    target = targets["build.json"]
    check(target, json.dumps({"wfstdecode_graph_dir": 1, "stages": stages}).encode())


@FUZZ
@given(
    metadata=json_values
    | st.dictionaries(
        st.sampled_from(["format_version", "start", "source"]), json_values | st.integers(-2, 12)
    )
)
def test_graph_metadata_of_any_shape(targets, metadata):  # fmt: skip
    target = targets["tlg.npz"]
    with np.load(io.BytesIO(target.seed)) as z:
        arrays = dict(z)
    arrays["metadata_json"] = np.array(json.dumps(metadata))
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    check(target, buf.getvalue())


def test_mutations_apply_as_documented():
    data = b"abcdef"
    assert Mutation("truncate", 10).apply(data) == b"abc"  # 10 % 7
    assert Mutation("flip", 1, value=9).apply(data) == b"a" + bytes([ord("b") ^ 2]) + b"cdef"
    assert Mutation("insert", 6, payload=b"XY").apply(data) == b"abcdefXY"
    assert Mutation("delete", 2, value=1).apply(data) == b"abef"
    assert Mutation("overwrite", 4, payload=b"XYZ").apply(data) == b"abcdXYZ"
    assert Mutation("flip", 3).apply(b"") == b""

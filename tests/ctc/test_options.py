import dataclasses
import math

import pytest

from wfstdecode import OptionsError
from wfstdecode.ctc import CtcBeamOptions


def test_defaults_are_valid_and_frozen():
    opts = CtcBeamOptions()
    assert opts.beam == 16.0 and opts.nbest == 1
    with pytest.raises(AttributeError):
        opts.beam = 3.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"beam": 0.0}, "beam"),
        ({"beam": math.nan}, "beam"),
        ({"max_active": 0}, "max_active"),
        ({"max_active": 2.5}, "max_active"),
        ({"min_active": 0}, "min_active"),
        ({"min_active": 10, "max_active": 5}, "min_active.*max_active"),
        ({"acoustic_scale": 0.0}, "acoustic_scale"),
        ({"acoustic_scale": math.inf}, "acoustic_scale"),
        ({"acoustic_scale": 1e30}, r"acoustic_scale must be in \[0.001, 1000\]; got 1e\+30"),
        ({"acoustic_scale": 1e-30}, r"acoustic_scale must be in \[0.001, 1000\]"),
        ({"blank_penalty": 1e10}, r"blank_penalty must be in \[-1000, 1000\]"),
        ({"word_insertion_penalty": -1e39}, "word_insertion_penalty"),
        ({"blank_penalty": math.nan}, "blank_penalty"),
        ({"word_insertion_penalty": math.inf}, "word_insertion_penalty"),
        ({"nbest": 0}, "nbest"),
        ({"beam": "16"}, "beam"),
        ({"nbest": True}, "nbest"),
    ],
)
def test_impossible_options_raise_naming_the_option(kwargs, match):
    with pytest.raises(OptionsError, match=match):
        CtcBeamOptions(**kwargs)


def test_unbounded_beam_is_allowed():
    assert CtcBeamOptions(beam=math.inf).beam == math.inf


def test_numpy_scalars_are_taken_as_pythons_own():
    """Options read from arrays or configs arrive as NumPy scalars: taken as the Python numbers
    they are (equal and hashing alike), as the transducer options take them; NumPy bools not."""
    import numpy as np

    from wfstdecode.ctc import CpuTuning

    given = CtcBeamOptions(beam=np.float32(12), max_active=np.int64(2000), nbest=np.int32(2))
    assert given == CtcBeamOptions(beam=12.0, max_active=2000, nbest=2)
    assert hash(given) == hash(CtcBeamOptions(beam=12.0, max_active=2000, nbest=2))
    assert type(given.beam) is float and type(given.max_active) is int
    assert CpuTuning(first_room=np.int64(64)) == CpuTuning(first_room=64)
    with pytest.raises(OptionsError, match="nbest must be an int"):
        CtcBeamOptions(nbest=np.bool_(True))


def test_cuda_tuning_takes_numpy_integers_as_cpu_tuning_does():
    """CudaTuning refused np.int64(8) ("must be an int >= 1; got np.int64(8)"), where CpuTuning
    and the options take NumPy integers as the Python ints they are."""
    import numpy as np

    from wfstdecode.ctc import CudaTuning

    given = CudaTuning(
        frames_per_chunk=np.int64(8),
        prune_threads=np.int32(256),
        max_frames_per_call=np.int64(512),
        collect_records_at=np.uint32(1024),
    )
    assert given == CudaTuning(8, prune_threads=256, max_frames_per_call=512,
                               collect_records_at=1024)  # fmt: skip
    assert type(given.frames_per_chunk) is int and type(given.prune_threads) is int
    with pytest.raises(OptionsError, match="frames_per_chunk must be an int >= 1"):
        CudaTuning(frames_per_chunk=np.int64(0))
    with pytest.raises(OptionsError, match="frames_per_chunk must be an int"):
        CudaTuning(frames_per_chunk=np.bool_(True))


def test_bounds_themselves_are_allowed():
    """MAX_COST_TERM and MAX_COUNT are inclusive bounds (mutants O4: ``<``; O5: one more)."""
    from wfstdecode import CtcBeamOptions, OptionsError
    from wfstdecode.ctc.options import MAX_COST_TERM, MAX_COUNT

    CtcBeamOptions(blank_penalty=MAX_COST_TERM, word_insertion_penalty=-MAX_COST_TERM)
    CtcBeamOptions(max_active=MAX_COUNT, nbest=MAX_COUNT)
    for name in ("max_active", "nbest", "max_candidates", "mbr_candidates"):
        kwargs = {name: MAX_COUNT + 1}
        with pytest.raises(OptionsError, match=rf"{name} must be at most {MAX_COUNT}"):
            CtcBeamOptions(**kwargs, lattice_beam=4.0)


@pytest.mark.parametrize("value", ["x", "Lattice", None])
def test_unknown_posteriors_are_refused(value):
    """(mutant O8: a value outside 'determinized' / 'lattice' taken)."""
    from wfstdecode import CtcBeamOptions, OptionsError

    with pytest.raises(OptionsError, match="posteriors must be 'determinized' or 'lattice'"):
        CtcBeamOptions(posteriors=value)


def test_numbers_are_kept_as_floats_one_setting_one_config():
    """beam=16 and beam=16.0 are one setting: a corpus run's config (JSON) said them apart, and
    a resume with the other spelling was another config."""
    import json

    a, b = (
        CtcBeamOptions(beam=16, lattice_beam=8, acoustic_scale=1),
        CtcBeamOptions(beam=16.0, lattice_beam=8.0, acoustic_scale=1.0),
    )
    assert json.dumps(dataclasses.asdict(a)) == json.dumps(dataclasses.asdict(b))
    assert isinstance(a.beam, float) and isinstance(a.word_insertion_penalty, float)

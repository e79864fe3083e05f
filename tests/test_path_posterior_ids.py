"""`Lattice.path_posterior` (and `CompactLattice.path_posterior`, MBR's weights) takes word ids
and says so when given something else ("path_posterior takes word ids (ints)"); but ``int(x)``
truncated a float (word 1.9 scored as word 1) and a string was read digit by digit ("12" as
words 1, 2): a silently wrong posterior instead of the clear error."""

import numpy as np
import pytest

from wfstdecode.errors import OptionsError
from wfstdecode.lattice import Lattice


def _three_words() -> Lattice:
    i32 = lambda x: np.asarray(x, np.int32)  # noqa: E731
    return Lattice(1, i32([0, 1]), i32([0, 1]), np.array([np.inf, 0], np.float32),
                   i32([0, 0, 0]), i32([1, 1, 1]), i32([0, 1, 2]), i32([1, 1, 1]),
                   i32([1, 2, 12]), i32([0, 0, 0]), np.zeros(3, np.float32),
                   np.zeros(3, np.float32), 1.0)  # fmt: skip


def test_word_ids_are_read_as_given():
    lat = _three_words()
    assert lat.path_posterior([12]) == pytest.approx(1 / 3)
    assert lat.path_posterior(np.array([12], np.int64)) == pytest.approx(1 / 3)


@pytest.mark.parametrize("words", [[1.9], "12", [12.0]])
def test_what_is_not_word_ids_is_refused(words):
    with pytest.raises(OptionsError, match="word ids"):
        _three_words().path_posterior(words)

import numpy as np
import pytest

from wfstdecode.ctc.search import prepare_problem


@pytest.fixture
def problem_of():
    """prepare_problem with defaults, for tests that call backends directly."""

    def make(lp, graph, options, lengths=None, boosts=None):
        return prepare_problem(np.asarray(lp), lengths, graph, options, boosts)

    return make

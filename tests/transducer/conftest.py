import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    """Transducer tests run small ops: more torch threads only add contention on CI's cores."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)

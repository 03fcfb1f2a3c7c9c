"""The curriculum tests run their tiny models (tests/conftest.py) on one torch thread."""

import pytest


@pytest.fixture(scope="session", autouse=True)
def _one_thread(one_torch_thread):
    yield

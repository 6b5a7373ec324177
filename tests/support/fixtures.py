"""Fixtures several suites use; a suite's conftest.py imports those it offers."""

import pytest


@pytest.fixture(params=[2, 3], ids=lambda n: f"np{n}")
def world(request):
    """The number of ranks: each test using it runs on 2 and on 3."""
    return request.param

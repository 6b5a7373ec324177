"""Fixtures several suites use; a suite's conftest.py imports those it offers."""

import pytest


@pytest.fixture(params=[2, 3], ids=lambda n: f"np{n}")
def world(request):
    """The number of ranks: each test using it runs on 2 and on 3."""
    return request.param


def per_world(*sizes):
    """The decorator of a module-scoped fixture made once per world size (test ids np2, np3...):
    one launch of a batch of scenarios serves every test of the module at that size."""
    return pytest.fixture(scope="module", params=list(sizes), ids=lambda n: f"np{n}")

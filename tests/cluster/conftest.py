"""Cluster tests: real compose clusters of horovod:<tag> containers (tests/support/compose.py).
Every cluster is taken down (with its key volumes) when its tests end."""

import pytest

from tests.support.compose import TIMINGS, make_cluster


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "alone: its assertions race a clock or measure a link (elastic jobs against a worker's "
        "start, stall bounds, bandwidth); `make test` runs these with nothing beside them and the "
        "rest beside the image checks (-m 'not alone')",
    )


@pytest.fixture(scope="module", params=[2, 3], ids=lambda n: f"{n}workers")
def cluster(request):
    """A healthy cluster of 2 or 3 workers, 2 slots each, shared by a module's tests."""
    c = make_cluster(request.param)
    yield c
    c.down()


@pytest.fixture
def fresh_cluster():
    """A 2-worker cluster of the test's own (fault tests break it)."""
    c = make_cluster(2)
    yield c
    c.down()


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.section("cluster timings")
        for what, seconds in TIMINGS:
            terminalreporter.write_line(f"{what}: {seconds:.1f} s")

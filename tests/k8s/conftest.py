"""tests/k8s: the chart rendered and checked offline (test_chart, test_mpijob, no docker), the key
hook's API client against the stand-in API server as a process (test_keys_client), and
what it renders run as containers (test_run_rendered, needs the horovod image)."""

from tests.support.compose import TIMINGS


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.section("k8s timings")
        for what, seconds in TIMINGS:
            terminalreporter.write_line(f"{what}: {seconds:.1f} s")

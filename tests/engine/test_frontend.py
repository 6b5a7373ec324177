"""The NumPy frontend and its bindings under real MPI ranks (scenarios_frontend.py)."""
import re
from pathlib import Path

from conftest import run_ok

SCRIPT = Path(__file__).with_name("scenarios_frontend.py")


def test_non_native_byte_order_is_reduced_by_value(world):
    run_ok(world, "byteorder", script=SCRIPT)


def test_out_overlapping_the_input(world):
    run_ok(world, "overlap", script=SCRIPT)


def test_dropped_handles_release_their_buffers():
    out, _ = run_ok(2, "dropped_handles", "5000", script=SCRIPT, timeout=300)
    grown = [float(g) for g in re.findall(r"grown=(-?[\d.]+) MB", out)]
    assert len(grown) == 2 and max(grown) < 50, out


def test_bad_arguments_name_the_tensor(world):
    run_ok(world, "bad_args", script=SCRIPT)


def test_concurrent_synchronize_of_one_handle(world):
    run_ok(world, "threads", script=SCRIPT)

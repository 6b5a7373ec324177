"""The NumPy frontend and its bindings under real MPI ranks (scenarios_frontend.py)."""
from pathlib import Path

from conftest import run_ok

SCRIPT = Path(__file__).with_name("scenarios_frontend.py")


def test_non_native_byte_order_is_reduced_by_value(world):
    run_ok(world, "byteorder", script=SCRIPT)


def test_out_overlapping_the_input(world):
    run_ok(world, "overlap", script=SCRIPT)

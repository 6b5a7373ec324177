"""The NumPy frontend and its bindings under real MPI ranks (scenarios_frontend.py)."""

import re

from tests.support.mpi import ENGINE


def test_non_native_byte_order_is_reduced_by_value(world):
    ENGINE.run_ok(world, "byteorder")


def test_out_overlapping_the_input(world):
    ENGINE.run_ok(world, "overlap")


def test_outputs_the_binding_allocates(world):
    ENGINE.run_ok(world, "output_blocks")


def test_dropped_handles_release_their_buffers():
    out, _ = ENGINE.run_ok(2, "dropped_handles", "5000", timeout=300)
    grown = [float(g) for g in re.findall(r"grown=(-?[\d.]+) MB", out)]
    assert len(grown) == 2 and max(grown) < 50, out


def test_bad_arguments_name_the_tensor(world):
    ENGINE.run_ok(world, "bad_args")


def test_concurrent_synchronize_of_one_handle(world):
    ENGINE.run_ok(world, "threads")


def test_blocking_calls_agree_with_handles(world):
    ENGINE.run_ok(world, "blocking_calls")

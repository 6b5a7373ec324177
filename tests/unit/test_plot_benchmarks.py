"""scripts/plot_benchmarks.py reads the recorded outputs as the benchmark scripts print them,
and every recorded output in docs/bench has a sweep to draw."""

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("plot", ROOT / "scripts" / "plot_benchmarks.py")
plot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot)

IPERF = (
    "== 2 workers x 2 slots on 2 cores; raw TCP worker-2 -> worker-1 (iperf3, 5 s): "
    "one way 1.50 GB/s; both ways at once 0.90 GB/s per direction"
)
SAMPLE = (
    IPERF
    + """
== hierarchical (auto); the ring column is the bare flat ring
# 4 ranks, float32 sum; Open MPI v4.1.4; engine cpu_operations=ring
    size |  engine us   GB/s |    ring us   GB/s |     mpi us   GB/s | engine/mpi ring/mpi
   1 MiB |     1000.0   1.57 |     2000.0   0.79 |     1500.0   1.05 |       1.50     0.75
  16 MiB |    20000.0   1.26 |    40000.0   0.63 |    30000.0   0.84 |       1.50     0.75
== flat (HOROVOD_HIERARCHICAL_ALLREDUCE=0)
   1 MiB |     2000.0   0.79 |     2000.0   0.79 |     1500.0   1.05 |       0.75     0.75
  16 MiB |    40000.0   0.63 |    40000.0   0.63 |    30000.0   0.84 |       0.75     0.75
"""
)


def test_parse_reads_both_sweeps_and_iperf():
    data = plot.parse(SAMPLE)
    assert data["iperf"] == (1.50, 0.90)
    assert data["title"].startswith("2 workers x 2 slots on 2 cores")
    assert data["sweeps"]["hierarchical"] == [
        (1 << 20, 1.57, 0.79, 1.05),
        (16 << 20, 1.26, 0.63, 0.84),
    ]
    assert [r[1] for r in data["sweeps"]["flat"]] == [0.79, 0.63]


def test_a_lone_bench_allreduce_output_is_one_engine_sweep():
    lone = "\n".join(SAMPLE.splitlines()[2:6])
    data = plot.parse(lone)
    assert list(data["sweeps"]) == ["engine"] and data["iperf"] is None


def test_a_bench_torch_output_is_one_torch_sweep():
    out = """    size |  horovod us   GB/s |     gloo us   GB/s | horovod/gloo
   4 KiB |       72.7   0.06 |     1702.1   0.00 |    23.40
  16 MiB |     3164.4   5.30 |    12170.8   1.38 |     3.85
"""
    data = plot.parse(out)
    assert data["sweeps"] == {"torch": [(4 << 10, 0.06, 0.0), (16 << 20, 5.30, 1.38)]}


@pytest.mark.parametrize("path", sorted((ROOT / "docs" / "bench").glob("*.txt")), ids=str)
def test_recorded_outputs_have_a_sweep_and_a_chart(path):
    data = plot.parse(path.read_text())
    assert data["sweeps"], f"{path}: no sweep"
    assert (ROOT / "docs" / "plots" / (path.stem + ".png")).exists(), "run `make plots`"


def test_render_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")  # `make plots` installs it; the tests do not need it
    plot.render(plot.parse(SAMPLE), tmp_path / "x.png")
    assert (tmp_path / "x.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

"""benchmarks/plot.py reads the recorded outputs as the benchmark scripts print them,
and every recorded output in docs/bench has a sweep to draw."""

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("plot", ROOT / "benchmarks" / "plot.py")
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
    # Bus bandwidth from the times (4 ranks: 2(n-1)/n = 1.5 of the size), as printed to 0.01.
    hier = data["sweeps"]["hierarchical"]
    assert [r[0] for r in hier] == [1 << 20, 16 << 20]
    assert [r[1:] for r in hier] == [
        pytest.approx((1.5729, 0.7864, 1.0486), abs=1e-4),
        pytest.approx((1.2583, 0.6291, 0.8389), abs=1e-4),
    ]
    assert [r[1] for r in data["sweeps"]["flat"]] == pytest.approx([0.79, 0.63], abs=0.01)


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


def test_a_shaped_run_draws_the_rate_and_iperf_through_the_shaper():
    out = (
        (
            "== 2 workers x 2 slots on 2 cores; links shaped at 400mbit (0.0500 GB/s); raw TCP "
            "worker-2 -> worker-1 (iperf3, 5 s): 383 Mbit/s\n"
        )
        + """== allreduce, flat ring (HOROVOD_HIERARCHICAL_ALLREDUCE=0)
# 4 ranks, float32 sum
  64 MiB | 2516582.4   0.04 | 2600000.0   0.04 | 2700000.0   0.04 |  1.07  1.04 |  0.10 0.1 0.2
== allreduce, hierarchical (auto: several hosts of several ranks)
# 4 ranks, float32 sum
  64 MiB | 1677721.6   0.06 | 2600000.0   0.04 | 2700000.0   0.04 |  1.61  1.04 |  0.10 0.1 0.2
"""
    )
    data = plot.parse(out)
    assert data["shaped"] == ("400mbit", 0.05, pytest.approx(0.047875))
    assert data["sweeps"]["flat"][0][1] == pytest.approx(0.04)
    assert data["sweeps"]["hierarchical"][0][1] == pytest.approx(0.06)


def test_a_scaling_run_is_efficiency_against_the_rate():
    pred = (
        "== predicted from the link: 14.0 MB of gradients, ring of {} at {} GB/s: allreduce 1 ms, "
        "compute step 1 ms; efficiency without overlap {}%, with full overlap {}%; measured {} %\n"
    )
    out = (
        "== 2 workers x 1 slot, links at 400mbit (0.0500 GB/s)\n"
        "Communication overhead: 73.3 % median of 20 pairs; scaling efficiency 26.7 %\n"
        + pred.format(2, "0.0500", 28.2, 39.1, 26.7)
        + "== against one worker alone (300.0 img/s): 25.1% per rank (without communication "
        "these ranks ran 97.0% of it)\n"
        + "== 3 workers x 1 slot, links at 1gbit (0.1250 GB/s)\n"
        + pred.format(3, "0.1250", 39.5, 65.3, 35.0)
    )
    data = plot.parse(out)
    assert data["scaling"] == [
        dict(
            workers=2,
            rate=0.05,
            no_overlap=28.2,
            full_overlap=39.1,
            measured=26.7,
            against_one_worker=25.1,
        ),
        dict(workers=3, rate=0.125, no_overlap=39.5, full_overlap=65.3, measured=35.0),
    ]


@pytest.mark.parametrize("path", sorted((ROOT / "docs" / "bench").glob("*.txt")), ids=str)
def test_recorded_outputs_have_a_sweep_and_a_chart(path):
    data = plot.parse(path.read_text())
    assert data["sweeps"] or data["scaling"], f"{path}: no sweep and no scaling run"
    assert (ROOT / "docs" / "plots" / (path.stem + ".png")).exists(), "run `make plots`"


def test_render_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")  # `make plots` installs it; the tests do not need it
    plot.render(plot.parse(SAMPLE), tmp_path / "x.png")
    assert (tmp_path / "x.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    scaling = plot.parse(
        "== 2 workers x 1 slot, links at 400mbit (0.0500 GB/s)\n== predicted from the link: "
        "x: efficiency without overlap 28.2%, with full overlap 39.1%; measured 26.7 %\n"
    )
    plot.render_scaling(scaling, tmp_path / "s.png")
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

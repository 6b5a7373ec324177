"""HOROVOD_AUTOTUNE: rank 0 tries fusion thresholds and cycle times while a job runs and keeps the
best; every rank switches in the same round (results checked against NumPy through every
switch, scenarios_autotune.py), the trials go to HOROVOD_AUTOTUNE_LOG, and the choice is logged
once by rank 0 and applied by every rank."""

import csv
import re

from tests.support.mpi import ENGINE

FUSION_GRID_MIB = {0, 1, 4, 16, 32, 64, 128}
CYCLE_GRID_MS = {0.5, 1, 2.5, 5, 10}
SETTING = r"fusion threshold ([\d.e+-]+) MiB, cycle time ([\d.e+-]+) ms"


def tuning_env(log, **extra):
    env = {
        "HOROVOD_AUTOTUNE": "1",
        "HOROVOD_AUTOTUNE_LOG": str(log),
        "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "1",
        "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "2",
    }
    env.update(extra)
    return env


def trials(log):
    """(warmup rows, numbered rows, the chosen row) of the CSV, each row a dict."""
    with open(log) as f:
        rows = list(csv.DictReader(f))
    assert rows and rows[-1]["sample"] == "chosen", rows
    warmup = [r for r in rows if r["sample"] == "warmup"]
    numbered = rows[len(warmup) : -1]
    assert [r["sample"] for r in numbered] == [str(i + 1) for i in range(len(numbered))], rows
    return warmup, numbered, rows[-1]


def setting(row):
    return float(row["fusion_threshold_mib"]), float(row["cycle_time_ms"])


def chosen_lines(err):
    return re.findall(
        rf"\[horovod rank 0 INFO\] autotune: chose {SETTING} after (\d+) samples", err
    )


def per_rank(err, world, pattern):
    """{rank: [matches of pattern in that rank's log lines, in order]}."""
    out = {r: [] for r in range(world)}
    for rank, rest in re.findall(r"\[horovod rank (\d+) \w+\] (autotune: .*)", err):
        m = re.fullmatch(pattern, rest)
        if m:
            out[int(rank)].append(tuple(float(g) for g in m.groups()))
    return out


def test_autotune_switches_every_rank_together_and_keeps_the_best(tmp_path, world):
    log = tmp_path / "autotune.csv"
    env = tuning_env(log, HOROVOD_LOG_LEVEL="debug")
    _, err = ENGINE.run_ok(world, "autotune_steps", 80, env=env, timeout=240)

    warmup, numbered, chosen = trials(log)
    assert len(warmup) == 1, warmup
    assert 2 <= len(numbered) <= 20, numbered  # HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES=20
    # Starts from the defaults (128 MiB, 1 ms), then tries each grid point at most once.
    assert setting(numbered[0]) == (128, 1), numbered[0]
    tried = [setting(r) for r in numbered]
    assert len(set(tried)) == len(tried), tried
    for fusion, cycle in tried:
        assert fusion in FUSION_GRID_MIB and cycle in CYCLE_GRID_MS, tried
    # The first sweep covers every fusion threshold at the starting cycle time.
    assert {f for f, c in tried[: len(FUSION_GRID_MIB)]} == FUSION_GRID_MIB, tried
    for r in numbered:
        assert int(r["rounds"]) == 2 and int(r["bytes"]) > 0 and float(r["seconds"]) > 0, r
        assert int(r["score_bytes_per_s"]) > 0, r
    best = max(numbered, key=lambda r: int(r["score_bytes_per_s"]))
    assert setting(chosen) == setting(best), (chosen, best)
    assert chosen["score_bytes_per_s"] == best["score_bytes_per_s"]

    # Rank 0 says once what it chose; every rank switched through the same settings, in the
    # same order as the log's samples, and ended with the chosen one.
    lines = [tuple(float(x) for x in line) for line in chosen_lines(err)]
    assert lines == [(*setting(chosen), len(numbered))], err
    tries = per_rank(err, world, rf"autotune: this rank now tries {SETTING}")
    finals = per_rank(err, world, rf"autotune: this rank now runs with {SETTING} \(final\)")
    for rank in range(world):
        assert tries[rank] == tried[1:], (rank, tries[rank], tried)
        assert finals[rank] == [setting(chosen)], (rank, finals[rank])


def test_autotune_holds_a_knob_set_explicitly(tmp_path):
    # HOROVOD_FUSION_THRESHOLD is set: only the cycle time is tuned. At the default log level
    # the choice is still shown, once, and the samples are not.
    log = tmp_path / "autotune.csv"
    env = tuning_env(log, HOROVOD_FUSION_THRESHOLD=str(4 << 20))
    _, err = ENGINE.run_ok(2, "autotune_steps", 40, env=env, timeout=240)
    _, numbered, chosen = trials(log)
    tried = [setting(r) for r in numbered]
    assert {f for f, _ in tried} == {4} and {c for _, c in tried} == CYCLE_GRID_MS, tried
    assert setting(chosen)[0] == 4
    lines = [tuple(float(x) for x in line) for line in chosen_lines(err)]
    assert lines == [(*setting(chosen), len(numbered))], err
    assert "autotune: sample" not in err, err


def test_autotune_stops_at_the_sample_limit(tmp_path):
    log = tmp_path / "autotune.csv"
    env = tuning_env(
        log, HOROVOD_AUTOTUNE_WARMUP_SAMPLES="0", HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES="3"
    )
    _, err = ENGINE.run_ok(3, "autotune_steps", 30, env=env, timeout=240)
    warmup, numbered, chosen = trials(log)
    assert not warmup and len(numbered) == 3, numbered
    lines = [tuple(float(x) for x in line) for line in chosen_lines(err)]
    assert lines == [(*setting(chosen), 3)], err

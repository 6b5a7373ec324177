"""Launching MPI ranks, and plain processes, for the tests (ranks over the TCP transport:
tcp.py, which Program's transport="tcp" routes to). Every launch has a hard timeout: a
hang fails the test with the output so far instead of stalling CI.

A scenario program (tests/engine/scenarios.py, tests/tensorflow/scenarios_ops.py and
scenarios_keras.py) runs as `python PROGRAM NAME[,NAME...] [ARGS...]` on every rank and prints
"OK <NAME> rank=<r>" after each scenario that passes, "FAIL <NAME> rank=<r>" and the traceback
at the first that does not (tests/support/scenario.py is that side). Program binds one to its
defaults; ENGINE, TF_OPS and KERAS are the suites' programs.

`site` is the directory the children import horovod from (default: the source tree; the GPU
suite passes the GPU build's copy): they run there, with it first on PYTHONPATH.
"""

import os
import re
import subprocess
import sys
import time

import pytest

from tests.support.paths import ROOT

MPIRUN = [
    "mpirun",
    "--allow-run-as-root",
    "--oversubscribe",
    "--bind-to",
    "none",
    "--mca",
    "btl_vader_single_copy_mechanism",
    "none",
]
# TensorFlow's log noise off and its thread pools small: several ranks share a few cores.
TF_ENV = {
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "2",
    "OMP_NUM_THREADS": "1",
}


def environment(env=None, *, site=ROOT, tf=False):
    """The children's environment: ours, `site` first on PYTHONPATH and the repository root last
    (scenario programs import tests.support; last, so that it never shadows another build's
    horovod), TF_ENV if `tf`, then `env`."""
    e = dict(os.environ)
    path = [str(site)] + [p for p in e.get("PYTHONPATH", "").split(os.pathsep) if p]
    path += [] if str(ROOT) in path else [str(ROOT)]
    e["PYTHONPATH"] = os.pathsep.join(path)
    e.update(TF_ENV if tf else {})
    e.update(env or {})
    return e


def _text(output):
    # TimeoutExpired carries bytes even when the run asked for text.
    return output.decode(errors="replace") if isinstance(output, bytes) else (output or "")


def run(cmd, *, env=None, site=ROOT, tf=False, timeout=120, what=None):
    """Runs cmd (a list) in `site`; returns the CompletedProcess (output captured as text).
    Fails the test if it runs for more than `timeout` seconds."""
    cmd = [str(c) for c in cmd]
    try:
        return subprocess.run(
            cmd,
            cwd=site,
            env=environment(env, site=site, tf=tf),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as ex:
        pytest.fail(
            f"{what or ' '.join(cmd)} hung for more than {timeout} s:\n"
            f"{_text(ex.stdout)}\n{_text(ex.stderr)}"
        )


def python(code, **options):
    """`python -c code` in one plain process (no mpirun); options as run()'s."""
    return run([sys.executable, "-c", code], **options)


def launch(np_, *argv, what=None, **options):
    """`mpirun -np np_ python ARGV...`; returns (returncode, stdout, stderr). options as run()'s."""
    p = run(
        MPIRUN + ["-np", str(np_), sys.executable, *argv],
        what=what or f"{' '.join(map(str, argv))} on {np_} ranks",
        **options,
    )
    return p.returncode, p.stdout, p.stderr


def launch_per_rank(envs, *argv, what=None, timeout=60, **options):
    """One rank per entry of `envs`, each with those variables set (mpirun's MPMD form), all
    running `python ARGV...`; returns (returncode, stdout, stderr)."""
    cmd = list(MPIRUN)
    for i, env in enumerate(envs):
        if i:
            cmd.append(":")
        cmd += ["-np", "1"]
        for k, v in env.items():
            cmd += ["-x", f"{k}={v}"]
        cmd += [sys.executable, *argv]
    p = run(
        cmd,
        timeout=timeout,
        what=what or f"{' '.join(map(str, argv))} on {len(envs)} ranks",
        **options,
    )
    return p.returncode, p.stdout, p.stderr


def ok_ranks(out, name):
    """The ranks that printed "OK <name> rank=<r>"; mpirun may interleave ranks' lines, so the
    verdicts are looked for anywhere in the output."""
    return {int(r) for r in re.findall(rf"OK {re.escape(name)} rank=(\d+)", out)}


class Batch:
    """The outcome of one launch that ran several scenarios in one process per rank (TF's import
    costs seconds per rank, so tests share launches). The program prints "OK <name> rank=<r>"
    after each scenario and, on the first failure, "FAIL <name> rank=<r>" with the traceback,
    then exits: the later scenarios do not run."""

    def __init__(self, np_, names, rc, out, err, seconds):
        self.np, self.names, self.rc, self.out, self.err = np_, names, rc, out, err
        self.seconds = seconds

    def passed(self, name):
        return ok_ranks(self.out, name) == set(range(self.np))

    def check(self, name):
        """Fails the calling test unless every rank passed `name`, saying why."""
        assert name in self.names, f"{name} is not in this batch"
        if self.passed(name):
            return
        failed = [n for n in self.names if not self.passed(n)]
        first = failed[0]
        why = (
            f"{name} did not run: {first} failed before it"
            if first != name
            else f"{name} failed on {self.np} ranks"
        )
        # The failing ranks' reports: from "FAIL" to the next verdict line.
        reports = re.findall(
            rf"(FAIL {re.escape(first)} rank=.*?)(?=^OK |^FAIL |\Z)", self.out, re.S | re.M
        )
        pytest.fail(
            f"{why} (rc={self.rc}, {self.seconds:.0f} s)\n"
            + ("\n".join(reports) or f"stdout:\n{self.out[-6000:]}")
            + f"\nstderr (end):\n{self.err[-3000:]}",
            pytrace=False,
        )


class Program:
    """A scenario program and its launch defaults (TF_ENV or not, the timeout); every method
    takes run()'s options (env, site, tf, timeout) too."""

    def __init__(self, path, *, tf=False, timeout=120):
        self.path, self.options = path, {"tf": tf, "timeout": timeout}

    def _options(self, options):
        return {**self.options, **options}

    def launch(self, np_, name, *args, transport="mpi", **options):
        """Runs scenario `name` (or "a,b,c") on np_ ranks; returns (returncode, stdout, stderr).
        transport="tcp": plain processes over the TCP transport instead of mpirun (tcp.py;
        options may then also hold per_rank_env and grace)."""
        if transport == "tcp":
            from tests.support import tcp

            return tcp.launch_tcp(
                np_,
                tcp.__file__,
                self.path,
                name,
                *map(str, args),
                what=f"{name} on {np_} TCP ranks",
                **self._options(options),
            )
        assert transport == "mpi", f"unknown transport {transport!r}"
        return launch(
            np_,
            self.path,
            name,
            *map(str, args),
            what=f"{name} on {np_} ranks",
            **self._options(options),
        )

    def run_ok(self, np_, name, *args, **options):
        """Runs the scenario and asserts that it exits 0 with every rank's OK line; returns
        (stdout, stderr). transport= as launch's."""
        rc, out, err = self.launch(np_, name, *args, **options)
        assert rc == 0 and ok_ranks(out, name) == set(range(np_)), (
            f"rc={rc}\nstdout:\n{out}\nstderr:\n{err}"
        )
        return out, err

    def run_batch(self, np_, names, *args, **options):
        """One launch of scenarios `names` (in order, one process per rank; `args` for every
        one of them); returns a Batch. transport= as launch's."""
        options.setdefault("timeout", 300)
        start = time.monotonic()
        rc, out, err = self.launch(np_, ",".join(names), *args, **options)
        return Batch(np_, list(names), rc, out, err, time.monotonic() - start)

    def run_single(self, name, *args, **options):
        """The scenario in one plain process, without mpirun; returns the CompletedProcess."""
        return run([sys.executable, self.path, name, *args], **self._options(options))

    def launch_per_rank(self, envs, name, *args, timeout=60, **options):
        """The scenario on one rank per entry of `envs`, each with those variables set."""
        return launch_per_rank(
            envs,
            self.path,
            name,
            *args,
            what=f"{name} on {len(envs)} ranks",
            **self._options({**options, "timeout": timeout}),
        )


ENGINE = Program(ROOT / "tests" / "engine" / "scenarios.py")
TF_OPS = Program(ROOT / "tests" / "tensorflow" / "scenarios_ops.py", tf=True, timeout=180)
KERAS = Program(ROOT / "tests" / "tensorflow" / "scenarios_keras.py", tf=True, timeout=180)

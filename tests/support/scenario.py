"""The rank side of the scenario protocol (tests/support/mpi.py is the test side).

A scenario program, `python PROGRAM NAME[,NAME...] [ARGS...]`, runs each named scenario in
order in this one process (TF's import costs seconds per rank, so tests batch them) and prints
"OK <NAME> rank=<r>" after each; the first failure prints "FAIL <NAME> rank=<r>" and its
traceback and ends the process at once, which makes mpirun end the job: the later scenarios
never start, and nothing waits for this rank. A scenario reads its ARGS from sys.argv[2:].

Scenarios are the functions sc_<NAME> of the program's subject modules (collect), which a
program finds by their file names (beside): `scenarios_<subject>.py` beside it, so that a new
subject needs no list; docs/architecture.md, "Where a new test goes", has the convention. Every
check is against a reference each rank computes itself (reference.py), and a failed one raises.

Launched by the tests, the repository root is on PYTHONPATH (mpi.environment); by hand, run
from the root with `PYTHONPATH=. mpirun -np 2 python tests/engine/scenarios.py NAME`.
"""

import importlib
import os
import traceback
from pathlib import Path

from tests.support.paths import ROOT


def beside(program_file, *patterns):
    """The modules next to program_file whose file names match one of the glob patterns, in
    name order, imported by their dotted names from the repository root (tests.<suite>.<name>),
    as the program's own imports would."""
    here = Path(program_file).resolve().parent
    package = ".".join(here.relative_to(ROOT).parts)
    names = sorted({path.stem for pattern in patterns for path in here.glob(pattern)})
    return [importlib.import_module(f"{package}.{name}") for name in names]


def collect(*modules):
    """{NAME: function} of the modules' sc_NAME functions; a name in two modules is an error."""
    found = {}
    for module in modules:
        for attr, fn in vars(module).items():
            if attr.startswith("sc_") and callable(fn):
                name = attr[3:]
                assert name not in found, f"scenario {name} in {module.__name__} and elsewhere"
                found[name] = fn
    return found


def manages_init(fn):
    """Marks a scenario that calls init itself (after setting up, or expecting it to fail): the
    runner does not initialize a process that runs it."""
    fn.manages_init = True
    return fn


def rank():
    """This process's rank in the job (MPI_COMM_WORLD, also for scenarios that run Horovod on a
    subcommunicator); 0 without mpirun."""
    return int(os.environ.get("OMPI_COMM_WORLD_RANK", 0))


def main(scenarios, names, *, init, shutdown):
    """Runs scenarios[name] for each of `names` in order (the protocol above)."""
    if not any(getattr(scenarios[name], "manages_init", False) for name in names):
        init()
    for name in names:
        try:
            scenarios[name]()
        except SystemExit as e:
            if e.code in (None, 0):  # a scenario ending its rank on purpose: atexit still runs
                raise
            _fail(name)
        except BaseException:  # noqa: B036  (the report must come out, whatever was raised)
            _fail(name)
        print(f"OK {name} rank={rank()}", flush=True)
    shutdown()


def _fail(name):
    print(f"FAIL {name} rank={rank()}\n{traceback.format_exc()}", flush=True)
    os._exit(1)


def expect_error(fn, exc, *needles):
    """fn() must raise `exc` whose message holds every needle; returns the message."""
    try:
        fn()
    except exc as e:
        msg = str(e)
        for needle in needles:
            assert needle in msg, f"error {msg!r} lacks {needle!r}"
        return msg
    raise AssertionError(f"expected {exc.__name__} containing {needles}")

"""The engine's knob table (csrc/common/config.h, read through horovod._core) against what is
written and done elsewhere: docs/knobs.md's table lists every knob with its default, range and
"equal" mark, and no stale row; no Python code in horovod/ reads an engine knob from the
environment (with a default and parser of its own); the engine's one-knob check is init()'s.

Needs the built engine (`make build`), not MPI: importing _core and these queries do not call
MPI_Init (checked below).
"""

import ast
import pathlib
import re
import subprocess
import sys

import pytest

from horovod.common import basics

ROOT = pathlib.Path(__file__).resolve().parents[2]
KNOBS = {k.env: k for k in basics.config_knobs()}
UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
NUMBER = r"(\d+(?:\.\d+)?(?:e[+-]?\d+)?)(?:\s*(KiB|MiB|GiB))?"


def documented_rows():
    """{variable: (default, range, equal)} of docs/knobs.md's table under '## The table'."""
    text = (ROOT / "docs" / "knobs.md").read_text()
    section = text.split("## The table", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    assert lines[0] == "| variable | default | range | equal | meaning |", lines[0]
    rows = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        m = re.fullmatch(r"`(HOROVOD_[A-Z0-9_]+)`", cells[0])
        assert m, f"docs/knobs.md row without a `HOROVOD_*` name: {line}"
        assert m.group(1) not in rows, f"docs/knobs.md lists {m.group(1)} twice"
        rows[m.group(1)] = tuple(cells[1:4])
    return rows


def _number(value, unit):
    return float(value) * UNITS.get(unit, 1)


def _range_of(text):
    """(min, max) of a range cell such as '64 .. 1 GiB' or '0, or check time .. 1e6': the first
    number and the one after the last '..'."""
    first = re.match(NUMBER, text)
    last = re.search(r"\.\.\s*" + NUMBER + r"\s*$", text)
    assert first and last, f"range {text!r} is not 'min .. max'"
    return _number(*first.groups()), _number(*last.groups())


def test_knob_page_lists_every_knob_and_no_other():
    rows = documented_rows()
    missing = sorted(set(KNOBS) - set(rows))
    stale = sorted(set(rows) - set(KNOBS))
    assert not missing and not stale, (
        f"docs/knobs.md's table lacks {missing} and lists {stale}, which the engine does not read"
    )


@pytest.mark.parametrize("env", sorted(KNOBS))
def test_knob_page_row_matches_the_engine(env):
    rows = documented_rows()
    if env not in rows:
        pytest.skip("reported by test_knob_page_lists_every_knob_and_no_other")
    knob = KNOBS[env]
    default, range_, equal = rows[env]
    assert default == (knob.default or "(off)"), (
        f"{env}: documented default {default!r}, engine {knob.default!r}"
    )
    if knob.type in ("int", "float"):
        assert _range_of(range_) == (knob.min, knob.max), (
            f"{env}: documented range {range_!r}, engine [{knob.min}, {knob.max}]"
        )
    elif knob.type == "bool":
        assert range_ == "boolean", f"{env}: documented range {range_!r} for a boolean"
    elif knob.choices:
        assert range_ == ", ".join(knob.choices), (
            f"{env}: documented range {range_!r}, engine {knob.choices}"
        )
    assert equal == ("yes" if knob.equal else ""), (
        f"{env}: documented equal {equal!r}, engine {'must' if knob.equal else 'need not'} agree"
    )


def test_range_cells_parse():
    assert _range_of("0 .. 64 GiB") == (0, 64 << 30)
    assert _range_of("0.1 .. 1e6") == (0.1, 1e6)
    assert _range_of("0, or check time .. 1e6") == (0, 1e6)


# ---- the engine's check is init()'s parse -------------------------------------------------------


@pytest.mark.parametrize(
    "env,value",
    [
        ("HOROVOD_CYCLE_TIME", "inf"),
        ("HOROVOD_CACHE_CAPACITY", "1e8"),
        ("HOROVOD_FUSION_THRESHOLD", "-1"),
        ("HOROVOD_LOG_LEVEL", "bogus"),
        ("HOROVOD_CPU_OPERATIONS", "gloo"),
        ("HOROVOD_STALL_CHECK_DISABLE", "maybe"),
        ("HOROVOD_SUMMARY", "3"),
        ("HOROVOD_RING_CHUNK_BYTES", "16"),
    ],
)
def test_check_knob_says_what_init_says(monkeypatch, env, value):
    # config_values() before init() parses the environment with init()'s parser.
    monkeypatch.setenv(env, value)
    error = basics.check_knob(env, value)
    assert error.startswith(f"{env}='{value}' is not valid: expected ")
    with pytest.raises(ValueError) as e:
        basics.config_values()
    assert str(e.value) == error


@pytest.mark.parametrize(
    "env,value,parsed",
    [
        ("HOROVOD_FUSION_THRESHOLD", "0", 0),
        ("HOROVOD_CYCLE_TIME", "2.5", 2.5),
        ("HOROVOD_LOG_LEVEL", "DEBUG", "debug"),
        ("HOROVOD_STALL_CHECK_DISABLE", "yes", True),
        ("HOROVOD_TIMELINE", "/tmp/t.json", "/tmp/t.json"),
    ],
)
def test_valid_values_pass_and_parse(monkeypatch, env, value, parsed):
    assert basics.check_knob(env, value) == ""
    monkeypatch.setenv(env, value)
    assert basics.config_values()[env] == parsed


def test_unset_knobs_parse_to_their_defaults(monkeypatch):
    for env in KNOBS:
        monkeypatch.delenv(env, raising=False)
    values = basics.config_values()
    for env, knob in KNOBS.items():
        v = values[env]
        text = (
            ("1" if v else "0")
            if isinstance(v, bool)
            else f"{v:g}"
            if isinstance(v, float)
            else str(v)
        )
        assert text == knob.default, f"{env}: parsed default {v!r}, table {knob.default!r}"


def test_unknown_knob_and_nul_are_errors():
    assert (
        basics.check_knob("HOROVOD_NO_SUCH_KNOB", "1")
        == "HOROVOD_NO_SUCH_KNOB is not a Horovod knob"
    )
    assert "NUL" in basics.check_knob("HOROVOD_CACHE_CAPACITY", "1\x00junk")


def test_queries_do_not_initialize_mpi():
    code = (
        "import horovod.common.basics as b\n"
        "b.config_knobs(); b.check_knob('HOROVOD_CYCLE_TIME', '1'); b.config_values()\n"
        "import mpi4py\n"
        "mpi4py.rc.initialize = mpi4py.rc.finalize = False\n"
        "from mpi4py import MPI\n"
        "print('MPI initialized:', MPI.Is_initialized())\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert p.returncode == 0 and "MPI initialized: False" in p.stdout, p.stdout + p.stderr


# ---- no engine knob is parsed in Python -----------------------------------------------------


def _is_environment(node):
    """os.environ, environ, or a variable named env (flags.py's parse_args(env=...))."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id in ("environ", "env")
    )


def _reads_of_knobs(path):
    """(line, code) of each read of an engine knob's variable: os.environ.get / os.getenv /
    env.get calls and os.environ[...] loads. Setting one (setdefault, assignment) and asking
    whether it is set (`in`) are not reads."""
    source = path.read_text()
    out = []
    for node in ast.walk(ast.parse(source, str(path))):
        name = None
        if (
            isinstance(node, ast.Call)
            and node.args
            and (
                isinstance(node.func, ast.Attribute)
                and (
                    node.func.attr in ("get", "pop")
                    and _is_environment(node.func.value)
                    or node.func.attr == "getenv"
                )
                or isinstance(node.func, ast.Name)
                and node.func.id == "getenv"
            )
        ):
            name = node.args[0]
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and _is_environment(node.value)
        ):
            name = node.slice
        if isinstance(name, ast.Constant) and name.value in KNOBS:
            out.append((node.lineno, ast.get_source_segment(source, node)))
    return sorted(out)


def test_no_engine_knob_is_parsed_in_python():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {code}"
        for path in sorted((ROOT / "horovod").rglob("*.py"))
        for line, code in _reads_of_knobs(path)
    ]
    assert not found, (
        "engine knobs read from the environment in Python (use "
        "horovod.common.basics.config_values(): the engine's parse, defaults and "
        "bounds):\n  " + "\n  ".join(found)
    )


def test_the_knob_read_finder_finds_reads(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(
        "import os\n"
        "a = int(os.environ.get('HOROVOD_FUSION_THRESHOLD', 1))\n"
        "b = os.environ['HOROVOD_CYCLE_TIME']\n"
        "os.environ.setdefault('HOROVOD_SUMMARY', '0')\n"
        "os.environ['HOROVOD_SUMMARY'] = '0'\n"
        "c = 'HOROVOD_TIMELINE' in os.environ\n"
        "d = os.environ.get('HOROVOD_START_TIMEOUT')\n"
        "e = config_values()['HOROVOD_CYCLE_TIME']\n"
        "f = os.getenv('HOROVOD_LOG_LEVEL')\n"
    )
    assert [line for line, _ in _reads_of_knobs(f)] == [2, 3, 9]

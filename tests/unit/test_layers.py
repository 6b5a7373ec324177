"""scripts/check_layers.py: the real csrc/ is clean, and planted violations are caught."""

import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
CHECK = REPO / "scripts" / "check_layers.py"


def run(root=None):
    args = [sys.executable, str(CHECK)] + ([str(root)] if root else [])
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def write(root, rel, text):
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_csrc_includes_point_down():
    r = run()
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == ""


def clean_tree(root):
    write(root, "common/common.h", "#pragma once\n")
    write(root, "transport/transport.h", '#include "common/common.h"\n')
    seam = '#include "transport/transport.h"\n'
    write(root, "transport/mpi/mpi_transport.h", "#include <mpi.h>\n" + seam)
    write(root, "ops/cpu_collectives.h", '#include "common/common.h"\n' + seam)
    write(root, "engine/engine.h", '#include "ops/cpu_collectives.h"\n')
    write(root, "engine/watchdog.h", '#include "engine/engine.h"\n')
    write(root, "python/module.cc", '#include "common/common.h"\n#include "engine/engine.h"\n')
    # TensorFlow's own headers share the directory name of our frontend: not ours, not checked.
    write(
        root,
        "tensorflow/mpi_ops.cc",
        '#include "engine/engine.h"\n#include "tensorflow/core/framework/op.h"\n',
    )


def test_clean_tree_passes(tmp_path):
    clean_tree(tmp_path)
    r = run(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_planted_violations_are_named_with_file_and_line(tmp_path):
    clean_tree(tmp_path)
    write(
        tmp_path,
        "ops/broadcast.cc",
        '// up a layer\n#include "common/common.h"\n#include "engine/watchdog.h"\n',
    )
    write(tmp_path, "common/config.cc", '#include "transport/transport.h"\n')
    write(tmp_path, "engine/loop.cc", "#include <mpi.h>\n")
    write(
        tmp_path,
        "python/extra.cc",
        '#include "engine/watchdog.h"\n#include "ops/cpu_collectives.h"\n',
    )
    write(tmp_path, "tensorflow/other.cc", '#include "python/module.cc"\n')
    write(tmp_path, "misc/loose.cc", '#include "common/common.h"\n')
    r = run(tmp_path)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    expected = [
        f'{tmp_path}/common/config.cc:1: #include "transport/transport.h"',
        f"{tmp_path}/engine/loop.cc:1: #include <mpi.h>: only csrc/transport/mpi/ talks to MPI",
        f"{tmp_path}/misc/loose.cc:1:",
        f'{tmp_path}/ops/broadcast.cc:3: #include "engine/watchdog.h"',
        f'{tmp_path}/python/extra.cc:1: #include "engine/watchdog.h"',
        f'{tmp_path}/python/extra.cc:2: #include "ops/cpu_collectives.h"',
        f'{tmp_path}/tensorflow/other.cc:1: #include "python/module.cc"',
    ]
    assert len(lines) == len(expected), r.stdout
    for line, start in zip(lines, expected):
        assert line.startswith(start), (line, start)
    assert "common/ may include only common" in r.stdout
    assert (
        "a frontend (python) may include only its own and common/ headers and engine/engine.h"
        in r.stdout
    )
    assert "misc/loose.cc is outside every layer" in r.stdout

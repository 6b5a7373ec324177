#!/usr/bin/env python3
"""Checks that every #include "..." under csrc/ points down the layers (architecture.md):

    common -> transport -> ops -> engine -> frontends (python, tensorflow)

A file may include headers of its own layer and of any layer below it. Frontends are thin:
they see the engine only through engine/engine.h, plus the base (common/); they never include
each other. An include counts as ours when the file exists under the csrc root (so TensorFlow's
"tensorflow/core/..." is not mistaken for csrc/tensorflow). A directory of csrc/ that is not in
LAYERS is an error too, so a new one must be placed in the order here first.

Usage: check_layers.py [CSRC_DIR]   (default: csrc/ beside this script's parent)
Prints each offending include as file:line and exits 1; prints nothing and exits 0 if clean.
"""

import pathlib
import re
import sys

# Directory -> height; an include may not point to a greater height.
LAYERS = {"common": 0, "transport": 1, "ops": 2, "engine": 3, "python": 4, "tensorflow": 4}
FRONTENDS = {"python", "tensorflow"}
# What a frontend may include from the layers below the base.
FRONTEND_ENGINE_API = {"engine/engine.h"}
SOURCE_SUFFIXES = {".h", ".cc", ".cpp", ".hpp", ".cu", ".cuh"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# Nothing above the transport seam names MPI: its header belongs to the MPI transport alone.
MPI_HEADER = re.compile(r"^\s*#\s*include\s+<mpi\.h>")
MPI_HOME = ("transport", "mpi")


def allowed(src_layer, target):
    """None if a file of src_layer may include target (a path relative to the csrc root), else
    the rule it breaks."""
    dst_layer = target.split("/", 1)[0]
    if src_layer in FRONTENDS:
        # Its own headers too (python/dlpack.h), never another frontend's.
        if dst_layer in ("common", src_layer) or target in FRONTEND_ENGINE_API:
            return None
        return (
            f"a frontend ({src_layer}) may include only its own and common/ headers and "
            f"{', '.join(sorted(FRONTEND_ENGINE_API))}"
        )
    if dst_layer not in LAYERS:
        return f"{dst_layer}/ is not a layer of csrc/ (add it to LAYERS in scripts/check_layers.py)"
    if LAYERS[dst_layer] > LAYERS[src_layer] or dst_layer in FRONTENDS:
        below = [d for d, h in LAYERS.items() if h <= LAYERS[src_layer] and d not in FRONTENDS]
        return f"{src_layer}/ may include only {', '.join(below)} (includes point down the layers)"
    return None


def check(root):
    root = pathlib.Path(root)
    problems = []
    for path in sorted(p for p in root.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file()):
        rel = path.relative_to(root)
        src_layer = rel.parts[0] if len(rel.parts) > 1 else ""
        if src_layer not in LAYERS:
            problems.append(
                f"{path}:1: {rel} is outside every layer of csrc/ "
                f"({', '.join(LAYERS)}); add its directory to LAYERS"
            )
            continue
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if MPI_HEADER.match(line) and tuple(rel.parts[:2]) != MPI_HOME:
                problems.append(
                    f"{path}:{lineno}: #include <mpi.h>: only csrc/transport/mpi/ talks to MPI"
                )
                continue
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            if not (root / target).is_file():
                continue  # a system or third-party header (e.g. tensorflow/core/...)
            why = allowed(src_layer, target)
            if why:
                problems.append(f'{path}:{lineno}: #include "{target}": {why}')
    return problems


def main(argv):
    root = argv[1] if len(argv) > 1 else pathlib.Path(__file__).resolve().parent.parent / "csrc"
    if not pathlib.Path(root).is_dir():
        print(f"check_layers: {root} is not a directory", file=sys.stderr)
        return 2
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(
            f"check_layers: {len(problems)} include(s) point up or across the layers "
            "common -> transport -> ops -> engine -> frontends (<mpi.h> only in transport/mpi/)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

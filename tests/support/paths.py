"""Where things are, and the version pins of versions.env."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# The GPU engine's copy of the package (`make build/engine-gpu`); the Makefile points here.
GPU_SITE = Path(os.environ.get("HOROVOD_TEST_SITE", ROOT / "build" / "gpu" / "site"))


def pins(path=ROOT / "versions.env"):
    """{KEY: VALUE} of versions.env (KEY=VALUE lines; blank lines and # comments skipped)."""
    out = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out

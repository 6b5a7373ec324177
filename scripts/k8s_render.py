#!/usr/bin/env python3
"""`helm template` without a helm binary: renders charts/horovod with Helm's own Go code (PyPI's
helm-python-sdk, pinned in tests/requirements.txt) and prints the manifests, NOTES.txt last.

    python scripts/k8s_render.py [-f values.yaml] [--set workers=4,image.registry=reg:5000]
                                 [--name demo] [--namespace default]

Values the chart's schema refuses fail here as they would at helm install (exit 2)."""

import argparse
import sys
from pathlib import Path

import helm_python
import yaml

CHART = Path(__file__).resolve().parents[1] / "charts" / "horovod"


def merge(into, more):
    for k, v in more.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            merge(into[k], v)
        else:
            into[k] = v
    return into


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-f", "--values", action="append", default=[], help="a values YAML file")
    p.add_argument("--set", action="append", default=[], help="helm --set expression")
    p.add_argument("--name", default="demo", help="release name")
    p.add_argument("--namespace", default="default")
    args = p.parse_args()
    values = {}
    for f in args.values:
        merge(values, yaml.safe_load(Path(f).read_text()) or {})
    for s in args.set:
        merge(values, helm_python.parse_set_string(s))
    try:
        with helm_python.Chart.load(CHART) as chart:
            out = chart.render(values, name=args.name, namespace=args.namespace, is_install=True)
    except helm_python.HelmError as e:
        print(f"k8s_render: {e}", file=sys.stderr)
        return 2
    notes = [k for k in out if k.endswith("NOTES.txt")]
    for path in sorted(set(out) - set(notes)):
        if out[path].strip():
            print(f"---\n# Source: {path}\n{out[path].strip()}")
    for path in notes:
        print("\n# " + out[path].strip().replace("\n", "\n# "), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

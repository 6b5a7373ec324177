"""Charts of the recorded benchmark outputs: `make plots` turns every docs/bench/*.txt into
docs/plots/<same name>.png, shown beside the tables in docs/benchmarks.md.

A recorded output is what a benchmark script printed, verbatim. Understood here:
  - scripts/bench_hierarchical.sh: the iperf3 line, then one bench_allreduce.py sweep per mode
    ("== hierarchical ..." and "== flat ..."): bus bandwidth against message size for the engine
    in both modes, the bare flat ring, MPI_Allreduce, and iperf3 as horizontal lines;
  - scripts/bench_allreduce.py alone: engine, bare ring and MPI_Allreduce;
  - scripts/bench_torch.py --bandwidth: horovod.torch against torch.distributed (gloo).

    python scripts/plot_benchmarks.py [--out docs/plots] [FILE.txt ...]   (default docs/bench/*.txt)
"""

import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
ROW = re.compile(
    r"^ *(\d+) (KiB|MiB) \| +[0-9.]+ +([0-9.]+) \| +[0-9.]+ +([0-9.]+) \| +[0-9.]+ +([0-9.]+) \|",
    re.M,
)
# bench_torch.py --bandwidth: size | horovod us GB/s | gloo us GB/s | ratio
TORCH_ROW = re.compile(
    r"^ *(\d+) (KiB|MiB) \| +[0-9.]+ +([0-9.]+) \| +[0-9.]+ +([0-9.]+) \| +[0-9.]+$", re.M
)
IPERF = re.compile(r"one way ([0-9.]+) GB/s; both ways at once ([0-9.]+) GB/s per direction")


def parse(text):
    """{"title", "iperf": (one way, both ways) or None, "sweeps": {mode: [(bytes, engine, ring,
    mpi)]}}, GB/s of bus bandwidth. A sweep's mode is the "== <mode>" line above it ("engine" if
    none); bench_torch.py's rows make the mode "torch", as (bytes, horovod.torch, gloo)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    m = IPERF.search(text)
    sweeps, mode = {}, "engine"
    for line in text.splitlines():
        head = re.match(r"^== (hierarchical|flat)\b", line)
        if head:
            mode = head.group(1)
            continue
        row = ROW.match(line) or TORCH_ROW.match(line)
        if row:
            size = int(row.group(1)) * UNITS[row.group(2)]
            key = mode if row.re is ROW else "torch"
            sweeps.setdefault(key, []).append((size, *map(float, row.groups()[2:])))
    return {
        "title": first.lstrip("= ").strip(),
        "iperf": (float(m.group(1)), float(m.group(2))) if m else None,
        "sweeps": sweeps,
    }


def label(nbytes):
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def render(data, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=100)
    sizes = set()
    styles = {"hierarchical": "o-", "flat": "s-", "engine": "o-"}
    torch_rows = data["sweeps"].get("torch")
    if torch_rows:  # one comparison, same run: horovod.torch against torch.distributed (gloo)
        xs = [r[0] for r in torch_rows]
        sizes.update(xs)
        ax.plot(xs, [r[1] for r in torch_rows], "o-", label="horovod.torch allreduce_")
        ax.plot(xs, [r[2] for r in torch_rows], "^--", label="torch.distributed all_reduce (gloo)")
        data = dict(data, sweeps={}, title="horovod.torch and gloo, 2 ranks")
    for mode, rows in data["sweeps"].items():
        xs = [r[0] for r in rows]
        sizes.update(xs)
        ax.plot(xs, [r[1] for r in rows], styles.get(mode, "o-"), label=f"engine ({mode})")
    # The bare ring and MPI_Allreduce of the first sweep (same ranks, same run).
    base = next(iter(data["sweeps"].values()), [])
    if base:
        ax.plot([r[0] for r in base], [r[2] for r in base], "^--", label="bare flat ring")
        ax.plot([r[0] for r in base], [r[3] for r in base], "v--", label="MPI_Allreduce")
    if data["iperf"]:
        one, both = data["iperf"]
        ax.axhline(one, color="grey", linestyle=":", label=f"iperf3 one way ({one:.2f})")
        ax.axhline(both, color="black", linestyle=":", label=f"iperf3 both ways ({both:.2f})")
    ax.set_xscale("log", base=2)
    ticks = sorted(sizes)
    ax.set_xticks(ticks, [label(s) for s in ticks])
    ax.set_xlabel("message size (float32)")
    ax.set_ylabel("bus bandwidth, GB/s" if not torch_rows else "GB/s (bench_torch.py)")
    ax.set_ylim(bottom=0)
    ax.set_title(data["title"].split(";")[0] + ": allreduce bus bandwidth", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=pathlib.Path)
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "docs" / "plots")
    args = ap.parse_args(argv)
    files = args.files or sorted((ROOT / "docs" / "bench").glob("*.txt"))
    args.out.mkdir(parents=True, exist_ok=True)
    for f in files:
        data = parse(f.read_text())
        if not data["sweeps"]:
            print(f"{f}: no allreduce sweep found", file=sys.stderr)
            return 1
        path = args.out / (f.stem + ".png")
        render(data, path)
        print(f"{f} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

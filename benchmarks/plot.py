"""Charts of the recorded benchmark outputs: `make plots` turns every docs/bench/*.txt into
docs/plots/<same name>.png, shown beside the tables in docs/benchmarks.md.

A recorded output is what a benchmark script printed, verbatim. Understood here:
  - benchmarks/cluster.sh hierarchical: the iperf3 line, then one allreduce.py sweep per mode
    ("== hierarchical ..." and "== flat ..."): bus bandwidth against message size for the engine
    in both modes, the bare flat ring, MPI_Allreduce, and iperf3 as horizontal lines;
  - benchmarks/allreduce.py alone: engine, bare ring and MPI_Allreduce;
  - benchmarks/frontend_torch.py --bandwidth: horovod.torch against torch.distributed (gloo);
  - benchmarks/shaped.sh allreduce: the same sweeps on links shaped to a rate, drawn as a
    line beside iperf3 through the same shaper;
  - benchmarks/shaped.sh scaling: scaling efficiency against the link rate, per number of
    workers, beside what the link predicts with and without overlap.

    python benchmarks/plot.py [--out docs/plots] [FILE.txt ...]   (default docs/bench/*.txt)
"""

import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
# size | engine us GB/s | ring us GB/s | mpi us GB/s | ...
ROW = re.compile(
    r"^ *(\d+) (KiB|MiB) \| +([0-9.]+) +([0-9.]+) \| +([0-9.]+) +([0-9.]+) \| "
    r"+([0-9.]+) +([0-9.]+) \|",
    re.M,
)
RANKS = re.compile(r"^# (\d+) ranks", re.M)
SHAPED = re.compile(r"links shaped at (\S+) \(([0-9.]+) GB/s\); raw TCP .*: ([0-9.]+) Mbit/s")
SCALING_RUN = re.compile(r"^== (\d+) workers x 1 slot, links at (\S+) \(([0-9.]+) GB/s\)$")
SCALING_PREDICTED = re.compile(
    r"^== predicted from the link: .* without overlap ([0-9.]+)%, with full overlap ([0-9.]+)%; "
    r"measured ([0-9.]+) %$"
)
SCALING_ALONE = re.compile(r"^== against one worker alone \([0-9.]+ img/s\): ([0-9.]+)% per rank")
# frontend_torch.py --bandwidth: size | horovod us GB/s | gloo us GB/s | ratio
TORCH_ROW = re.compile(
    r"^ *(\d+) (KiB|MiB) \| +[0-9.]+ +([0-9.]+) \| +[0-9.]+ +([0-9.]+) \| +[0-9.]+$", re.M
)
IPERF = re.compile(r"one way ([0-9.]+) GB/s; both ways at once ([0-9.]+) GB/s per direction")


def parse(text):
    """{"title", "iperf": (one way, both ways) or None, "sweeps": {mode: [(bytes, engine, ring,
    mpi)]}}, GB/s of bus bandwidth. A sweep's mode is the "== <mode>" line above it ("engine" if
    none); frontend_torch.py's rows make the mode "torch", as (bytes, horovod.torch, gloo)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    m = IPERF.search(text)
    shaped = SHAPED.search(text)
    sweeps, mode, ranks, scaling = {}, "engine", None, []
    for line in text.splitlines():
        head = re.match(r"^== (?:allreduce, )?(hierarchical|flat)\b", line)
        if head:
            mode = head.group(1)
            continue
        run = SCALING_RUN.match(line)
        if run:
            scaling.append({"workers": int(run.group(1)), "rate": float(run.group(3))})
            continue
        pred = SCALING_PREDICTED.match(line)
        if pred and scaling:
            no, full, measured = map(float, pred.groups())
            scaling[-1].update(no_overlap=no, full_overlap=full, measured=measured)
            continue
        alone = SCALING_ALONE.match(line)
        if alone and scaling:
            scaling[-1]["against_one_worker"] = float(alone.group(1))
            continue
        n = RANKS.match(line)
        if n:
            ranks = int(n.group(1))
            continue
        row = ROW.match(line)
        if row:
            size = int(row.group(1)) * UNITS[row.group(2)]
            times, shown = map(float, row.groups()[2::2]), map(float, row.groups()[3::2])
            # Bus bandwidth from the times where the ranks are known: the printed GB/s has two
            # decimals, too coarse for links of 0.05 GB/s.
            busbw = (
                [size * 2 * (ranks - 1) / ranks / (t * 1e-6) / 1e9 for t in times]
                if ranks
                else list(shown)
            )
            sweeps.setdefault(mode, []).append((size, *busbw))
            continue
        row = TORCH_ROW.match(line)
        if row:
            size = int(row.group(1)) * UNITS[row.group(2)]
            sweeps.setdefault("torch", []).append((size, *map(float, row.groups()[2:])))
    return {
        "title": first.lstrip("= ").strip(),
        "iperf": (float(m.group(1)), float(m.group(2))) if m else None,
        "shaped": (shaped.group(1), float(shaped.group(2)), float(shaped.group(3)) / 8e3)
        if shaped
        else None,
        "sweeps": sweeps,
        "scaling": [r for r in scaling if "measured" in r],
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
    if data["shaped"]:
        name, rate, tcp = data["shaped"]
        ax.axhline(rate, color="red", linestyle="-", label=f"shaped rate {name} ({rate:.3f})")
        ax.axhline(tcp, color="grey", linestyle=":", label=f"iperf3 through the shaper ({tcp:.3f})")
    if data["iperf"]:
        one, both = data["iperf"]
        ax.axhline(one, color="grey", linestyle=":", label=f"iperf3 one way ({one:.2f})")
        ax.axhline(both, color="black", linestyle=":", label=f"iperf3 both ways ({both:.2f})")
    ax.set_xscale("log", base=2)
    ticks = sorted(sizes)
    ax.set_xticks(ticks, [label(s) for s in ticks])
    ax.set_xlabel("message size (float32)")
    ax.set_ylabel("bus bandwidth, GB/s" if not torch_rows else "GB/s (frontend_torch.py)")
    ax.set_ylim(bottom=0)
    where = f", links at {data['shaped'][0]}" if data["shaped"] else ""
    ax.set_title(data["title"].split(";")[0] + where + ": allreduce bus bandwidth", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def render_scaling(data, path):
    """Scaling efficiency against the link rate: measured per number of workers, beside the link's
    prediction without overlap (dashed) and with full overlap (dotted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=100)
    for workers in sorted({r["workers"] for r in data["scaling"]}):
        rows = [r for r in data["scaling"] if r["workers"] == workers]
        rows.sort(key=lambda r: r["rate"])
        xs = [r["rate"] * 8e3 for r in rows]  # Mbit/s
        measured = [r["measured"] for r in rows]
        (line,) = ax.plot(
            xs,
            measured,
            "o-",
            label=f"{workers} workers, against the same ranks without communication",
        )
        color = line.get_color()
        # (key, style, alpha, label): the one-worker figure only where every run printed it.
        series = [
            ("against_one_worker", "^-.", 1.0, "against one worker alone"),
            ("no_overlap", "--", 0.7, "predicted without overlap"),
            ("full_overlap", ":", 0.7, "predicted with full overlap"),
        ]
        for key, style, alpha, what in series:
            if all(key in r for r in rows):
                ys = [r[key] for r in rows]
                ax.plot(xs, ys, style, color=color, alpha=alpha, label=f"{workers} workers, {what}")
    ax.set_xlabel("link rate, Mbit/s (tc tbf on every worker)")
    ax.set_ylabel("scaling efficiency, %")
    ax.set_ylim(0, 100)
    ax.set_title("synthetic benchmark (MobileNetV2, batch 32) on shaped links", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
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
        path = args.out / (f.stem + ".png")
        if data["scaling"]:
            render_scaling(data, path)
        elif data["sweeps"]:
            render(data, path)
        else:
            print(f"{f}: no allreduce sweep or scaling run found", file=sys.stderr)
            return 1
        print(f"{f} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

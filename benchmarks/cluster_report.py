"""The figures benchmarks/cluster.sh prints after each measurement, from the outputs it kept.

    python benchmarks/cluster_report.py allreduce OUTPUT ONE_BEFORE ONE_AFTER BOTH_BEFORE BOTH_AFTER
    python benchmarks/cluster_report.py hierarchical HIER_OUTPUT FLAT_OUTPUT
    python benchmarks/cluster_report.py network-check REPORT PAIRS RING

ONE/BOTH: iperf3 GB/s one way, and per direction both ways at once; PAIRS and RING: lines
"FROM TO GB/s" of iperf3 per ordered pair alone, and around the ring all at once.
"""

import re
import sys


def allreduce(path, one_before, one_after, both_before, both_after):
    text = open(path).read()
    one, both = max(map(float, (one_before, one_after))), max(map(float, (both_before, both_after)))
    for size in ("16 MiB", "64 MiB", "256 MiB"):
        m = re.search(rf"^ *{size} \| +[0-9.]+ +([0-9.]+) \|", text, re.M)
        if m:
            e = float(m.group(1))
            print(
                f"engine busbw at {size}: {e:.2f} GB/s = {e / one:.2f} of raw TCP one way "
                f"({one:.2f}, the better of before/after), {e / both:.2f} of raw TCP per "
                f"direction both ways ({both:.2f})"
            )


def hierarchical(hier_path, flat_path):
    def rows(path):  # size -> (engine GB/s, ring GB/s, mpi GB/s)
        out = {}
        pat = (
            r"^ *(\d+ [KM]iB) \| +[0-9.]+ +([0-9.]+) \| +[0-9.]+ +([0-9.]+) \| "
            r"+[0-9.]+ +([0-9.]+) \|"
        )
        for m in re.finditer(pat, open(path).read(), re.M):
            out[m.group(1)] = tuple(map(float, m.groups()[1:]))
        return out

    hier, flat = rows(hier_path), rows(flat_path)
    print(
        "== busbw GB/s: hierarchical, flat (engine); hierarchical/flat; "
        "each / MPI_Allreduce of its run"
    )
    for size in hier:
        if size in flat:
            h, f = hier[size][0], flat[size][0]
            print(
                f"{size:>8}: hierarchical {h:.2f}, flat {f:.2f}; x{h / f:.2f}; "
                f"vs MPI {h / hier[size][2]:.2f} and {f / flat[size][2]:.2f}"
            )


def network_check(report_path, pairs_path, ring_path):
    lines = open(report_path).read().splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("bandwidth, GB/s"))
    cols = lines[i + 1].split()
    cells = {}
    for line in lines[i + 2 : i + 2 + len(cols)]:
        row, *vals = line.split()
        cells.update({(row, c): float(v) for c, v in zip(cols, vals) if v != "-"})
    for line in open(pairs_path):
        a, b, g = line.split()
        d = cells.get((a, b))
        print(
            f"{a} -> {b}: doctor {d:.2f} GB/s, iperf3 {float(g):.2f} GB/s, ratio {d / float(g):.2f}"
        )
    alone = min(float(line.split()[2]) for line in open(pairs_path))
    at_once = min(float(line.split()[2]) for line in open(ring_path))
    busbw = float(re.search(r"^ +64 MiB: +[0-9.]+ us +([0-9.]+) GB/s$", "\n".join(lines), re.M)[1])
    print(
        f"engine 64 MiB {busbw:.2f} GB/s bus bandwidth: {busbw / alone:.2f} of the slowest link "
        f"alone (iperf3 {alone:.2f} GB/s), {busbw / at_once:.2f} of the slowest at once "
        f"(iperf3 {at_once:.2f} GB/s)"
    )


if __name__ == "__main__":
    report = {"allreduce": allreduce, "hierarchical": hierarchical}
    report["network-check"] = network_check
    report[sys.argv[1]](*sys.argv[2:])

"""The figures benchmarks/shaped.sh prints after each measurement, from the outputs it kept:
bus bandwidth against the rate the links are shaped at and against raw TCP (iperf3) through
the same shaper, and scaling against what the link predicts.

    python benchmarks/shaped_report.py allreduce FLAT HIER RATE_BPS TCP_MBITS RANKS
    python benchmarks/shaped_report.py allgather FLAT HIER RATE_BPS TCP_MBITS [RANKS]
    python benchmarks/shaped_report.py transports OUTPUT RATE_BPS
    python benchmarks/shaped_report.py scaling OUTPUT RATE_BPS WORKERS PARAMS ALONE_IMG_S

RATE_BPS: bytes/s as tc holds it; HIER may be empty (one slot per worker: no hierarchical run).
"""

import re
import sys


def against_flat(hier, flat, hier_mpi, hier_cpu):
    """The hierarchical run's part of a size's line: GB/s, against flat and its own MPI."""
    return (
        f"; hierarchical {hier:.4f} = {hier / flat:.2f}x flat ({hier / hier_mpi:.2f}x its MPI,"
        f" CPU {hier_cpu:.2f}/rank)"
    )


def allreduce(flat_path, hier_path, rate_bps, tcp_mbits, ranks):
    n = int(ranks)

    def rows(path):  # size -> bus bandwidth GB/s (engine, ring, mpi) from the times, engine's CPU
        pat = (
            r"^ *(\d+) ([KM])iB \| +([0-9.]+) +[0-9.]+ \| +([0-9.]+) +[0-9.]+ \| +([0-9.]+) "
            r".*\| +([0-9.]+) +[0-9.]+ +([0-9.]+)$"
        )
        out = {}
        for m in re.finditer(pat, open(path).read(), re.M):
            nbytes = int(m.group(1)) << (10 if m.group(2) == "K" else 20)
            out[f"{m.group(1)} {m.group(2)}iB"] = tuple(
                nbytes * 2 * (n - 1) / n / (float(t) * 1e-6) / 1e9 for t in m.groups()[2:5]
            ) + (float(m.group(6)), float(m.group(7)))
        return out

    flat, hier = rows(flat_path), rows(hier_path)
    rate, tcp = float(rate_bps) / 1e9, float(tcp_mbits) / 8e3
    print(f"== bus bandwidth (GB/s) against the shaped rate {rate:.4f} and raw TCP {tcp:.4f}")
    for size, (e, _, m, ecpu, mcpu) in flat.items():
        line = (
            f"{size:>8}: flat engine {e:.4f} = {e / rate:.2f} of the rate, {e / tcp:.2f} of TCP"
            f" (CPU {ecpu:.2f}/rank); MPI_Allreduce {m:.4f} ({e / m:.2f}x, CPU {mcpu:.2f}/rank)"
        )
        if size in hier:
            line += against_flat(hier[size][0], e, hier[size][2], hier[size][3])
        print(line)


def allgather(flat_path, hier_path, rate_bps, tcp_mbits, ranks=None):
    def rows(path):  # size label -> (engine GB/s, mpi GB/s, engine CPU/rank)
        pat = (
            r"^ *(\d+ [KM]iB) \| +[0-9.]+ +([0-9.]+) \| +[0-9.]+ +([0-9.]+) \| +[0-9.]+ \| "
            r"+([0-9.]+) +[0-9.]+$"
        )
        text = open(path).read()
        return {m[1]: (float(m[2]), float(m[3]), float(m[4])) for m in re.finditer(pat, text, re.M)}

    flat, hier = rows(flat_path), rows(hier_path)
    rate, tcp = float(rate_bps) / 1e9, float(tcp_mbits) / 8e3
    print(
        "== allgather bus bandwidth (GB/s, per rank's size) against the shaped rate "
        f"{rate:.4f} and raw TCP {tcp:.4f}"
    )
    for size, (e, m, ecpu) in flat.items():
        line = (
            f"{size:>8}: flat engine {e:.4f} = {e / rate:.2f} of the rate (CPU {ecpu:.2f}/rank);"
            f" MPI_Allgather {m:.4f} ({e / m:.2f}x)"
        )
        if size in hier:
            line += against_flat(*hier[size][:1], e, *hier[size][1:])
        print(line)


def transports(path, rate_bps):
    rate = float(rate_bps) / 1e9
    pat = r"^ *(\d+) \| +[0-9.]+ +([0-9.]+) +[0-9.]+ +([0-9.]+) \|"
    for m in re.finditer(pat, open(path).read(), re.M):
        size, mpi, tcp = int(m[1]), float(m[2]), float(m[3])
        if size >= 1 << 20:
            print(
                f"{size >> 20} MiB: tcp transport {tcp:.4f} GB/s = {tcp / rate:.2f} of the shaped "
                f"rate, {tcp / mpi:.2f}x MPI's ({mpi / rate:.2f} of the rate)"
            )


def scaling(path, rate_bps, workers, params, alone_img_s):
    text, rate, n, params = open(path).read(), float(rate_bps), int(workers), int(params)
    alone = float(alone_img_s)
    m = re.search(r"^Img/sec per CPU: ([0-9.]+) .* ([0-9.]+) \+-[0-9.]+ without$", text, re.M)
    eff = re.search(r"scaling efficiency ([0-9.]+) %", text)
    if not m or not eff:
        sys.exit("shaped.sh scaling: no Img/sec or scaling efficiency line in the output")
    step = 32 / float(m.group(2))  # seconds per batch of 32 without communication
    comm = params * 4 * 2 * (n - 1) / n / rate  # the ring's bytes on each link at the shaped rate
    print(
        f"== predicted from the link: {params * 4 / 1e6:.1f} MB of gradients, ring of {n} at "
        f"{rate / 1e9:.4f} GB/s: allreduce {comm * 1e3:.0f} ms, compute step {step * 1e3:.0f} ms; "
        f"efficiency without overlap {step / (step + comm):.1%}, with full overlap "
        f"{min(1.0, step / comm):.1%}; measured {float(eff.group(1)):.1f} %"
    )
    with_comm = float(m.group(1))
    print(
        f"== against one worker alone ({alone:.1f} img/s): {with_comm / alone:.1%} per rank "
        f"(without communication these ranks ran {float(m.group(2)) / alone:.1%} of it)"
    )


if __name__ == "__main__":
    report = {"allreduce": allreduce, "allgather": allgather, "transports": transports}
    report["scaling"] = scaling
    report[sys.argv[1]](*sys.argv[2:])

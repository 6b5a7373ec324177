"""Rank 0's report of `horovodrun --check-network` (network_check.py measures): the matrices,
the engine's allreduce against what the links allow, the causes this check can see, and the
verdict. Pure text from the measurements, so the tests feed it figures of their own."""

import statistics

KIB, MIB = 1 << 10, 1 << 20
MESSAGE = 4 * MIB  # the check's bandwidth messages: large, so per-message costs are small
# A link this many times below the median link between hosts is named: a host at half the
# others' rate holds every ring step to its own (2x below the median of 3 hosts' links, 1.5x of
# 2 hosts'); unshaped links between containers sharing 2 cores came within 1.2-1.3x of their
# median, one at a time, and 1.75x of the fastest.
SLOW_FACTOR = 1.45
FASTER_FACTOR = 1.3  # another interface this much faster than the chosen one is a warning
# Below this share of what the slowest link allows, allreduce is called slow: where the link is
# the limit, the engine's ring carries 0.9-0.96 of it (links shaped to a set rate,
# docs/shaped-links.md); below 0.85 something besides the link holds it back.
REACH_FLOOR = 0.85
LATENCY_FACTOR = 10.0  # a small allreduce this many link latencies long is called latency-bound
# Links that carry less than this share of their one-at-a-time figure when all carry the ring at
# once are named as slowing each other down (separate hosts with full-duplex NICs come close to 1).
AT_ONCE_FLOOR = 0.7


def _gbs(v):
    """GB/s with at least two significant digits (a throttled link is 0.05, not 0.0)."""
    if not isinstance(v, (int, float)):
        return "-"
    x = v / 1e9
    return f"{x:.2f}" if x >= 0.1 else f"{x:.3f}"


def _size(nbytes):
    return f"{nbytes // MIB} MiB" if nbytes >= MIB else f"{nbytes // KIB} KiB"


def _matrix(title, hosts, values, fmt):
    width = max(8, max(len(h) for h in hosts) + 1)
    lines = [title, " " * (width + 2) + "".join(f"{h:>{width}}" for h in hosts)]
    for a in hosts:
        row = "".join(f"{fmt(values.get((a, b))):>{width}}" for b in hosts)
        lines.append(f"  {a:<{width}}{row}")
    return lines


def slow_links(bw):
    """The links between hosts more than SLOW_FACTOR below their median, slowest first."""
    links = {k: v for k, v in bw.items() if k[0] != k[1] and isinstance(v, float)}
    if not links:
        return []
    median = statistics.median(links.values())
    return sorted((k for k, v in links.items() if v < median / SLOW_FACTOR), key=lambda k: links[k])


def slowdown_causes(checker, plan, hierarchical="auto"):
    """What this check can see that slows allreduce down below what the links allow: ranks that
    outnumber the cores of the machine they share, the hierarchical allreduce off where it would
    help (or impossible: hosts with different rank counts), a small /dev/shm."""
    causes = []
    if plan.get("oversubscribed"):
        causes.append(plan["oversubscribed"].replace("horovodrun: ", "", 1))
    counts = {h: len(rs) for h, rs in checker.ranks_of.items()}
    if len(counts) > 1 and max(counts.values()) > 1:
        if min(counts.values()) != max(counts.values()):
            causes.append(
                f"hosts hold {min(counts.values())} to {max(counts.values())} ranks each, so "
                "the hierarchical allreduce cannot run (it needs the same number on every "
                "host): give every host the same slots"
            )
        elif hierarchical == "0":
            causes.append(
                f"HOROVOD_HIERARCHICAL_ALLREDUCE=0 on {len(counts)} hosts of "
                f"{max(counts.values())} ranks: the flat ring crosses each host boundary "
                "through one rank; leave it unset (auto) for the hierarchical allreduce"
            )
    for h, shm in sorted((plan.get("small_shm") or {}).items()):  # the launcher chose them
        if counts.get(h, 0) > 1:
            causes.append(
                f"/dev/shm on {h} is only {shm / MIB:.0f} MiB for its {counts[h]} ranks: "
                "give the container more (docker run --shm-size=1g, compose shm_size)"
            )
    return causes


def hierarchical_runs(checker, hierarchical):
    """Whether the engine's allreduce is the hierarchical one (its `auto`: several hosts, the
    same number of ranks on each, more than one)."""
    counts = [len(rs) for rs in checker.ranks_of.values()]
    if hierarchical == "0" or len(counts) < 2 or min(counts) != max(counts):
        return False
    return hierarchical == "1" or min(counts) > 1


def predicted_allreduce(checker, nbytes, measured_s, slowest, hierarchical):
    """The time the links allow an allreduce of `nbytes`, against the measured one. The flat
    ring sends 2(n-1)/n of the buffer over every link, in order around the ring, so the slowest
    link sets the pace; the hierarchical one sends 2(c-1)/c of it out of each of the c hosts,
    through the host's ranks at once over its one link (shared-memory steps not counted)."""
    if hierarchical_runs(checker, hierarchical):
        c = len(checker.hosts)
        share, how = 2 * (c - 1) / c, f"hierarchical: 2(c-1)/c of it out of each of {c} hosts"
    else:
        n = checker.size
        share, how = 2 * (n - 1) / n, f"flat ring: 2(n-1)/n of it over each link, n = {n}"
    predicted = nbytes * share / slowest
    return (
        f"allreduce of {_size(nbytes)}: {predicted * 1e3:.1f} ms predicted from the slowest link "
        f"({how}), {measured_s * 1e3:.1f} ms measured ({measured_s / predicted:.2f}x)"
    )


def report(
    checker,
    lat,
    bw,
    allreduce,
    interfaces,
    plan,
    fusion_threshold,
    hierarchical="auto",
    at_once=None,
):
    """fusion_threshold: the engine's HOROVOD_FUSION_THRESHOLD, in bytes (0: fusion off);
    hierarchical: its HOROVOD_HIERARCHICAL_ALLREDUCE; at_once: Checker.ring_at_once()'s
    {(host, next host): bytes/s}."""
    lines = _tables(checker, lat, bw, allreduce, plan)
    # Links between hosts: the slow ones, by direction.
    links = {k: v for k, v in bw.items() if k[0] != k[1] and isinstance(v, float)}
    # A ring's bus bandwidth is bounded by its slowest link: how close the engine comes.
    top = allreduce.get(max(allreduce)) if allreduce else None
    # The same links all busy at once, as the ring's steps keep them: what a ring can get.
    together = {k: v for k, v in (at_once or {}).items() if isinstance(v, float)}
    ring_min = min(together.items(), key=lambda kv: kv[1]) if together else None
    link_lines, at_once_cause = _link_lines(links, allreduce, top, ring_min)
    lines += link_lines
    causes = slowdown_causes(checker, plan, hierarchical)
    if at_once_cause:
        causes.append(at_once_cause)
    for cause in causes:
        lines.append("cause: " + cause)
    lines += _small_messages(lat, allreduce)
    verdicts = []
    slow_lines, slow_verdict = _slow_link_lines(bw, links)
    lines += slow_lines
    if slow_verdict:
        verdicts.append(slow_verdict)
    if links and top and top[1]:
        bound = min(links.values())
        lines.append(predicted_allreduce(checker, max(allreduce), top[0], bound, hierarchical))
    interface_lines, faster_verdict = _interface_lines(checker.hosts, interfaces, plan["network"])
    lines += interface_lines
    if faster_verdict:
        verdicts.append(faster_verdict)
    lines += _model_lines(checker, plan, allreduce, fusion_threshold)
    # The verdict names what holds the job back first: slow links (measured on the job's own
    # transport), then a faster interface (the remedy raw TCP suggests), then the engine's reach,
    # which is judged against the links, so they come before it.
    reach_verdict = _reach_verdict(links, top, causes)
    if reach_verdict:
        verdicts.append(reach_verdict)
    lines.append(_verdict(verdicts, links))
    return "\n".join(lines)


def _tables(checker, lat, bw, allreduce, plan):
    """The header, the latency and bandwidth matrices, the engine's allreduce by size."""
    hosts = checker.hosts
    lines = [
        f"horovodrun --check-network: {len(hosts)} host(s), {checker.size} rank(s); "
        f"network {plan['network']} ({plan.get('interface', '?')}); "
        f"{checker.seconds:g} s per bandwidth measurement"
    ]
    lines += _matrix(
        "latency, us (8 bytes, half a round trip over MPI; diagonal: two ranks of one host)",
        hosts,
        lat,
        lambda v: f"{v * 1e6:.1f}" if v else "-",
    )
    lines += _matrix(
        f"bandwidth, GB/s (row sends to column, {MESSAGE // MIB} MiB messages over MPI; "
        "diagonal: shared memory)",
        hosts,
        bw,
        _gbs,
    )
    lines.append(
        f"allreduce through the engine, {checker.size} ranks "
        "(bus bandwidth, slowest rank's median time):"
    )
    for size, (t, busbw) in sorted(allreduce.items()):
        shown = _gbs(busbw) if busbw else "n/a"
        lines.append(f"  {_size(size):>7}: {t * 1e6:9.1f} us  {shown} GB/s")
    return lines


def _link_lines(links, allreduce, top, ring_min):
    """The engine's reach against the slowest link, that link (horovodrun keeps it), the links
    all at once; and, when they carry much less at once, that cause (else None)."""
    lines = []
    if not links:
        return lines, None
    (a, b), slowest = min(links.items(), key=lambda kv: kv[1])
    if top and top[1]:
        line = (
            f"allreduce reaches {top[1] / slowest:.0%} of what the links allow ({_gbs(top[1])} "
            f"GB/s bus bandwidth at {max(allreduce) // MIB} MiB; slowest link {_gbs(slowest)} GB/s)"
        )
        if ring_min:
            line += f", {top[1] / ring_min[1]:.0%} of what they carry all at once"
        lines.append(line)
    # horovodrun reads this line (runner/links.py REPORT_LINE) and keeps the figure.
    together_text = f", {ring_min[1] / 1e9:.3f} GB/s all at once" if ring_min else ""
    lines.append(
        f"links: slowest {slowest / 1e9:.3f} GB/s between hosts ({a} -> {b}){together_text}; "
        "horovodrun keeps it for later jobs on these hosts, whose summary compares with it"
    )
    if not ring_min:
        return lines, None
    (a, b), carried = ring_min
    share = carried / slowest
    lines.append(
        f"links at once (each host streams to the next while receiving, as a ring does): "
        f"slowest {_gbs(carried)} GB/s ({a} -> {b}), {share:.0%} of the slowest link alone"
    )
    if share >= AT_ONCE_FLOOR:
        return lines, None
    return lines, (
        f"the links slow each other down: all busy at once, as a ring keeps them, the "
        f"slowest carries {_gbs(carried)} GB/s, {share:.0%} of the "
        f"{_gbs(slowest)} GB/s one link gets alone (hosts that share one "
        "machine's CPUs, or one NIC or switch port): no allreduce gets more from them"
    )


def _small_messages(lat, allreduce):
    """Small messages against the links' latency: what a model of many small tensors pays."""
    link_lat = [v for k, v in lat.items() if k[0] != k[1] and v]
    if not (link_lat and allreduce and min(allreduce) <= 64 * KIB):
        return []
    t_small, worst = allreduce[min(allreduce)][0], max(link_lat)
    if t_small <= LATENCY_FACTOR * worst:
        return []
    return [
        f"small messages: a {min(allreduce) // KIB} KiB allreduce takes "
        f"{t_small * 1e6:.0f} us, {t_small / worst:.0f}x the slowest link's latency "
        f"({worst * 1e6:.0f} us): many small gradients per step are latency-bound; "
        "fusion packs them into fewer allreduces (HOROVOD_FUSION_THRESHOLD, and "
        "HOROVOD_CYCLE_TIME for how long it waits to gather them)"
    ]


def _slow_link_lines(bw, links):
    """A line per slow link (slow_links), and the verdict naming the host most involved (None:
    no slow link)."""
    if not links:
        return [], None
    median = statistics.median(links.values())
    slow = slow_links(bw)
    lines = [
        f"slow link: {a} -> {b}: {_gbs(links[(a, b)])} GB/s, median {_gbs(median)} GB/s"
        for a, b in slow
    ]
    if not slow:
        return lines, None
    involved = sorted({h for k in slow for h in k}, key=lambda h: -sum(h in k for k in slow))
    return lines, (
        f"{len(slow)} slow link(s), more than {SLOW_FACTOR:g}x below the median "
        f"(most involved: {involved[0]}): every ring step runs at the slowest link's "
        "rate while the others idle; check that host's network"
    )


def _interface_lines(hosts, interfaces, chosen):
    """Interfaces: the chosen one against every other subnet, per host; a warning for each host
    where another is much faster, and the verdict naming the largest gain (None: none)."""
    if not interfaces:
        return [], None
    lines = ["interfaces (raw TCP from each host to the next, GB/s):"]
    for h in hosts:
        cells = []
        for subnet, per_host in interfaces.items():
            if h in per_host:
                ifname, addr, value, nxt = per_host[h]
                mark = " (chosen)" if subnet == chosen else ""
                v = f"{_gbs(value)} GB/s" if isinstance(value, float) else f"failed: {value}"
                cells.append(f"{ifname} {addr}{mark} {v}")
        lines.append(f"  {h}: " + "; ".join(cells))
    faster = []  # (gain, interface, host) for the verdict: the largest gain is named
    for h in hosts:
        mine = interfaces.get(chosen, {}).get(h)
        if not mine or not isinstance(mine[2], float):
            continue
        for subnet, per_host in interfaces.items():
            other = per_host.get(h)
            if (
                subnet != chosen
                and other
                and isinstance(other[2], float)
                and other[2] > FASTER_FACTOR * mine[2]
            ):
                msg = (
                    f"{h}: the job's interface {mine[0]} ({chosen}) "
                    f"carries {_gbs(mine[2])} GB/s, "
                    f"but {other[0]} ({subnet}) carries {_gbs(other[2])} GB/s: use "
                    f"--network-interface {other[0]}"
                )
                lines.append("warning: " + msg)
                faster.append((other[2] / mine[2], other[0], h))
    if not faster:
        return lines, None
    _, ifname, h = max(faster, key=lambda f: f[0])
    return lines, f"a faster interface than the chosen one exists ({ifname} on {h})"


def _model_lines(checker, plan, allreduce, fusion_threshold):
    """The allreduce time per step of --model/--model-bytes' gradients, and the scaling
    efficiency bound with --step-time-ms."""
    model = plan.get("model_bytes")
    if not (model and allreduce):
        return []
    n = checker.size
    big = allreduce[max(allreduce)]
    small = allreduce[min(allreduce)]
    if not big[1]:
        return []
    fusion = fusion_threshold or model
    t_comm = model * 2 * (n - 1) / n / big[1] + -(-model // fusion) * small[0]
    line = (
        f"model of {model / MIB:.1f} MiB of gradients: "
        f"about {t_comm * 1e3:.1f} ms of allreduce per "
        f"step on {n} ranks ({_gbs(big[1])} GB/s bus bandwidth at 64 MiB)"
    )
    step = plan.get("step_time_ms")
    if step:
        s = step / 1e3
        line += (
            f"; with a {step:g} ms compute step, scaling efficiency is at most "
            f"{s / (s + t_comm):.0%} without overlap, "
            f"{min(1.0, s / t_comm) if t_comm else 1.0:.0%} "
            f"if communication fully overlaps compute"
        )
    else:
        line += "; pass --step-time-ms (one rank's step time) for the scaling efficiency bound"
    return [line]


def _reach_verdict(links, top, causes):
    """The engine's allreduce well below what the links allow (REACH_FLOOR), with its likely
    causes counted; None when it is not."""
    if not (links and top and top[1] and top[1] / min(links.values()) < REACH_FLOOR):
        return None
    return f"allreduce reaches {top[1] / min(links.values()):.0%} of what the links allow" + (
        f" ({len(causes)} likely cause(s) above)"
        if causes
        else " (no cause this check can see: look for other processes on the CPUs, "
        "and compare HOROVOD_CPU_OPERATIONS=mpi)"
    )


def _verdict(verdicts, links):
    if verdicts:
        return "verdict: WARN: " + "; ".join(verdicts)
    if links:
        return (
            f"verdict: OK: every link between hosts within {SLOW_FACTOR:g}x of the median "
            f"({_gbs(statistics.median(links.values()))} GB/s), allreduce at "
            f"{REACH_FLOOR:.0%} or more of what they allow, and the chosen interface is the "
            "fastest measured"
        )
    return "verdict: OK (one host: no links between hosts to judge)"

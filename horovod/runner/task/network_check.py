"""`horovodrun --check-network`: the program every rank runs (one per slot,
`python -m horovod.runner.task.network_check`) to measure the cluster's network, and rank 0's
report.

Measured, one step at a time so that measurements do not compete for the links or the CPUs:
  - per host pair, both directions: latency (8-byte ping-pong, half the round trip) and
    bandwidth (4 MiB messages for --check-seconds) over MPI, i.e. what the job's transport gets;
    the diagonal is the same between two ranks of one host (shared memory);
  - allreduce bus bandwidth through our engine at 4 KiB, 1 MiB and 64 MiB, all ranks;
  - every subnet all hosts share, raw TCP from each host to the next: which interface is fastest.
Rank 0 coordinates: after each step every rank reports to it, and it releases the next step.
Every wait polls with a deadline; whoever waits too long names the rank and host it waited for,
and aborts the job (horovodrun then ends mpirun within its abort grace).

The plan (hosts, interfaces, chosen subnet, options) comes from horovodrun in
HOROVOD_NETWORK_CHECK_PLAN, as JSON.
"""

import json
import math
import os
import socket
import statistics
import sys
import time

from horovod.common import basics

KIB, MIB = 1 << 10, 1 << 20
TAG_DATA, TAG_STOP, TAG_CTRL = 11, 12, 13
MESSAGE = 4 * MIB  # large enough that per-message costs (Python, rendezvous) are small
IN_FLIGHT = 8
SLOW_FACTOR = 3.0  # a link this many times below the median is named
FASTER_FACTOR = 1.3  # another interface this much faster than the chosen one is a warning
# Below this share of what the slowest link allows, allreduce is called slow (a ring's bus
# bandwidth can approach the link's; half is already generous for TCP and Python in between).
REACH_FLOOR = 0.5
LATENCY_FACTOR = 10.0  # a small allreduce this many link latencies long is called latency-bound


class NoAnswer(Exception):
    pass


class Checker:
    def __init__(self, comm, plan):
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.plan = plan
        self.seconds = float(plan.get("seconds", 0.5))
        self.step_timeout = float(plan.get("step_timeout", 10.0)) + self.seconds
        self.host_of = {int(r): h for r, h in plan["placement"].items()}
        self.hosts = list(dict.fromkeys(self.host_of[r] for r in range(self.size)))
        self.ranks_of = {
            h: [r for r in range(self.size) if self.host_of[r] == h] for h in self.hosts
        }
        self.step = ""

    # -- bounded waiting -----------------------------------------------------------------
    def who(self, rank):
        return f"rank {rank} on {self.host_of.get(rank, '?')}"

    def wait(self, req, peer, deadline):
        while not req.Test():
            if time.monotonic() > deadline:
                raise NoAnswer(
                    f"{self.who(peer)} did not answer within {self.step_timeout:.0f} s "
                    f"(step: {self.step})"
                )
            time.sleep(0)

    def recv_obj(self, source, deadline):
        while not self.comm.Iprobe(source=source, tag=TAG_CTRL):
            if time.monotonic() > deadline:
                raise NoAnswer(
                    f"{self.who(source)} did not answer within {self.step_timeout:.0f} s "
                    f"(step: {self.step})"
                )
            time.sleep(0.0005)
        return self.comm.recv(source=source, tag=TAG_CTRL)

    def sync(self, result=None):
        """End of a step: every rank's result to rank 0 (which returns them all), then release."""
        deadline = time.monotonic() + self.step_timeout
        if self.rank == 0:
            results = {0: result}
            for r in range(1, self.size):
                results[r] = self.recv_obj(r, deadline)
            for r in range(1, self.size):
                self.comm.send("next", dest=r, tag=TAG_CTRL)
            return results
        self.comm.send(result, dest=0, tag=TAG_CTRL)
        self.recv_obj(0, deadline + self.step_timeout)
        return None

    # -- point to point over MPI ---------------------------------------------------------
    def latency(self, a, b, iters=200):
        import numpy as np

        buf = np.zeros(8, np.uint8)
        peer = b if self.rank == a else a
        deadline = time.monotonic() + self.step_timeout
        samples = []
        for _ in range(iters):
            t0 = time.perf_counter()
            if self.rank == a:
                self.wait(self.comm.Isend(buf, dest=peer, tag=TAG_DATA), peer, deadline)
                self.wait(self.comm.Irecv(buf, source=peer, tag=TAG_DATA), peer, deadline)
                samples.append((time.perf_counter() - t0) / 2)
            else:
                self.wait(self.comm.Irecv(buf, source=peer, tag=TAG_DATA), peer, deadline)
                self.wait(self.comm.Isend(buf, dest=peer, tag=TAG_DATA), peer, deadline)
        return statistics.median(samples[iters // 10 :]) if samples else None

    def bandwidth(self, src, dst):
        """src streams 4 MiB messages to dst for self.seconds; bytes/s as seen by src (after
        dst's acknowledgement of the last byte)."""
        import numpy as np

        deadline = time.monotonic() + self.step_timeout + self.seconds
        if self.rank == src:
            data = np.ones(MESSAGE, np.uint8)
            t0 = time.perf_counter()
            sent, pending = 0, []
            while time.perf_counter() - t0 < self.seconds or sent == 0:
                pending.append(self.comm.Isend(data, dest=dst, tag=TAG_DATA))
                sent += MESSAGE
                if len(pending) >= IN_FLIGHT:  # several in flight keep the link busy
                    self.wait(pending.pop(0), dst, deadline)
            for req in pending:
                self.wait(req, dst, deadline)
            self.wait(self.comm.Isend(np.zeros(1, np.uint8), dest=dst, tag=TAG_STOP), dst, deadline)
            ack = np.zeros(1, np.uint8)
            self.wait(self.comm.Irecv(ack, source=dst, tag=TAG_STOP), dst, deadline)
            return sent / (time.perf_counter() - t0)
        from mpi4py import MPI

        buf = np.empty(MESSAGE, np.uint8)
        status = MPI.Status()
        while True:
            req = self.comm.Irecv(buf, source=src, tag=MPI.ANY_TAG)
            while not req.Test(status):
                if time.monotonic() > deadline:
                    raise NoAnswer(
                        f"{self.who(src)} stopped sending within {self.step_timeout:.0f} s "
                        f"(step: {self.step})"
                    )
                time.sleep(0)
            if status.Get_tag() == TAG_STOP:
                break
        self.wait(self.comm.Isend(np.zeros(1, np.uint8), dest=src, tag=TAG_STOP), src, deadline)
        return None

    # -- raw TCP on one subnet -----------------------------------------------------------
    def tcp(self, src, dst, address):
        """Raw TCP from src to dst's address; GB/s as seen by dst, or an error string."""
        deadline = time.monotonic() + self.step_timeout
        if self.rank == dst:
            # The port goes to src in one message either way (None: nothing to connect to).
            srv = socket.socket()
            try:
                srv.bind((address, 0))
                srv.listen(1)
            except OSError as e:
                srv.close()
                self.comm.send(None, dest=src, tag=TAG_CTRL)
                return f"cannot listen on {address}: {e}"
            self.comm.send(srv.getsockname()[1], dest=src, tag=TAG_CTRL)
            srv.settimeout(self.step_timeout)
            try:
                conn, _ = srv.accept()
            except OSError as e:
                return f"no connection from {self.host_of[src]} on {address}: {e}"
            finally:
                srv.close()
            with conn:
                conn.settimeout(self.step_timeout)
                buf = bytearray(MESSAGE)
                got, t0 = 0, None
                try:
                    while True:
                        n = conn.recv_into(buf)
                        if not n:
                            break
                        t0 = t0 or time.perf_counter()
                        got += n
                except OSError as e:
                    return f"receive from {self.host_of[src]} failed: {e}"
                return got / (time.perf_counter() - t0) if got and t0 else "no data"
        port = self.recv_obj(dst, deadline)
        if port is None:
            return None
        data = memoryview(bytearray(MESSAGE))
        try:
            with socket.create_connection(
                (address, port), timeout=min(5.0, self.step_timeout)
            ) as s:
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < self.seconds:
                    s.sendall(data)
        except OSError as e:
            return f"cannot send to {self.host_of[dst]} at {address}: {e}"
        return None

    # -- the plan ------------------------------------------------------------------------
    def run(self):
        rep = {h: rs[0] for h, rs in self.ranks_of.items()}
        lat, bw = {}, {}
        # Inside each host first (shared memory), then every pair of hosts.
        pairs = [(h, h) for h in self.hosts] + [
            (a, b) for i, a in enumerate(self.hosts) for b in self.hosts[i + 1 :]
        ]
        for a, b in pairs:
            if a == b:
                if len(self.ranks_of[a]) < 2:
                    continue
                ra, rb = self.ranks_of[a][:2]
            else:
                ra, rb = rep[a], rep[b]
            self.step = f"latency {a} <-> {b}"
            mine = self.latency(ra, rb) if self.rank in (ra, rb) else None
            res = self.sync(mine)
            if res:
                lat[(a, b)] = lat[(b, a)] = res[ra]
            for s, d, hs, hd in ((ra, rb, a, b), (rb, ra, b, a)):
                self.step = f"bandwidth {hs} -> {hd}"
                mine = self.bandwidth(s, d) if self.rank in (s, d) else None
                res = self.sync(mine)
                if res:
                    bw[(hs, hd)] = res[s]
        allreduce = self.allreduce_sweep()
        interfaces = self.interface_sweep(rep)
        return lat, bw, allreduce, interfaces

    def allreduce_sweep(self):
        import numpy as np

        import horovod.numpy as hvd

        out = {}
        # A fixed number of ops per size: every rank must submit the same ops (a rank that
        # stopped on its own clock would leave the others waiting).
        for size, iters in ((4 * KIB, 50), (1 * MIB, 10), (64 * MIB, 3)):
            self.step = f"allreduce {size // KIB} KiB, all ranks"
            x = np.ones(size // 4, np.float32)
            y = np.empty_like(x)
            name = f"netcheck.{size}"
            hvd.allreduce(x, op=hvd.Sum, name=name, out=y)
            times = []
            for _ in range(iters):
                t0 = time.perf_counter()
                hvd.allreduce(x, op=hvd.Sum, name=name, out=y)
                times.append(time.perf_counter() - t0)
            # Every rank's median; the slowest rank's is the job's.
            res = self.sync(statistics.median(times))
            if res:
                t = max(res.values())
                out[size] = (
                    t,
                    size * 2 * (self.size - 1) / self.size / t if self.size > 1 else None,
                )
        return out

    def interface_sweep(self, rep):
        """{subnet: {host: (ifname, address, GB/s or error)}}: each host to the next, raw TCP."""
        subnets = self.plan.get("subnets", {})
        result = {}
        if len(self.hosts) < 2:
            return result
        for subnet, members in subnets.items():
            result[subnet] = {}
            for i, h in enumerate(self.hosts):
                nxt = self.hosts[(i + 1) % len(self.hosts)]
                self.step = f"raw TCP {h} -> {nxt} on {subnet}"
                src, dst = rep[h], rep[nxt]
                mine = self.tcp(src, dst, members[nxt][1]) if self.rank in (src, dst) else None
                res = self.sync(mine)
                if res:
                    value = res[dst] if not isinstance(res[src], str) else res[src]
                    result[subnet][h] = (members[h][0], members[h][1], value, nxt)
        return result


# -- the report (rank 0) ---------------------------------------------------------------------
def _gbs(v):
    """GB/s with at least two significant digits (a throttled link is 0.05, not 0.0)."""
    if not isinstance(v, (int, float)):
        return "-"
    x = v / 1e9
    return f"{x:.2f}" if x >= 0.1 else f"{x:.3f}"


def _matrix(title, hosts, values, fmt):
    width = max(8, max(len(h) for h in hosts) + 1)
    lines = [title, " " * (width + 2) + "".join(f"{h:>{width}}" for h in hosts)]
    for a in hosts:
        row = "".join(f"{fmt(values.get((a, b))):>{width}}" for b in hosts)
        lines.append(f"  {a:<{width}}{row}")
    return lines


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


def report(checker, lat, bw, allreduce, interfaces, plan, fusion_threshold, hierarchical="auto"):
    """fusion_threshold: the engine's HOROVOD_FUSION_THRESHOLD, in bytes (0: fusion off);
    hierarchical: its HOROVOD_HIERARCHICAL_ALLREDUCE."""
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
        label = f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"
        lines.append(f"  {label:>7}: {t * 1e6:9.1f} us  {_gbs(busbw) if busbw else 'n/a'} GB/s")
    verdicts = []
    # Links between hosts: the slow ones, by direction.
    links = {k: v for k, v in bw.items() if k[0] != k[1] and isinstance(v, float)}
    # A ring's bus bandwidth is bounded by its slowest link: how close the engine comes.
    top = allreduce.get(max(allreduce)) if allreduce else None
    if links and top and top[1]:
        bound = min(links.values())
        lines.append(
            f"allreduce reaches {top[1] / bound:.0%} of what the links allow ({_gbs(top[1])} "
            f"GB/s bus bandwidth at {max(allreduce) // MIB} MiB; slowest link {_gbs(bound)} GB/s)"
        )
    if links:
        (a, b), slowest = min(links.items(), key=lambda kv: kv[1])
        # horovodrun reads this line (runner/links.py REPORT_LINE) and keeps the figure.
        lines.append(
            f"links: slowest {slowest / 1e9:.3f} GB/s between hosts ({a} -> {b}); horovodrun "
            "keeps it for later jobs on these hosts, whose summary compares with it"
        )
    causes = slowdown_causes(checker, plan, hierarchical)
    for cause in causes:
        lines.append("cause: " + cause)
    # Small messages against the links' latency: what a model of many small tensors pays.
    link_lat = [v for k, v in lat.items() if k[0] != k[1] and v]
    if link_lat and allreduce and min(allreduce) <= 64 * KIB:
        t_small, worst = allreduce[min(allreduce)][0], max(link_lat)
        if t_small > LATENCY_FACTOR * worst:
            lines.append(
                f"small messages: a {min(allreduce) // KIB} KiB allreduce takes "
                f"{t_small * 1e6:.0f} us, {t_small / worst:.0f}x the slowest link's latency "
                f"({worst * 1e6:.0f} us): many small gradients per step are latency-bound; "
                "fusion packs them into fewer allreduces (HOROVOD_FUSION_THRESHOLD, and "
                "HOROVOD_CYCLE_TIME for how long it waits to gather them)"
            )
    if links and top and top[1] and top[1] / bound < REACH_FLOOR:
        verdicts.append(
            f"allreduce reaches {top[1] / bound:.0%} of what the links allow"
            + (
                f" ({len(causes)} likely cause(s) above)"
                if causes
                else " (no cause this check can see: look for other processes on the CPUs, "
                "and compare HOROVOD_CPU_OPERATIONS=mpi)"
            )
        )
    if links:
        median = statistics.median(links.values())
        slow = sorted(
            (k for k, v in links.items() if v < median / SLOW_FACTOR), key=lambda k: links[k]
        )
        for a, b in slow:
            lines.append(
                f"slow link: {a} -> {b}: {_gbs(links[(a, b)])} GB/s, median {_gbs(median)} GB/s"
            )
        if slow:
            involved = sorted(
                {h for k in slow for h in k}, key=lambda h: -sum(h in k for k in slow)
            )
            verdicts.append(
                f"{len(slow)} slow link(s), more than {SLOW_FACTOR:g}x below the median "
                f"(most involved: {involved[0]}); check that host's network"
            )
    # Interfaces: the chosen one against every other subnet, per host.
    chosen = plan["network"]
    if interfaces:
        lines.append("interfaces (raw TCP from each host to the next, GB/s):")
        for h in hosts:
            cells = []
            for subnet, per_host in interfaces.items():
                if h in per_host:
                    ifname, addr, value, nxt = per_host[h]
                    mark = " (chosen)" if subnet == chosen else ""
                    v = f"{_gbs(value)} GB/s" if isinstance(value, float) else f"failed: {value}"
                    cells.append(f"{ifname} {addr}{mark} {v}")
            lines.append(f"  {h}: " + "; ".join(cells))
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
                    if not any("faster interface" in v for v in verdicts):
                        verdicts.append(
                            f"a faster interface than the chosen one exists ({other[0]} on {h})"
                        )
    model = plan.get("model_bytes")
    if model and allreduce:
        n = checker.size
        big = allreduce[max(allreduce)]
        small = allreduce[min(allreduce)]
        if big[1]:
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
                line += (
                    "; pass --step-time-ms (one rank's step time) for the scaling efficiency bound"
                )
            lines.append(line)
    if verdicts:
        lines.append("verdict: WARN: " + "; ".join(verdicts))
    elif links:
        lines.append(
            f"verdict: OK: every link between hosts within {SLOW_FACTOR:g}x of the median "
            f"({_gbs(statistics.median(links.values()))} GB/s), "
            "and the chosen interface is the fastest measured"
        )
    else:
        lines.append("verdict: OK (one host: no links between hosts to judge)")
    return "\n".join(lines)


def main():
    plan = json.loads(os.environ["HOROVOD_NETWORK_CHECK_PLAN"])
    # The engine's watchdog warns after one step bound and aborts after two: the check's own
    # deadlines fire first and say which step and host; the watchdog is the backstop for the
    # engine's allreduce step.  Equal on every rank (AGREE knobs).  A check time the user set
    # is kept, as the engine parses it, and the shutdown time is never below it (init refuses).
    step = plan.get("step_timeout", 10.0) + plan.get("seconds", 0.5)
    os.environ.setdefault("HOROVOD_STALL_CHECK_TIME_SECONDS", str(int(step)))
    check_time = basics.config_values()["HOROVOD_STALL_CHECK_TIME_SECONDS"]
    os.environ.setdefault(
        "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", str(max(int(2 * step + 5), math.ceil(check_time)))
    )
    os.environ.setdefault("HOROVOD_SUMMARY", "0")  # the report says it all
    # Our communicator first, then the engine: creating a communicator while the engine's
    # thread runs its negotiation collectives can stall Open MPI 4.1's context-id agreement
    # (seen under load in CI: two ranks never reached the engine's rounds).
    from mpi4py import MPI

    comm = MPI.COMM_WORLD.Dup()
    import horovod.numpy as hvd

    hvd.init()
    checker = Checker(comm, plan)
    if checker.rank == 0:
        print(
            f"horovodrun --check-network: {checker.size} ranks started on "
            f"{len(checker.hosts)} host(s); "
            f"measuring (each step bounded by {checker.step_timeout:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
    try:
        lat, bw, allreduce, interfaces = checker.run()
    except NoAnswer as e:
        print(
            f"horovodrun --check-network: {checker.who(checker.rank)}: {e}",
            file=sys.stderr,
            flush=True,
        )
        MPI.COMM_WORLD.Abort(2)
        return 2
    if checker.rank == 0:
        # The threshold the engine runs with (its default, or the environment's value).
        knobs = basics.config_values()
        fusion, hierarchical = (
            knobs["HOROVOD_FUSION_THRESHOLD"],
            knobs["HOROVOD_HIERARCHICAL_ALLREDUCE"],
        )
        print(
            report(checker, lat, bw, allreduce, interfaces, plan, fusion, hierarchical),
            flush=True,
        )
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

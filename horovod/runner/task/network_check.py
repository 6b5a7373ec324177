"""`horovodrun --check-network`: the program every rank runs (one per slot,
`python -m horovod.runner.task.network_check`) to measure the cluster's network, and rank 0's
report.

Measured, one step at a time so that measurements do not compete for the links or the CPUs:
  - per host pair, both directions: latency (8-byte ping-pong, half the round trip) and
    bandwidth (4 MiB messages for --check-seconds) over MPI, i.e. what the job's transport gets;
    the diagonal is the same between two ranks of one host (shared memory);
  - the links all at once, as a ring uses them: each host's first rank streams to the next
    host's while receiving from the previous one (containers on one machine, or hosts behind
    one NIC, carry less each this way than one link alone);
  - allreduce bus bandwidth through our engine at 4 KiB, 1 MiB and 64 MiB, all ranks;
  - every subnet all hosts share, raw TCP from each host to the next: which interface is fastest.
Rank 0 coordinates: after each step every rank reports to it, and it releases the next step.
Every wait polls with a deadline; whoever waits too long names the rank and host it waited for,
and aborts the job (horovodrun then ends mpirun within its abort grace).

The plan (hosts, interfaces, chosen subnet, options) comes from horovodrun in
HOROVOD_NETWORK_CHECK_PLAN, as JSON.  The bounded steps are network_steps.py's, the measurements
between two ranks network_measure.py's, the report network_report.py's.
"""

import json
import math
import os
import statistics
import sys
import time

from horovod.common import basics
from horovod.runner.task.network_measure import Measures
from horovod.runner.task.network_report import KIB, MIB, report, slow_links
from horovod.runner.task.network_steps import NoAnswer

REMEASURE = 2  # times a link that measured slow is measured again before it is named


class Checker(Measures):
    """The plan: every measurement step in order, on every rank."""

    def run(self):
        rep = {h: rs[0] for h, rs in self.ranks_of.items()}
        lat, bw = self.pairs(rep)
        self.measure_slow_again(rep, bw)
        at_once = self.ring_at_once(rep)
        allreduce = self.allreduce_sweep()
        interfaces = self.interface_sweep(rep)
        return lat, bw, at_once, allreduce, interfaces

    def pairs(self, rep):
        """({(host, host): s}, {(from, to): bytes/s}): latency and both directions' bandwidth
        inside each host first (shared memory; two ranks of it), then every pair of hosts
        (their first ranks, rep)."""
        lat, bw = {}, {}
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
        return lat, bw

    def measure_slow_again(self, rep, bw):
        """A link that measured slow is measured again (twice at most) and keeps its best figure
        in bw: one short measurement between hosts that share cores can dip 2x (a CI run named a
        healthy link slow at 0.49 GB/s beside 1.04 for its reverse); a slow link stays slow
        however often it is measured."""
        for _ in range(REMEASURE):
            self.step = "which links to measure again"
            suspects = self.share(slow_links(bw) if self.rank == 0 else None)
            if not suspects:
                break
            for hs, hd in suspects:
                s, d = rep[hs], rep[hd]
                self.step = f"bandwidth {hs} -> {hd}, measured again"
                mine = self.bandwidth(s, d) if self.rank in (s, d) else None
                res = self.sync(mine)
                if res:
                    bw[(hs, hd)] = max(bw[(hs, hd)], res[s])

    def ring_at_once(self, rep):
        """{(host, next host): bytes/s}: every host's first rank streams to the next host's, all
        at the same time (the ring's steps between hosts); {} on one host."""
        if len(self.hosts) < 2:
            return {}
        self.step = "links at once (each host to the next)"
        nxt = {h: self.hosts[(i + 1) % len(self.hosts)] for i, h in enumerate(self.hosts)}
        prev = {b: a for a, b in nxt.items()}
        mine = None
        for h, r in rep.items():
            if r == self.rank:
                mine = self.stream_ring(rep[nxt[h]], rep[prev[h]])
        res = self.sync(mine)
        return {(h, nxt[h]): res[rep[h]] for h in self.hosts} if res else {}

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
        lat, bw, at_once, allreduce, interfaces = checker.run()
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
            report(checker, lat, bw, allreduce, interfaces, plan, fusion, hierarchical, at_once),
            flush=True,
        )
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

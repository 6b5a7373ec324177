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
from horovod.runner.task.network_report import KIB, MESSAGE, MIB, report, slow_links

TAG_DATA, TAG_STOP, TAG_CTRL, TAG_RING = 11, 12, 13, 14
IN_FLIGHT = 8
REMEASURE = 2  # times a link that measured slow is measured again before it is named


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

    def share(self, value):
        """Rank 0's value to every rank (bounded, as sync is); what rank 0 decided."""
        deadline = time.monotonic() + self.step_timeout
        if self.rank == 0:
            for r in range(1, self.size):
                self.comm.send(value, dest=r, tag=TAG_CTRL)
            return value
        return self.recv_obj(0, deadline)

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

    def stream_ring(self, dst, src):
        """Streams 4 MiB messages to dst for self.seconds while receiving src's stream, as a
        ring step does; bytes/s sent, as seen by this rank after dst acknowledged the end. A
        message shorter than 4 MiB ends a stream; the acknowledgements travel on TAG_STOP and
        the streams on TAG_RING, so they stay apart when dst and src are one rank (2 hosts)."""
        import numpy as np
        from mpi4py import MPI

        deadline = time.monotonic() + self.step_timeout + self.seconds
        data, buf = np.ones(MESSAGE, np.uint8), np.empty(MESSAGE, np.uint8)
        end, ack, ack_out = np.zeros(1, np.uint8), np.zeros(1, np.uint8), np.zeros(1, np.uint8)
        status = MPI.Status()
        pending, sent, rate = [], 0, None
        end_req = ack_req = ack_back = None
        recv = self.comm.Irecv(buf, source=src, tag=TAG_RING)
        t0 = time.perf_counter()
        while rate is None or recv is not None or not ack_back.Test():
            if end_req is None and (time.perf_counter() - t0 < self.seconds or sent == 0):
                while len(pending) < IN_FLIGHT:  # several in flight keep the link busy
                    pending.append(self.comm.Isend(data, dest=dst, tag=TAG_RING))
                    sent += MESSAGE
            while pending and pending[0].Test():
                pending.pop(0)
            if end_req is None and not pending and time.perf_counter() - t0 >= self.seconds:
                end_req = self.comm.Isend(end, dest=dst, tag=TAG_RING)
                ack_req = self.comm.Irecv(ack, source=dst, tag=TAG_STOP)
            if rate is None and ack_req is not None and ack_req.Test():
                rate = sent / (time.perf_counter() - t0)
            if recv is not None and recv.Test(status):
                if status.Get_count(MPI.BYTE) < MESSAGE:  # src's stream ended
                    recv = None
                    ack_back = self.comm.Isend(ack_out, dest=src, tag=TAG_STOP)
                else:
                    recv = self.comm.Irecv(buf, source=src, tag=TAG_RING)
            if time.monotonic() > deadline:
                peer = src if recv is not None else dst
                raise NoAnswer(
                    f"{self.who(peer)} did not answer within {self.step_timeout:.0f} s "
                    f"(step: {self.step})"
                )
            time.sleep(0)
        if end_req is not None:
            self.wait(end_req, dst, deadline)
        return rate

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
        # A link that measured slow is measured again (twice at most) and keeps its best
        # figure: one short measurement between hosts that share cores can dip 2x (a CI run
        # named a healthy link slow at 0.49 GB/s beside 1.04 for its reverse); a slow link
        # stays slow however often it is measured.
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
        at_once = self.ring_at_once(rep)
        allreduce = self.allreduce_sweep()
        interfaces = self.interface_sweep(rep)
        return lat, bw, at_once, allreduce, interfaces

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

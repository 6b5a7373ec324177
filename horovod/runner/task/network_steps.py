"""The steps of `horovodrun --check-network` (network_check.py), one at a time on every rank:
the plan's placement, waits bounded by the step's timeout (whoever waits too long names the rank
and host it waited for), and rank 0's coordination (sync, share) over the check's own
communicator."""

import time

TAG_DATA, TAG_STOP, TAG_CTRL, TAG_RING = 11, 12, 13, 14


class NoAnswer(Exception):
    pass


class Steps:
    """One rank's view of the check: where every rank runs (the plan's placement), the step in
    progress (named when a wait runs out), and the waits, each bounded."""

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

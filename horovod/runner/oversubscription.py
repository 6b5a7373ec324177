"""Ranks that outnumber the cores under them (issue 20, part 3).

Open MPI's ranks busy-poll while they wait, and yield the core only when Open MPI knows a node
is oversubscribed. It cannot know when several "hosts" are containers on one machine (each
sees all the machine's cores), so three 1-slot containers on a 2-core machine spin against
each other: measured, 1 MiB allreduce took 34 ms instead of 2.6 ms with yielding.
Hosts that report the same kernel boot id share a machine; their ranks are summed against
its cores (a cgroup CPU quota counts for the host that has it)."""

MCA_YIELD = ("--mca", "mpi_yield_when_idle", "1")


def find(probes, ranks_per_host):
    """[(hosts, cores, ranks)] of the machines (or single hosts) with more ranks than cores.
    probes: {host: probe dict (probe.py)}; ranks_per_host: {host: ranks of this job}."""
    machines = {}
    for host, ranks in ranks_per_host.items():
        p = probes.get(host) or {}
        key = p.get("boot_id") or f"host:{host}"
        machines.setdefault(key, []).append((host, ranks, p.get("cpus")))
    out = []
    for members in machines.values():
        cpus = [c for _, _, c in members if c]
        if not cpus:
            continue
        ranks = sum(r for _, r, _ in members)
        # The machine has at least as many cores as any of its hosts sees; a host under a
        # quota is oversubscribed on its own when its ranks exceed the quota.
        cores = max(cpus)
        hosts = [h for h, _, _ in members]
        if ranks > cores:
            out.append((hosts, cores, ranks))
        else:
            out += [([h], c, r) for h, r, c in members if c and r > c]
    return out


def describe(found, user_set=False):
    parts = []
    for hosts, cores, ranks in found:
        where = (
            f"hosts {', '.join(hosts)} share one machine"
            if len(hosts) > 1
            else f"host {hosts[0]} has"
        )
        parts.append(f"{where} with {cores} core(s) and {ranks} rank(s)")
    how = (
        "--mpi-args sets mpi_yield_when_idle"
        if user_set
        else "ranks yield the core while they wait (--mca mpi_yield_when_idle 1)"
    )
    return "horovodrun: oversubscribed: " + "; ".join(parts) + "; " + how


def mpirun_args(found, mpi_args):
    """The MCA setting to add, unless the user set it in --mpi-args."""
    if not found or "mpi_yield_when_idle" in (mpi_args or ""):
        return []
    return list(MCA_YIELD)

"""Which network the ranks talk over: one IPv4 subnet every host has an address in.

Open MPI's TCP transports accept a subnet (CIDR) as well as interface names, so the choice is
passed as a subnet: it works when the hosts name the interface differently (eth0 here, ens5
there).  Interfaces that exist on every host but do not connect them are the classic cause of
silent hangs: `lo`, and `docker0`, whose 172.17.0.1/16 is the same address on every Docker
host.  Those are never chosen unless asked for, and a subnet in which two hosts claim the same
address is rejected for the same reason.
"""

import ipaddress

# Bridges and virtual ends that exist on many hosts without connecting them.
NEVER_AUTO = ("lo", "docker0", "docker_gwbridge", "virbr")
NEVER_AUTO_PREFIXES = ("veth", "br-", "virbr", "cni", "flannel.", "kube-")


class NetworkError(ValueError):
    pass


def _addresses(probe):
    """[(ifname, IPv4Interface, speed_mbps)] of a host's probe."""
    return [
        (i["name"], ipaddress.ip_interface(f"{i['address']}/{i['prefix']}"), i.get("speed_mbps"))
        for i in probe["interfaces"]
    ]


def _auto_ok(name, iface):
    return not (iface.ip.is_loopback or name in NEVER_AUTO or name.startswith(NEVER_AUTO_PREFIXES))


def _describe(probe):
    addrs = [f"{n} {a}" for n, a, _ in _addresses(probe)]
    return ", ".join(addrs) or "no IPv4 interface"


class Choice:
    """The chosen subnet, each host's interface in it, and what mpirun is told."""

    def __init__(self, network, per_host, launcher_iface, reason, requested=None):
        self.network = network  # ipaddress.IPv4Network or None (names given)
        self.per_host = per_host  # host -> (ifname, IPv4Interface)
        self.launcher_iface = launcher_iface
        self.reason = reason
        self.requested = requested

    def mpi_value(self):
        return str(self.network) if self.network else self.requested

    def mpirun_args(self):
        value = self.mpi_value()
        args = ["--mca", "btl_tcp_if_include", value]
        # mpirun (on the launcher) and the daemons it starts talk over the out-of-band channel:
        # restricting it to a subnet the launcher is not on would leave mpirun no interface.
        if self.launcher_iface is not None:
            args += ["--mca", "oob_tcp_if_include", value]
        return args

    def names(self):
        return sorted({name for name, _ in self.per_host.values()})


def choose(probes, resolved, launcher_probe, requested=None):
    """probes: host -> probe dict; resolved: host -> the IPv4 address its name resolves to at
    the launcher (or None); requested: --network-interface (names or CIDRs, comma-separated)."""
    if requested:
        return _requested(probes, launcher_probe, requested)
    hosts = list(probes)
    per_host_nets = {}
    for h in hosts:
        nets = {}
        for name, iface, speed in _addresses(probes[h]):
            if _auto_ok(name, iface):
                nets.setdefault(iface.network, (name, iface, speed))
        per_host_nets[h] = nets
    common = set.intersection(*(set(n) for n in per_host_nets.values())) if hosts else set()
    # A subnet in which two hosts have the same address does not connect them.
    common = {
        net for net in common if len({per_host_nets[h][net][1].ip for h in hosts}) == len(hosts)
    }
    if not common:
        lines = "; ".join(f"{h}: {_describe(probes[h])}" for h in hosts)
        raise NetworkError(
            f"no IPv4 subnet is shared by every host (lo, docker0 and bridges excluded): {lines}. "
            "Fix: connect the hosts on one network, or name the interface with --network-interface"
        )
    launcher_nets = {iface.network: (name, iface) for name, iface, _ in _addresses(launcher_probe)}

    def score(net):
        by_name = sum(
            1 for h in hosts if resolved.get(h) and ipaddress.ip_address(resolved[h]) in net
        )
        slowest = min((per_host_nets[h][net][2] or 0) for h in hosts)
        return (by_name, net in launcher_nets, slowest, -net.prefixlen, str(net))

    best = max(common, key=score)
    by_name = score(best)[0]
    reason = (
        "the subnet the host names resolve to"
        if by_name == len(hosts)
        else "the only subnet every host shares"
        if len(common) == 1
        else f"the best of {len(common)} shared subnets"
    )
    per_host = {h: per_host_nets[h][best][:2] for h in hosts}
    launcher = launcher_nets.get(best)
    return Choice(best, per_host, launcher[1] if launcher else None, reason)


def _requested(probes, launcher_probe, requested):
    wanted = [w.strip() for w in requested.split(",") if w.strip()]
    nets = []
    for w in wanted:
        if "/" in w:
            try:
                nets.append(ipaddress.ip_network(w, strict=False))
            except ValueError:
                raise NetworkError(
                    f"--network-interface {w!r} is neither an interface name nor "
                    "a subnet like 10.0.0.0/24"
                ) from None

    def match(probe):
        for name, iface, _ in _addresses(probe):
            if name in wanted or any(iface.ip in n for n in nets):
                return name, iface
        return None

    per_host, missing = {}, []
    for h, probe in probes.items():
        m = match(probe)
        if m is None:
            missing.append(f"{h} (has {_describe(probe)})")
        else:
            per_host[h] = m
    if missing:
        raise NetworkError(
            f"--network-interface {requested}: no such interface on " + "; ".join(missing)
        )
    launcher = match(launcher_probe)
    networks = {iface.network for _, iface in per_host.values()}
    network = (
        networks.pop() if len(networks) == 1 and not nets else (nets[0] if len(nets) == 1 else None)
    )
    return Choice(
        network,
        per_host,
        launcher[1] if launcher else None,
        "given with --network-interface",
        requested=",".join(wanted),
    )


def shared_subnets(probes):
    """{subnet: {host: (ifname, address)}} for every IPv4 subnet all hosts have an address in,
    at distinct addresses (lo and docker0-like duplicates connect nothing): the interfaces
    that could carry the job's traffic, which --check-network compares."""
    hosts = list(probes)
    per_host = {h: {} for h in hosts}
    for h in hosts:
        for name, iface, _ in _addresses(probes[h]):
            if not iface.ip.is_loopback:
                per_host[h].setdefault(iface.network, (name, str(iface.ip)))
    common = set.intersection(*(set(n) for n in per_host.values())) if hosts else set()
    out = {}
    for net in sorted(common, key=str):
        members = {h: per_host[h][net] for h in hosts}
        if len({addr for _, addr in members.values()}) == len(hosts):
            out[str(net)] = members
    return out

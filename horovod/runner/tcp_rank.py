"""What every launcher that starts ranks without mpirun (horovodrun --gloo, horovod.spark,
horovod.ray) tells a rank of a TCP-transport job: upstream's Gloo variables, and the one
interface the ranks bind."""


def rank_variables(slot, size, rendezvous=None, iface=None):
    """{name: str} one rank reads. `slot` has rank, local_rank, local_size, cross_rank,
    cross_size and host; `rendezvous` is the (addr, port) of the launcher's server, None where the
    launcher sets it later; the secret (HOROVOD_SECRET_KEY) is added apart, never on a command
    line."""
    env = {
        "HOROVOD_RANK": str(slot.rank),
        "HOROVOD_SIZE": str(size),
        "HOROVOD_LOCAL_RANK": str(slot.local_rank),
        "HOROVOD_LOCAL_SIZE": str(slot.local_size),
        "HOROVOD_CROSS_RANK": str(slot.cross_rank),
        "HOROVOD_CROSS_SIZE": str(slot.cross_size),
        "HOROVOD_HOSTNAME": slot.host,
        "HOROVOD_RENDEZVOUS_SERVER": "external",
        "HOROVOD_TRANSPORT": "tcp",
    }
    if rendezvous is not None:
        addr, port = rendezvous
        env["HOROVOD_GLOO_RENDEZVOUS_ADDR"] = addr
        env["HOROVOD_GLOO_RENDEZVOUS_PORT"] = str(port)
    if iface:
        env["HOROVOD_GLOO_IFACE"] = iface
    return env


def single_interface(nics, caller):
    """The one interface name in `nics` (a name or a collection of names) the ranks bind
    (HOROVOD_GLOO_IFACE), or None for none given; more than one is refused, naming `caller`."""
    if not nics:
        return None
    names = [nics] if isinstance(nics, str) else sorted(nics)
    if len(names) != 1:
        raise ValueError(
            f"{caller}: nics={nics!r}: give one network interface (the TCP transport binds one)"
        )
    return names[0]

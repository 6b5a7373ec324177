"""The mpirun command line horovodrun runs, and where its ranks land.  Pure functions of the
flags and the hosts, so they are tested without MPI."""

import shlex

from horovod.runner import hosts as hostlib
from horovod.runner.inherited import forwarded


def mpirun_command(args, env, cpus, is_root, hosts=None, network_args=(), ssh_args=()):
    """The mpirun command line.  hosts: [(host, slots)] or None (this host only)."""
    if hosts:
        total = sum(s for _, s in hosts)
        np_ = args.np or total
    else:
        np_ = args.np or cpus
    cmd = [args.mpirun]
    if is_root:
        cmd.append("--allow-run-as-root")
    cmd += ["-np", str(np_)]
    if hosts:
        cmd += ["-H", hostlib.format_hosts(hosts)]
    cmd += ["--bind-to", "none", "--map-by", "slot"]
    if (hosts is None and np_ > cpus) or (hosts and np_ > total):
        cmd.append("--oversubscribe")
    if ssh_args:
        # mpirun starts its daemon on each host with these; each daemon is started from here
        # (no tree spawn), so the key is needed on the launcher only.
        cmd += [
            "--mca",
            "plm_rsh_args",
            shlex.join(ssh_args),
            "--mca",
            "plm_rsh_no_tree_spawn",
            "1",
        ]
    cmd += list(network_args)
    for name in forwarded(env):
        cmd += ["-x", name]
    cmd += shlex.split(args.mpi_args)
    return cmd + list(args.command)


def rank_hosts(hosts, np_):
    """rank -> host under --map-by slot (each host's slots filled in turn); {} if unknown."""
    if not hosts or np_ > sum(s for _, s in hosts):
        return {}
    placement = [h for h, s in hosts for _ in range(s)]
    return dict(enumerate(placement[:np_]))

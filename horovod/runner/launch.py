"""horovodrun: `horovodrun -np 4 -H a:2,b:2 python train.py` runs mpirun with the flags Horovod
needs, after a preflight of every host.

Upstream's flag names, so upstream command lines work.  On this host alone (no -H/--hostfile,
or only localhost) nothing goes through ssh.  With remote hosts, preflight.run() asks every host
first and nothing is launched unless all of them pass.  main() returns the job's exit code.

This module runs the job; the flags are flags.py's, the mpirun command line command.py's (a pure
function, tested without MPI), --check-network's plan network_check_plan.py's, and supervise.py
sees mpirun through.  Their names stay importable from here: upstream's module path, and
horovodrun's tests, use them as launch.parse_args, launch.mpirun_command, ...
"""

import json
import os
import shlex
import sys

from horovod.runner import hosts as hostlib
from horovod.runner import links, oversubscription
from horovod.runner.command import mpirun_command, rank_hosts
from horovod.runner.flags import (  # noqa: F401  (names this module has always offered)
    DEFAULT_START_TIMEOUT,
    KNOB_FLAGS,
    SWITCH_FLAGS,
    knob_env,
    parse_args,
    resolve_hosts,
)
from horovod.runner.inherited import FORWARD_NAMES, FORWARD_PREFIXES, forwarded, usable_cpus  # noqa: F401
from horovod.runner.network_check_plan import check_bound, check_plan, model_bytes  # noqa: F401
from horovod.runner.supervise import _say, _stuck_message, run  # noqa: F401  (_stuck_message: tests)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.check_build:
        from horovod.runner.check_build import check_build

        return check_build()
    env = knob_env(args, os.environ)
    job = launch_job
    if args.gloo:
        from horovod.runner import gloo_launch

        job = gloo_launch.launch_job
    if args.host_discovery_script:
        from horovod.runner import elastic_driver

        return elastic_driver.run(args, env, job)
    return job(args, env, args.host_list)


def _oversubscribed(args, hosts, probes):
    """The machines whose cores this job's ranks outnumber (oversubscription.find), said."""
    per_host = {}
    for h in rank_hosts(hosts, args.np or sum(s for _, s in hosts)).values():
        per_host[h] = per_host.get(h, 0) + 1
    crowded = oversubscription.find(probes, per_host)
    if crowded:
        user_set = "mpi_yield_when_idle" in (args.mpi_args or "")
        _say(oversubscription.describe(crowded, user_set))
    return crowded


def launch_job(args, env, hosts, report=None):
    """Preflight (remote hosts), then mpirun on `hosts` ([(host, slots)] or None: this host);
    returns the job's exit status (3: the preflight failed, nothing was launched). `report`:
    see supervise.run."""
    remote = any(not hostlib.is_local(h) for h, _ in hosts or [])  # ssh, preflight, links
    if args.check_network and not remote:
        args.command[0] = sys.executable  # this host: the interpreter running horovodrun
    network_args, ssh_args = [], []
    if hosts:
        total = sum(s for _, s in hosts)
        if args.np and args.np > total:
            _say(
                f"horovodrun: -np {args.np} but the hosts have {total} slots "
                f"({hostlib.format_hosts(hosts)}); give fewer processes or more slots"
            )
            return 2
        if remote:
            passed = _preflight(args, env, hosts, report)
            if passed is None:
                return 3
            network_args, ssh_args = passed
    if remote and not args.check_network and "HOROVOD_LINK_GBPS" not in env:
        _use_known_links(env, hosts)
    if args.check_network and "HOROVOD_NETWORK_CHECK_PLAN" not in env:
        env["HOROVOD_NETWORK_CHECK_PLAN"] = json.dumps(check_plan(args, hosts, None, None))
    if not network_args and args.nics:
        network_args = [
            "--mca",
            "btl_tcp_if_include",
            args.nics,
            "--mca",
            "oob_tcp_if_include",
            args.nics,
        ]
    cmd = mpirun_command(args, env, usable_cpus(), os.geteuid() == 0, hosts, network_args, ssh_args)
    if args.verbose:
        _say(shlex.join(cmd))
    return _run_mpirun(args, env, hosts, cmd, remote, report)


def _preflight(args, env, hosts, report):
    """Asks every host (preflight.run); (mpirun's network arguments, ssh's arguments), or None
    when a host failed (said, and noted in `report`). For --check-network, the plan goes in
    env."""
    from horovod.runner import preflight

    try:
        reports, choice, text, ssh_args = preflight.run_for_flags(args, hosts)
    except preflight.PreflightFailed as e:
        _say(str(e))
        if report is not None:
            report["preflight_failed"] = True
        return None
    _say(text)
    network_args = choice.mpirun_args()
    crowded = _oversubscribed(args, hosts, {r.host: r.probe for r in reports})
    network_args += oversubscription.mpirun_args(crowded, args.mpi_args)
    if args.check_network:
        plan = check_plan(args, hosts, {r.host: r.probe for r in reports}, choice)
        plan["oversubscribed"] = (
            oversubscription.describe(crowded, "mpi_yield_when_idle" in args.mpi_args)
            if crowded
            else None
        )
        env["HOROVOD_NETWORK_CHECK_PLAN"] = json.dumps(plan)
    return network_args, ssh_args


def _use_known_links(env, hosts):
    """The slowest link an earlier --check-network kept for these hosts, for the ranks'
    summary to compare with (links.py)."""
    known = links.load(hosts)
    if known:
        env["HOROVOD_LINK_GBPS"] = f"{known['slowest_gbps']:g}"
        if links.at_once(known):
            env.setdefault("HOROVOD_LINK_AT_ONCE_GBPS", f"{links.at_once(known):g}")
        _say(links.describe(known))


def _run_mpirun(args, env, hosts, cmd, remote, report):
    """Runs `cmd` under supervise.run (bounded for --check-network); its exit status."""
    try:
        np_ = int(cmd[cmd.index("-np") + 1])
        bound = (
            check_bound(json.loads(env["HOROVOD_NETWORK_CHECK_PLAN"]))
            if args.check_network
            else None
        )
        report = {} if report is None else report
        rc = run(cmd, env, rank_hosts(hosts, np_), bound, "the network check", report)
        if args.check_network and rc == 0 and remote and report.get("slowest_link_gbps"):
            _keep_slowest_link(env, hosts, report)
        return rc
    except FileNotFoundError:
        _say(f"horovodrun: {args.mpirun} not found; install Open MPI (mpirun)")
        return 127


def _keep_slowest_link(env, hosts, report):
    """What a --check-network found, kept for later jobs on these hosts (links.py)."""
    plan = json.loads(env["HOROVOD_NETWORK_CHECK_PLAN"])
    try:
        saved = links.save(
            hosts,
            report["slowest_link_gbps"],
            plan.get("interface"),
            report.get("links_at_once_gbps"),
        )
        _say(f"horovodrun: kept the slowest link for later jobs on these hosts: {saved}")
    except OSError as e:  # the check itself succeeded: its report stands
        _say(f"horovodrun: could not keep the slowest link for later jobs ({e})")


if __name__ == "__main__":
    sys.exit(main())

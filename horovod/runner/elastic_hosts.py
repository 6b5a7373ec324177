"""What the elastic driver does on the job's hosts over ssh, each bounded by PROBE_TIMEOUT:
asks which no longer answer after a failed generation, and removes the job's commit files at
its end."""

import os
import shlex
import subprocess
import threading
import time

from horovod.runner import hosts as hostlib

PROBE_TIMEOUT = 5.0


def ssh_args(args):
    from horovod.runner import preflight

    return preflight.ssh_base(args.ssh_port, args.ssh_identity_file, int(PROBE_TIMEOUT))


def unreachable(args, hosts):
    """{host: why} of `hosts` that no longer answer over ssh within PROBE_TIMEOUT."""
    remote = [h for h, _ in hosts if not hostlib.is_local(h)]
    out = {}

    def probe(host):
        try:
            p = subprocess.run(
                ["ssh", *ssh_args(args), host, "true"],
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT + 1,
                stdin=subprocess.DEVNULL,
            )
            if p.returncode != 0:
                out[host] = (p.stderr.strip().splitlines() or ["ssh failed"])[-1][:200]
        except subprocess.TimeoutExpired:
            out[host] = f"no answer over ssh within {PROBE_TIMEOUT:g} s (paused or cut off?)"

    threads = [threading.Thread(target=probe, args=(h,)) for h in remote]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def remove_commits(args, env, job_id, hosts):
    """Removes the job's commit files on every host it ran on, and the store's folder if no
    other job uses it (rmdir fails on a folder in use; best effort, bounded)."""
    root = env.get("HOROVOD_ELASTIC_STORE", "/dev/shm/horovod-elastic")
    path = os.path.join(root, job_id)
    cmd = f"rm -rf {shlex.quote(path)}; rmdir {shlex.quote(root)} 2>/dev/null; true"
    procs = []
    for host in sorted(set(hosts)):
        argv = ["sh", "-c", cmd] if hostlib.is_local(host) else ["ssh", *ssh_args(args), host, cmd]
        procs.append(
            subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    deadline = time.monotonic() + PROBE_TIMEOUT
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()

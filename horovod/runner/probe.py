"""What a host has, as one JSON line: versions, /dev/shm, IPv4 interfaces.

horovodrun's preflight sends this file's source to every host over ssh (`python3 -`), so it must
stay standard-library only and must not import horovod (a host without horovod, or with another
version of it, still answers and is reported as such).
"""

import fcntl
import importlib.metadata
import json
import os
import platform
import socket
import struct
import subprocess
import sys

SIOCGIFADDR, SIOCGIFNETMASK = 0x8915, 0x891B


def _version(*dists):
    for d in dists:
        try:
            return importlib.metadata.version(d)
        except importlib.metadata.PackageNotFoundError:
            pass
    return None


def _openmpi():
    try:
        out = subprocess.run(
            ["mpirun", "--version"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    # "mpirun (Open MPI) 4.1.4"
    first = out.splitlines()[0] if out else ""
    return first.rsplit(" ", 1)[-1] if "Open MPI" in first else (first or None)


def _ioctl_ipv4(sock, request, name):
    packed = struct.pack("256s", name.encode()[:15])
    return socket.inet_ntoa(fcntl.ioctl(sock.fileno(), request, packed)[20:24])


def _sysfs(name, leaf):
    try:
        with open(f"/sys/class/net/{name}/{leaf}") as f:
            return f.read().strip()
    except OSError:
        return None


def interfaces():
    """[{name, address, prefix, speed_mbps, mtu}] of the interfaces that are up with an IPv4."""
    out = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                addr = _ioctl_ipv4(s, SIOCGIFADDR, name)
                mask = _ioctl_ipv4(s, SIOCGIFNETMASK, name)
            except OSError:  # no IPv4 address
                continue
            if _sysfs(name, "operstate") == "down":
                continue
            prefix = sum(bin(int(b)).count("1") for b in mask.split("."))
            speed = _sysfs(name, "speed")
            mtu = _sysfs(name, "mtu")
            out.append(
                {
                    "name": name,
                    "address": addr,
                    "prefix": prefix,
                    "speed_mbps": int(speed)
                    if speed and speed.lstrip("-").isdigit() and int(speed) > 0
                    else None,
                    "mtu": int(mtu) if mtu and mtu.isdigit() else None,
                }
            )
    return out


# Below this, Open MPI's shared memory between a host's ranks may fail or fall back (the preflight
# warns, the network check names it as a cause).
SMALL_SHM = 256 << 20


def shm_bytes():
    try:
        st = os.statvfs("/dev/shm")
        return st.f_blocks * st.f_frsize
    except OSError:
        return None


def boot_id():
    """The kernel's boot id: hosts (containers) that report the same one share a machine."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or None
    except OSError:
        return None


def cpu_quota():
    """CPUs a cgroup CPU quota allows (`docker run --cpus`, compose `cpus:`), rounded up, or None:
    cgroup v2's cpu.max, else v1's cpu.cfs_quota_us / cpu.cfs_period_us (-1: no quota)."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        return None if quota == "max" else max(1, -(-int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as f:
            quota = int(f.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
            period = int(f.read())
        return None if quota <= 0 or period <= 0 else max(1, -(-quota // period))
    except (OSError, ValueError):
        return None


def usable_cpus():
    """CPUs this host's processes may use: the affinity mask, cut by a cgroup CPU quota."""
    cpus = len(os.sched_getaffinity(0))
    quota = cpu_quota()
    return min(cpus, quota) if quota else cpus


def probe():
    return {
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "horovod": _version("horovod"),
        "tensorflow": _version("tensorflow-cpu", "tensorflow"),
        "openmpi": _openmpi(),
        "shm_bytes": shm_bytes(),
        "cpus": usable_cpus(),
        "boot_id": boot_id(),
        "interfaces": interfaces(),
    }


if __name__ == "__main__":
    print("HOROVOD_PROBE " + json.dumps(probe()), flush=True)

"""The rank's side of an elastic launch (`horovodrun --host-discovery-script ...`,
horovod/runner/elastic_driver.py).

MPI cannot be initialized twice in one process, and Open MPI 4.1 cannot shrink a communicator
after a peer fails, so the driver re-forms the job by relaunching every rank: on a failed peer
or a membership change each rank exits with RELAUNCH_EXIT_CODE and the driver starts the next
generation on the hosts it then knows. What must survive the relaunch is the last commit, so
`state.commit()` also writes it to a memory-backed file on the rank's host (write, then rename:
a reader sees a whole commit or the previous one). The ranks of the next generation agree on
the newest commit any of them holds and the lowest rank holding it broadcasts it: survivors and
new hosts alike resume from it, never from fresh weights.

Over TCP (`horovodrun --gloo`, HOROVOD_ELASTIC_REFORM=process) a rank re-forms in process
instead (reform()): it shuts its engine down, asks the driver for its place in the next
generation (rank, size, the next rendezvous) and inits there, keeping its Python state, model
and imports; resume() then takes a survivor's commit from memory, and only new slots start new
processes. A rank that gets no place in time exits for a relaunch, as over MPI.

The ranks of one generation read the driver's notifications through rank 0 (an HTTP request to
the driver), and rank 0's answer is broadcast, so every rank raises HostsUpdatedInterrupt at the
same commit. All collectives here go through horovod.numpy, which every frontend's process has.
"""

import json
import os
import pickle
import struct
import sys
import time
import urllib.error
import urllib.request

import numpy as np

# EX_TEMPFAIL: "try again". The driver relaunches a generation whose ranks exit with it.
RELAUNCH_EXIT_CODE = 75
_HEADER = struct.Struct("<q")  # the commit number, before the pickled snapshot
_warned = set()


def active():
    """True inside a rank started by the elastic driver."""
    return os.environ.get("HOROVOD_ELASTIC") == "1" and "HOROVOD_ELASTIC_JOB_ID" in os.environ


def in_process():
    """True when this rank re-forms in process (horovodrun --gloo's elastic mode over TCP)."""
    return (
        active()
        and os.environ.get("HOROVOD_ELASTIC_REFORM") == "process"
        and "HOROVOD_ELASTIC_WORKER" in os.environ
    )


def generation():
    return int(os.environ.get("HOROVOD_ELASTIC_GENERATION", "0"))


def _say(text):
    print(f"[horovod elastic] {text}", file=sys.stderr, flush=True)


def _store_dir():
    root = os.environ.get("HOROVOD_ELASTIC_STORE", "/dev/shm/horovod-elastic")
    return os.path.join(root, os.environ["HOROVOD_ELASTIC_JOB_ID"])


def save(state, commit):
    """Writes `state`'s last save as commit number `commit` to this rank's file."""
    from horovod.common import basics

    directory = _store_dir()
    for attempt in range(3):
        try:
            os.makedirs(directory, exist_ok=True)
            break
        except FileNotFoundError:
            # Another job's driver removed the empty store folder between makedirs' two mkdirs
            # (elastic_hosts.remove_commits); once this job's folder is in it, it stays.
            if attempt == 2:
                raise
    path = os.path.join(directory, f"slot-{basics.local_rank()}.commit")
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(_HEADER.pack(commit))
        pickle.dump(state._snapshot(), f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)


def _newest_local():
    """(commit, path) of the newest commit file on this host, or (-1, None)."""
    best = (-1, None)
    try:
        names = os.listdir(_store_dir())
    except OSError:
        return best
    for name in names:
        if not name.endswith(".commit"):
            continue
        path = os.path.join(_store_dir(), name)
        try:
            with open(path, "rb") as f:
                (commit,) = _HEADER.unpack(f.read(_HEADER.size))
        except (OSError, struct.error):
            continue
        if commit > best[0]:
            best = (commit, path)
    return best


def resume(state, in_memory=False):
    """Generation > 0: every rank takes the newest commit any rank holds, broadcast by the lowest
    rank holding it. A rank of the last generation that re-formed in process (`in_memory`)
    offers the commit it holds in memory, a new process the newest file on its host. Returns
    the commit number, or None when no rank has one (the job failed before its first commit: it
    starts over from rank 0's state, as generation 0 did)."""
    from horovod.common import array_ops as hnp
    from horovod.common import basics

    mine, path = (
        (state._commits if state._commits > 0 else -1, None) if in_memory else _newest_local()
    )
    newest = int(
        hnp.allreduce(np.array([mine], np.int64), op=basics.Max, name="elastic.resume.commit")[0]
    )
    if newest < 0:
        _say(f"generation {generation()}: no commit to resume from; starting from rank 0's state")
        return None
    me = basics.rank()
    holder = me if mine == newest else basics.size()
    root = int(
        hnp.allreduce(np.array([holder], np.int64), op=basics.Min, name="elastic.resume.root")[0]
    )
    data = b""
    if me == root and in_memory:
        data = pickle.dumps(state._snapshot(), protocol=pickle.HIGHEST_PROTOCOL)
    elif me == root:
        with open(path, "rb") as f:
            f.seek(_HEADER.size)
            data = f.read()
    length = int(
        hnp.broadcast(np.array([len(data)], np.int64), root_rank=root, name="elastic.resume.size")[
            0
        ]
    )
    buf = np.frombuffer(data, np.uint8) if me == root else np.empty(length, np.uint8)
    buf = hnp.broadcast(buf, root_rank=root, name="elastic.resume.state")
    state._load_snapshot(pickle.loads(buf.tobytes()))
    state.restore()
    if me == 0:
        saved = getattr(state, "_saved_state", {}) or {}
        at = {k: saved[k] for k in ("epoch", "batch") if k in saved}
        _say(
            f"generation {generation()}, {basics.size()} rank(s): resumed from commit {newest}"
            + (f" {at}" if at else "")
            + f" (rank {root}'s copy, {len(buf) / 1e6:.1f} MB); the steps after it are redone"
        )
    return newest


def _driver_request(path, body=None, timeout=5, quiet=False):
    addr = os.environ.get("HOROVOD_ELASTIC_DRIVER")
    if not addr:
        return None
    req = urllib.request.Request(
        f"http://{addr}{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"X-Horovod-Token": os.environ.get("HOROVOD_ELASTIC_TOKEN", "")},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.load(r)
    except (OSError, ValueError) as e:
        if not quiet and path not in _warned:
            _warned.add(path)
            _say(f"cannot reach the driver at {addr} ({e}); carrying on without it")
        return None


def hosts_updated():
    """Whether the driver has new or lost hosts for this generation, the same on every rank
    (rank 0 asks, then broadcasts the answer)."""
    from horovod.common import array_ops as hnp
    from horovod.common import basics

    changed = 0
    if basics.rank() == 0:
        answer = _driver_request(f"/hosts?generation={generation()}")
        changed = int(bool(answer and answer.get("changed")))
    flag = hnp.broadcast(np.array([changed], np.int32), root_rank=0, name="elastic.hosts_updated")
    return bool(flag[0])


def exit_for_relaunch(reason):
    """Ends this rank so the driver relaunches the job: tells the driver why, then exits at once
    (no MPI finalize: peers may be gone, and a finalize with them would hang)."""
    from horovod.common import basics

    try:
        rank = basics.rank()
    except Exception:  # noqa: BLE001  (the engine may be down; the message matters more)
        rank = -1
    _driver_request("/relaunch", {"rank": rank, "generation": generation(), "reason": reason})
    _say(f"rank {rank}: {reason}; exiting for the driver to relaunch the job")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(RELAUNCH_EXIT_CODE)


# One request for a place waits this long at most (the driver answers "wait" after 20 s).
_PLACE_REQUEST_TIMEOUT = 30


def _rank_or_unknown():
    from horovod.common import basics

    try:
        return basics.rank()
    except Exception:  # noqa: BLE001  (the engine may be down; the message matters more)
        return -1


def _place_after(after, deadline):
    """The driver's answer for this process in the first generation after `after`: {"env": the
    rank's variables, "rank", "size", "generation"} or {"exit": True, "why": ...}; None when
    none came by `deadline` (monotonic)."""
    worker = os.environ["HOROVOD_ELASTIC_WORKER"]
    while time.monotonic() < deadline:
        answer = _driver_request(
            f"/place?worker={worker}&after={after}", timeout=_PLACE_REQUEST_TIMEOUT, quiet=True
        )
        if answer is None:  # the driver is busy or unreachable for a moment: ask again
            time.sleep(1.0)
        elif not answer.get("wait"):
            return answer
    return None


def reform(reason):
    """Leaves this world and joins the next one in this process: tells the driver why, shuts the
    engine down, asks the driver for this process's place and inits there (a failed init waits
    for the generation after). A process left out of the next world ends (exit 0); one with no
    place within HOROVOD_ELASTIC_PLACE_TIMEOUT exits for a relaunch."""
    from horovod.common import basics

    rank, after = _rank_or_unknown(), generation()
    body = {"rank": rank, "generation": after, "reason": reason, "in_process": True}
    _driver_request("/relaunch", body)
    _say(f"rank {rank}: {reason}; re-forming in this process")
    basics.shutdown()
    bound = float(os.environ.get("HOROVOD_ELASTIC_PLACE_TIMEOUT", "600"))
    deadline = time.monotonic() + bound
    while True:
        place = _place_after(after, deadline)
        if place is None:
            exit_for_relaunch(f"no place in a generation after {after} within {bound:g} s")
        if place.get("exit"):
            _say(f"rank {rank}: not in the next generation ({place.get('why', '')}); ending")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        os.environ.update(place["env"])
        try:
            basics.init()
            return
        except Exception as e:  # noqa: BLE001  (the engine's error, whatever its class)
            after = place["generation"]
            why = f"joining generation {after} as rank {place['rank']} failed ({e})"
            body = {"rank": place["rank"], "generation": after, "reason": why, "in_process": True}
            _driver_request("/relaunch", body)
            _say(f"{why}; waiting for the next one")


def progress_lost(state):
    """Words for what a rollback to the last commit redoes, from the state's batch/epoch."""
    saved = getattr(state, "_saved_state", {}) or {}
    now = {k: getattr(state, k) for k in ("epoch", "batch") if k in saved}
    if not now:
        return "the steps since it are redone"
    then = {k: saved[k] for k in now}
    if now.get("epoch", 0) == then.get("epoch", 0) and "batch" in now:
        steps = now["batch"] - then["batch"]
        return f"{steps} batch(es) since it are redone (at {now}, committed {then})"
    return f"the work from {then} to {now} is redone"

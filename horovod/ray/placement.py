"""Where the workers run: the placement group that reserves their resources, and the ranks
that follow from the nodes Ray put them on.

num_workers: one bundle per worker, PACK (as few nodes as Ray can). num_hosts: one bundle per
host holding num_workers_per_host workers, STRICT_SPREAD (each bundle on a node of its own).
Inside a placement group already (e.g. a Ray Tune trial) with use_current_placement_group,
the workers go into that one.
"""

import collections
import logging

from horovod.ray.errors import PlacementTimeoutError

log = logging.getLogger("horovod.ray")

# A rank's place: its Ray node and the values the engine takes from the environment.
Slot = collections.namedtuple(
    "Slot", "rank node_id node_ip host pid local_rank local_size cross_rank cross_size label"
)


def worker_resources(cpus_per_worker, use_gpu, gpus_per_worker):
    """One worker's resources as Ray counts them (no zero entries: Ray refuses those)."""
    resources = {"CPU": float(cpus_per_worker)}
    if use_gpu:
        resources["GPU"] = float(gpus_per_worker or 1)
    return resources


class Placement:
    """The bundles the workers go into, and the placement group if this executor made it."""

    def __init__(self, group, bundle_of_worker, created):
        self.group = group
        self.bundle_of_worker = bundle_of_worker  # worker index -> bundle index (-1: any)
        self.created = created

    def remove(self):
        if self.created and self.group is not None:
            import ray

            ray.util.remove_placement_group(self.group)
        self.group = None


def reserve(per_worker, num_workers, num_hosts, workers_per_host, use_current, timeout_s):
    """A Placement for the request, once Ray has reserved it; PlacementTimeoutError after
    timeout_s otherwise (the group is removed again)."""
    import ray
    from ray.util.placement_group import get_current_placement_group

    current = get_current_placement_group() if use_current else None
    if current is not None:
        log.info(
            "horovod.ray: inside a placement group already: the workers go into it "
            "(use_current_placement_group=False makes a new one)"
        )
        total = num_workers or num_hosts * workers_per_host
        return Placement(current, [-1] * total, created=False)
    if num_workers:
        bundles = [dict(per_worker) for _ in range(num_workers)]
        strategy, workers = "PACK", list(range(num_workers))
    else:
        per_host = {k: v * workers_per_host for k, v in per_worker.items()}
        bundles = [dict(per_host) for _ in range(num_hosts)]
        strategy = "STRICT_SPREAD"
        workers = [b for b in range(num_hosts) for _ in range(workers_per_host)]
    group = ray.util.placement_group(bundles, strategy=strategy)
    ready, _ = ray.wait([group.ready()], timeout=timeout_s)
    if not ready:
        available = ray.available_resources()
        ray.util.remove_placement_group(group)
        raise PlacementTimeoutError(
            f"horovod.ray: the cluster could not place the workers within {timeout_s} s "
            f"(placement_group_timeout_s): asked for {len(bundles)} bundle(s) of "
            f"{_show(bundles[0])} ({strategy}, {len(workers)} worker(s)); free now: "
            f"{_show(available)}; whole cluster: {_show(ray.cluster_resources())}, on "
            f"{len([n for n in ray.nodes() if n.get('Alive')])} node(s)",
            bundles,
            available,
        )
    return Placement(group, workers, created=True)


def _show(resources):
    """{'CPU': 4.0, 'memory': ...} -> "CPU 4, GPU 1" (the resources a worker may ask for)."""
    keys = [k for k in sorted(resources) if k in ("CPU", "GPU") or not _internal(k)]
    return ", ".join(f"{k} {resources[k]:g}" for k in keys) or "nothing"


def _internal(key):
    # Ray's own bookkeeping resources: node:<ip>, memory, object store, accelerator types.
    return key.startswith(("node:", "accelerator_type:")) or key in (
        "memory",
        "object_store_memory",
    )


def assign_slots(infos):
    """[Slot] in rank order from each worker's (node_id, node_ip, host, pid), in the order the
    workers were made. A node's workers get consecutive ranks, nodes in order of their first
    worker; local rank: the index on the node; cross rank: the node's index among the nodes
    with that local rank; cross size: how many have it (as under mpirun --map-by slot).
    Returns (slots, order): order[rank] is the index of that rank's worker."""
    nodes = list(dict.fromkeys(info[0] for info in infos))
    by_node = {n: [i for i, info in enumerate(infos) if info[0] == n] for n in nodes}
    labels = node_labels(infos, nodes)
    slots, order = [], []
    for node in nodes:
        members = by_node[node]
        for local, worker in enumerate(members):
            peers = [n for n in nodes if len(by_node[n]) > local]
            node_id, node_ip, host, pid = infos[worker]
            slots.append(
                Slot(len(slots), node_id, node_ip, host, pid, local, len(members),
                     peers.index(node), len(peers), labels[node])
            )  # fmt: skip
            order.append(worker)
    return slots, order


def visible_devices(slots, gpu_ids):
    """CUDA_VISIBLE_DEVICES for each rank (rank order) from the GPU ids Ray gave each rank's
    actor (ray.get_gpu_ids()): every rank on a node sees its node's GPUs in one order, where
    position j holds local rank j's first GPU (then the ranks' other GPUs, in rank order). So
    `torch.cuda.set_device(hvd.local_rank())` picks the rank's own GPU, as under horovodrun,
    and the ranks of a node agree on what each index is."""
    by_node = {}
    for slot, ids in zip(slots, gpu_ids):
        by_node.setdefault(slot.node_id, []).append([str(int(i)) for i in ids])
    order = {}
    for node, per_rank in by_node.items():
        first = [ids[0] for ids in per_rank if ids]
        rest = [i for ids in per_rank for i in ids[1:]]
        order[node] = ",".join(first + rest)
    return [order[slot.node_id] for slot in slots]


def node_labels(infos, nodes):
    """The name each node goes by for the engine (HOROVOD_HOSTNAME) and in messages: its IP,
    or IP/node id where nodes share an IP (several Ray nodes on one machine)."""
    ip_of = {info[0]: info[1] for info in infos}
    shared = collections.Counter(ip_of[n] for n in nodes)
    return {n: ip_of[n] if shared[ip_of[n]] == 1 else f"{ip_of[n]}/{n[:8]}" for n in nodes}

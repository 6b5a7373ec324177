"""Which Ray nodes the elastic executor can use, and how many workers each takes (upstream's
RayHostDiscovery): every alive node's CPUs (and GPUs with use_gpu) divided by one worker's.

A node is named by its Ray node id (several Ray nodes may share one IP: a
`ray.cluster_utils.Cluster` on one machine); an entry without one (a discovery of the user's
that lists host names, upstream's `override_discovery=False`) is placed through Ray's
`node:<name>` resource, as upstream placed its workers.
"""

import logging
import math

log = logging.getLogger("horovod.ray")


class RayHostDiscovery:
    """find_available_hosts_and_slots() -> {node: workers it can hold}, nodes with none left
    out. Counts a node's whole resources, not what is free now: the running generation's own
    workers hold some of them."""

    def __init__(self, use_gpu=False, cpus_per_worker=1, gpus_per_worker=1):
        self.use_gpu = use_gpu
        self.cpus_per_worker = cpus_per_worker or 1
        self.gpus_per_worker = gpus_per_worker or 1

    def find_available_hosts_and_slots(self):
        import ray

        found = {}
        for node in ray.nodes():
            if not (node.get("alive") or node.get("Alive")):
                continue
            resources = node.get("Resources", {})
            slots = resources.get("CPU", 0) // self.cpus_per_worker
            if self.use_gpu:
                slots = min(slots, resources.get("GPU", 0) // self.gpus_per_worker)
            slots = int(math.ceil(slots))
            if slots:
                found[node.get("NodeID") or node["NodeManagerAddress"]] = slots
        return found


class SlotsOf:
    """A discovery object (find_available_hosts_and_slots()) as the elastic driver's
    HostWatch polls it: a callable giving [(node, slots)] in a stable order, and close()."""

    def __init__(self, discovery):
        self.discovery = discovery

    def __call__(self):
        from horovod.runner.elastic_discovery import DiscoveryError

        try:
            found = self.discovery.find_available_hosts_and_slots()
        except Exception as e:  # noqa: BLE001  (a user's discovery: said, the last list kept)
            raise DiscoveryError(f"{type(e).__name__}: {e}") from None
        return sorted((str(k), int(v)) for k, v in dict(found).items() if int(v) > 0)

    def close(self):
        pass


def placement_options(node, live_node_ids):
    """Ray options that put an actor on `node`: the node itself when it is a Ray node id, else
    its `node:<name>` resource (a host name of the user's discovery)."""
    if node in live_node_ids:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}
    return {"resources": {f"node:{node}": 0.01}}


def live_node_ids():
    import ray

    return {n["NodeID"] for n in ray.nodes() if n.get("Alive") or n.get("alive")}


def node_words(node):
    """A node id shortened for messages (Ray's are 56 hex digits)."""
    return node[:12] if len(node) == 56 else node

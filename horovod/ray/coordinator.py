"""Upstream's Coordinator (horovod.ray.runner.Coordinator): the registry of where each rank
runs, and each rank's topology from it. RayExecutor orders its ranks with
placement.assign_slots; this is the same rule for code that drives the registry itself."""

import collections


class Coordinator:
    """register(hostname, node_id, world_rank) per rank, then finalize_registration():
    {rank: {"HOROVOD_RANK": ..., "HOROVOD_LOCAL_RANK": ..., "HOROVOD_CROSS_SIZE": ..., ...}}.
    A node's ranks get local ranks in rank order; a rank's cross rank is its node's index
    among the nodes that have its local rank, as under mpirun --map-by slot."""

    def __init__(self, settings):
        self.settings = settings
        self.node_id_by_rank = {}
        self.hostname_by_rank = {}

    @property
    def world_size(self):
        return len(self.node_id_by_rank)

    @property
    def hostnames(self):
        return set(self.hostname_by_rank.values())

    @property
    def node_id_string(self):
        counts = collections.Counter(self.node_id_by_rank.values())
        return ",".join(f"{node}:{n}" for node, n in counts.items())

    def register(self, hostname, node_id, world_rank):
        self.hostname_by_rank[world_rank] = hostname
        self.node_id_by_rank[world_rank] = node_id

    def finalize_registration(self):
        ranks_of = collections.defaultdict(list)
        for rank in sorted(self.node_id_by_rank):
            ranks_of[self.node_id_by_rank[rank]].append(rank)
        nodes = list(ranks_of)  # in order of their lowest rank
        info = {}
        for node in nodes:
            for local, rank in enumerate(ranks_of[node]):
                peers = [n for n in nodes if len(ranks_of[n]) > local]
                info[rank] = {
                    "HOROVOD_HOSTNAME": str(node),
                    "HOROVOD_RANK": rank,
                    "HOROVOD_SIZE": self.world_size,
                    "HOROVOD_LOCAL_RANK": local,
                    "HOROVOD_LOCAL_SIZE": len(ranks_of[node]),
                    "HOROVOD_CROSS_RANK": peers.index(node),
                    "HOROVOD_CROSS_SIZE": len(peers),
                }
        return info

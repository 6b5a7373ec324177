"""One generation of the elastic Ray executor (horovod/ray/elastic.py): a fresh actor per
worker on the nodes chosen for it, the ranks' variables (the elastic worker protocol's
included: horovod/common/elastic_worker.py), a rendezvous of its own, fn on every rank, and
how it ended: every rank's result, fn's own error, or ranks lost (their actor or node died) or
asking for a relaunch (a peer failed, or the nodes changed at a commit: they exit with
elastic_worker.RELAUNCH_EXIT_CODE after telling the driver why).

Its actors are killed when it ends, whatever the outcome: this engine cannot start twice in one
process, so each world is a new set of processes, as the MPI elastic driver relaunches them.
"""

import dataclasses
import logging
import secrets
import time

from horovod.ray import discovery as ray_discovery
from horovod.ray import placement
from horovod.ray.errors import worker_error
from horovod.ray.worker import BaseHorovodWorker
from horovod.runner import tcp_rank

log = logging.getLogger("horovod.ray")

# After the first rank ended badly, how long the others have to end too (survivors of a lost
# peer see it at once on the TCP transport, or within the stall bound) before they are killed.
GENERATION_GRACE_SECONDS = 15.0


@dataclasses.dataclass
class Outcome:
    results: list = None  # every rank's value, rank order: the job is done
    why: list = dataclasses.field(default_factory=list)  # why it must re-form
    failed_nodes: dict = dataclasses.field(default_factory=dict)  # node -> why (blacklisted)
    # Ranks failed with a lost peer's error, but no peer was lost and none asked for a relaunch
    # (e.g. hvd.init() could not meet the others): the job's own failure unless the nodes
    # changed, as the MPI driver ends a generation that failed on its own.
    own_error: Exception = None


class Generation:
    """Runs `call` (worker.call's argument) on `hosts` ([(node, workers)]) as generation
    `number` of job `job_id`; run() gives an Outcome or raises fn's own error."""

    def __init__(self, executor, number, hosts, call, job_id):
        self.ex = executor
        self.number = number
        self.hosts = hosts
        self.call = call
        self.job_id = job_id
        self.workers, self.slots, self.nodes = [], [], []  # rank order
        self.server = None

    def run(self):
        try:
            lost = self._start_actors()
            if lost is not None:
                return lost
            refs = [w.call.remote(self.call) for w in self.workers]
            return self._wait(refs)
        finally:
            self.end()

    def end(self):
        """Stops the rendezvous and kills every actor of the generation (idempotent)."""
        import ray

        if self.server is not None:
            self.server.stop()
            self.server = None
        for worker in self.workers:
            try:
                ray.kill(worker, no_restart=True)
            except Exception as e:  # noqa: BLE001  (already gone)
                log.debug("horovod.ray: kill: %s", e)
        self.workers = []

    # -- the actors ---------------------------------------------------------------------------

    def _start_actors(self):
        """Actors on their nodes, ranks ordered by node, variables set, executables made.
        Returns None, or an Outcome naming the nodes where the actors did not start."""
        import ray

        ex = self.ex
        remote_cls = ray.remote(BaseHorovodWorker)
        live = ray_discovery.live_node_ids()
        actors, keys = [], []
        for node, count in self.hosts:
            options = {
                "num_cpus": ex.cpus_per_worker,
                **ray_discovery.placement_options(node, live),
            }
            if ex.use_gpu:
                options["num_gpus"] = ex.gpus_per_worker or 1
            for _ in range(count):
                actors.append(remote_cls.options(**options).remote())
                keys.append(node)
        self.workers = actors  # end() kills them whatever happens next
        bound = ex.start_bound()
        infos, unstarted = self._node_infos(actors, keys, bound)
        if unstarted:
            why = f"the workers on {len(unstarted)} node(s) did not start within {bound:g} s"
            return Outcome(why=[why], failed_nodes=unstarted)
        self.slots, order = placement.assign_slots(infos)
        self.workers = [actors[i] for i in order]
        self.nodes = [keys[i] for i in order]
        try:
            envs = self._rank_envs()
            ray.get(
                [w.update_env_vars.remote(env) for w, env in zip(self.workers, envs)],
                timeout=bound,
            )
        except Exception as e:  # noqa: BLE001  (an actor lost while starting: a reset)
            return Outcome(why=[f"the workers were lost while starting: {type(e).__name__}: {e}"])
        args = ex.start_args
        made = [
            w.make_executable.remote(args.executable_cls, args.executable_args,
                                     args.executable_kwargs) for w in self.workers
        ]  # fmt: skip
        outcome = self._wait(made)
        return None if outcome.results is not None else outcome

    @staticmethod
    def _node_infos(actors, keys, bound):
        """Each actor's node_info within `bound` seconds, and {node: why} for the nodes of those
        that did not give it (their node went away, or Ray could not place them)."""
        import ray

        refs = [a.node_info.remote() for a in actors]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=bound)
        infos, unstarted = [], {}
        for ref, node in zip(refs, keys):
            if ref not in ready:
                unstarted[node] = f"its worker did not start within {bound:g} s"
                continue
            try:
                infos.append(ray.get(ref))
            except Exception as e:  # noqa: BLE001  (the actor died starting)
                unstarted[node] = f"its worker died starting: {type(e).__name__}"
        return infos, unstarted

    def _rank_envs(self):
        """Each rank's variables: extra_env_vars, the rank's place, the rendezvous, the
        elastic worker protocol (job, generation, the driver's channel, the commit store)."""
        import ray

        from horovod.runner.rendezvous import RendezvousServer

        ex = self.ex
        size = len(self.slots)
        addr = ray.util.get_node_ip_address()
        secret = secrets.token_hex(32)
        self.server = RendezvousServer()
        port = self.server.start(addr, size, secret, float(ex.setting("timeout_s", 30)))
        envs = []
        for slot in self.slots:
            env = dict(ex.start_args.extra_env_vars)
            env.update(
                tcp_rank.rank_variables(slot._replace(host=slot.label), size, (addr, port),
                                        ex.iface)
            )  # fmt: skip
            env.update(
                HOROVOD_SECRET_KEY=secret,
                HOROVOD_RENDEZVOUS_TIMEOUT=str(ex.setting("timeout_s", 30)),
                HOROVOD_ELASTIC="1",
                HOROVOD_ELASTIC_JOB_ID=self.job_id,
                HOROVOD_ELASTIC_GENERATION=str(self.number),
                HOROVOD_ELASTIC_DRIVER=f"{addr}:{ex.channel.server.server_address[1]}",
                HOROVOD_ELASTIC_TOKEN=ex.token,
            )
            # One store per Ray node: nodes sharing a machine keep their commits apart, as
            # separate hosts would.
            env.setdefault("HOROVOD_ELASTIC_STORE", ex.store_of(slot.node_id))
            ex.stores.add((slot.node_id, env["HOROVOD_ELASTIC_STORE"], self.job_id))
            envs.append(env)
        if ex.use_gpu:
            ids = ray.get([w.get_gpu_ids.remote() for w in self.workers], timeout=ex.start_bound())
            for env, devices in zip(envs, placement.visible_devices(self.slots, ids)):
                env["CUDA_VISIBLE_DEVICES"] = devices
        return envs

    # -- the outcome --------------------------------------------------------------------------

    def _wait(self, refs):
        """Every rank's value, or why the generation ended: after the first rank ended badly
        the others get GENERATION_GRACE_SECONDS, then are killed."""
        import ray

        pending = {ref: rank for rank, ref in enumerate(refs)}
        values, own, died, first = [None] * len(refs), [], [], None
        while pending and (first is None or time.monotonic() < first + GENERATION_GRACE_SECONDS):
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for ref in ready:
                rank = pending.pop(ref)
                try:
                    record = ray.get(ref)
                except Exception as e:  # noqa: BLE001  (the actor died: os._exit, killed, node)
                    died.append((rank, e))
                    first = first or time.monotonic()
                    continue
                if record["ok"]:
                    values[rank] = record["value"]
                elif record.get("collateral"):  # a peer left outside hvd.elastic.run
                    died.append((rank, record))
                    first = first or time.monotonic()
                else:
                    own.append((rank, record))
                    first = first or time.monotonic()
        if own:
            rank, record = own[0]
            self.end()
            raise worker_error(
                record, self.slots[rank], len(self.slots), "run", sorted(pending.values())
            )
        if not died:
            return Outcome(results=values)
        return self._lost(died, sorted(pending.values()))

    def _lost(self, died, stopped):
        """The Outcome of a generation whose ranks died or asked for a relaunch: the nodes of
        ranks that died without asking (killed, their node gone) are failed nodes."""
        asked = self.ex.relaunch_requests(self.number)
        why, failed = [], {}
        for rank, error in died:
            if rank in asked:
                continue
            slot = self.slots[rank]
            what = error.get("type") if isinstance(error, dict) else type(error).__name__
            words = f"rank {rank} on node {slot.label} (Ray node id {slot.node_id}) ended: {what}"
            why.append(words)
            if not isinstance(error, dict):
                failed[self.nodes[rank]] = words
        if asked:
            rank, reason = sorted(asked.items())[0]
            why.append(f"{len(asked)} rank(s) asked for a relaunch (rank {rank}: {reason})")
        if stopped:
            why.append(f"rank(s) {stopped} were stopped after {GENERATION_GRACE_SECONDS:g} s")
        own = None
        if not asked and all(isinstance(error, dict) for _, error in died):
            rank, record = died[0]
            own = worker_error(record, self.slots[rank], len(self.slots), "run", stopped)
        return Outcome(why=why, failed_nodes=failed, own_error=own)

"""horovod.ray.RayExecutor: a static Horovod job on Ray, one rank per actor (upstream
0.28.1's API), over the engine's TCP transport.

start() reserves the workers' resources in a placement group (horovod/ray/placement.py), makes
one actor per worker (horovod/ray/worker.py), orders the ranks by node and gives each actor its
rank's variables, as `horovodrun --gloo` gives them. The driver serves the rendezvous (the
engine's RendezvousServer, a fresh secret each round): a round begins whenever the actors'
engines are all fresh, so `hvd.init()` inside fn needs no argument and meets the other ranks.

One engine per actor: it starts at the first `hvd.init()` and stays up for the next runs (a
later `hvd.init()` is a no-op), as upstream, whose fn runs again and again in the same actors.
This engine cannot start twice in one process, so when a run failed, or fn shut the engine
down, the next call replaces every actor (same placement group, fresh processes, the
executable made again) and the ranks meet anew.
"""

import dataclasses
import logging
import secrets
import time

from horovod.ray import placement
from horovod.ray.coordinator import Coordinator  # noqa: F401  (upstream's name, from here)
from horovod.ray.errors import RayExecutorStateError, worker_error
from horovod.ray.worker import ENGINE_FRESH, ENGINE_RUNNING, BaseHorovodWorker, StartArgs
from horovod.runner import tcp_rank

log = logging.getLogger("horovod.ray")

# After the first worker failed, how long the others have to end their call (a peer blocked in
# a collective fails at once: the failed rank shut its engine down) before they are killed.
FAILURE_GRACE_SECONDS = 10.0


@dataclasses.dataclass
class RaySettings:
    """What RayExecutor.create_settings makes (upstream's MiniSettings). timeout_s: seconds
    for the ranks to meet at hvd.init() (the rendezvous) and for the actors to start."""

    timeout_s: float = 30
    ssh_identity_file: str = None  # accepted for upstream's signature; no ssh is used
    placement_group_timeout_s: float = 100
    nics: object = None
    verbose: int = 1


MiniSettings = RaySettings  # upstream's name


class RayExecutor:
    """A static Horovod job on Ray: `num_workers` ranks (PACK placement), or `num_hosts` x
    `num_workers_per_host` (one bundle per host, STRICT_SPREAD). Elastic arguments
    (min_workers, max_workers, reset_limit, cooldown_range) are refused: not in this release."""

    @classmethod
    def create_settings(
        cls,
        timeout_s=30,
        ssh_identity_file=None,
        ssh_str=None,
        placement_group_timeout_s=100,
        nics=None,
    ):
        """Settings for RayExecutor (upstream's signature). ssh_identity_file and ssh_str are
        accepted and unused: the ranks talk over the TCP transport, nothing logs in by ssh.
        nics: one network interface for the ranks' links (HOROVOD_GLOO_IFACE)."""
        del ssh_str  # upstream wrote it to ssh_identity_file for its ssh checks
        return RaySettings(
            timeout_s=timeout_s,
            ssh_identity_file=ssh_identity_file,
            placement_group_timeout_s=placement_group_timeout_s,
            nics=nics,
        )

    def __init__(
        self,
        settings,
        num_workers=None,
        num_hosts=None,
        num_workers_per_host=1,
        cpus_per_worker=1,
        use_gpu=False,
        gpus_per_worker=None,
        use_current_placement_group=True,
        min_workers=None,
        max_workers=None,
        reset_limit=None,
        cooldown_range=None,
        elastic_timeout=600,
        override_discovery=True,
    ):
        self._elastic = None
        if max_workers is not None and min_workers is None:
            raise ValueError(
                "RayExecutor: max_workers without min_workers: an elastic job needs a positive "
                "min_workers"
            )
        if min_workers is not None and (num_workers is not None or num_hosts is not None):
            raise ValueError(
                "Both `min_workers` and `num_workers` provided. Only one of the above is "
                "allowed as workloads cannot be elastic and non-elastic (num_hosts neither)."
            )
        self.settings = settings
        self.iface = tcp_rank.single_interface(getattr(settings, "nics", None), "RayExecutor")
        if min_workers is not None:
            from horovod.ray.elastic import ElasticExecutor

            self._elastic = ElasticExecutor(
                settings, min_workers, max_workers, reset_limit, cooldown_range,
                elastic_timeout, cpus_per_worker, use_gpu, gpus_per_worker,
                override_discovery, self.iface,
            )  # fmt: skip
            return
        if num_workers is not None and num_hosts is not None:
            raise ValueError("RayExecutor: give num_workers or num_hosts, not both")
        if num_workers is None and num_hosts is None:
            raise ValueError(
                "RayExecutor: give num_workers, or num_hosts (x num_workers_per_host), or "
                "min_workers (elastic)"
            )
        for name, value in (("num_workers", num_workers), ("num_hosts", num_hosts),
                            ("num_workers_per_host", num_workers_per_host)):  # fmt: skip
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"RayExecutor: {name} must be a positive integer, not {value!r}")
        self.num_workers = num_workers
        self.num_hosts = num_hosts
        self.num_workers_per_host = num_workers_per_host
        self.cpus_per_worker = cpus_per_worker
        self.use_gpu = use_gpu
        self.gpus_per_worker = gpus_per_worker
        self.use_current_placement_group = use_current_placement_group
        self._state = "new"  # "started", "shut down"
        self._placement = None
        self._workers = []  # actors in rank order
        self._slots = []
        self._stale = False  # the actors must be replaced before the next call
        self._server = None
        self._start_args = None

    @property
    def size(self):
        return self.num_workers or self.num_hosts * self.num_workers_per_host

    def _setting(self, name, default):
        value = getattr(self.settings, name, None)
        return default if value is None else value

    # -- life cycle ------------------------------------------------------------------------

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):  # fmt: skip
        """Reserves the workers' resources, starts one actor per rank (ranks ordered by node),
        gives each its rank's variables (and extra_env_vars), and makes
        executable_cls(*executable_args, **executable_kwargs) in each. Raises
        PlacementTimeoutError when the cluster cannot place them in placement_group_timeout_s."""
        if self._elastic is not None:
            return self._elastic.start(executable_cls, executable_args, executable_kwargs,
                                       extra_env_vars)  # fmt: skip
        if self._state == "started":
            raise RayExecutorStateError("RayExecutor.start: already started; shutdown() first")
        import ray

        if not ray.is_initialized():
            ray.init()
        self._start_args = StartArgs(
            executable_cls, executable_args, executable_kwargs, dict(extra_env_vars or {})
        )
        per_worker = placement.worker_resources(
            self.cpus_per_worker, self.use_gpu, self.gpus_per_worker
        )
        self._placement = placement.reserve(
            per_worker, self.num_workers, self.num_hosts, self.num_workers_per_host,
            self.use_current_placement_group, self._setting("placement_group_timeout_s", 100),
        )  # fmt: skip
        self._state = "started"
        try:
            self._start_workers()
        except BaseException:
            self.shutdown()
            raise

    def shutdown(self):
        """Ends the actors (their processes), removes the placement group this executor made
        and stops the rendezvous. Idempotent; run() afterwards raises until start()."""
        if self._elastic is not None:
            return self._elastic.shutdown()
        if self._state != "started":
            return
        self._stop_rendezvous()
        self._kill_workers()
        if self._placement is not None:
            self._placement.remove()
            self._placement = None
        self._state = "shut down"

    def _start_workers(self):
        """Actors for every rank in the placement, told their rank's variables, executables
        made; the first rendezvous round (an executable may call hvd.init())."""
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        remote_cls = ray.remote(BaseHorovodWorker)
        actors = []
        for bundle in self._placement.bundle_of_worker:
            strategy = PlacementGroupSchedulingStrategy(
                self._placement.group, bundle, placement_group_capture_child_tasks=False
            )
            options = {"num_cpus": self.cpus_per_worker, "scheduling_strategy": strategy}
            if self.use_gpu:
                options["num_gpus"] = self.gpus_per_worker or 1
            actors.append(remote_cls.options(**options).remote())
        infos = self._bounded_get([a.node_info.remote() for a in actors], "start the actors")
        self._slots, order = placement.assign_slots(infos)
        self._workers = [actors[i] for i in order]
        self._stale = False
        envs = [self._rank_env(slot) for slot in self._slots]
        if self.use_gpu:
            self._share_node_gpus(envs)
        self._bounded_get(
            [w.update_env_vars.remote(env) for w, env in zip(self._workers, envs)],
            "set the ranks' variables",
        )
        self._begin_rendezvous()
        args = self._start_args
        self._collect(
            [w.make_executable.remote(args.executable_cls, args.executable_args,
                                      args.executable_kwargs) for w in self._workers],
            "start_executable",
        )  # fmt: skip

    def _rank_env(self, slot):
        env = dict(self._start_args.extra_env_vars)
        # HOROVOD_HOSTNAME is the node's label; the rendezvous is set per round.
        env.update(
            tcp_rank.rank_variables(slot._replace(host=slot.label), self.size, None, self.iface)
        )
        env["HOROVOD_RENDEZVOUS_TIMEOUT"] = str(self._setting("timeout_s", 30))
        return env

    def _share_node_gpus(self, envs):
        """Each rank sees its node's GPUs with its own at index local_rank
        (placement.visible_devices): Ray's assignment, pinned the way horovodrun pins."""
        ids = self._bounded_get([w.get_gpu_ids.remote() for w in self._workers], "read GPU ids")
        for env, devices in zip(envs, placement.visible_devices(self._slots, ids)):
            env["CUDA_VISIBLE_DEVICES"] = devices

    def _kill_workers(self):
        import ray

        for worker in self._workers:
            try:
                ray.kill(worker, no_restart=True)
            except Exception as e:  # already gone
                log.debug("horovod.ray: kill: %s", e)
        self._workers = []

    def _replace_workers(self):
        log.info("horovod.ray: replacing the %d workers (fresh engines)", self.size)
        self._stop_rendezvous()
        self._kill_workers()
        self._start_workers()

    # -- the rendezvous --------------------------------------------------------------------

    def _begin_rendezvous(self):
        """A new rendezvous round: a server for `size` ranks with a fresh secret, its address
        in every actor's environment (read by the engine at hvd.init())."""
        import ray

        from horovod.runner.rendezvous import RendezvousServer

        self._stop_rendezvous()
        addr = ray.util.get_node_ip_address()
        secret = secrets.token_hex(32)
        server = RendezvousServer()
        port = server.start(addr, self.size, secret, float(self._setting("timeout_s", 30)))
        self._server = server
        env = {
            "HOROVOD_GLOO_RENDEZVOUS_ADDR": addr,
            "HOROVOD_GLOO_RENDEZVOUS_PORT": port,
            "HOROVOD_SECRET_KEY": secret,
        }
        if self._setting("verbose", 1) >= 2:
            log.info("horovod.ray: rendezvous for %d ranks at %s:%d", self.size, addr, port)
        self._bounded_get(
            [w.update_env_vars.remote(env) for w in self._workers], "set the rendezvous"
        )

    def _stop_rendezvous(self):
        if self._server is not None:
            self._server.stop()
            self._server = None

    # -- calls -----------------------------------------------------------------------------

    def _prepare(self, what):
        """Before running user code: the executor started, the actors usable, and the ranks
        able to meet (a new round when every engine is fresh; new actors when some ended)."""
        if self._state != "started":
            why = "after shutdown()" if self._state == "shut down" else "before start()"
            raise RayExecutorStateError(f"RayExecutor.{what} called {why}: call start() first")
        import ray

        if self._stale:
            self._replace_workers()
            return
        states = ray.get([w.engine_state.remote() for w in self._workers])
        if all(s == ENGINE_RUNNING for s in states):
            return
        if all(s == ENGINE_FRESH for s in states):
            self._begin_rendezvous()
            return
        self._replace_workers()  # an engine ended (fn shut it down): this process cannot init

    def run(self, fn, args=None, kwargs=None, callbacks=None):
        """fn(*args, **kwargs) on every worker; its results as a list in rank order. Raises
        WorkerFailedError naming the rank, node and host when fn failed on a worker (after the
        others ended their call or were stopped); the next call then gets fresh workers.
        callbacks: accepted and unused, as upstream's static executor."""
        if self._elastic is not None:
            return self._elastic.run_job(_Call(fn, args, kwargs), "run", callbacks)
        warn_callbacks(callbacks)
        return self._collect(self._dispatch("run", _Call(fn, args, kwargs)), "run")

    def run_remote(self, fn, args=None, kwargs=None):
        """fn(*args, **kwargs) on every worker, without waiting: ObjectRefs in rank order."""
        if self._elastic is not None:
            raise NotImplementedError(
                "RayExecutor.run_remote: an elastic job's workers change between generations, "
                "so there are no ObjectRefs to give (as upstream); use run()"
            )
        return self._dispatch("run_remote", _Call(fn, args, kwargs))

    def execute(self, fn, callbacks=None):
        """fn(executable) on every worker (the object start(executable_cls=...) made there);
        the results in rank order."""
        if self._elastic is not None:
            return self._elastic.run_job(fn, "execute", callbacks)
        warn_callbacks(callbacks)
        return self._collect(self._dispatch("execute", fn), "execute")

    def execute_single(self, fn):
        """fn(executable) on the rank 0 worker; its result."""
        if self._elastic is not None:
            raise NotImplementedError(
                "RayExecutor.execute_single: not in elastic mode (as upstream); use execute()"
            )
        return self._collect(self._dispatch("execute_single", fn, ranks=1), "execute_single")[0]

    def _dispatch(self, what, fn, ranks=None):
        """fn on the first `ranks` workers (all by default): records (worker.call) for the
        calls that wait here, plain results (worker.execute, upstream's) for run_remote."""
        self._prepare(what)
        if what == "run_remote":
            return [w.execute.remote(fn) for w in self._workers]
        return [w.call.remote(fn) for w in self._workers[:ranks]]

    def _bounded_get(self, refs, what):
        """ray.get within timeout_s + placement_group_timeout_s (the actors' start included)."""
        import ray

        limit = float(self._setting("timeout_s", 30)) + float(
            self._setting("placement_group_timeout_s", 100)
        )
        try:
            return ray.get(refs, timeout=limit)
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError(
                f"horovod.ray: the workers did not {what} within {limit:g} s"
            ) from None

    def _collect(self, refs, what):
        """The results of refs (one per rank, rank order), or WorkerFailedError for the root
        cause: after the first failure the others get FAILURE_GRACE_SECONDS to end, then are
        killed; either way the actors are replaced before the next call."""
        import ray

        pending = {ref: rank for rank, ref in enumerate(refs)}
        values, failures, deadline = [None] * len(refs), [], None
        try:
            while pending and (deadline is None or time.monotonic() < deadline):
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for ref in ready:
                    rank = pending.pop(ref)
                    try:
                        record = ray.get(ref)
                    except Exception as e:  # the actor died, or its record did not pickle
                        record = {"ok": False, "ray_error": e}
                    if record["ok"]:
                        values[rank] = record["value"]
                    else:
                        failures.append((rank, record))
                        deadline = deadline or time.monotonic() + FAILURE_GRACE_SECONDS
        except BaseException:
            self._stale = True  # e.g. Ctrl-C: the ranks may be mid-collective
            raise
        if not failures:
            return values
        self._stale = True
        self._stop_rendezvous()
        if pending:
            self._kill_workers()
        raise self._failure_error(failures, sorted(pending.values()), what)

    def _failure_error(self, failures, stopped, what):
        """WorkerFailedError for the root cause: a rank that failed by itself rather than with
        a collateral error (a peer left), else one whose actor died (killed, its node gone),
        first by the order the driver heard of them."""

        def key(item):  # fn's own error, then an actor's death, then a peer's collateral
            heard, (_, record) = item
            kind = 2 if record.get("collateral") else 1 if "ray_error" in record else 0
            return (kind, heard)

        _, (rank, record) = min(enumerate(failures), key=key)
        if record.get("collateral") and stopped:
            # Only collateral errors: a rank that never answered (its node killed before Ray
            # noticed) is the likelier cause, so it is the one named.
            why = f"no answer {FAILURE_GRACE_SECONDS:g} s after rank {rank}'s {record['type']}"
            rank, record = stopped[0], {"ray_error": TimeoutError(f"{why}: {record['text']}")}
        return worker_error(record, self._slots[rank], self.size, what, stopped)


class _Call:
    """fn with its arguments, as execute() runs it: the executable is not passed (run)."""

    def __init__(self, fn, args, kwargs):
        self.fn, self.args, self.kwargs = fn, list(args or []), dict(kwargs or {})

    def __call__(self, _executable):
        return self.fn(*self.args, **self.kwargs)


def warn_callbacks(callbacks):
    if callbacks:
        log.warning(
            "horovod.ray: callbacks are not used by the static RayExecutor (as upstream's); "
            "fn's results come back from run()"
        )

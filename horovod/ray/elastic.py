"""The elastic Ray executor: `RayExecutor(settings, min_workers=, max_workers=, ...)`
(upstream's elastic_v2), for a fn that trains with `hvd.elastic.run` and a state.

The job runs as generations, as horovodrun's elastic driver runs it over MPI
(horovod/runner/elastic_driver.py, docs/elastic.md): this engine cannot start twice in one
process, so each world is a fresh set of actors (horovod/ray/generation.py), one per worker
Ray's nodes can hold (RayHostDiscovery: CPUs, and GPUs with use_gpu), between min_workers and
max_workers. The ranks speak the elastic worker protocol (horovod/common/elastic_worker.py):
`state.commit()` writes the commit to the node's store in /dev/shm and rank 0 asks the
driver's channel (elastic_channel.Channel) whether the nodes changed (HostWatch of the MPI
driver, polling Ray's nodes each second); a lost peer or a change makes every rank exit for a
relaunch, and the next generation resumes from the newest commit any node holds. A node whose
actor died without asking for a relaunch is blacklisted (for good, or for a random span in
cooldown_range); the job ends after reset_limit resets, or when fewer than min_workers can be
placed for elastic_timeout seconds.
"""

import logging
import threading
import types
import uuid

from horovod.ray import discovery as ray_discovery
from horovod.ray.errors import RayExecutorStateError, ResetLimitError, TooFewWorkersError
from horovod.ray.generation import Generation
from horovod.ray.worker import StartArgs
from horovod.runner.elastic_blacklist import Blacklist
from horovod.runner.elastic_channel import Channel
from horovod.runner.elastic_driver import HostWatch, _fill

log = logging.getLogger("horovod.ray")

STORE_ROOT = "/dev/shm/horovod-ray"  # + /<node id>/<job id>/slot-<local rank>.commit


def say(text):
    log.warning("horovod.ray: elastic: %s", text)


class ElasticExecutor:
    """What RayExecutor delegates to when given min_workers (see the module docstring)."""

    def __init__(self, settings, min_workers, max_workers=None, reset_limit=None,
                 cooldown_range=None, elastic_timeout=600, cpus_per_worker=1, use_gpu=False,
                 gpus_per_worker=None, override_discovery=True, iface=None):  # fmt: skip
        check_elastic_arguments(min_workers, max_workers, reset_limit, cooldown_range,
                                elastic_timeout)  # fmt: skip
        self.settings = settings
        self.min_workers, self.max_workers = min_workers, max_workers
        self.reset_limit, self.cooldown_range = reset_limit, cooldown_range
        self.elastic_timeout = float(elastic_timeout)
        self.cpus_per_worker, self.use_gpu = cpus_per_worker, use_gpu
        self.gpus_per_worker = gpus_per_worker
        self.iface = iface
        if override_discovery:
            self.discovery = ray_discovery.RayHostDiscovery(use_gpu, cpus_per_worker,
                                                            gpus_per_worker or 1)  # fmt: skip
        else:
            self.discovery = getattr(settings, "discovery", None)
            if not hasattr(self.discovery, "find_available_hosts_and_slots"):
                raise ValueError(
                    "RayExecutor: override_discovery=False needs settings.discovery, an object "
                    "with find_available_hosts_and_slots() -> {host: slots}"
                )
        self.state = "new"
        self.start_args = None
        self.channel = None
        self.token = None
        self.blacklist = Blacklist(tuple(cooldown_range) if cooldown_range else None)
        self._lock = threading.Lock()
        self._requests = []  # the ranks' POSTs to the channel (relaunch requests)
        self._watch = None  # the running job's HostWatch
        self._callbacks = []
        self._generation = None
        self.stores = set()  # (Ray node id, store folder, job id) that may hold commit files

    def setting(self, name, default):
        value = getattr(self.settings, name, None)
        return default if value is None else value

    def start_bound(self):
        """Seconds for a generation's actors to start and answer."""
        return max(30.0, float(self.setting("timeout_s", 30)))

    def store_of(self, node_id):
        return f"{STORE_ROOT}/{ray_discovery.node_words(node_id)}"

    # -- life cycle -----------------------------------------------------------------------------

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):  # fmt: skip
        """Starts the driver's channel and waits (up to elastic_timeout) until Ray's nodes can
        hold min_workers workers; the actors start with each run()."""
        import secrets

        import ray

        if self.state == "started":
            raise RayExecutorStateError("RayExecutor.start: already started; shutdown() first")
        if not ray.is_initialized():
            ray.init()
        self.start_args = StartArgs(executable_cls, executable_args, executable_kwargs,
                                     dict(extra_env_vars or {}))  # fmt: skip
        self.token = secrets.token_hex(16)
        self.channel = Channel(self.token, self._answer, self._record)
        self.channel.start()
        self.state = "started"
        try:
            self._wait_for_slots(self._new_watch())
        except BaseException:
            self.shutdown()
            raise

    def shutdown(self):
        """Stops the channel, ends a generation still running, removes the commit files."""
        if self.state != "started":
            return
        if self._generation is not None:
            self._generation.end()
        self.channel.shutdown()
        self._remove_commits()
        self.state = "shut down"

    def _require(self, what):
        if self.state != "started":
            why = "after shutdown()" if self.state == "shut down" else "before start()"
            raise RayExecutorStateError(f"RayExecutor.{what} called {why}: call start() first")

    # -- the channel ----------------------------------------------------------------------------

    def _answer(self, generation):
        watch = self._watch
        if watch is None:
            return {"changed": False, "generation": -1}
        return watch.answer(generation)

    def _record(self, body):
        """A rank's POST: a relaunch request, or what it logged (ray_logger.log) for the
        callbacks of the running job."""
        with self._lock:
            if "log" in body:
                for callback in self._callbacks:
                    callback(body["log"])
                return
            self._requests.append(body)

    def relaunch_requests(self, generation):
        """{rank: reason} of the ranks of `generation` that asked for a relaunch."""
        with self._lock:
            bodies = list(self._requests)
        return {
            int(b.get("rank", -1)): str(b.get("reason", "?"))
            for b in bodies
            if str(b.get("generation")) == str(generation)
        }

    # -- the job --------------------------------------------------------------------------------

    def run_job(self, call, what, callbacks=None):
        """call on every rank of each generation until one finishes: its results in rank
        order. Raises fn's own error (WorkerFailedError), TooFewWorkersError, ResetLimitError.
        callbacks get what the ranks log with horovod.ray.ray_logger.log."""
        self._require(what)
        self._callbacks = list(callbacks or [])
        job_id = uuid.uuid4().hex[:12]  # a run's commits are its own: the next run starts fresh
        watch = self._watch = self._new_watch()
        watcher = threading.Thread(target=watch.watch, daemon=True, name="horovod-ray-nodes")
        watcher.start()
        resets, number = 0, 0
        try:
            while True:
                if self.state != "started":  # shutdown() from another thread ended it
                    raise RayExecutorStateError(f"RayExecutor.{what}: shut down while running")
                found = self._wait_for_slots(watch)
                total = sum(s for _, s in found)
                hosts = _fill(found, min(total, self.max_workers or total))
                size = sum(n for _, n in hosts)
                watch.generation = number
                watch.begin(hosts, size)
                nodes = ", ".join(f"{ray_discovery.node_words(h)}:{n}" for h, n in hosts)
                say(f"generation {number}: {size} worker(s) on {nodes}")
                self._generation = Generation(self, number, hosts, call, job_id)
                outcome = self._generation.run()
                if outcome.results is not None:
                    say(f"generation {number} finished; {size} result(s)")
                    return outcome.results
                resets += 1
                self._end_generation(watch, number, outcome, resets)
                number += 1
        finally:
            watch.close()
            self._watch = self._generation = None
            self._remove_commits()

    def _end_generation(self, watch, number, outcome, resets):
        """Says why generation `number` ended, blacklists its failed nodes, and raises
        ResetLimitError past reset_limit."""
        why = list(outcome.why)
        changed = watch.end()
        if changed:
            why.append("the nodes changed")
        elif outcome.own_error is not None:
            say(
                f"generation {number} failed without a lost peer or a node change: {'; '.join(why)}"
            )
            raise outcome.own_error
        for node, reason in outcome.failed_nodes.items():
            span = self.blacklist.add(node, f"lost in generation {number}: {reason}")
            why.append(
                f"node {ray_discovery.node_words(node)} blacklisted "
                + ("for the rest of the job" if span == float("inf") else f"for {span:.0f} s")
            )
        limit = f" of {self.reset_limit}" if self.reset_limit is not None else ""
        say(f"generation {number} ended: {'; '.join(why)}; reset {resets}{limit}")
        if self.reset_limit is not None and resets > self.reset_limit:
            raise ResetLimitError(
                f"horovod.ray: elastic: reset {resets} is over reset_limit={self.reset_limit}; "
                f"ending the job (generation {number} ended: {'; '.join(why)})"
            )

    def _new_watch(self):
        """The MPI driver's HostWatch over Ray's nodes (its discovery replaced)."""
        args = types.SimpleNamespace(
            host_discovery_script=None, slots_per_host=None, min_np=self.min_workers,
            max_np=self.max_workers, elastic_timeout=self.elastic_timeout,
        )  # fmt: skip
        watch = HostWatch(args, self.blacklist)
        watch.discovery = ray_discovery.SlotsOf(self.discovery)
        return watch

    def _wait_for_slots(self, watch):
        """The usable nodes once they hold min_workers workers; TooFewWorkersError after
        elastic_timeout otherwise."""
        per = f"{self.cpus_per_worker} CPU" + (
            f", {self.gpus_per_worker or 1} GPU" if self.use_gpu else ""
        )
        found, slots, error = watch.wait_until(
            self.min_workers,
            self.elastic_timeout,
            lambda slots, _: say(
                f"waiting up to {self.elastic_timeout:g} s for {self.min_workers} "
                f"worker(s) of {per}; the nodes hold {slots}"
            ),
            interval=0.5,
        )
        if slots >= self.min_workers:
            return found
        have = ", ".join(f"{ray_discovery.node_words(h)}:{s}" for h, s in found) or "none"
        raise TooFewWorkersError(
            f"horovod.ray: elastic: needed {self.min_workers} worker(s) (min_workers) "
            f"of {per} each, but for {self.elastic_timeout:g} s (elastic_timeout) "
            f"Ray's nodes could hold {slots} (node:workers {have}); blacklisted: "
            f"{self.blacklist.describe()}" + (f"; discovery: {error}" if error else "")
        )

    def _remove_commits(self):
        """Deletes the commit files the runs left: a task on each node still there (bounded),
        and here for the nodes gone (a Ray node that shared this machine left its store here;
        elsewhere the folder is not here and nothing happens)."""
        import ray

        stores, self.stores = self.stores, set()
        live = ray_discovery.live_node_ids()
        refs = []
        for node, store, job_id in stores:
            if node not in live:
                _remove_store(store, job_id)
                continue
            task = ray.remote(num_cpus=0)(_remove_store)
            options = ray_discovery.placement_options(node, live)
            refs.append(task.options(**options).remote(store, job_id))
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=10)


def _remove_store(store, job_id):
    """On a node: the store's folder of job_id; and, when the store is this module's
    default, the store and STORE_ROOT once empty (never a folder of the user's)."""
    import os
    import shutil

    shutil.rmtree(os.path.join(store, job_id), ignore_errors=True)
    if os.path.dirname(store) != STORE_ROOT:
        return
    for folder in (store, STORE_ROOT):
        try:
            os.rmdir(folder)
        except OSError:
            break  # another job's files are in it


def check_elastic_arguments(min_workers, max_workers, reset_limit, cooldown_range, timeout):
    """ValueError naming the argument that is wrong."""
    if not isinstance(min_workers, int) or min_workers < 1:
        raise ValueError(
            f"RayExecutor: min_workers must be a positive integer, not {min_workers!r}"
        )
    if max_workers is not None and (not isinstance(max_workers, int) or max_workers < min_workers):
        raise ValueError(
            f"RayExecutor: max_workers must be an integer >= min_workers ({min_workers}), "
            f"not {max_workers!r}"
        )
    if reset_limit is not None and (not isinstance(reset_limit, int) or reset_limit < 0):
        raise ValueError(f"RayExecutor: reset_limit must be an integer >= 0, not {reset_limit!r}")
    if cooldown_range is not None:
        low, high = tuple(cooldown_range)
        if not 0 <= low <= high:
            raise ValueError(
                f"RayExecutor: cooldown_range must be (low, high) seconds with 0 <= low <= "
                f"high, not {cooldown_range!r}"
            )
    if not timeout or timeout <= 0:
        raise ValueError(f"RayExecutor: elastic_timeout must be positive seconds, not {timeout!r}")

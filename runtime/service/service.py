"""A running service: the durable queue, the live cluster, the dispatcher and the metrics
(:mod:`runtime.service.metrics`).

Start-up order (``readyz`` answers 200 only after it): open the queue, put back every task that
was running when the last process died (:meth:`TaskStore.recover`), start the node agents,
start dispatching. Nothing accepted is ever dropped: a crash between acceptance and completion
leaves the task queued or running in the database, and the next process runs it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from rlsched.errors import InputError
from rlsched.overload import TICK_S
from rlsched.policies.registry import AUTO, describe_auto
from rlsched.scheduler import TwoStageScheduler
from rlsched.version import package_version
from rlsched.view_guard import guarded_view
from runtime.cluster.backend import ClusterBackend, DeviceReport
from runtime.cluster.config import LiveClusterSpec, default_live_cluster
from runtime.cluster.config_io import load_live_cluster
from runtime.service.admin_changes import AdminKeeper
from runtime.service.cluster_backend import make_cluster
from runtime.service.config import ServiceConfig, Tenant
from runtime.service.dispatcher import Dispatcher
from runtime.service.learning import Learning
from runtime.service.log_format import set_format
from runtime.service.metrics import ServiceMetrics
from runtime.service.models import ModelVersion, build_scheduler
from runtime.service.nodes import NodeAdmin, UnknownNode
from runtime.service.promotion import Promotion
from runtime.service.reload import Reloader, ReloadRefused
from runtime.service.retention import Retention
from runtime.service.store import STATES, TaskStore

log = logging.getLogger(__name__)
#: Seconds between feedback ticks (stream feedback, overload check).
#: Ticks between two looks for Ray nodes that joined.
DISCOVER_EVERY = 8
#: Ticks between two checkpoints of the queue's WAL (:meth:`TaskStore.checkpoint_wal`).
CHECKPOINT_WAL_EVERY = 4
#: Ticks between two removals of finished tasks past the retention (every 2 s: with nothing due
#: a call is one indexed read, a few microseconds).
PRUNE_EVERY = 8
#: An idle queue is probed with a small write after this long without one, so that ``readyz``
#: turns 503 when its file stops taking writes before a client's write finds out.
PROBE_IDLE_S = 5.0


class Service:
    """The queue, the cluster and the dispatcher of one ``rlsched serve`` process.

    :param config: the service's configuration.
    :param cluster: a cluster backend (default: :class:`LocalCluster` on the config's cluster).
    :param scheduler: the scheduler (default: the config's).
    :param store: the queue, already open (default: opened here, which takes its lock).
    :raises DatabaseInUse: another service holds the queue file.
    """

    def __init__(
        self,
        config: ServiceConfig,
        cluster: ClusterBackend | None = None,
        scheduler: TwoStageScheduler | None = None,
        store: TaskStore | None = None,
    ) -> None:
        self.config = config
        self.store = store or TaskStore(config.db, store_owner(config))
        try:
            self._build(config, cluster, scheduler)
        except BaseException:
            if store is None:  # the queue's lock is ours: a service that cannot start frees it
                self.store.close()
            raise
        self.metrics = ServiceMetrics()
        self.retention = Retention(self.store, config.finished_retention_s, self.metrics.pruned.inc)
        self.ready = threading.Event()
        self._stopping = threading.Event()
        self.recovered = 0
        self.dispatcher: Dispatcher | None = None
        self.nodes: NodeAdmin | None = None
        #: Re-reads the config on ``SIGHUP`` and ``POST /v1/admin/reload`` (set by ``serve``).
        self.reloader: Reloader | None = None
        self._reload_wanted = threading.Event()
        #: An admin's drains and scheduler switch, kept in the queue file.
        self.admin = AdminKeeper(self.store)

    def _build(
        self, config: ServiceConfig, cluster: ClusterBackend | None, scheduler: TwoStageScheduler | None
    ) -> None:
        """The scheduler, the cluster and what learns (any of them may refuse the config)."""
        spec: LiveClusterSpec = (
            default_live_cluster() if config.cluster is None else load_live_cluster(config.cluster)
        )
        versions: list = []
        if scheduler is None:
            scheduler, versions = build_scheduler(
                config.scheduler,
                config.selector_model,
                config.placer_model,
                config.source,
                config.active_profiling,
                config.prediction_fallback,
                config.recogniser_model,
            )
        self.scheduler = scheduler
        self.cluster = cluster or make_cluster(config, spec)
        self.learning = Learning(config, self.cluster, versions)
        self.promotion = Promotion(config.canary, versions, self._promote, self._promotion_event)
        if config.selector_learning:
            self.learning.selector = self._selector_learner(versions)

    def start(self) -> None:
        """Recover the queue, start the agents and the dispatcher; then ready."""
        self.recovered = self.store.recover()
        log.log(
            logging.WARNING if self.recovered else logging.INFO,
            "rlsched serve: queue recovered: %d tasks that were running when the last process stopped "
            "run again",
            self.recovered,
        )
        self.scheduler = (
            self.admin.restore_switch(self.config.scheduler, self.scheduler_for) or self.scheduler
        )
        sched = self.scheduler
        with self.cluster.lock:
            sched.reset(self.cluster.view, 0)
        self.learning.install(sched, started=False)
        self.dispatcher = Dispatcher(self.store, self.cluster, sched, self.config.tenants, self.metrics.event)
        self.dispatcher.promotion = self.promotion
        if self.learning.selector is not None:
            self.dispatcher.recorder = self.learning.selector.record
            self.learning.selector.start()
        self.nodes = NodeAdmin(self.cluster, self.dispatcher)
        closed = self.dispatcher.closed
        self.nodes.on_join = lambda name, row: self.admin.joined(name, row, closed)
        if self.admin.changes.drained:
            self.admin.restore_drains(self.nodes.live_index, self.dispatcher.closed)
            self._keep_drains()
        self.dispatcher.start()
        self._feedback = threading.Thread(target=self._tick, name="rlsched-feedback", daemon=True)
        self._feedback.start()
        self.ready.set()

    def _keep_drains(self) -> bool:
        """Keep the names of the nodes drained now (admin lock held); whether the file took them."""
        assert self.dispatcher is not None
        names = self.cluster.spec.nodes
        return self.admin.drained(names[i].name for i in self.dispatcher.closed)

    def drain_node(self, name: str, on: bool = True) -> dict[str, Any]:
        """An admin's drain (``on``) or resume of node ``name``, kept across restarts.

        :raises UnknownNode: no live node of that name (and, for a resume, no drain waiting
            for one to join).
        """
        assert self.nodes is not None
        with self.admin.lock:
            try:
                i: int | None = self.nodes.drain(name, on)
            except UnknownNode:
                if on or not self.admin.forget_pending(name):
                    raise
                i = None  # a drain that waited for the node to join, forgotten
            return {"name": name, "index": i, "draining": on, "kept": self._keep_drains()}

    def remove_node(self, name: str) -> dict[str, Any]:
        """An admin's removal of node ``name`` (a drain of it is forgotten).

        :raises UnknownNode: no live node of that name.
        """
        assert self.nodes is not None
        with self.admin.lock:
            held = self.nodes.remove(name)
            self._keep_drains()
        return {"name": name, "requeued": held}

    def _selector_learner(self, versions: list[ModelVersion]) -> Any:
        """The LDWP learner (``selector_learning``); a network it had promoted before a restart
        is the incumbent again.

        :raises InputError: the scheduler's selector is not ``ldwp``.
        """
        from rlsched.policies import ldwp_from_network
        from runtime.service.selector_learning import SelectorLearning, weights_sha256

        sel, c = self.scheduler.selector, self.config
        if getattr(sel, "name", None) != "ldwp" or getattr(sel, "net", None) is None:
            raise InputError(c.source, "selector_learning", "a scheduler whose selector is ldwp", c.scheduler)
        origin = next(v.sha256 for v in versions if v.role == "selector")
        learner = SelectorLearning(
            sel, origin, self.promotion, self.config.selector_candidate_updates, self.learning.learned
        )
        if learner.promoted is not None:
            where = str(self.learning.state.folder)
            self.scheduler = TwoStageScheduler(
                ldwp_from_network(learner.promoted, learner.meta, where),  # type: ignore[arg-type]
                self.scheduler.placer,
            )
            versions[:] = [v for v in versions if v.role != "selector"]
            versions.insert(0, ModelVersion("selector", "ldwp", where, weights_sha256(learner.promoted)))
        return learner

    def metrics_text(self) -> tuple[bytes, str]:
        """``/metrics``: the Prometheus text and its content type, gauges refreshed now."""
        return self.metrics.render(
            self.store.counts(),
            [t.name for t in self.config.tenants],
            self.learning.describe(),
            self.promotion.canary is not None,
            self.cluster if self.ready.is_set() else None,
            self.dispatcher.closed if self.dispatcher is not None else set(),
        )

    def apply_config(self, config: ServiceConfig) -> None:
        """Make ``config`` the running one (a reload: only the keys of
        :data:`~runtime.service.reload.RELOADABLE` differ from the running config)."""
        if self.dispatcher is not None:
            self.dispatcher.set_tenants(config.tenants)
        self.retention.retention_s = config.finished_retention_s
        if config.log_level != self.config.log_level:
            logging.getLogger("runtime").setLevel(config.log_level.upper())
        if config.log_format != self.config.log_format:
            set_format(config.log_format)
        self.config = config  # authentication, admission and the feedback tick read it each time

    def tenant_for(self, token: str) -> Tenant | None:
        """The tenant whose bearer token this is, under the config now in effect."""
        return self.config.tenant_for(token)

    def request_reload(self) -> None:
        """Ask the feedback thread to reload the config (safe in a signal handler: it only sets
        a flag, where the reload itself takes locks the interrupted thread may hold)."""
        self._reload_wanted.set()

    def _reload(self) -> None:
        if self.reloader is None:
            log.warning("rlsched serve: SIGHUP ignored: this service was not started from a config file")
            return
        try:
            log.info("%s", self.reloader.reload().text())
        except ReloadRefused as e:
            log.error("rlsched serve: reload refused: %s", e)

    def _tick(self) -> None:
        """Every 0.25 s until :meth:`stop`: stream feedback, the overload check, and (Ray,
        every 2 s) Ray nodes that joined."""
        n = 0
        while not self._stopping.wait(TICK_S):
            n += 1
            try:
                if self.store.degraded is not None or self.store.idle_s() >= PROBE_IDLE_S:
                    self.store.probe()  # readyz follows the file within a tick, or PROBE_IDLE_S
                self.cluster.tick()
                self.learning.tick()
                self.promotion.check()
                if self.config.rebalance and self.dispatcher is not None:
                    self.dispatcher.rebalance()
                if self.nodes is not None and n % DISCOVER_EVERY == 0:
                    self.nodes.discover(self.config.ray_gpu_model)
                if n % CHECKPOINT_WAL_EVERY == 0:
                    self.store.checkpoint_wal()
                if n % PRUNE_EVERY == 1:  # the first tick too: a file kept long starts at once
                    self.retention.tick()
                if self._reload_wanted.is_set():
                    self._reload_wanted.clear()
                    self._reload()
            except Exception:  # the loop must outlive one bad tick, or feedback stops for good
                log.exception("rlsched serve: feedback tick failed")

    def scheduler_for(self, spec: str) -> TwoStageScheduler:
        """Scheduler ``spec`` (``SELECTOR+PLACER`` or ``auto``) as the config runs it: its
        ``selector_model``, ``placer_model`` and ``recogniser_model`` to the parts that take them,
        and the placer's ``active_profiling`` and ``prediction_fallback``; not yet in use.

        :raises ValueError: an unknown selector or placer, a configured model that does not load,
            or a selector other than ``ldwp`` while ``selector_learning`` is on (its learner
            would train a network nothing runs).
        """
        c = self.config
        sel, _, plc = spec.partition("+")
        auto = spec == AUTO
        if c.selector_learning and sel != "ldwp":
            raise ValueError(
                f"scheduler: selector_learning needs a scheduler whose selector is ldwp, got {spec}"
            )
        try:
            sched, _ = build_scheduler(
                spec,
                c.selector_model if sel == "ldwp" or auto else None,
                c.placer_model if plc == "iawp-rl" else None,
                c.source,
                c.active_profiling,
                c.prediction_fallback,
                recogniser_model=c.recogniser_model if auto else None,
            )
        except InputError as e:
            raise ValueError(str(e)) from None
        return sched

    def set_scheduler(self, spec: str, sched: TwoStageScheduler | None = None) -> str:
        """Switch to the config's scheduler ``spec`` (a reload; built by :meth:`scheduler_for`
        unless given): :meth:`_install`, and an admin's kept switch is forgotten.

        :raises ValueError: as :meth:`scheduler_for`.
        """
        name = self._install(sched if sched is not None else self.scheduler_for(spec))
        with self.admin.lock:
            self.admin.forget_switch(spec)
        return name

    def admin_switch(self) -> str | None:
        """The scheduler an admin switched to, while it runs (``None``: the config's runs)."""
        return self.admin.changes.scheduler

    def switch_scheduler(self, spec: str) -> dict[str, Any]:
        """An admin's switch (``PUT /v1/admin/scheduler``): :meth:`_install`, kept across
        restarts while the config names the scheduler it was made over.

        :raises ValueError: as :meth:`scheduler_for`.
        """
        name = self._install(self.scheduler_for(spec))
        configured = self.config.scheduler
        with self.admin.lock:
            kept = self.admin.switched(*((None, None) if spec == configured else (spec, configured)))
        return {"scheduler": name, "kept": kept}

    def _install(self, sched: TwoStageScheduler) -> str:
        """Run ``sched`` for tasks not yet placed; tasks already on a node keep running; their
        remaining subtasks use the new placer."""
        with self.cluster.lock:
            sched.reset(self.cluster.view, 0)
        self.learning.install(sched, started=True)
        assert self.dispatcher is not None
        with self.cluster.lock:
            self.dispatcher.scheduler = self.scheduler = sched
        return sched.name

    def _promote(self, selector: Any, name: str) -> None:
        """Make ``selector`` the incumbent stage 1 (the placer stays)."""
        assert self.dispatcher is not None
        sched = TwoStageScheduler(selector, self.scheduler.placer)
        with self.cluster.lock:
            reset = getattr(selector, "reset", None)
            if reset is not None:
                reset(guarded_view(self.cluster.view, selector), 0)
            self.dispatcher.scheduler = self.scheduler = sched

    def _promotion_event(self, kind: str) -> None:
        (self.metrics.promotions if kind == "promoted" else self.metrics.rollbacks).inc()

    def wake_dispatcher(self) -> None:
        """Tasks were queued: the dispatcher looks at once, not at its next idle timeout."""
        d = self.dispatcher
        if d is not None:
            d.wake()

    def start_canary(self, spec: str, selector_model: str | None) -> dict[str, Any]:
        """Run selector ``spec`` as a canary (see :mod:`runtime.service.promotion`)."""
        return self.promotion.start(self.scheduler, spec, selector_model)

    def stop(self) -> None:
        self.ready.clear()
        self._stopping.set()
        if hasattr(self, "_feedback"):
            self._feedback.join(timeout=5)  # no tick may run on a closed cluster
        if self.dispatcher is not None:
            self.dispatcher.stop()
        self.dispatcher = None
        if self.learning.selector is not None:
            self.learning.selector.stop()
        self.learning.checkpoint()  # a clean stop keeps everything learnt
        self.cluster.close()
        self.store.close()

    def admission(self, tenant: Tenant, n: int) -> str | None:
        """Why ``n`` more tasks of ``tenant`` are refused now (``None``: accepted)."""
        queued = self.store.queued()  # per request: the queue's index, not the whole table
        mine = queued.get(tenant.name, 0)
        if mine + n > tenant.max_queued:
            return f"tenant {tenant.name}: at most {tenant.max_queued} queued tasks ({mine} queued)"
        total = sum(queued.values())
        if total + n > self.config.queue_bound:
            return f"service: the queue holds at most {self.config.queue_bound} tasks ({total} queued)"
        return None

    def tenants_state(self) -> list[dict[str, Any]]:
        """Each tenant's limits and tasks by state (``done``, ``failed``, ``cancelled``: since the
        queue file was created); a tenant the config no longer names is listed while its tasks are
        queued or running (``configured`` false)."""
        counts = self.store.counts(pruned=True)
        configured = {t.name: t for t in self.config.tenants}
        former = dict(self.dispatcher.former) if self.dispatcher is not None else {}
        busy = {t for (t, st), n in counts.items() if st in ("queued", "running") and n > 0}
        shown = list(configured.values()) + [
            former.get(name) or Tenant(name, "") for name in sorted(busy - configured.keys())
        ]
        return [
            {
                "name": t.name,
                "configured": t.name in configured,
                "tokens": len(t.digests) if t.name in configured else 0,
                "weight": t.weight,
                "max_queued": t.max_queued,
                "max_running": t.max_running,
                "gpu_share": t.gpu_share,
                "admin": t.admin,
                **{state: counts.get((t.name, state), 0) for state in STATES},
            }
            for t in shown
        ]

    def cluster_state(self) -> dict[str, Any]:
        """Nodes, their GPUs (model, streams, memory), and the queue depth per node."""
        c = self.cluster
        closed = self.dispatcher.closed if self.dispatcher is not None else set()
        # Cache counters and utilisation per GPU, by node name (a name reused after a removal:
        # the later, live node's figures).
        reports = {(d.node, d.gpu): d for d in c.device_reports()} if self.ready.is_set() else {}
        with c.lock:
            v = c.view
            nodes = [
                {
                    "name": n.name,
                    "index": i,
                    "alive": bool(v.alive[i]),
                    "draining": i in closed,
                    "ray_node_id": c.location(i),  # Ray: where the agent runs
                    "cpu_cores": n.cpu_cores,
                    "tasks": int(v.tasks_on_node[i]),
                    "ready_waiting": int(v.ready_waiting[i]),
                    "gpus": [
                        {
                            "model": g.model,
                            "streams": int(v.gpu_streams[i, j]),
                            "running": int(v.gpu_running[i, j]),
                            "mem_used_mib": float(v.gpu_mem_used_mb[i, j]),
                            "mem_mib": float(v.gpu_mem_mb[i, j]),
                            # What schedulers read: the measured speed, and the rate the GPU's
                            # streams were seen to deliver (``mct-drain``) with its sample count.
                            "speed": float(v.speed_gpu[i, j]),
                            "rate": float(v.gpu_rate[i, j]),
                            "rate_samples": int(v.gpu_rate_samples[i, j]),
                            **_device_figures(reports.get((n.name, j)) if v.alive[i] else None),
                        }
                        for j, g in enumerate(n.gpus)
                    ],
                }
                for i, n in enumerate(c.spec.nodes)
            ]
        counts = self.store.counts(pruned=True)  # done, failed, cancelled: every task, pruned or not
        auto = describe_auto(self.scheduler)
        if auto is not None:  # the pair that places tasks now (`placer` says "auto"), as /v1/models has it
            auto = {k: auto[k] for k in ("running", "tasks_seen", "window")} | {
                "deciding": auto["choice"] is None
            }
        return {
            "version": package_version(),
            "scheduler": self.scheduler.name,
            "auto": auto,
            "backend": c.backend_name,
            **self.learning.describe(),
            "nodes": nodes,
            "drains_waiting": sorted(self.admin.pending),  # drained nodes not in the cluster yet
            **{state: sum(v for (_, s), v in counts.items() if s == state) for state in STATES},
        }


def _device_figures(d: DeviceReport | None) -> dict[str, float | int | None]:
    """A GPU's utilisation and input-cache counters for ``/v1/cluster`` (``None``: unknown)."""
    if d is None:
        return {"utilisation": None, "cache_hits": None, "cache_misses": None, "memory_refusals": None}
    return {
        "utilisation": d.util,
        "cache_hits": d.hits,
        "cache_misses": d.misses,
        "memory_refusals": d.memory_refusals,
    }


def store_owner(config: ServiceConfig) -> str:
    """Who holds the queue file while ``config``'s service runs (shown to a second one)."""
    return f"serving {config.host}:{config.port}"

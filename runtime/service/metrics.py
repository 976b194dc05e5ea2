"""The Prometheus metrics of a running service (``GET /metrics``): counters the service updates
as tasks move, and gauges refreshed from the queue, the learning state and the devices when a
scraper asks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from rlsched.version import package_version
from runtime.cluster.backend import ClusterBackend


class ServiceMetrics:
    """The Prometheus metrics of one service (its own registry)."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.accepted = Counter("rlsched_tasks_accepted", "tasks accepted", ["tenant"], registry=r)
        self.rejected = Counter("rlsched_tasks_rejected", "tasks refused with 429", ["tenant"], registry=r)
        self.completed = Counter("rlsched_tasks_completed", "tasks completed", ["tenant"], registry=r)
        self.failed = Counter("rlsched_tasks_failed", "tasks failed", ["tenant"], registry=r)
        self.moved = Counter(
            "rlsched_tasks_moved",
            "tasks moved off an overloaded node before they started",
            ["tenant"],
            registry=r,
        )
        self.pruned = Counter(
            "rlsched_tasks_pruned",
            "finished tasks removed from the queue file after finished_retention_s",
            registry=r,
        )
        self.requeued = Counter(
            "rlsched_tasks_requeued",
            "tasks run again after their node was lost or removed",
            ["tenant"],
            registry=r,
        )
        self.deadlines = Counter(
            "rlsched_deadlines",
            "finished tasks that had a deadline, by whether they finished within it (met, missed: "
            "late, or failed)",
            ["tenant", "result"],
            registry=r,
        )
        self.nodes = Gauge("rlsched_nodes", "nodes by state (alive, draining, gone)", ["state"], registry=r)
        build = Gauge("rlsched_build_info", "the rlsched version serving (1)", ["version"], registry=r)
        build.labels(package_version()).set(1)
        self.decision = Histogram(
            "rlsched_decision_seconds",
            "stage-1 decision latency",
            buckets=(1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1),
            registry=r,
        )
        self.task = Histogram(
            "rlsched_task_seconds",
            "task latency from start to completion",
            ["tenant"],
            buckets=(0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100),
            registry=r,
        )
        self.queue = Gauge("rlsched_queue_depth", "queued tasks", ["tenant"], registry=r)
        self.running = Gauge("rlsched_tasks_running", "tasks running", ["tenant"], registry=r)
        self.util = Gauge(
            "rlsched_device_utilisation", "share of time a GPU ran a subtask", ["node", "gpu"], registry=r
        )
        self.mem = Gauge("rlsched_device_memory_used_mib", "device memory held", ["node", "gpu"], registry=r)
        self.hits = Gauge("rlsched_cache_hits", "input cache hits", ["node", "gpu"], registry=r)
        self.refusals = Gauge(
            "rlsched_device_memory_refusals",
            "device memory requests refused (a subtask waited for memory to free)",
            ["node", "gpu"],
            registry=r,
        )
        self.streams = Gauge("rlsched_streams", "active streams", ["node", "gpu"], registry=r)
        self.model_info = Gauge(
            "rlsched_model_info",
            "models in use (1), by role and version",
            ["role", "name", "sha256"],
            registry=r,
        )
        self.calibration = Gauge(
            "rlsched_calibration",
            "calibration of the placer per GPU model (1 = the state)",
            ["gpu_model", "state"],
            registry=r,
        )
        self.online_updates = Gauge(
            "rlsched_online_updates", "online updates of a learned model", ["learner"], registry=r
        )
        self.checkpoint = Gauge(
            "rlsched_learned_checkpoint", "number of the last learned-state checkpoint", registry=r
        )
        self.checkpoint_failures = Gauge(
            "rlsched_learned_checkpoint_failures",
            "learned-state checkpoints that failed since the start (a full disk): a crash would lose "
            "what was learnt since the last one",
            registry=r,
        )
        self.promotions = Counter("rlsched_canary_promotions", "candidates promoted", registry=r)
        self.rollbacks = Counter("rlsched_canary_rollbacks", "candidates rolled back", registry=r)
        self.canary = Gauge("rlsched_canary_active", "1 while a candidate runs as a canary", registry=r)
        self.reloads = Counter(
            "rlsched_config_reloads",
            "re-reads of the config file, by result (applied, refused)",
            ["result"],
            registry=r,
        )
        self.pending_restart = Gauge(
            "rlsched_config_pending_restart",
            "keys changed in the config file that the running service keeps until it restarts",
            registry=r,
        )

    def event(self, kind: str, tenant: str, seconds: float) -> None:
        if kind == "decision":
            self.decision.observe(seconds)
        elif kind == "completed":
            self.completed.labels(tenant).inc()
            self.task.labels(tenant).observe(seconds)
        elif kind == "failed":
            self.failed.labels(tenant).inc()
        elif kind == "moved":
            self.moved.labels(tenant).inc()
        elif kind == "requeued":
            self.requeued.labels(tenant).inc()
        elif kind in ("deadline_met", "deadline_missed"):
            self.deadlines.labels(tenant, kind.removeprefix("deadline_")).inc()

    def render(
        self,
        counts: dict[tuple[str, str], int],
        tenants: Iterable[str],
        learning: dict[str, Any],
        canary: bool,
        cluster: ClusterBackend | None,
        closed: set[int],
    ) -> tuple[bytes, str]:
        """The text exposition, gauges refreshed first.

        :param counts: the queue's tasks by (tenant, state).
        :param tenants: the configured tenants' names.
        :param learning: what the service's learning describes (models, calibration, updates).
        :param canary: whether a candidate runs as a canary.
        :param cluster: the running cluster (``None`` before the service is ready).
        :param closed: the nodes being drained, by index.
        """
        # A tenant removed by a reload still has its accepted tasks queued or running.
        for name in set(tenants) | {t for t, _ in counts}:
            self.queue.labels(name).set(counts.get((name, "queued"), 0))
            self.running.labels(name).set(counts.get((name, "running"), 0))
        self._learning(learning)
        self.canary.set(1 if canary else 0)
        if cluster is not None:
            self._devices(cluster, closed)
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def _devices(self, cluster: ClusterBackend, closed: set[int]) -> None:
        view = cluster.view
        alive = int(view.alive.sum())
        self.nodes.labels("alive").set(alive - len(closed))
        self.nodes.labels("draining").set(len(closed))
        self.nodes.labels("gone").set(view.n_nodes - alive)
        rows = {node.name: i for i, node in enumerate(cluster.spec.nodes) if view.alive[i]}
        for d in cluster.device_reports():
            n = rows.get(d.node)
            if n is None:
                continue  # a node that left: its last figures are not current
            labels = (d.node, str(d.gpu))
            self.util.labels(*labels).set(d.util)
            self.hits.labels(*labels).set(d.hits)
            self.refusals.labels(*labels).set(d.memory_refusals)
            self.streams.labels(*labels).set(d.streams)
            self.mem.labels(*labels).set(float(view.gpu_mem_used_mb[n, d.gpu]))

    def _learning(self, d: dict[str, Any]) -> None:
        self.model_info.clear()  # a model that learns changes version: only the current ones show
        for role, m in d["models"].items():
            self.model_info.labels(role, m["name"], m["sha256"]).set(1)
        self.calibration.clear()
        for model, c in d["calibration"].items():
            self.calibration.labels(model, c["state"]).set(1)
        for learner, n in d["online_updates"].items():
            self.online_updates.labels(learner).set(n)
        self.checkpoint.set(d["checkpoint"]["version"])
        self.checkpoint_failures.set(d["checkpoint"]["failures"])

"""The live run loop: tasks arrive in wall-clock time, stage 1 picks nodes, agents run them.

It is the live counterpart of ``Simulator.run``: same schedulers, same ``ClusterView``, same
metrics (``rlsched.metrics.summarise``), but time is the wall clock and work is real kernels.
Tasks a dead node held come back with :data:`NODE_LOST` and are placed again.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from rlsched.feasibility import feasible_nodes, task_needs
from rlsched.interference.instrument import ProfilingInstrument
from rlsched.metrics import RunMetrics, summarise
from rlsched.records import TaskRecord
from rlsched.scheduler import TwoStageScheduler
from rlsched.tasks import Task
from rlsched.view import ClusterView
from rlsched.world import drive, hand_over, take_decision
from runtime.cluster.backend import NODE_LOST, ClusterBackend, DeviceReport, TaskOutcome
from runtime.kernels import TaskData

__all__ = ["NODE_LOST", "LiveOptions", "LiveResult", "LiveSession", "device_table", "run_live"]


@dataclass
class LiveResult:
    """One live run."""

    scheduler: str
    backend: str
    metrics: RunMetrics
    outcomes: dict[int, TaskOutcome]
    devices: list[DeviceReport]
    errors: dict[int, str]
    dispatch_us_per_subtask: float
    stream_moves: int
    records: list[TaskRecord] = field(default_factory=list)


@dataclass(frozen=True)
class LiveOptions:
    """Knobs of a live run.

    :param seed: scheduler seed.
    :param feedback_interval_s: stream-feedback period.
    :param timeout_s: give up waiting for tasks after this long (they count as lost).
    :param progress: show a progress bar of completed tasks.
    """

    seed: int = 0
    feedback_interval_s: float = 0.25
    timeout_s: float = 600.0
    progress: bool = False


class _Tracker:
    """Outcomes as they arrive from agent threads."""

    def __init__(self, records: list[TaskRecord], bar: tqdm | None) -> None:
        self.records = records
        self.outcomes: dict[int, TaskOutcome] = {}
        self.retry: list[int] = []
        self.cond = threading.Condition()
        self.finished = 0
        self.bar = bar

    def on_done(self, out: TaskOutcome) -> None:
        with self.cond:
            rec = self.records[out.task.id]
            if out.error == NODE_LOST:
                rec.requeues += 1
                self.retry.append(out.task.id)
            else:
                if math.isnan(rec.first_start_s):
                    rec.first_start_s = out.first_start_s
                rec.error = out.error
                if out.error is None:
                    rec.done_s = out.done_s
                    rec.completions += 1
                self.outcomes[out.task.id] = out
                self.finished += 1
                if self.bar is not None:
                    self.bar.update(1)
            self.cond.notify_all()


class LiveSession:
    """A live run driven one stage-1 decision at a time: a :class:`rlsched.world.World` in
    wall-clock time (:meth:`next_decision`, :meth:`mask`, :meth:`assign`, :meth:`finish`).

    :param cluster: a cluster backend; the session starts its agents.
    :param scheduler: stage 2 runs in the agents; stage 1 is the caller's (or :func:`run_live`'s).
    :param work: tasks (ids dense from 0, arrival times in seconds from the start) with data.
    :param opts: run options.
    :param instrument: the cluster's profiling instrument (``runtime.profiler.LiveProfiler``); a
        placer that calibrates (IAWP) measures the cluster with it before the run.
    """

    def __init__(
        self,
        cluster: ClusterBackend,
        scheduler: TwoStageScheduler,
        work: Sequence[tuple[Task, TaskData]],
        opts: LiveOptions = LiveOptions(),
        instrument: ProfilingInstrument | None = None,
    ) -> None:
        self.cluster, self.scheduler, self.opts = cluster, scheduler, opts
        self.tasks = {t.id: (t, d) for t, d in work}
        self.records = [TaskRecord(t.arrival_s, t.deadline_s) for t, _ in sorted(work, key=lambda w: w[0].id)]
        self._order = sorted(self.tasks, key=lambda i: self.tasks[i][0].arrival_s)
        self._next = 0
        with cluster.lock:
            scheduler.reset(cluster.view, opts.seed)
        cluster.start(scheduler.placer, opts.seed, hand_over(scheduler.placer, instrument))
        bar = tqdm(total=len(work), desc=f"live {scheduler.name}", unit="task") if opts.progress else None
        self.tracker = _Tracker(self.records, bar)
        self._stop = threading.Event()
        self._fb = threading.Thread(
            target=_feedback, args=(cluster, self._stop, opts.feedback_interval_s), daemon=True
        )
        self._fb.start()
        self.t0 = time.perf_counter()
        self.unschedulable = 0
        self.decisions = 0
        self.decide_s = 0.0
        self._pending: list[int] = []
        self._submitted: set[int] = set()
        #: The run's full result, once :meth:`finish` has run.
        self.result: LiveResult | None = None

    @property
    def view(self) -> ClusterView:
        """The cluster's view (read it inside :meth:`lock`)."""
        return self.cluster.view

    @contextlib.contextmanager
    def lock(self) -> Iterator[object]:
        """The cluster lock (agents update the view from their threads), with the view's clock
        set to now."""
        with self.cluster.lock:
            self.cluster.view.time_s = self.now
            yield self.cluster.lock

    @property
    def now(self) -> float:
        """Seconds since the run started."""
        return time.perf_counter() - self.t0

    @property
    def completed(self) -> int:
        return sum(r.completions for r in self.records)

    def in_system_area(self) -> float:
        """Task-seconds spent in the system so far (arrived, not finished)."""
        now = self.now
        area = 0.0
        for r in self.records:
            if r.arrival_s < now:
                end = r.done_s if not math.isnan(r.done_s) else now
                area += max(min(end, now) - r.arrival_s, 0.0)
        return area

    def next_decision(self) -> Task | None:
        """Wait for the next task that needs a node (arrivals and tasks of dead nodes);
        ``None`` once every task has been given a node."""
        while True:
            with self.tracker.cond:
                self._pending.extend(self.tracker.retry)
                self.tracker.retry = []
            if self._pending:
                task = self.tasks[self._pending[0]][0]
            elif self._next < len(self._order):
                task = self.tasks[self._order[self._next]][0]
                delay = task.arrival_s - self.now
                if delay > 0:
                    time.sleep(delay)
                self._pending.append(task.id)
                self._next += 1
            else:
                return None
            if self.mask(task).any():
                return task
            self._pending.pop(0)
            self.records[task.id].error = "no feasible node"
            self.unschedulable += 1

    def mask(self, task: Task) -> np.ndarray:
        """Live nodes that could run ``task``."""
        with self.cluster.lock:
            return feasible_nodes(task_needs(task), self.cluster.view)

    def assign(self, task: Task, node: int) -> None:
        """Send the task :meth:`next_decision` returned to ``node``."""
        take_decision(self._pending, task, node, self.mask(task))
        self.decisions += 1
        self._submitted.add(task.id)
        self.records[task.id].node = node
        self.cluster.submit(node, task, self.tasks[task.id][1], self.tracker.on_done)

    def select(self, task: Task) -> int:
        """Stage 1 by the scheduler's own selector."""
        mask = self.mask(task)
        with self.lock():
            d0 = time.perf_counter()
            node = self.scheduler.selector.select(task, self.cluster.view, mask)
            self.decide_s += time.perf_counter() - d0
        return node

    def finish(self) -> RunMetrics:
        """Wait for every assigned task (at most ``timeout_s``), stop the cluster, summarise;
        the full result is kept in :attr:`result`."""
        if self.result is not None:
            return self.result.metrics
        tr = self.tracker
        deadline = time.perf_counter() + self.opts.timeout_s
        while time.perf_counter() < deadline:
            with tr.cond:
                # Tasks never given a node (an abandoned episode) are not waited for.
                if self._submitted.issubset(tr.outcomes) and not tr.retry:
                    break
                tr.cond.wait(timeout=0.05)
                retry = bool(tr.retry)
            if retry:  # a node died after the last arrival: place its tasks again
                while (task := self.next_decision()) is not None:
                    self.assign(task, self.select(task))
        self._stop.set()
        self._fb.join(timeout=5)
        if tr.bar is not None:
            tr.bar.close()
        wall = self.now
        c = self.cluster
        util, devices, stats = c.utilisation(), c.device_reports(), c.stats()
        c.close()
        metrics = summarise(
            self.records,
            util,
            unschedulable=self.unschedulable,
            decisions=self.decisions,
            wall_s=wall,
            decide_s=self.decide_s,
        )
        errors = {i: r.error for i, r in enumerate(self.records) if r.error}
        self.result = LiveResult(
            self.scheduler.name,
            c.backend_name,
            metrics,
            tr.outcomes,
            devices,
            errors,
            stats.dispatch_us_per_subtask,
            stats.stream_moves,
            self.records,
        )
        return metrics


def run_live(
    cluster: ClusterBackend,
    scheduler: TwoStageScheduler,
    work: Sequence[tuple[Task, TaskData]],
    opts: LiveOptions = LiveOptions(),
    instrument: ProfilingInstrument | None = None,
) -> LiveResult:
    """Run every task of ``work`` on ``cluster`` with both stages of ``scheduler``.

    :param cluster: a cluster backend; this call starts its agents and closes them at the end.
    :param scheduler: stage 1 and stage 2.
    :param work: tasks (ids dense from 0, arrival times in seconds) with their data.
    :param opts: run options.
    :param instrument: the cluster's profiling instrument, for a placer that calibrates.
    """
    session = LiveSession(cluster, scheduler, work, opts, instrument)
    session.decide_s += drive(session, scheduler.selector)
    session.finish()
    assert session.result is not None
    return session.result


def _feedback(cluster: ClusterBackend, stop: threading.Event, interval: float) -> None:
    while not stop.wait(interval):
        cluster.tick()


def device_table(devices: list[DeviceReport]) -> str:
    """Markdown table of per-GPU figures."""
    lines = [
        "| node | gpu | model | streams | util | cache hit rate | evictions | H2D MB loaded | H2D MB saved |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for d in devices:
        lines.append(
            f"| {d.node} | {d.gpu} | {d.model} | {d.streams} | {d.util:.2f} | {d.hit_rate:.2f} "
            f"| {d.evictions} | {d.h2d_bytes_loaded / 1e6:.1f} | {d.h2d_bytes_saved / 1e6:.1f} |"
        )
    return "\n".join(lines)

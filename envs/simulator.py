"""Discrete-event simulator of a heterogeneous CPU-GPU cluster running streaming tasks.

The simulator is a :class:`rlsched.world.World` in simulated time: :meth:`Simulator.run` drives
it with a two-stage scheduler through :func:`rlsched.world.drive`, and the Gymnasium environment
asks for each stage-1 decision through :meth:`next_decision` and answers with :meth:`assign`.
Between decisions the event loop here moves time on through arrivals, node churn, speed drift and
the service's overload checks; what a node does with a task once it has one (its input transfer,
its subtasks on GPU streams or CPU cores through :mod:`rlsched.dispatch`, the loop the live node
agents run, and its upload) is :class:`envs.sim_node.NodeExecution`.

Invariants (checked by property tests): device memory never exceeds capacity, a GPU never runs
more subtasks than it has streams, a subtask starts only after its parents finished, and every
task completes exactly once or is reported as unschedulable.
"""

from __future__ import annotations

import contextlib
import heapq
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from envs.ground_truth import GroundTruth
from envs.network import Link
from envs.rebalancing import withdraw
from envs.sim_node import (
    _ARRIVE,
    _DONE,
    _DRIFT,
    _JOIN,
    _LEAVE,
    _TICK,
    _UPLOAD,
    _XFER,
    NodeExecution,
    PlacementError,
    _NodeDispatch,
)
from envs.sim_runs import Run, TaskRun
from rlsched import dispatch
from rlsched.cluster import check_runnable
from rlsched.feasibility import TaskNeeds, static_feasible, task_needs
from rlsched.hardware import GpuModel
from rlsched.interference.calibration import CalibratingPlacer
from rlsched.metrics import RunMetrics, summarise
from rlsched.overload import TICK_S, OverloadWatch
from rlsched.records import TaskRecord
from rlsched.scenarios.spec import Scenario
from rlsched.scheduler import SubtaskPlacer, TwoStageScheduler, is_clairvoyant
from rlsched.tasks import Device, KindSpec, Task
from rlsched.utilisation import UtilAccumulator
from rlsched.view import ClusterView
from rlsched.view_guard import guarded_placer
from rlsched.world import drive, hand_over, take_decision

__all__ = ["PlacementError", "Simulator"]

if TYPE_CHECKING:
    from envs.simulated_instrument import Testbed


class Simulator(NodeExecution):
    """A simulated cluster for one scenario and seed.

    :param scenario: cluster, dynamics and interference source.
    :param tasks: the tasks to run, dense ids in arrival order.
    :param placer: the stage-2 policy used on every node.
    :param seed: drives drift and the ground truth's draws (the tasks were drawn from their own
        seed); default the scenario's, as :func:`~rlsched.scenarios.taskgen.generate_tasks`' is
        (it was 0 while tasks came from the scenario's seed).
    :param trace: keep a log of subtask executions (for tests).
    :param rebalance: move tasks that have not started off nodes that stay overloaded or to idle GPU nodes, as
        ``rlsched serve`` does (:mod:`envs.rebalancing`).
    """

    def __init__(
        self,
        scenario: Scenario,
        tasks: list[Task],
        placer: SubtaskPlacer,
        seed: int | None = None,
        trace: bool = False,
        rebalance: bool = False,
    ) -> None:
        self.scenario = scenario
        self.rebalance = rebalance
        self.tasks = tasks
        self.placer = placer
        #: What dispatch calls: the placer, or a guard that hands another's the view read-only.
        self.dispatch_placer = guarded_placer(placer)
        self.seed = scenario.seed if seed is None else seed
        spec = scenario.cluster
        check_runnable(spec)  # a scenario built in code is held to what the loader checks
        self.view = ClusterView.from_spec(spec)
        self.nodes = spec.nodes
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0x5EED]))
        self.truth = GroundTruth(scenario.interference, scenario.drift, [n.gpus for n in spec.nodes], rng)
        self.trace: list[tuple] | None = [] if trace else None
        self._init_state()

    # ---- setup -----------------------------------------------------------------------------
    def _init_state(self) -> None:
        n, g = self.view.n_nodes, self.view.max_gpus
        self.now = 0.0
        self._seq = 0
        self._n_events = 0
        self._mask_key: tuple[int, int] | None = None
        self._mask_val = np.zeros(0, dtype=bool)
        self._observe: Callable[[str, str, tuple[str, ...], float], None] | None = None
        self._events: list[tuple] = []
        self.records = [TaskRecord(t.arrival_s, deadline_s=t.deadline_s) for t in self.tasks]
        self._needs: list[TaskNeeds | None] = [None] * len(self.tasks)
        self._static_ok: list[np.ndarray | None] = [None] * len(self.tasks)
        self._gpu_runs: list[list[list[Run]]] = [[[] for _ in range(g)] for _ in range(n)]
        # Insertion-ordered (a dict, not a set): iteration order must not depend on object ids.
        self._cpu_runs: list[dict[Run, None]] = [{} for _ in range(n)]
        self._waiting = [dispatch.ReadyQueue() for _ in range(n)]
        self._hosts = [_NodeDispatch(self, i) for i in range(n)]
        self._admit: list[list[TaskRun]] = [[] for _ in range(n)]
        self._on_node: list[dict[int, TaskRun]] = [{} for _ in range(n)]
        self._epoch = [0] * n
        self._down = Link(n)  # inputs arrive over it
        self._up = Link(n)  # results leave over it
        # Python copies of static arrays read on every event (numpy scalar reads are slow).
        self._cpu_gf = self.view.cpu_gflops.tolist()
        self._tf = self.view.gpu_tflops.tolist()
        self._bw = self.view.gpu_bw_gbs.tolist()
        self._net = self.view.net_mbps.tolist()
        self._tf_mean = self.view.node_tflops_mean.tolist()
        self._bw_mean = self.view.node_bw_mean.tolist()
        self.pending: list[int] = []  # arrived, not yet given a node
        self.undecided: list[int] = []  # arrived after finish(): never given a node
        self.unplaceable: list[int] = []  # arrived, no feasible node right now
        self.completed = 0
        self.decisions = 0
        #: A declared clairvoyant policy was handed this simulator (its metrics say so).
        self.clairvoyant = False
        self.in_system = 0
        self.area = 0.0  # integral of tasks in system over time
        self._util = UtilAccumulator(self.view)
        self._watch = OverloadWatch() if self.rebalance else None
        self._ticking = False
        self.moved = 0  # tasks rebalancing took off a node
        self._avoid: dict[int, int] = {}  # moved task -> the node it left
        for t in self.tasks:
            self._push(t.arrival_s, _ARRIVE, t.id)
        for i, node in enumerate(self.nodes):
            if node.join_s > 0:
                self._push(node.join_s, _JOIN, i)
            if node.leave_s is not None:
                self._push(node.leave_s, _LEAVE, i)
        if self.scenario.drift.sigma > 0 and self.tasks:
            self._push(self.scenario.drift.interval_s, _DRIFT, None)
        self._util.start(0.0)

    # ---- driver API ------------------------------------------------------------------------
    def run(
        self, scheduler: TwoStageScheduler, on_decision: Callable[[], object] | None = None
    ) -> RunMetrics:
        """Run every task to completion with ``scheduler``; return the metrics.

        :param scheduler: stage 1 picks nodes; its placer must be the one this simulator was
            given (a world has one placer, handed over at construction).
        :param on_decision: called after each stage-1 decision (progress bars).
        :raises ValueError: if the scheduler's placer is not this simulator's.
        """
        if scheduler.placer is not self.placer:
            raise ValueError(
                f"scheduler {scheduler.name}: its placer is not the one this Simulator was built with; "
                "build the Simulator with scheduler.placer"
            )
        if self._n_events or self.decisions:  # its metrics would be the first run's, whatever ran
            raise ValueError("this Simulator has run: a Simulator runs once; build another for the next run")
        scheduler.reset(self.view, self.seed)
        self.calibrate_placer()
        self._bind_if_clairvoyant(scheduler.selector)
        t0 = time.perf_counter()
        decide_s = drive(self, scheduler.selector, on_decision)
        return self.metrics(wall_s=time.perf_counter() - t0, decide_s=decide_s)

    def calibrate_placer(self) -> None:
        """Hand the placer over (:func:`rlsched.world.hand_over`): when it calibrates it gets the
        data of the survey it asks for (taken here, with the simulated instrument, which it never
        holds), and it watches finished GPU subtasks when it observes. A placer that declares
        itself a clairvoyant reference is handed the simulator as well."""
        self._bind_if_clairvoyant(self.placer)
        instrument = None
        if isinstance(self.placer, CalibratingPlacer):
            # Imported here: profiling brings in the interference models (torch), which only
            # placers that calibrate need.
            from envs.simulated_instrument import SimulatedProfiler

            instrument = SimulatedProfiler(self.testbed())
        self._observe = hand_over(self.placer, instrument)

    def testbed(self) -> Testbed:
        """What this world's profiling instrument measures: its ground truth, the GPU models of its
        cluster and the GPU kinds of its tasks (see :class:`envs.simulated_instrument.SimulatedProfiler`)."""
        from envs.simulated_instrument import Testbed

        models: dict[str, GpuModel] = {}  # the first of each name
        for node in self.nodes:
            for g in node.gpus:
                if g is not None:
                    models.setdefault(g.name, g)
        kinds: dict[str, KindSpec] = {}
        for t in self.tasks:
            for s in t.graph.subtasks:
                if s.kind.device is not Device.CPU:  # CPU-only kinds never share a GPU
                    kinds.setdefault(s.kind.name, s.kind)
        return Testbed(self.truth, list(models.values()), list(kinds.values()), self.scenario.interference)

    def _bind_if_clairvoyant(self, policy: object) -> None:
        """Hand the simulator to a policy that declares itself clairvoyant (and only to such a
        one: :func:`rlsched.scheduler.is_clairvoyant`), and mark the run."""
        if is_clairvoyant(policy):
            policy.bind_simulator(self)  # type: ignore[attr-defined]
            self.clairvoyant = True

    def lock(self) -> contextlib.AbstractContextManager[object]:
        """Nothing runs beside the caller: no lock is needed to read the view."""
        return contextlib.nullcontext()

    def in_system_area(self) -> float:
        """Task-seconds spent in the system so far (arrived, not finished)."""
        return self.area

    def next_decision(self) -> Task | None:
        """Advance simulated time until a task awaits a node; ``None`` when all work is done."""
        while not self.pending:
            if not self._events:
                return None
            self._step_event()
        self._refresh_view()
        return self.tasks[self.pending[0]]

    def needs(self, task: Task) -> TaskNeeds:
        """Cached requirements of a task."""
        nd = self._needs[task.id]
        if nd is None:
            nd = self._needs[task.id] = task_needs(task)
        return nd

    def mask(self, task: Task) -> np.ndarray:
        """Feasible nodes for ``task`` now (at least one when it came from :meth:`next_decision`).

        Cached between :meth:`next_decision` and :meth:`assign`: no event runs in between.
        """
        key = (task.id, self._n_events)
        if self._mask_key != key:
            static = self._static_ok[task.id]
            if static is None:
                static = self._static_ok[task.id] = static_feasible(self.needs(task), self.view)
            self._mask_val = self.view.alive & static
            away = self._avoid.get(task.id)
            if away is not None and self._mask_val.sum() > 1:
                self._mask_val[away] = False  # as the service: a moved task goes elsewhere
            self._mask_val.flags.writeable = False  # a policy's write would change what assign checks
            self._mask_key = key
        return self._mask_val

    def assign(self, task: Task, node: int) -> None:
        """Apply a stage-1 decision for the task :meth:`next_decision` returned."""
        take_decision(self.pending, task, node, self.mask(task))
        self._avoid.pop(task.id, None)
        self.decisions += 1
        self._to_node(task, node)

    def finish(self) -> RunMetrics:
        """Run every task already given a node to its end; the run's metrics. Tasks that arrive
        meanwhile, or were waiting for a decision, get none: they count as
        ``tasks_unschedulable`` (never given a node), not as lost."""
        while self._events:
            self._step_event()
            if self.pending:  # no decision will come for them (and drift would wait for ever)
                self.undecided += self.pending
                self.pending = []
        return self.metrics()

    @property
    def done(self) -> bool:
        return not self._events and not self.pending

    def metrics(self, wall_s: float = 0.0, decide_s: float = 0.0) -> RunMetrics:
        """Metrics of the run so far."""
        self._util.advance(self.now)
        return summarise(
            self.records,
            self._util.summary(),
            unschedulable=len(self.unplaceable) + len(self.pending) + len(self.undecided),
            decisions=self.decisions,
            wall_s=wall_s,
            decide_s=decide_s,
            clairvoyant=self.clairvoyant,
        )

    # ---- event loop ------------------------------------------------------------------------
    def _step_event(self) -> None:
        t, kind, _, obj, version = heapq.heappop(self._events)
        self._n_events += 1
        if kind == _DONE and obj.version != version:
            return  # superseded by a rate change
        if t > self.now:
            self.area += self.in_system * (t - self.now)
            self.now = t
        if kind == _DONE:
            self._subtask_done(obj)
        elif kind == _ARRIVE:
            self.in_system += 1
            self.pending.append(obj)
            self._screen_pending()
            if self._watch is not None and not self._ticking:
                self._ticking = True
                self._push(self.now + TICK_S, _TICK, None)
        elif kind == _TICK:
            self._tick()
        elif kind == _XFER:
            self._transfer_done(obj)
        elif kind == _UPLOAD:
            if obj.epoch == self._epoch[obj.node]:  # else the node left and the task restarts
                self._task_done(obj)
        elif kind == _DRIFT:
            self._drift()
        elif kind == _JOIN:
            self._join(obj)
        else:
            self._leave(obj)

    def _screen_pending(self) -> None:
        """Move tasks that no live node can run out of the decision queue."""
        tid = self.pending[-1]
        if not self.mask(self.tasks[tid]).any():
            self.pending.pop()
            self.unplaceable.append(tid)

    def _refresh_view(self) -> None:
        v = self.view
        v.time_s = self.now
        self._down.busy_s(self.now, v.net_in_busy_s)
        self._up.busy_s(self.now, v.net_out_busy_s)
        self._down.utilisation(self.now, v.net_in_util)
        self._up.utilisation(self.now, v.net_out_util)

    # ---- dynamics --------------------------------------------------------------------------
    def _tick(self) -> None:
        """The service's overload check, every :data:`TICK_S` while tasks are in the system."""
        assert self._watch is not None
        for node, k in self._watch.moves(self.view, set()):
            self.moved += withdraw(self, node, k)
        # Tasks no node can run stay in the system for ever: tick while some node holds work.
        self._ticking = bool(self.view.tasks_on_node.any())
        if self._ticking:
            self._push(self.now + TICK_S, _TICK, None)

    def _drift(self) -> None:
        self.truth.step_drift()
        for n in range(self.view.n_nodes):
            for g in range(len(self.nodes[n].gpus)):
                self._rerate(n, g)
        if self.pending or any(k != _DRIFT for _, k, *_ in self._events):
            self._push(self.now + self.scenario.drift.interval_s, _DRIFT, None)

    def _join(self, node: int) -> None:
        self._util.advance_node(node, self.now)
        self.view.set_alive(node, True)
        retry, self.unplaceable = self.unplaceable, []
        for tid in retry:
            self.pending.append(tid)
            self._screen_pending()
        self.pending.sort()

    def _leave(self, node: int) -> None:
        """Node failure: running and queued work is lost and its tasks go back to stage 1."""
        v = self.view
        self._util.advance_node(node, self.now)
        self._epoch[node] += 1
        for runs in self._gpu_runs[node]:
            for r in runs:
                r.version += 1
            runs.clear()
        for r in self._cpu_runs[node]:
            r.version += 1
        self._cpu_runs[node].clear()
        requeue = sorted(self._on_node[node])
        self._on_node[node].clear()
        self._waiting[node].clear()
        self._admit[node].clear()
        v.set_alive(node, False)
        v.clear_node(node)
        self._down.cut(node, self.now)
        self._up.cut(node, self.now)
        for tid in requeue:
            self.records[tid].requeues += 1
            self.records[tid].node = -1
            self.pending.append(tid)
            self._screen_pending()
        self.pending.sort()

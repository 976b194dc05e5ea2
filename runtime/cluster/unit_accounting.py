"""What a node's view and learners take from subtasks starting and ending on its units: busy
units, measured speeds relative to the cluster, GPU memory held by task data, and the co-runners
of each finished GPU subtask (online interference learning)."""

from __future__ import annotations

from collections.abc import Callable

from rlsched.estimates import subtask_gpu_seconds
from rlsched.scheduler import CPU
from rlsched.tasks import Subtask
from rlsched.view import ClusterView
from rlsched.world import Observe
from runtime.cluster.config import LiveNode
from runtime.cluster.corunners import CoRunners, Mark
from runtime.cluster.reports import NodeReports
from runtime.cluster.runs import SubtaskJob
from runtime.cluster.speed_reference import CPU_UNIT, SpeedReference
from runtime.mlsm.residency import Residency


class UnitAccounting:
    """Unit bookkeeping of one node (every call with the cluster lock held).

    :param nspec: the node.
    :param node: its row in ``view``.
    :param view: the cluster view it keeps up to date.
    :param speeds: turns measured speeds into speeds relative to the cluster.
    :param reports: integrates each GPU's busy time.
    :param residency: the task data on the node's GPUs.
    :param clock: seconds since the run started.
    """

    def __init__(
        self,
        nspec: LiveNode,
        node: int,
        view: ClusterView,
        speeds: SpeedReference,
        reports: NodeReports,
        residency: Residency,
        clock: Callable[[], float],
    ) -> None:
        self.nspec, self.node, self.view = nspec, node, view
        self.speeds, self.reports, self.residency, self.clock = speeds, reports, residency, clock
        self.corunners = CoRunners(len(nspec.gpus))

    def started(self, sub: Subtask, unit: int, now: float) -> Mark | None:
        """``sub`` started on ``unit`` at ``now``; a GPU run's co-runner mark."""
        v, n = self.view, self.node
        if unit == CPU:
            v.cpu_started(n)
            return None
        self.reports.gpu_tick(unit, now)
        v.gpu_started(n, unit, sub.mem_mb, sub.kind.name)
        return self.corunners.started(unit, sub.kind.name, now)

    def ended(self, job: SubtaskJob, measured: float, observe: Observe | None) -> None:
        """The job left its unit after ``measured`` seconds (0: it did not run to the end);
        ``observe`` gets a finished GPU run with its co-runners, and the view the GPU's memory."""
        v, n, sub = self.view, self.node, job.sub
        if job.unit == CPU:
            nominal = job.run.cpu_nominal[sub.index]
            v.cpu_finished(n, self._relative(CPU_UNIT, sub, nominal, measured), 1.0)
            return
        g, f = job.unit, v.fast
        self.reports.gpu_tick(g, self.clock())
        nominal = subtask_gpu_seconds(sub, f.gpu_tflops[n][g], f.gpu_bw[n][g])
        speed = nominal / measured if measured > 0 else 0.0
        v.gpu_finished(n, g, sub.mem_mb, sub.kind.name, self._relative(g, sub, nominal, measured), 1.0)
        shares = self.corunners.finished(g, sub.kind.name, job.mark, self.clock()) if job.mark else {}
        if observe is not None and speed > 0:
            model = self.nspec.gpus[g].model
            observe(model, sub.kind.name, tuple(shares), speed, tuple(shares.values()))
        self.sync_memory(g)

    def sync_memory(self, g: int) -> None:
        """Show the memory task data holds on GPU ``g`` in the view."""
        self.view.set_gpu_mem_used(self.node, g, self.residency.held_mb(g))

    def _relative(self, unit: int, sub: Subtask, nominal: float, measured: float) -> float:
        """The unit's speed relative to the cluster after this run (0: no sample, the view keeps
        its value). Already smoothed, so the view takes it as it is (EMA weight 1)."""
        if measured <= 0 or nominal <= 0:
            return 0.0
        return self.speeds.record(self.node, unit, sub.kind.name, nominal / measured)

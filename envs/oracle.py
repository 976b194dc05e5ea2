"""The ``oracle`` node selector: clairvoyant greedy minimum completion time, a reference only.

It reads the simulator's ground truth — true solo speeds, current drift, the true remaining work of
every running and queued subtask — which no real scheduler can observe. Reports show it so a
policy's distance from clairvoyance is visible; it must never be used as a teacher for a policy
that claims to see only observable state.

It is greedy: each task goes where it would finish first given what is already placed, with no
regard for the tasks after it. It is therefore *not* an upper bound — a policy that keeps fast
nodes free for the work that needs them can beat it (seen on a trace-derived case). The bound is
``envs.capacity``.

It declares itself clairvoyant (``clairvoyant = True``, :class:`rlsched.scheduler.Clairvoyant`):
that declaration, not the mere presence of :meth:`OracleSelector.bind_simulator`, is what makes
the simulator hand itself over, and what marks its runs (``RunMetrics.clairvoyant``) and reports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from rlsched.tasks import Device, Subtask, Task
from rlsched.view import ClusterView

if TYPE_CHECKING:
    from envs.simulator import Simulator


class OracleSelector:
    """Pick the node with the smallest true expected completion time."""

    name = "oracle"
    #: A clairvoyant reference: it reads the simulator's ground truth.
    clairvoyant: ClassVar[bool] = True

    def __init__(self) -> None:
        self.sim: Simulator | None = None

    def bind_simulator(self, sim: Simulator) -> None:
        """Give the oracle the simulator whose ground truth it reads."""
        self.sim = sim

    def reset(self, view: ClusterView, seed: int) -> None:
        """Stateless apart from the bound simulator."""

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        if self.sim is None:
            raise RuntimeError("the oracle needs a simulator (it reads ground truth); none is bound")
        etc = np.full(view.n_nodes, np.inf)
        for n in np.flatnonzero(mask):
            etc[n] = self._etc(task, int(n))
        ok = np.flatnonzero(mask)
        return int(ok[np.argmin(etc[ok])])

    def _sub_seconds(self, sub: Subtask, node: int) -> tuple[float, float]:
        """True (best GPU seconds, CPU seconds) of a subtask on a node, at current drift."""
        sim = self.sim
        assert sim is not None
        gpus = sim.nodes[node].gpus
        g = min(
            (
                sim.truth.gpu_solo_seconds(sub, m) / float(sim.truth.speed[node, j])
                for j, m in enumerate(gpus)
            ),
            default=np.inf,
        )
        if sub.device is Device.GPU:
            return g, np.inf
        c = sim.truth.cpu_solo_seconds(sub, float(sim.view.cpu_gflops[node]))
        return (np.inf, c) if sub.device is Device.CPU else (g, c)

    def _etc(self, task: Task, node: int) -> float:
        sim = self.sim
        assert sim is not None
        v = sim.view
        gpu_work = cpu_work = 0.0
        for r in [r for runs in sim._gpu_runs[node] for r in runs]:
            gpu_work += max(r.remaining - (sim.now - r.t_last) * r.rate, 0.0) / r.rate
        for r in sim._cpu_runs[node]:
            cpu_work += max(r.remaining - (sim.now - r.t_last) * r.rate, 0.0) / r.rate
        for tr in sim._on_node[node].values():
            for s in tr.task.graph.subtasks:
                if not tr.started[s.index]:
                    g, c = self._sub_seconds(s, node)
                    if g <= c:
                        gpu_work += g
                    else:
                        cpu_work += c
        own = 0.0
        for s in task.graph.subtasks:
            g, c = self._sub_seconds(s, node)
            own += min(g, c)
        n_gpus = max(len(sim.nodes[node].gpus), 1)
        wait = max(gpu_work / n_gpus, cpu_work / max(int(v.cores[node]), 1))
        xfer = max(float(sim._down.free_at[node]) - sim.now, 0.0) + task.input_mb / float(v.net_mbps[node])
        return xfer + wait + own


__all__ = ["OracleSelector"]

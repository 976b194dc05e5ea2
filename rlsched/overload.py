"""Moving work off an overloaded node: which nodes, and how many tasks.

A node is overloaded when more ready subtasks wait on it than it has units (GPU streams and CPU
cores: one full round of work queued behind the running one) for :attr:`OverloadWatch.ticks`
consecutive feedback ticks, while another node that takes new work has idle units. Its tasks
that have not started yet — none of their subtasks has run, so nothing is lost by moving them —
are withdrawn (youngest first) and placed again by stage 1 on another node. This is the usual
practice of GPU servers (move queued work away from a device that stays saturated); it corrects
stage-1 decisions that turned out badly (a node slower than its datasheet, a burst of long tasks)
without touching work that already runs.

The watch reads only the :class:`~rlsched.view.ClusterView`, i.e. what the node agents measured,
so the same watch runs in both worlds: the service's dispatcher ticks it every 0.25 s, and the
simulator (``envs.simulator``, with ``rebalance`` on) ticks it at the same period of simulated time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rlsched.view import ClusterView

#: How often the service runs stream feedback and this check (and the simulator, with
#: ``rebalance`` on, this check), in seconds.
TICK_S = 0.25


@dataclass
class OverloadWatch:
    """Decides, once per feedback tick, which nodes give up queued tasks.

    :param ticks: consecutive ticks a node must stay overloaded before tasks move (at the
        service's 0.25 s tick, 4 = one second: a burst that drains by itself moves nothing).
    :param factor: waiting ready subtasks per unit above which a node counts as overloaded.
    """

    ticks: int = 4
    factor: float = 1.0
    streak: dict[int, int] = field(default_factory=dict)

    def moves(self, view: ClusterView, closed: set[int]) -> list[tuple[int, int]]:
        """``(node, tasks to withdraw)`` pairs for this tick (caller holds the view's lock).

        :param view: the cluster view.
        :param closed: nodes that take no new tasks (draining): they may give tasks, never get.
        """
        alive = view.alive.astype(bool)
        units = view.node_streams + view.cores
        waiting = view.ready_waiting
        over = alive & (waiting > self.factor * np.maximum(units, 1))
        open_ = alive.copy()
        open_[list(closed)] = False
        idle_units = np.maximum(view.node_idle_streams, 0) + np.maximum(view.cores - view.cpu_busy, 0)
        spare = np.where(open_ & ~over & (waiting == 0), idle_units, 0)
        out: list[tuple[int, int]] = []
        budget = int(spare.sum())
        for n in range(view.n_nodes):
            self.streak[n] = self.streak.get(n, 0) + 1 if over[n] else 0
            if self.streak[n] < self.ticks or budget <= 0:
                continue
            k = min(int(waiting[n] - units[n]), budget)
            if k > 0:
                out.append((n, k))
                budget -= k
                self.streak[n] = 0  # judge the node again only after the move has settled
        return out

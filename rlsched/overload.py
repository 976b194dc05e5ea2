"""Moving work off an overloaded node: which nodes, and how many tasks.

A node is overloaded when more ready subtasks wait on it than it has units (GPU streams and CPU
cores: one full round of work queued behind the running one) for :attr:`OverloadWatch.ticks`
consecutive feedback ticks, while another node that takes new work has idle units. Its tasks
that have not started yet — none of their subtasks has run, so nothing is lost by moving them —
are withdrawn (youngest first) and placed again by stage 1 on another node. This is the usual
practice of GPU servers (move queued work away from a device that stays saturated); it corrects
stage-1 decisions that turned out badly (a node slower than its datasheet, a burst of long tasks)
without touching work that already runs.

It also lets an idle GPU take queued work (:attr:`OverloadWatch.steal`). Stage 1 commits each task
to a node when it arrives; under a backlog, every task has a queue long before it runs, and an
estimate that was off leaves fast nodes' queues running long after slower nodes went idle (on
overloaded generated cases the last 5 % of completions took a median 16 % of the run). So a node
whose queue would keep a not-started task waiting longer than that task would take to run on a GPU
node with no task gives tasks back, as many as that node's streams, for stage 1 to place again.

The watch reads only the :class:`~rlsched.view.ClusterView`, i.e. what the node agents measured,
so the same watch runs in both worlds: the service's dispatcher ticks it every 0.25 s, and the
simulator (``envs.simulator``, with ``rebalance`` on) ticks it at the same period of simulated time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rlsched.estimates import capacity_wait
from rlsched.view import ClusterView

#: A taker that stays empty after steals is passed over for up to ``steal_ticks`` x 2^this ticks.
STEAL_BACKOFF_DOUBLINGS = 6

#: How often the service runs stream feedback and this check (and the simulator, with
#: ``rebalance`` on, this check), in seconds.
TICK_S = 0.25


@dataclass
class OverloadWatch:
    """Decides, once per feedback tick, which nodes give up queued tasks.

    :param ticks: consecutive ticks a node must stay overloaded before tasks move (at the
        service's 0.25 s tick, 4 = one second: a burst that drains by itself moves nothing).
    :param factor: waiting ready subtasks per unit above which a node counts as overloaded.
    :param steal: also let idle GPU nodes take queued tasks that would wait longer than they run
        there (:meth:`steals`).
    :param steal_ticks: consecutive ticks a node's queue must outlast a taker's run before it gives.
    :param steal_margin: how many times a taker's run the queue must last.
    """

    ticks: int = 4
    factor: float = 1.0
    steal: bool = True
    steal_ticks: int = 4
    steal_margin: float = 1.0
    streak: dict[int, int] = field(default_factory=dict)
    steal_streak: dict[int, int] = field(default_factory=dict)
    # the steal's memory: ticks so far, takers the last steals counted on, their misses in a row,
    # and the tick until which each is passed over
    _tick: int = field(default=0, init=False, repr=False)
    _expected: set[int] = field(default_factory=set, init=False, repr=False)
    _misses: dict[int, int] = field(default_factory=dict, init=False, repr=False)
    _passed_over: dict[int, int] = field(default_factory=dict, init=False, repr=False)

    def moves(self, view: ClusterView, closed: set[int]) -> list[tuple[int, int]]:
        """``(node, tasks to withdraw)`` pairs for this tick (caller holds the view's lock): the
        overloaded nodes' (:meth:`overloaded`), then, where :attr:`steal` is on, the steals.

        :param view: the cluster view.
        :param closed: nodes that take no new tasks (draining): they may give tasks, never get.
        """
        out = self.overloaded(view, closed)
        if self.steal:
            out += self.steals(view, closed, out)
        return out

    def overloaded(self, view: ClusterView, closed: set[int]) -> list[tuple[int, int]]:
        """``(node, tasks to withdraw)`` for nodes that stayed overloaded :attr:`ticks` ticks.

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

    def steals(
        self,
        view: ClusterView,
        closed: set[int],
        moved: Sequence[tuple[int, int]] = (),
    ) -> list[tuple[int, int]]:
        """``(node, tasks to withdraw)`` so that idle GPU nodes take queued work.

        A taker is an open GPU node with no task at all. A GPU node with ready subtasks waiting
        gives up to that many tasks when its queue, drained at its streams' capacity
        (:func:`~rlsched.estimates.capacity_wait`), lasts longer than one of its tasks (its mean
        queued work) runs on a taker, at the taker's datasheet and measured speed, for
        :attr:`steal_ticks` ticks in a row; as many as those takers' streams, longest queue first.
        The withdrawn tasks go back to stage 1, which places them again (not on the node they
        left). The watch sees nodes, not tasks: a taker that is still empty on the next tick did
        not get them (they need GPU models or memory it lacks, or stage 1 preferred another node),
        so it is passed over for :attr:`steal_ticks` x 2, 4, 8, ... ticks (up to 2^6; the count
        starts again once a steal's tasks land on it); without that, tasks that only their node
        can run went back and forth thousands of times in a run.

        :param view: the cluster view.
        :param closed: nodes that take no new tasks.
        :param moved: moves already decided this tick (those nodes give nothing more; their tasks
            use up takers' streams first).
        """
        self._tick += 1
        self._judge_takers(view)
        alive = view.alive.astype(bool)
        gpu = alive & (view.n_gpus > 0)
        waiting = view.ready_waiting
        taker = gpu & (view.tasks_on_node == 0)
        taker[list(closed)] = False
        for m, until in self._passed_over.items():
            if until > self._tick:
                taker[m] = False
        streams = np.maximum(view.node_streams, 0)
        budget = int(streams[taker].sum()) - sum(k for _, k in moved)
        if budget <= 0:
            self.steal_streak.clear()
            return []
        takers = np.flatnonzero(taker)
        wait = capacity_wait(view)
        per_task = view.backlog_gpu_s / np.maximum(view.tasks_on_node, 1)
        given = {n for n, _ in moved}
        out: list[tuple[int, int]] = []
        donors: list[int] = np.flatnonzero(gpu & (waiting > 0)).tolist()
        for n in set(self.steal_streak) - set(donors):
            self.steal_streak[n] = 0
        for n in sorted(donors, key=lambda n: (-wait[n], n)):
            if n in given:
                continue
            # nominal seconds at n's datasheet, run at a taker's datasheet and measured speed
            run = (
                per_task[n]
                * view.node_tflops_mean[n]
                / view.node_tflops_mean[takers]
                / np.maximum(view.node_speed_gpu[takers], 1e-3)
            )
            fit = takers[self.steal_margin * run < wait[n]]
            room = int(streams[fit].sum())
            self.steal_streak[n] = self.steal_streak.get(n, 0) + 1 if room > 0 else 0
            k = min(int(waiting[n]), budget, room)
            if k > 0 and self.steal_streak[n] >= self.steal_ticks:
                out.append((n, k))
                budget -= k
                self.steal_streak[n] = 0
                self._expected.update(int(m) for m in fit)
        return out

    def _judge_takers(self, view: ClusterView) -> None:
        """Pass over the takers that stayed empty after the last steal meant work for them."""
        for m in self._expected:
            if view.tasks_on_node[m] > 0:
                self._misses[m] = 0
            else:
                self._misses[m] = min(self._misses.get(m, 0) + 1, STEAL_BACKOFF_DOUBLINGS)
                self._passed_over[m] = self._tick + self.steal_ticks * 2 ** self._misses[m]
        self._expected.clear()

"""What a node agent reports: how long each GPU had work, the end-of-run figures of each GPU
(:class:`~runtime.cluster.backend.DeviceReport`) and the agent's counters
(:class:`~runtime.cluster.backend.ClusterStats`)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from rlsched.view import ClusterView
from runtime.cluster.backend import ClusterStats, DeviceReport
from runtime.cluster.config import LiveNode
from runtime.mlsm.memory import DeviceMemory
from runtime.mlsm.streams import StreamFeedback, StreamPool


class NodeReports:
    """Busy time, device figures and counters of one node.

    :param nspec: the node.
    :param node: its row in ``view``.
    :param view: the cluster view (how many subtasks each GPU runs).
    :param memory: each GPU's memory manager (cache counters).
    :param pools: each GPU's stream pool (active streams).
    :param feedback: the node's stream-feedback controller (its moves).
    :param lock: the cluster lock guarding ``view``.
    :param clock: seconds since the run started.
    """

    def __init__(
        self,
        nspec: LiveNode,
        node: int,
        view: ClusterView,
        memory: list[DeviceMemory],
        pools: list[StreamPool],
        feedback: StreamFeedback,
        lock: threading.RLock,
        clock: Callable[[], float],
    ) -> None:
        self.nspec, self.node, self.view = nspec, node, view
        self.memory, self.pools, self.feedback = memory, pools, feedback
        self.lock, self.clock = lock, clock
        self.gpu_busy_s = [0.0] * len(pools)
        self._gpu_mark = [0.0] * len(pools)
        #: Subtasks that ran to the end.
        self.subtasks_done = 0
        #: Seconds spent offering ready subtasks to the placer.
        self.dispatch_s = 0.0

    def gpu_tick(self, g: int, now: float) -> None:
        """Integrate the time GPU ``g`` had at least one subtask running (lock held)."""
        if self.view.fast.gpu_running[self.node][g] > 0:
            self.gpu_busy_s[g] += now - self._gpu_mark[g]
        self._gpu_mark[g] = now

    def gpu_util(self) -> list[float]:
        """Fraction of the run each GPU had at least one subtask running."""
        with self.lock:
            now = self.clock()
            for g in range(len(self.pools)):
                self.gpu_tick(g, now)
            return [b / now if now > 0 else 0.0 for b in self.gpu_busy_s]

    def device_reports(self) -> list[DeviceReport]:
        """Per-GPU stream count, utilisation and cache counters of this node."""
        util = self.gpu_util()
        out = []
        for g, mem in enumerate(self.memory):
            st = mem.stats()
            out.append(
                DeviceReport(
                    self.nspec.name,
                    g,
                    self.nspec.gpus[g].model,
                    self.pools[g].active,
                    util[g],
                    st.hits,
                    st.misses,
                    st.evictions,
                    st.h2d_bytes_loaded,
                    st.h2d_bytes_saved,
                    st.refusals,
                )
            )
        return out

    def stats(self) -> ClusterStats:
        """The node's counters: stream moves, subtasks done, dispatch seconds."""
        return ClusterStats(len(self.feedback.moves), self.subtasks_done, self.dispatch_s)

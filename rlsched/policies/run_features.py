"""How a run is going under the pair running it: features for ``auto``'s second decision.

``auto``'s first decision (:mod:`rlsched.policies.case_features`) sees the fleet and the first
tasks, never how a pair copes with them; where it chose wrong, the run shows it afterwards: work
piles up on a few nodes while alike ones have idle streams, tasks finish more slowly than they
arrive. :class:`RunWatch` samples the cluster view at every arrival between the first decision
and the second and averages what it sees. Everything is observable by a real system: the
scheduler's own view (tasks committed to each node, streams, alive nodes) and the count of tasks
that arrived; nothing of the simulator's ground truth.
"""

from __future__ import annotations

import numpy as np

from rlsched.view import ClusterView

#: The features, in order (the second decision's model records them and refuses others).
RUN_FEATURES: tuple[str, ...] = (
    "in_system_per_stream",
    "stranded_share",
    "concentration",
    "load_spread",
    "done_share",
)


def snapshot(view: ClusterView) -> tuple[float, float, float, float]:
    """(tasks in the system per stream, stranded share, concentration, load spread) of the alive
    GPU nodes now; zeros without one.

    *Stranded*: streams idle on some nodes while tasks wait beyond the streams of others, over all
    streams — capacity lost to imbalance, whatever its cause. *Concentration*: the busiest node's
    tasks per stream over the mean. *Load spread*: the coefficient of variation of tasks per stream.
    """
    streams = np.asarray(view.node_streams, dtype=float)
    gpu = np.asarray(view.alive, dtype=bool) & (streams > 0)
    if not gpu.any():
        return 0.0, 0.0, 0.0, 0.0
    s = streams[gpu]
    tasks = np.asarray(view.tasks_on_node, dtype=float)[gpu]
    total = float(s.sum())
    idle = float(np.maximum(s - tasks, 0.0).sum())
    excess = float(np.maximum(tasks - s, 0.0).sum())
    per = tasks / s
    mean = float(per.mean())
    conc = float(per.max() / mean) if mean > 0 else 0.0
    spread = float(per.std() / mean) if mean > 0 else 0.0
    return float(tasks.sum() / total), min(idle, excess) / total, conc, spread


class RunWatch:
    """Averages :func:`snapshot` over the arrivals it is shown (those between ``auto``'s two
    decisions: it keeps a sum, not the samples)."""

    def __init__(self) -> None:
        self._sum = np.zeros(4)
        self.samples = 0

    def reset(self) -> None:
        self._sum[:] = 0.0
        self.samples = 0

    def observe(self, view: ClusterView) -> None:
        """Sample the view (call once per arriving task)."""
        self._sum += snapshot(view)
        self.samples += 1

    def features(self, view: ClusterView, arrived: int) -> np.ndarray:
        """The :data:`RUN_FEATURES` now.

        :param view: the cluster as the scheduler sees it now.
        :param arrived: tasks that have arrived in the run so far.
        """
        mean = self._sum / max(self.samples, 1)
        alive = np.asarray(view.alive, dtype=bool)
        in_system = float(np.asarray(view.tasks_on_node, dtype=float)[alive].sum())
        done = 1.0 - in_system / arrived if arrived > 0 else 0.0
        return np.array([*mean, max(done, 0.0)], dtype=float)

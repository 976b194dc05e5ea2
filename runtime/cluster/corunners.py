"""Time-weighted co-runners of the subtasks on one node's GPUs, for online interference learning.

A subtask on a busy GPU rarely keeps the same co-runners from start to end: others finish and
new ones start beside it. Learning only from runs whose co-runners never changed leaves almost
nothing on a loaded cluster (in one run at 30 tasks/s on 2 cores with host load: 12 clean
co-runs against 1,013 discarded). Under the placer's additive slowdown model, a run's measured
slowdown is the time-weighted sum of its partners' slowdowns, so each partner kind is reported
with the average number of subtasks of that kind that ran beside it (its *share*).

Per GPU, the integral over time of the number of running subtasks of each kind is kept; a run's
shares are the integrals' growth between its start and its end, over its duration, less itself.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

#: Shares below this are dropped (a partner that overlapped the run's last instant).
MIN_SHARE = 1e-3


@dataclass(frozen=True)
class Mark:
    """Where a run started: the clock and the integrals then."""

    t: float
    area: dict[str, float]


class CoRunners:
    """Integrals of running subtasks per kind on each GPU of a node.

    :param n_gpus: GPUs of the node.
    """

    def __init__(self, n_gpus: int) -> None:
        self._t = [0.0] * n_gpus
        self._area: list[dict[str, float]] = [{} for _ in range(n_gpus)]
        self._running: list[Counter[str]] = [Counter() for _ in range(n_gpus)]

    def _advance(self, g: int, now: float) -> None:
        dt = now - self._t[g]
        if dt > 0:
            area = self._area[g]
            for kind, n in self._running[g].items():
                if n:
                    area[kind] = area.get(kind, 0.0) + n * dt
        self._t[g] = max(now, self._t[g])

    def started(self, g: int, kind: str, now: float) -> Mark:
        """A subtask of ``kind`` started on GPU ``g`` at ``now``; its mark for :meth:`finished`."""
        self._advance(g, now)
        self._running[g][kind] += 1
        return Mark(now, dict(self._area[g]))

    def finished(self, g: int, kind: str, mark: Mark, now: float) -> dict[str, float]:
        """It ended (or was given up) at ``now``: the average number of subtasks of each kind
        (itself not counted) that ran beside it, by kind (empty: it ran alone)."""
        self._advance(g, now)
        self._running[g][kind] -= 1
        dt = now - mark.t
        if dt <= 0:
            return {}
        area = self._area[g]
        shares = {k: (a - mark.area.get(k, 0.0)) / dt for k, a in area.items()}
        shares[kind] = shares.get(kind, 0.0) - 1.0  # itself, the whole time
        return {k: s for k, s in sorted(shares.items()) if s > MIN_SHARE}

"""Safe promotion of a candidate stage-1 policy: a canary on a share of the tasks, promoted only
when it is measured not worse than the incumbent, rolled back as soon as it is measured worse.

While a canary runs, a task whose id falls in the canary's share (``id * φ mod 1 < share``, an
even, deterministic spread over ids) is placed by the candidate, every other task by the
incumbent; both run on the same cluster with the same placer, at the same time. For each arm the
service records, per completed task, its latency (submission to completion, as the client sees
it) and whether it failed. The test (:func:`judge`), stated in the README:

- **Rolled back** as soon as, with at least ``min_tasks`` finished in each arm, the candidate's
  mean latency exceeds the incumbent's by more than ``margin`` and a one-sided Welch t-test
  rejects "not slower" at level ``alpha``; or its failure rate exceeds the incumbent's by more
  than ``margin`` (absolute) — throughput lost to failures.
- **Promoted** once ``promote_tasks`` have finished in each arm and the upper ``1 - alpha``
  confidence bound of the candidate's mean latency over the incumbent's is at most ``1 + margin``
  (and its failure rate is not worse by more than ``margin``).
- Otherwise the canary keeps running.

Throughput enters through failures and latency: both arms receive tasks at their share of the
same arrival stream, so an arm that completes fewer of its tasks fails them or lets them wait,
and the latency test sees the wait.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import numpy as np

#: The golden-ratio fraction that spreads ids evenly over [0, 1).
_PHI = (math.sqrt(5.0) - 1.0) / 2.0


def in_canary(task_id: int, share: float) -> bool:
    """Whether task ``task_id`` is placed by the candidate at this canary share."""
    return (task_id * _PHI) % 1.0 < share


@dataclass(frozen=True)
class CanaryRule:
    """The promotion test's settings.

    :param share: share of tasks the candidate places, in (0, 1).
    :param min_tasks: finished tasks per arm before a rollback can be decided.
    :param promote_tasks: finished tasks per arm before a promotion can be decided.
    :param margin: relative latency (and absolute failure-rate) slack within which the candidate
        counts as not worse.
    :param alpha: level of the one-sided tests.
    """

    share: float = 0.2
    min_tasks: int = 30
    promote_tasks: int = 200
    margin: float = 0.05
    alpha: float = 0.05


@dataclass
class Arm:
    """Finished tasks of one arm: latencies (seconds) and failures."""

    latencies: list[float] = field(default_factory=list)
    failed: int = 0

    @property
    def finished(self) -> int:
        return len(self.latencies) + self.failed

    @property
    def failure_rate(self) -> float:
        return self.failed / self.finished if self.finished else 0.0

    def summary(self) -> dict[str, float | int | None]:
        lat = self.latencies
        return {
            "finished": self.finished,
            "failed": self.failed,
            "mean_latency_s": float(np.mean(lat)) if lat else None,
            "p95_latency_s": float(np.percentile(lat, 95)) if lat else None,
        }


def _ratio_upper(cand: np.ndarray, inc: np.ndarray, alpha: float) -> float:
    """Upper ``1 - alpha`` bound of mean(cand) / mean(inc) (delta method on the two means)."""
    from scipy import stats  # here, not at import: the service's config reads this module

    mc, mi = float(cand.mean()), float(inc.mean())
    vc, vi = float(cand.var(ddof=1)) / len(cand), float(inc.var(ddof=1)) / len(inc)
    se = math.sqrt(vc / mi**2 + vi * mc**2 / mi**4)
    return mc / mi + float(stats.norm.ppf(1.0 - alpha)) * se


def judge(candidate: Arm, incumbent: Arm, rule: CanaryRule) -> str | None:
    """``"rollback"``, ``"promote"`` or ``None`` (keep measuring), by the module's test."""
    if min(candidate.finished, incumbent.finished) < rule.min_tasks:
        return None
    if candidate.failure_rate > incumbent.failure_rate + rule.margin:
        return "rollback"
    c, i = np.asarray(candidate.latencies), np.asarray(incumbent.latencies)
    if len(c) < 2 or len(i) < 2:
        return None
    if c.mean() > i.mean() * (1.0 + rule.margin):
        from scipy import stats

        t = stats.ttest_ind(c, i, equal_var=False, alternative="greater")
        if float(t.pvalue) < rule.alpha:
            return "rollback"
    enough = min(candidate.finished, incumbent.finished) >= rule.promote_tasks
    if enough and i.mean() > 0 and _ratio_upper(c, i, rule.alpha) <= 1.0 + rule.margin:
        return "promote"
    return None


class Canary:
    """One candidate policy under test.

    :param name: the candidate's scheduler spec (``SELECTOR[+PLACER]``).
    :param selector: the candidate's stage-1 policy.
    :param version: its version (checkpoint sha256), if it has one.
    :param rule: the promotion test.
    """

    def __init__(self, name: str, selector: object, version: str | None, rule: CanaryRule) -> None:
        self.name, self.selector, self.version, self.rule = name, selector, version, rule
        self.arms = {"candidate": Arm(), "incumbent": Arm()}
        self._arm_of: dict[int, str] = {}
        self._lock = threading.Lock()

    def choose(self, task_id: int) -> bool:
        """Whether the candidate places ``task_id`` (recorded for its outcome)."""
        mine = in_canary(task_id, self.rule.share)
        with self._lock:
            self._arm_of[task_id] = "candidate" if mine else "incumbent"
        return mine

    def finished(self, task_id: int, latency_s: float, failed: bool) -> None:
        """A task placed while the canary ran finished (others are ignored)."""
        with self._lock:
            arm = self._arm_of.pop(task_id, None)
            if arm is None:
                return
            a = self.arms[arm]
            if failed:
                a.failed += 1
            else:
                a.latencies.append(latency_s)

    def verdict(self) -> str | None:
        """The test's decision now."""
        with self._lock:
            return judge(self.arms["candidate"], self.arms["incumbent"], self.rule)

    def summary(self) -> dict[str, object]:
        with self._lock:
            return {
                "candidate": self.name,
                "version": self.version,
                "share": self.rule.share,
                "arms": {k: a.summary() for k, a in self.arms.items()},
            }

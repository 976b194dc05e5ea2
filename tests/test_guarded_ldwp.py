"""The guarded-LDWP probe (experiments/benchmarks/guarded_ldwp.py): its guard bounds every choice,
and without a guard it is the shipped selector."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from experiments import inputs
from experiments.benchmarks.guarded_ldwp import GuardedLdwp, main
from experiments.simulate import simulate
from rlsched.estimates import drain_estimates
from rlsched.policies import registry
from rlsched.tasks import Task
from rlsched.view import ClusterView

#: Unguarded, the shipped network sends 39 of these 300 tasks beyond 1.5x the least drain estimate.
CASE = "hetero-saturated#300"


#: Each choice's drain estimate over the least among the feasible nodes, in the last run.
_SEEN: list[float] = []


class _Recorded(GuardedLdwp):
    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        node = super().select(task, view, mask)
        etc = np.where(mask, drain_estimates(task, view), np.inf)
        _SEEN.append(float(etc[node] / etc.min()))
        return node


def _ratios(guard: float) -> np.ndarray:
    _SEEN.clear()
    registry.register_selector(f"test-guard-{guard:g}", lambda: _Recorded(guard, "drain"))
    simulate(inputs.scenario(CASE, None), f"test-guard-{guard:g}+speedup", 20000)
    return np.array(_SEEN)


def test_the_guard_bounds_every_choice_and_binds_here() -> None:
    guarded, free = _ratios(1.5), _ratios(0.0)
    assert len(guarded) == len(free) == 300
    assert guarded.max() <= 1.5
    assert (free > 1.5).sum() >= 10  # the case is one where the guard has something to do


def test_without_a_guard_it_is_the_shipped_selector_and_writes_rows(tmp_path: Path) -> None:
    main(["--scenarios", "transfer-4#60", "--seeds", "1", "--guards", "g0", "--out", str(tmp_path)])
    rows = json.loads((tmp_path / "g0" / "results.json").read_text())["rows"]
    shipped = simulate(inputs.scenario("transfer-4#60", None), "ldwp+iawp", 10001)
    assert [(r["scheduler"], r["seed"], r["throughput"]) for r in rows] == [
        ("ldwp+iawp", 10001, shipped.throughput)
    ]

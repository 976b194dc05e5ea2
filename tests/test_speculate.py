"""The speculative-copies probe (experiments/benchmarks/speculate.py): a straggler on a slow node
gets a copy on an idle fast node, the first copy to finish completes the task once, and the other
leaves nothing behind on its node."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from envs.simulator import Simulator
from experiments.benchmarks.speculate import SpeculatingSimulator, judge
from rlsched.cluster import NodeSpec
from rlsched.policies.registry import parse_scheduler
from rlsched.scenarios.spec import Scenario
from rlsched.scenarios.taskgen import generate_tasks


def _run(cls: type[Simulator], sc: Scenario) -> Simulator:
    s = parse_scheduler("round-robin+speedup")  # half the tasks go to the slow node, whatever it is
    sim = cls(sc, generate_tasks(sc, 0), s.placer, seed=0)
    sim.run(s)
    return sim


def test_a_straggler_gets_a_copy_that_wins_and_the_loser_leaves_nothing_behind(
    small_scenario: Callable[..., Scenario], node: Callable[..., NodeSpec]
) -> None:
    # A CPU-only node runs matmul on its cores, ~100x slower than the idle H100 beside it.
    sc = small_scenario(
        nodes=(node("cores", gpus=()), node("fast", gpus=("H100",))),
        apps={"matmul": 1.0},
        tasks=4,
        rate_per_min=600,
    )
    plain, spec = _run(Simulator, sc), _run(SpeculatingSimulator, sc)
    assert isinstance(spec, SpeculatingSimulator)
    assert spec.copies == spec.copies_won == 2
    assert [r.completions for r in spec.records] == [1, 1, 1, 1]
    assert all(r.node == 1 for r in spec.records)  # each task completed where its winner ran
    assert spec.metrics().makespan_s < plain.metrics().makespan_s / 10
    # The cancelled copies released their cores, memory, backlog and queue places.
    v = spec.view
    assert v.cpu_busy.sum() == 0 and v.tasks_on_node.sum() == 0 and v.ready_waiting.sum() == 0
    assert np.allclose(v.backlog_cpu_s, 0) and np.allclose(v.backlog_gpu_s, 0)
    assert np.allclose(v.host_mem_used_mb, 0) and v.gpu_running.sum() == 0


def test_no_copy_where_a_fresh_run_would_not_save_half(
    small_scenario: Callable[..., Scenario], node: Callable[..., NodeSpec]
) -> None:
    sc = small_scenario(
        nodes=(node("k80", gpus=("K80",)), node("fast", gpus=("H100",))),
        apps={"matmul": 1.0},
        tasks=2,
        rate_per_min=600,
    )
    spec = _run(SpeculatingSimulator, sc)
    assert isinstance(spec, SpeculatingSimulator) and spec.copies == 0
    assert spec.metrics().makespan_s == pytest.approx(_run(Simulator, sc).metrics().makespan_s)


def test_the_probe_refuses_rebalancing(small_scenario: Callable[..., Scenario]) -> None:
    sc = small_scenario(tasks=2)
    with pytest.raises(ValueError, match="without rebalancing"):
        SpeculatingSimulator(sc, generate_tasks(sc, 0), parse_scheduler("mct").placer, seed=0, rebalance=True)


def test_judge_compares_each_variant_with_its_own_best_heuristic_pair() -> None:
    rows = [
        {
            "case": c,
            "scheduler": s,
            "seed": 1,
            "copies_on": on,
            "throughput": t,
            "latency_mean_s": 1.0,
            "copies": 0,
        }
        for c, s, on, t in [
            ("a", "auto", False, 0.9),
            ("a", "h", False, 1.0),
            ("a", "auto", True, 1.0),
            ("a", "h", True, 1.0),
        ]
    ]
    v = judge(rows, ("auto",))
    assert v["without"]["auto"]["geomean"] == pytest.approx(0.9)
    assert v["with copies"]["auto"]["share_099"] == 1.0
    assert v["copies against none, per scheduler"]["auto"]["throughput"] == pytest.approx(1 / 0.9)

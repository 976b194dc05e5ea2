"""Run metrics on hand-made records and utilisation integrals (``rlsched.metrics``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from rlsched.metrics import load_balance, summarise


@dataclass
class Rec:
    arrival_s: float
    first_start_s: float = math.nan
    done_s: float = math.nan
    deadline_s: float | None = None
    requeues: int = 0
    completions: int = 0


def util(
    cpu: list[float],
    host_mem: list[float],
    gpu: list[float] | None = None,
    gpu_mem: list[float] | None = None,
    alive_s: list[float] | None = None,
    has_gpu: list[bool] | None = None,
    gpu_seconds: list[float] | None = None,
    gpu_capacity_s: list[float] | None = None,
) -> dict[str, np.ndarray]:
    """A utilisation dict as the simulator's accumulator summarises it."""
    n = len(cpu)
    z = [0.0] * n
    return {
        "alive_s": np.array(alive_s if alive_s is not None else [100.0] * n),
        "cpu": np.array(cpu),
        "host_mem": np.array(host_mem),
        "gpu": np.array(gpu if gpu is not None else z),
        "gpu_mem": np.array(gpu_mem if gpu_mem is not None else z),
        "has_gpu": np.array(has_gpu if has_gpu is not None else [True] * n),
        "gpu_seconds": np.array(gpu_seconds if gpu_seconds is not None else z),
        "gpu_capacity_s": np.array(gpu_capacity_s if gpu_capacity_s is not None else z),
    }


# ---- load balance -----------------------------------------------------------------------------------
def test_equal_load_is_perfect_balance() -> None:
    u = util([0.5, 0.5, 0.5], [0.2, 0.2, 0.2], [0.9, 0.9, 0.9], [0.1, 0.1, 0.1])
    assert load_balance(u) == pytest.approx(1.0)
    # Different mixes of the four utilisations with the same mean are still balanced.
    u = util([1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.5, 0.5])
    assert load_balance(u) == pytest.approx(1.0)


def test_load_balance_is_one_minus_population_std_of_node_loads() -> None:
    # Node loads (mean of the four) 0.2 and 0.6: population std 0.2.
    u = util([0.2, 0.6], [0.2, 0.6], [0.2, 0.6], [0.2, 0.6])
    assert load_balance(u) == pytest.approx(0.8)
    # Loads 0, 0.5, 1: std sqrt(1/6).
    u = util([0.0, 0.5, 1.0], [0.0, 0.5, 1.0], [0.0, 0.5, 1.0], [0.0, 0.5, 1.0])
    assert load_balance(u) == pytest.approx(1.0 - math.sqrt(1.0 / 6.0))


def test_load_balance_leaves_out_gpu_terms_of_gpu_less_nodes() -> None:
    # Node 1 has no GPU: its load is mean(cpu, host_mem) = 0.4, whatever its GPU columns say.
    u = util([0.4, 0.4], [0.4, 0.4], [0.4, 0.0], [0.4, 0.0], has_gpu=[True, False])
    assert load_balance(u) == pytest.approx(1.0)
    u = util([0.0, 0.8], [0.0, 0.4], [0.0, 0.0], [0.0, 0.0], has_gpu=[True, False])
    assert load_balance(u) == pytest.approx(1.0 - 0.3)  # loads 0 and 0.6


def test_load_balance_leaves_out_nodes_never_alive() -> None:
    u = util([0.3, 0.3, 1.0], [0.3, 0.3, 1.0], [0.3, 0.3, 1.0], [0.3, 0.3, 1.0], alive_s=[10.0, 5.0, 0.0])
    assert load_balance(u) == pytest.approx(1.0)
    assert math.isnan(load_balance(util([0.5], [0.5], alive_s=[0.0])))


# ---- summarise -------------------------------------------------------------------------------------
def _summary(records: list[Rec], u: dict[str, np.ndarray] | None = None, **kw: float):
    args = {"unschedulable": 0, "decisions": len(records), "wall_s": 1.0, "decide_s": 0.5} | kw
    return summarise(records, u if u is not None else util([0.5], [0.5]), **args)  # type: ignore[arg-type]


def test_latency_percentiles_and_throughput() -> None:
    # 100 tasks arriving at t = 0..99, each taking i + 1 seconds: latencies 1..100.
    recs = [Rec(float(i), float(i), float(2 * i + 1), completions=1) for i in range(100)]
    m = _summary(recs)
    assert m.tasks_total == m.tasks_completed == 100
    assert m.latency_mean_s == pytest.approx(50.5)
    assert m.latency_p50_s == pytest.approx(50.5)
    assert m.latency_p95_s == pytest.approx(95.05)  # linear interpolation between 95 and 96
    assert m.latency_p99_s == pytest.approx(99.01)
    assert m.makespan_s == pytest.approx(199.0)  # last done (199) - first arrival (0)
    assert m.throughput == pytest.approx(100 / 199.0)
    assert m.queue_wait_mean_s == pytest.approx(0.0)
    assert m.decisions_per_s == pytest.approx(200.0)


def test_counts_of_unfinished_tasks() -> None:
    recs = [
        Rec(0.0, 1.0, 5.0, completions=1, requeues=2),
        Rec(1.0, 3.0, 4.0, completions=1),
        Rec(2.0),  # unschedulable
        Rec(3.0, 4.0, requeues=1),  # requeued, then unschedulable
        Rec(4.0),  # neither done nor reported: lost
    ]
    m = _summary(recs, unschedulable=2)
    assert (m.tasks_total, m.tasks_completed, m.tasks_unschedulable, m.tasks_lost) == (5, 2, 2, 1)
    assert m.tasks_requeued == 3
    assert m.makespan_s == pytest.approx(5.0)
    assert m.throughput == pytest.approx(2 / 5.0)
    assert m.latency_mean_s == pytest.approx((5.0 + 3.0) / 2)
    assert m.queue_wait_mean_s == pytest.approx((1.0 + 2.0) / 2)


def test_deadline_misses_count_unfinished_tasks() -> None:
    recs = [
        Rec(0.0, 0.0, 5.0, deadline_s=10.0, completions=1),  # met
        Rec(0.0, 0.0, 12.0, deadline_s=10.0, completions=1),  # missed
        Rec(0.0, 0.0, 8.0, completions=1),  # no deadline: not counted
        Rec(0.0, deadline_s=10.0),  # never done: missed
    ]
    m = _summary(recs, unschedulable=1)
    assert m.deadline_miss_rate == pytest.approx(2 / 3)
    assert _summary(recs[2:3]).deadline_miss_rate == 0.0


def test_gpu_util_is_busy_gpu_seconds_over_capacity() -> None:
    u = util(
        [0.5, 0.5], [0.5, 0.5], has_gpu=[True, False], gpu_seconds=[30.0, 0.0], gpu_capacity_s=[200.0, 0.0]
    )
    assert _summary([Rec(0.0, 0.0, 1.0, completions=1)], u).gpu_util == pytest.approx(0.15)
    assert _summary([Rec(0.0, 0.0, 1.0, completions=1)]).gpu_util == 0.0  # no GPU capacity at all


def test_nothing_completed_gives_nan_latencies_and_zero_throughput() -> None:
    m = _summary([Rec(0.0), Rec(1.0)], unschedulable=2, decide_s=0.0)
    assert m.tasks_completed == 0 and m.throughput == 0.0 and m.tasks_lost == 0
    for v in (m.makespan_s, m.latency_mean_s, m.latency_p50_s, m.latency_p99_s, m.queue_wait_mean_s):
        assert math.isnan(v)
    assert math.isnan(m.decisions_per_s)
    d = m.to_dict()
    assert d["latency_mean_s"] is None and d["makespan_s"] is None and d["tasks_completed"] == 0

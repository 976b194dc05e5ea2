"""The capacity bound (``envs.capacity``) is a bound: no scheduler ever beats it.

Random small scenarios (those of the simulator's property tests, often at an arrival rate far
above what the cluster serves, so that capacity and not arrivals binds) run under every
selector+placer pair; no run's throughput exceeds the bound and no task finishes sooner than its
latency bound.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_simulator import scenarios

from envs.capacity import capacity_bound, task_latency_bounds
from envs.simulator import Simulator
from rlsched.policies.registry import parse_scheduler, placer_names, selector_names
from rlsched.scenarios.loader import list_scenarios, load_scenario
from rlsched.scenarios.spec import ArrivalSpec, Scenario
from rlsched.scenarios.taskgen import generate_tasks
from tests.conftest import examples

SATURATING = 1e5  # tasks per minute: every task arrives within a fraction of a second


def _saturated(sc: Scenario) -> Scenario:
    wl = dataclasses.replace(sc.workload, arrival=ArrivalSpec(rate_per_min=SATURATING))
    return dataclasses.replace(sc, workload=wl)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scenarios(),
    st.booleans(),
    st.sampled_from(selector_names()),
    st.sampled_from(placer_names()),
    st.integers(0, 99),
)
def test_no_scheduler_exceeds_the_bound(
    scenario: Scenario, saturate: bool, selector: str, placer: str, seed: int
) -> None:
    sc = _saturated(scenario) if saturate else scenario
    tasks = generate_tasks(sc, seed)
    bound = capacity_bound(sc, tasks)
    lat_lb = task_latency_bounds(sc, tasks)
    sched = parse_scheduler(f"{selector}+{placer}")
    sim = Simulator(sc, tasks, sched.placer, seed)
    m = sim.run(sched)
    for rec, lb in zip(sim.records, lat_lb, strict=True):
        if not math.isnan(rec.done_s):
            assert rec.done_s - rec.arrival_s >= lb * (1 - 1e-9), (rec, lb)
    if m.tasks_completed == bound.tasks > 0:  # (no task can run anywhere: nothing to bound)
        # Relative 1e-9: an arrival-bound run equals its bound up to float rounding.
        assert m.throughput <= bound.throughput_ub * (1 + 1e-9), (m.throughput, bound)
        assert m.latency_mean_s >= bound.latency_lb_mean_s * (1 - 1e-9)
        assert m.latency_p95_s >= bound.latency_lb_p95_s * (1 - 1e-9)


def test_the_bound_is_not_vacuous(small_scenario, node) -> None:
    """On a saturated cluster the best heuristic comes within a factor of two of the bound."""
    nodes = (node("a", gpus=("T4", "T4"), streams=4, net_gbps=100.0), node("b", gpus=("P4",), net_gbps=100.0))
    sc = _saturated(small_scenario(nodes=nodes, tasks=200, apps={"matmul": 1.0, "fft": 1.0}))
    tasks = generate_tasks(sc, 0)
    bound = capacity_bound(sc, tasks)
    sched = parse_scheduler("mct+mlsm")
    m = Simulator(sc, tasks, sched.placer, 0).run(sched)
    assert bound.binding == "capacity"
    assert 0.5 * bound.throughput_ub < m.throughput <= bound.throughput_ub, (m.throughput, bound)


def test_colocation_raises_the_bound_above_solo_speeds(small_scenario, node) -> None:
    """Complementary kinds sharing a GPU progress faster than one at a time: the LP counts it."""
    nodes = (node("a", gpus=("T4", "T4"), streams=4, net_gbps=100.0), node("b", gpus=("P4",), net_gbps=100.0))
    sc = _saturated(small_scenario(nodes=nodes, tasks=60, apps={"matmul": 1.0, "fft": 1.0}))
    tasks = generate_tasks(sc, 0)
    shared = capacity_bound(sc, tasks)
    one_stream = dataclasses.replace(
        sc,
        cluster=dataclasses.replace(
            sc.cluster, nodes=tuple(dataclasses.replace(n, streams_per_gpu=1) for n in sc.cluster.nodes)
        ),
    )
    solo = capacity_bound(one_stream, tasks)
    assert shared.capacity_per_min > 1.2 * solo.capacity_per_min


def test_offered_load_and_arrival_bound_label(small_scenario) -> None:
    slow = small_scenario(tasks=40, rate_per_min=1.0)
    b = capacity_bound(slow, generate_tasks(slow, 0))
    assert b.offered_load < 0.8 and b.arrival_bound and b.binding == "arrivals"
    assert b.to_dict()["arrival_bound"] is True
    fast = _saturated(slow)
    assert not capacity_bound(fast, generate_tasks(fast, 0)).arrival_bound


@pytest.mark.parametrize("n", [0])
def test_no_tasks(small_scenario, n: int) -> None:
    sc = small_scenario(tasks=n)
    b = capacity_bound(sc, generate_tasks(sc, 0))
    assert b.tasks == 0 and b.throughput_ub == 0.0
    assert np.isnan(b.latency_lb_mean_s)


BUILTIN_CAPS = {
    "large": 2000,
    "interference-gavel": 3000,
    "interference": 3000,
    "interference-saturated": 3000,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(list_scenarios())))
def test_every_builtin_stays_under_its_bound(name: str) -> None:
    """On every built-in scenario (the largest cut to their first tasks), oracle and the main
    heuristics stay under the bound."""
    sc = load_scenario(name)  # the data ship with the package: no built-in may be skipped
    if name in BUILTIN_CAPS:
        sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, tasks=BUILTIN_CAPS[name]))
    tasks = generate_tasks(sc, 20_000)
    bound = capacity_bound(sc, tasks)
    for spec in ("oracle+speedup", "mct+mlsm", "least-loaded+speedup", "random+speedup"):
        sched = parse_scheduler(spec)
        m = Simulator(sc, tasks, sched.placer, 20_000).run(sched)
        assert m.throughput <= bound.throughput_ub, (spec, m.throughput, bound)
        assert m.latency_p95_s >= bound.latency_lb_p95_s * (1 - 1e-9), (spec, m.latency_p95_s, bound)

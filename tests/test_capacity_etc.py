"""``mct-cap``: a node's GPU wait is its backlog over what its GPUs would deliver with every stream
busy (measured per-run speed times streams), so a lightly used node is not read as slow."""

from __future__ import annotations

import pytest

from rlsched.estimates import capacity_wait, drain_wait
from rlsched.policies.registry import parse_scheduler
from rlsched.view import ClusterView
from tests.conftest import node, small_scenario
from tests.test_drain_etc import finish_one

# Ten alike nodes of one T4 with four streams.
ALIKE = small_scenario(
    nodes=tuple(node(f"n{i}", cores=4, gpus=("T4",), streams=4) for i in range(10)),
    apps={"matmul": 1.0, "fft": 1.0},
    tasks=300,
    rate_per_min=900.0,
)


def test_a_lightly_used_node_reads_at_its_streams_capacity() -> None:
    v = ClusterView.from_spec(ALIKE.cluster)
    v.backlog_gpu_s[:2] = 8.0
    for _ in range(5):
        finish_one(v, 0, running=1, speed=1.0)  # node 0 ran one subtask at a time
        finish_one(v, 1, running=4, speed=1.0)  # node 1 ran four side by side, as fast each
    # What the streams delivered reads node 0 four times slower; both can do the same.
    assert drain_wait(v)[0] == pytest.approx(4 * drain_wait(v)[1], rel=0.05)
    assert capacity_wait(v)[0] == pytest.approx(capacity_wait(v)[1]) == pytest.approx(8.0 / 4)


def test_capacity_carries_the_measured_slowdown() -> None:
    v = ClusterView.from_spec(ALIKE.cluster)
    v.backlog_gpu_s[0] = 8.0
    for _ in range(40):
        finish_one(v, 0, running=4, speed=0.5)  # four side by side, each at half speed
    assert capacity_wait(v)[0] == pytest.approx(8.0 / (0.5 * 4), rel=0.05)


def test_mct_cap_runs_in_the_simulator() -> None:
    from envs.simulator import Simulator
    from rlsched.scenarios.taskgen import generate_tasks

    sched = parse_scheduler("mct-cap+iawp-pass")
    assert sched.selector.name == "mct-cap"
    sim = Simulator(ALIKE, generate_tasks(ALIKE, 0), sched.placer, seed=0)
    assert sim.run(sched).tasks_completed == ALIKE.workload.tasks

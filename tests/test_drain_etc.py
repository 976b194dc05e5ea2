"""``mct-drain``: a node's GPU wait is its backlog over the aggregate rate its GPUs were measured
to deliver (per-run speed times co-runners), not a rate assumed from the stream count."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from envs.simulator import Simulator
from rlsched.estimates import drain_wait
from rlsched.policies.registry import parse_scheduler
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.view import SPEED_EMA, ClusterView
from runtime.cluster.ray_actor import apply_node_snapshot, node_snapshot
from tests.conftest import node, small_scenario

# A burst onto one A100 with four streams and two one-stream GPUs. matmul and fft contend for
# the same units, so the four streams deliver little more than one.
CONTENDED = small_scenario(
    nodes=(
        node("many", cores=8, gpus=("A100",), streams=4),
        node("one-a", cores=8, gpus=("A100",), streams=1),
        node("one-v", cores=8, gpus=("V100M32",), streams=1),
    ),
    apps={"matmul": 1.0, "fft": 1.0},
    tasks=200,
    rate_per_min=3000.0,
)


def finish_one(v: ClusterView, node_i: int, running: int, speed: float) -> None:
    """Start ``running`` subtasks on the node's first GPU and finish one at ``speed``."""
    for _ in range(running):
        v.gpu_started(node_i, 0, 1.0, "fft")
    v.gpu_finished(node_i, 0, 1.0, "fft", speed, SPEED_EMA)
    for _ in range(running - 1):
        v.gpu_finished(node_i, 0, 1.0, "fft", 0.0, SPEED_EMA)  # no sample: the rate is kept


def test_the_rate_starts_at_the_streams_and_then_is_measured() -> None:
    v = ClusterView.from_spec(CONTENDED.cluster)
    assert v.gpu_rate[:, 0].tolist() == [4.0, 1.0, 1.0]
    assert v.node_gpu_rate.tolist() == [4.0, 1.0, 1.0]
    finish_one(v, 0, running=3, speed=0.4)  # three side by side, each at 0.4: 1.2 in all
    assert v.gpu_rate[0, 0] == pytest.approx(1.2)  # the first sample replaces the guess
    assert v.node_gpu_rate[0] == pytest.approx(1.2)
    finish_one(v, 0, running=2, speed=0.9)  # second sample: a running mean of the two
    assert v.gpu_rate[0, 0] == pytest.approx((1.2 + 1.8) / 2)
    for _ in range(20):
        finish_one(v, 0, running=1, speed=1.1)
    assert v.gpu_rate[0, 0] == pytest.approx(1.1, abs=0.01)  # then an EMA that follows the GPU
    assert v.node_gpu_rate[0] == pytest.approx(v.gpu_rate[0, 0])


def test_drain_wait_is_backlog_over_the_measured_rate() -> None:
    sc = small_scenario(nodes=(node("a", gpus=("T4", "T4"), streams=3), node("cpu", gpus=())))
    v = ClusterView.from_spec(sc.cluster)
    v.backlog_gpu_s[:] = [12.0, 12.0]
    assert drain_wait(v).tolist() == [pytest.approx(12.0 / 6), 0.0]
    finish_one(v, 0, running=2, speed=0.5)  # GPU 0 measured at 1.0; GPU 1 still at its 3 streams
    assert drain_wait(v)[0] == pytest.approx(12.0 / 4)


def test_a_ray_snapshot_carries_the_rate_rescaled_with_the_speed() -> None:
    agent = ClusterView.from_spec(CONTENDED.cluster)
    finish_one(agent, 0, running=2, speed=0.6)
    snap = node_snapshot(agent, 0, seq=1)
    driver = ClusterView.from_spec(CONTENDED.cluster)
    apply_node_snapshot(driver, 0, snap)
    assert driver.gpu_rate[0, 0] == pytest.approx(agent.gpu_rate[0, 0])
    assert driver.node_gpu_rate[0] == pytest.approx(agent.gpu_rate[0, 0])
    assert driver.gpu_rate_samples[0, 0] == 1  # /v1/cluster reports how many samples it rests on


def test_a_joining_node_starts_at_its_streams_and_the_others_keep_theirs() -> None:
    v = ClusterView.from_spec(CONTENDED.cluster)
    finish_one(v, 0, running=3, speed=0.4)
    sc = small_scenario(nodes=(node("new", gpus=("T4", "T4"), streams=2),))
    v.append_nodes(ClusterView.from_spec(sc.cluster))
    assert v.gpu_rate[0, 0] == pytest.approx(1.2)
    assert v.node_gpu_rate.tolist() == pytest.approx([1.2, 1.0, 1.0, 4.0])


def _run(spec: str) -> tuple[float, Counter, np.ndarray]:
    sched = parse_scheduler(spec)
    sim = Simulator(CONTENDED, generate_tasks(CONTENDED, 0), sched.placer, seed=0)
    m = sim.run(sched)
    assert m.tasks_completed == 200
    return m.throughput, Counter(r.node for r in sim.records), sim.view.gpu_rate[:, 0].copy()


def test_mct_drain_sees_what_contending_streams_really_deliver() -> None:
    stream, stream_nodes, _ = _run("mct-stream+speedup")
    drain, drain_nodes, rate = _run("mct-drain+speedup")
    assert rate[0] < 2.0  # four streams measured at little more than one (1.13)
    assert drain > 1.3 * stream  # measured 130.6 vs 89.5 tasks/min
    assert drain_nodes[0] < stream_nodes[0]  # 63 vs 90 of 200 on the four-stream GPU

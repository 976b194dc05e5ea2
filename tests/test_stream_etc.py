"""The completion estimates count what a node really serves: GPU streams side by side
(``mct-stream``), and GPU-capable work on the cores of a node without GPUs."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from envs.simulator import Simulator
from rlsched.estimates import backlog_seconds, node_estimates, stream_queue_wait
from rlsched.policies.registry import parse_scheduler
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.tasks import Device
from rlsched.view import ClusterView
from tests.conftest import node, small_scenario

# A burst onto a fast many-stream GPU, a slow one, and a CPU-only node with many cores.
STREAMS = small_scenario(
    nodes=(
        node("fast", cores=8, gpus=("A100",), streams=6),
        node("slow", cores=8, gpus=("K80",), streams=6),
        node("cpu", cores=32, gpus=()),
    ),
    apps={"fft": 1.0, "kmeans": 1.0},
    tasks=200,
    rate_per_min=3000.0,
)


def _run(spec: str) -> tuple[float, Counter]:
    sched = parse_scheduler(spec)
    sim = Simulator(STREAMS, generate_tasks(STREAMS, 0), sched.placer, seed=0)
    m = sim.run(sched)
    assert m.tasks_completed == 200
    return m.throughput, Counter(r.node for r in sim.records)


def test_gpu_capable_work_on_a_cpu_only_node_is_that_nodes_backlog() -> None:
    task = generate_tasks(STREAMS, 0)[0]
    assert any(s.kind.device is not Device.CPU for s in task.graph.subtasks)
    gpu, cpu = backlog_seconds(task, 0.0, 0.0, 25.0, has_gpus=False)
    assert gpu == [0.0] * len(gpu)
    assert all(c > 0 for c in cpu)  # every subtask runs on a core there
    gpu, cpu = backlog_seconds(task, 19.5, 1555.0, 25.0, has_gpus=True)
    assert all((g > 0) != (c > 0) for g, c in zip(gpu, cpu, strict=True))


def test_a_busy_cpu_only_node_never_looks_idle_to_the_etc() -> None:
    """Before the fix its backlog stayed 0 however many tasks it held, so every ETC saw it idle."""
    sched = parse_scheduler("mct-mem+speedup")
    sim = Simulator(STREAMS, generate_tasks(STREAMS, 0), sched.placer, seed=0)
    seen: list[tuple[int, float]] = []
    v = sim.view
    sim.run(sched, on_decision=lambda *_: seen.append((int(v.tasks_on_node[2]), float(v.backlog_cpu_s[2]))))
    busy = [b for t, b in seen if t > 0]
    assert busy and min(busy) > 0.0


def test_stream_queue_wait_counts_only_tasks_beyond_the_streams() -> None:
    sc = small_scenario(nodes=(node("a", gpus=("T4",), streams=4), node("b", gpus=("T4",), streams=1)))
    v = ClusterView.from_spec(sc.cluster)
    v.tasks_on_node[:] = [3, 3]
    v.backlog_gpu_s[:] = [30.0, 30.0]
    wait = stream_queue_wait(v)
    assert wait[0] == 0.0  # a stream is free: the task starts at once
    assert wait[1] == pytest.approx(30.0)  # one stream per GPU: the whole backlog, as mct's ETC
    task = generate_tasks(sc, 0)[0]
    g_s, _, etc = node_estimates(task, v)
    v.tasks_on_node[:] = [6, 6]
    v.backlog_gpu_s[:] = [60.0, 60.0]
    v.node_speed_gpu[:] = [0.5, 0.5]
    wait = stream_queue_wait(v)
    # three tasks queued beyond four streams, 10 nominal s each at half speed, four at a time
    assert wait[0] == pytest.approx(3 * 20.0 / 4)
    assert wait[1] == pytest.approx(6 * 20.0)
    assert np.all(g_s > 0) and np.all(etc > g_s)


def test_mct_stream_uses_the_streams_mct_mem_thinks_are_busy() -> None:
    mem, mem_nodes = _run("mct-mem+speedup")
    stream, stream_nodes = _run("mct-stream+speedup")
    assert stream > 1.3 * mem  # measured 83.1 vs 56.4 tasks/min
    assert stream_nodes[0] > mem_nodes[0] and stream_nodes[2] < mem_nodes[2]

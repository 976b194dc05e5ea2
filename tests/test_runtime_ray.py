"""RayCluster on a real two-node Ray cluster started on this machine (NumPy backend, no GPU)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from rlsched.hardware import gpu_model
from rlsched.policies.registry import parse_scheduler
from rlsched.view import ClusterView
from runtime.cluster.backend import ClusterBackend
from runtime.cluster.config import LiveClusterSpec, LiveGpu, LiveNode
from runtime.cluster.live import LiveOptions, LiveResult, run_live
from runtime.cluster.workload import LiveWorkload, build_work
from runtime.kernels import check_result

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402  (after the importorskip)

from runtime.cluster.ray_cluster import RayCluster, apply_node_snapshot, node_snapshot  # noqa: E402

MB = 1 << 20
# The actors must never look for a GPU, whatever this machine has.
ACTOR_ENV = {"env_vars": {"RLSCHED_BACKEND": "numpy"}}


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[tuple[Any, Any]]:
    """A head node and one worker node (one CPU each), the driver connected to the head.

    Shared by the module: starting Ray costs several seconds.
    """
    old_auth = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # a local test cluster needs no tokens
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": 80 * MB, "include_dashboard": False},
    )
    try:
        worker = cluster.add_node(num_cpus=1, object_store_memory=80 * MB)
        ray.init(address=cluster.address)
        yield cluster, worker
    finally:
        ray.shutdown()
        cluster.shutdown()
        if old_auth is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = old_auth


def two_nodes(worker_speed: float | None = None) -> LiveClusterSpec:
    return LiveClusterSpec(
        nodes=(
            LiveNode("head", cpu_cores=1, gpus=(LiveGpu("T4", 0, 256),)),
            LiveNode("worker", cpu_cores=1, gpus=(LiveGpu("T4", 0, 256, speed=worker_speed),)),
        )
    )


def run(cluster: RayCluster, tasks: int, rate: float) -> tuple[LiveResult, dict]:
    work = build_work(
        LiveWorkload(
            apps={"intrusion_detection": 1.0, "matmul": 1.0}, streams=4, tasks=tasks, rate_per_s=rate
        )
    )
    res = run_live(cluster, parse_scheduler("round-robin+mlsm"), work, LiveOptions(timeout_s=60))
    return res, {t.id: d for t, d in work}


def check_all(res: LiveResult, data: dict) -> None:
    assert res.metrics.tasks_completed == res.metrics.tasks_total, res.errors
    assert res.metrics.tasks_lost == 0
    for tid, out in res.outcomes.items():
        assert out.error is None, out.error
        check_result(data[tid], out.outputs)


def test_tasks_run_on_both_ray_nodes(ray_cluster: tuple[Any, Any]) -> None:
    cluster, worker = ray_cluster
    ids = [cluster.head_node.node_id, worker.node_id]
    rc = RayCluster(two_nodes(), node_ids=ids, runtime_env=ACTOR_ENV)
    assert isinstance(rc, ClusterBackend)
    assert [rc.location(0), rc.location(1)] == ids
    res, data = run(rc, tasks=40, rate=15.0)
    check_all(res, data)
    assert rc.backend_name == "numpy"
    assert rc.stats().subtasks_done > 0 and res.dispatch_us_per_subtask > 0  # reported by the actors
    assert {o.node for o in res.outcomes.values()} == {0, 1}
    assert res.metrics.tasks_requeued == 0
    assert [d.node for d in res.devices] == ["head", "worker"]
    assert all(o.assigned_s <= o.first_start_s <= o.done_s for o in res.outcomes.values())
    assert rc.view.tasks_on_node.tolist() == [0, 0]  # the driver's view saw every task finish
    assert rc.actors == []


def test_dead_node_tasks_are_placed_again(ray_cluster: tuple[Any, Any]) -> None:
    cluster, _ = ray_cluster
    doomed = cluster.add_node(num_cpus=1, object_store_memory=80 * MB)
    # The doomed node's GPU is 400x slower: a task there runs for seconds, so tasks are surely
    # in flight on it when it dies, and must come back and finish on the head node.
    rc = RayCluster(
        two_nodes(worker_speed=gpu_model("T4").fp32_tflops / 400),
        node_ids=[cluster.head_node.node_id, doomed.node_id],
        runtime_env=ACTOR_ENV,
    )
    killed = threading.Event()

    def kill_when_busy() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and rc.view.tasks_on_node[1] < 2:
            time.sleep(0.02)
        cluster.remove_node(doomed)
        killed.set()

    killer = threading.Thread(target=kill_when_busy, daemon=True)
    killer.start()
    try:
        res, data = run(rc, tasks=20, rate=10.0)
    finally:
        killer.join(timeout=60)
    assert killed.is_set()
    check_all(res, data)
    assert res.metrics.tasks_requeued >= 2
    assert not rc.view.alive[1]
    requeued = [i for i, r in enumerate(res.records) if r.requeues]
    assert all(res.outcomes[i].node == 0 for i in requeued)


def test_bad_arguments_fail_before_any_actor(ray_cluster: tuple[Any, Any]) -> None:
    spec = LiveClusterSpec(nodes=tuple(LiveNode(f"n{i}", cpu_cores=1) for i in range(5)))
    with pytest.raises(ValueError, match="only 2 alive"):
        RayCluster(spec)
    with pytest.raises(ValueError, match="not alive or unknown"):
        RayCluster(two_nodes(), node_ids=["00" * 28, "11" * 28])
    shared = RayCluster(spec, share_nodes=True)  # five agents dealt over the two Ray nodes
    assert len(shared.node_ids) == 5 and len(set(shared.node_ids)) == 2
    rc = RayCluster(two_nodes())
    with pytest.raises(ValueError, match="unknown placer 'nope'"):
        rc.start("nope", seed=0)
    assert rc.actors == []


def test_snapshot_round_trip() -> None:
    spec = two_nodes().to_cluster_spec()
    remote, driver = ClusterView.from_spec(spec), ClusterView.from_spec(spec)
    remote.gpu_started(1, 0, 12.5, "matmul")
    remote.cpu_started(1)
    remote.set_streams(1, 0, 6)
    remote.tasks_on_node[1] = 3
    remote.backlog_gpu_s[1] = 0.7
    apply_node_snapshot(driver, 1, node_snapshot(remote, 1, seq=1))
    for name in (
        "cpu_busy",
        "gpu_running",
        "gpu_mem_used_mb",
        "gpu_streams",
        "node_streams",
        "tasks_on_node",
    ):
        np.testing.assert_array_equal(getattr(driver, name), getattr(remote, name), err_msg=name)
    assert driver.fast.node_gpu_running == [0, 1]
    assert driver.node_idle_streams.tolist() == remote.node_idle_streams.tolist() == [4, 5]
    assert driver.gpu_kinds[1][0] == ["matmul"]
    assert driver.backlog_gpu_s[1] == pytest.approx(0.7)


def test_a_burst_sees_its_own_backlog_before_any_agent_reports(ray_cluster: tuple[Any, Any]) -> None:
    """Stage 1 on the driver counts a task's backlog when it sends it: with ``mct``, a burst of
    tasks arriving together spreads over both nodes instead of piling on the first."""
    cluster, worker = ray_cluster
    rc = RayCluster(two_nodes(), node_ids=[cluster.head_node.node_id, worker.node_id], runtime_env=ACTOR_ENV)
    work = build_work(LiveWorkload(apps={"matmul": 1.0}, streams=2, tasks=12, rate_per_s=1e6))
    res = run_live(rc, parse_scheduler("mct+mlsm"), work, LiveOptions(timeout_s=60))
    assert res.metrics.tasks_completed == 12
    per_node = np.bincount([o.node for o in res.outcomes.values()], minlength=2)
    assert per_node.min() >= 3, per_node

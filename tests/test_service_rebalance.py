"""Run-time adjustment below the HTTP layer: a view that grows when nodes join, the overload
watch, and tasks moved off a node that stays overloaded (a real service on the NumPy backend)."""

from __future__ import annotations

import collections
import dataclasses
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

from experiments.benchmarks.bench_rebalance import FirstNode, slow_and_fast
from rlsched.overload import OverloadWatch
from rlsched.policies import parse_scheduler
from rlsched.scheduler import TwoStageScheduler
from rlsched.view import ClusterView
from runtime.cluster.config import LiveClusterSpec, LiveGpu, LiveNode, default_live_cluster
from runtime.cluster.local import LocalCluster
from runtime.service.config import ServiceConfig, Tenant, hash_token
from runtime.service.service import Service
from runtime.service.store import NewTask, exactly_once_violations


def test_a_grown_view_equals_the_view_built_whole() -> None:
    spec = default_live_cluster()
    v = spec.view()
    v.gpu_started(0, 1, 10.0, "decode")
    v.extra["_cache"] = np.zeros(3)
    v.extra["gpu_util"] = np.full((2, 2), 0.5)
    extra = LiveNode(
        "n3", cpu_cores=3, gpus=tuple(LiveGpu(m, i) for i, m in enumerate(("A100", "A100", "T4")))
    )
    v.append_nodes(dataclasses.replace(spec, nodes=(extra,)).view())
    whole = dataclasses.replace(spec, nodes=(*spec.nodes, extra)).view()
    whole.gpu_started(0, 1, 10.0, "decode")
    for name in ("gpu_valid", "gpu_model", "gpu_streams", "gpu_running", "dyn", "cores", "node_tflops_mean"):
        np.testing.assert_array_equal(getattr(v, name), getattr(whole, name), err_msg=name)
    assert v.model_names == whole.model_names and v.node_names == whole.node_names
    assert v.fast.gpu_running == whole.fast.gpu_running and v.gpu_kinds == whole.gpu_kinds
    assert "_cache" not in v.extra and v.extra["gpu_util"].shape == (3, 3)


def _view(waiting: list[int]) -> ClusterView:
    spec = LiveClusterSpec(nodes=tuple(LiveNode(f"n{i}", 2, (LiveGpu("T4"),)) for i in range(len(waiting))))
    v = spec.view()  # each node: 4 streams + 2 cores = 6 units
    v.ready_waiting[:] = waiting
    return v


def test_overload_watch_moves_only_after_a_sustained_overload_and_only_to_spare_units() -> None:
    w = OverloadWatch(ticks=3)
    v = _view([20, 0, 0])
    assert w.moves(v, set()) == [] and w.moves(v, set()) == []
    assert w.moves(v, set()) == [(0, 12)]  # 14 beyond its 6 units; 2 x 6 idle units elsewhere
    assert w.moves(v, set()) == []  # judged again only after the move settled
    w = OverloadWatch(ticks=1)
    assert w.moves(_view([20, 0, 0]), {1}) == [(0, 6)]  # a draining node takes nothing
    assert w.moves(_view([20, 0, 3]), set()) == [(0, 6)]  # nor does one with work waiting
    assert w.moves(_view([5, 0, 0]), set()) == []  # less than a round of work: not overloaded


# The control run (watch off: nothing moves) in `make test-all` only; bench_rebalance measures both.
@pytest.mark.parametrize("rebalance", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_tasks_move_off_a_node_that_stays_overloaded(tmp_path: Path, rebalance: bool) -> None:
    """Node 0's GPU runs 20x slower than its datasheet and stage 1 keeps choosing it: with the
    watch on, tasks that had not started move to node 1, each still completes exactly once."""
    spec = slow_and_fast()
    cfg = ServiceConfig(
        tenants=(Tenant("a", hash_token("t")),), db=str(tmp_path / "q.db"), rebalance=rebalance
    )
    svc = Service(
        cfg,
        cluster=LocalCluster(spec, "numpy"),
        scheduler=TwoStageScheduler(FirstNode(), parse_scheduler("mct+mlsm").placer),
    )
    svc.start()
    try:
        svc.store.submit("a", [NewTask("intrusion_detection", k % 4, k, 0, None, None) for k in range(30)])
        deadline = time.monotonic() + 120
        while svc.store.counts().get(("a", "done"), 0) < 30 and time.monotonic() < deadline:
            time.sleep(0.1)
        rows = svc.store.list_tasks("a", None, 0, 100)
    finally:
        svc.stop()
    assert [r.state for r in rows] == ["done"] * 30
    db = sqlite3.connect(cfg.db)
    assert exactly_once_violations(db) == []
    moved_reports = db.execute("SELECT COUNT(*) FROM reports WHERE outcome = 'moved' AND recorded").fetchone()
    db.close()
    nodes = collections.Counter(r.node for r in rows)
    moved = svc.metrics.moved.labels("a")._value.get()
    if rebalance:
        assert moved > 0 and moved_reports[0] == moved and nodes["fast"] > 0, nodes
        assert all(r.attempt > 1 for r in rows if r.node == "fast")
    else:
        assert moved == moved_reports[0] == 0 and nodes == {"slow": 30}

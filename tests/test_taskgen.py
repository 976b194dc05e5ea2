"""Task generation from a scenario's workload."""

from __future__ import annotations

import dataclasses
import itertools
import sys
import types
from collections import Counter

import numpy as np
import pytest

from rlsched.cluster import ClusterSpec, NodeSpec
from rlsched.hardware import gpu_model
from rlsched.scenarios.spec import AlibabaSpec, Scenario, TaskClass, WorkloadSpec
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.workloads import APPS, PAPER_APPS, build_graph

CLUSTER = ClusterSpec((NodeSpec("n0", cpu_cores=16, host_mem_gib=32, gpus=(gpu_model("P4"),)),))


def _scenario(seed: int = 0, **workload: object) -> Scenario:
    return Scenario("test", CLUSTER, WorkloadSpec(**workload), seed=seed)  # type: ignore[arg-type]


def _with_arrival(s: Scenario, **arrival: object) -> Scenario:
    wl = dataclasses.replace(s.workload, arrival=dataclasses.replace(s.workload.arrival, **arrival))
    return dataclasses.replace(s, workload=wl)


def test_tasks_have_dense_ids_in_arrival_order() -> None:
    tasks = generate_tasks(_scenario(tasks=300, apps={"matmul": 1, "kmeans": 1}))
    assert [t.id for t in tasks] == list(range(300))
    assert all(a.arrival_s <= b.arrival_s for a, b in itertools.pairwise(tasks))
    assert all(isinstance(t.arrival_s, float) and isinstance(t.input_mb, float) for t in tasks)


def test_same_scenario_and_seed_give_identical_tasks() -> None:
    s = _scenario(seed=5, tasks=200, apps={"intrusion_detection": 2, "fft": 1}, deadline_s=60.0)
    assert generate_tasks(s) == generate_tasks(s)
    assert generate_tasks(s) == generate_tasks(_scenario(seed=9, **vars(s.workload)), seed=5)
    assert generate_tasks(s) != generate_tasks(s, seed=6)


def test_changing_the_arrival_process_keeps_apps_and_sizes() -> None:
    s = _scenario(tasks=400, apps={a: 1.0 for a in APPS})
    base = generate_tasks(s)
    for other in (
        generate_tasks(_with_arrival(s, rate_per_min=10.0)),
        generate_tasks(_with_arrival(s, process="bursty")),
    ):
        assert [t.app for t in other] == [t.app for t in base]
        assert [t.input_mb for t in other] == [t.input_mb for t in base]
        assert [t.arrival_s for t in other] != [t.arrival_s for t in base]


def test_apps_drawn_by_share() -> None:
    tasks = generate_tasks(_scenario(tasks=6000, apps={"matmul": 3, "fft": 1, "kmeans": 0}))
    counts = Counter(t.app for t in tasks)
    assert set(counts) == {"matmul", "fft"}
    assert counts["matmul"] / 6000 == pytest.approx(0.75, abs=0.02)


def test_default_apps_are_the_paper_video_apps() -> None:
    assert {t.app for t in generate_tasks(_scenario(tasks=300))} == set(PAPER_APPS)


def test_input_sizes_and_derived_fields() -> None:
    s = _scenario(tasks=500, apps={"face_recognition": 1, "video_synopsis": 1}, tenants=("a", "b", "c"))
    for t in generate_tasks(s):
        lo, hi = APPS[t.app].input_mb
        assert lo <= t.input_mb <= hi
        assert t.graph == build_graph(t.app, t.input_mb)
        assert t.host_mem_mb == pytest.approx(2 * t.input_mb + 256)
        assert t.tenant == "abc"[t.id % 3]
        assert t.deadline_s is None

    fixed = _scenario(tasks=200, apps={"matmul": 1}, input_mb=(10.0, 20.0), deadline_s=30.0)
    for t in generate_tasks(fixed):
        assert 10.0 <= t.input_mb <= 20.0
        assert t.deadline_s == pytest.approx(t.arrival_s + 30.0)


def test_colocation_apps_generate() -> None:
    tasks = generate_tasks(_scenario(tasks=50, apps={"colo:ResNet-50 (batch size 64)": 1.0}))
    assert all(
        len(t.graph) == 1 and t.graph.subtasks[0].kind.name == "ResNet-50 (batch size 64)" for t in tasks
    )


def test_mean_arrival_rate_follows_the_spec() -> None:
    s = _with_arrival(_scenario(tasks=5000, apps={"matmul": 1}), rate_per_min=30.0)
    t = np.array([task.arrival_s for task in generate_tasks(s)])
    assert 60 * len(t) / t[-1] == pytest.approx(30.0, rel=0.05)


@pytest.mark.parametrize(
    ("workload", "match"),
    [
        ({"apps": {"nope": 1.0}}, "nope"),
        ({"apps": {"matmul": -1.0}}, "matmul"),
        ({"apps": {"matmul": 0.0}}, "all be 0"),
        ({"apps": {"matmul": 1.0}, "input_mb": (0.0, 5.0)}, "input_mb"),
        ({"apps": {"matmul": 1.0}, "input_mb": (5.0, 1.0)}, "input_mb"),
    ],
)
def test_invalid_workloads(workload: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        generate_tasks(_scenario(tasks=10, **workload))


def test_no_tasks() -> None:
    assert generate_tasks(_scenario(tasks=0, apps={"matmul": 1})) == []


def test_alibaba_workloads_are_delegated(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    fake = types.ModuleType("rlsched.scenarios.traces")
    fake.alibaba_tasks = lambda spec, n, seed: calls.append((spec, n, seed)) or []  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "rlsched.scenarios.traces", fake)
    spec = AlibabaSpec(node_csv="nodes.csv", pod_csv="pods.csv")
    assert generate_tasks(_scenario(seed=4, tasks=77, alibaba=spec)) == []
    assert generate_tasks(_scenario(seed=4, tasks=77, alibaba=spec), seed=8) == []
    assert calls == [(spec, 77, 4), (spec, 77, 8)]


def test_task_classes_set_priority_and_deadline_by_share_and_change_nothing_else() -> None:
    plain = generate_tasks(_scenario(tasks=4000), seed=7)
    classes = (TaskClass("hi", 1.0, priority=1, deadline_s=20.0), TaskClass("lo", 3.0))
    tasks = generate_tasks(_scenario(tasks=4000, classes=classes), seed=7)

    # Classes come from their own random stream: apps, sizes and arrivals are as without them.
    def key(t: object) -> tuple:
        return (t.app, t.input_mb, t.arrival_s)  # type: ignore[attr-defined]

    assert [key(t) for t in tasks] == [key(t) for t in plain]
    hi = [t for t in tasks if t.priority == 1]
    assert abs(len(hi) / len(tasks) - 0.25) < 0.03
    assert all(t.deadline_s == pytest.approx(t.arrival_s + 20.0) for t in hi)
    assert all(t.deadline_s is None for t in tasks if t.priority == 0)
    assert {t.priority for t in tasks} == {0, 1}

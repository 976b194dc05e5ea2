"""Alibaba GPU trace v2023 reader: nodes, pods as tasks, on generated files and the sample data."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest

from rlsched.hardware import gpu_model
from rlsched.scenarios.data_paths import packaged_data_dir
from rlsched.scenarios.spec import AlibabaSpec
from rlsched.scenarios.traces import (
    NOMINAL_EFFICIENCY,
    POD_COLUMNS,
    POD_TIME_COLUMNS,
    TRACE_CPU,
    TRACE_GPU,
    alibaba_cluster,
    alibaba_tasks,
    check_pod_csv,
    trace_window_start,
)
from rlsched.tasks import Device

POD_HEADER = ",".join((*POD_COLUMNS, "gpu_spec", "qos", "pod_phase", *POD_TIME_COLUMNS))


def _nodes_csv(tmp_path: Path, models: dict[str, int]) -> Path:
    lines = ["sn,cpu_milli,memory_mib,gpu,model"]
    i = 0
    for model, count in models.items():
        for _ in range(count):
            gpus = 0 if model == "" else 2
            lines.append(f"node-{i:04d},32000,131072,{gpus},{model}")
            i += 1
    path = tmp_path / "nodes.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _pods_csv(tmp_path: Path, rows: list[str], header: str = POD_HEADER) -> Path:
    path = tmp_path / "pods.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


PODS = [
    # name,cpu,mem,num_gpu,gpu_milli,gpu_spec,qos,phase,created,deleted,scheduled
    "p0,4000,8192,1,500,,LS,Succeeded,100,400,110",  # 290 s, half a GPU
    "p1,8000,4096,0,0,,BE,Failed,50,80,60",  # CPU-only, created first
    "p2,4000,8192,1,1000,,BE,Pending,120,,",  # never ran: skipped
    "p3,4000,8192,4,0,V100M16|V100M32,Guaranteed,Running,200,10000,205",  # multi-GPU, constrained
    "p4,4000,8192,1,250,T4,Burstable,Succeeded,200,210,201",  # same creation time as p3
]


@pytest.fixture
def pod_spec(tmp_path: Path) -> AlibabaSpec:
    nodes = _nodes_csv(tmp_path, {"T4": 2})
    return AlibabaSpec(str(nodes), str(_pods_csv(tmp_path, PODS)), nodes=0, time_scale=0.5)


def test_tasks_dense_ids_in_arrival_order_and_pending_skipped(pod_spec: AlibabaSpec) -> None:
    tasks = alibaba_tasks(pod_spec, 0, seed=0)
    assert [t.id for t in tasks] == list(range(4))
    assert [t.host_mem_mb for t in tasks] == [4096.0, 8192.0, 8192.0, 8192.0]
    # Arrivals relative to the first kept pod (p1 at 50), scaled by 0.5; ties keep file order.
    assert [t.arrival_s for t in tasks] == [0.0, 25.0, 75.0, 75.0]
    assert all(t.app == "alibaba" and t.input_mb == 10.0 for t in tasks)


def test_arrival_speedup_compresses_arrivals_not_durations(pod_spec: AlibabaSpec) -> None:
    base = alibaba_tasks(pod_spec, 0, seed=0)
    fast = alibaba_tasks(dataclasses.replace(pod_spec, arrival_speedup=5.0), 0, seed=0)
    assert [t.arrival_s for t in fast] == [t.arrival_s / 5.0 for t in base]
    assert [t.graph.subtasks[0].gflop for t in fast] == [t.graph.subtasks[0].gflop for t in base]


def test_task_fields(pod_spec: AlibabaSpec) -> None:
    cpu, half, multi, quarter = alibaba_tasks(pod_spec, 0, seed=0)
    assert (cpu.tenant, cpu.priority) == ("BE", 0)
    assert (multi.tenant, multi.priority) == ("Guaranteed", 1)
    assert (quarter.tenant, quarter.priority) == ("Burstable", 0)
    assert multi.gpu_models == frozenset({"V100M16", "V100M32"})
    assert quarter.gpu_models == frozenset({"T4"})
    assert half.gpu_models == frozenset()

    (c,) = cpu.graph.subtasks
    assert c.kind is TRACE_CPU and c.device is Device.CPU
    assert c.gflop == pytest.approx(20 * 0.5 * 25.0)  # 20 s x time_scale x one 25 GFLOP/s core

    (h,) = half.graph.subtasks
    assert h.kind is TRACE_GPU and h.device is Device.GPU
    assert h.share == 0.5 and h.mem_mb == pytest.approx(8192.0)
    ref = gpu_model("T4").fp32_tflops * 1e3 * NOMINAL_EFFICIENCY
    assert h.gflop == pytest.approx(290 * 0.5 * ref)
    assert h.gflop / h.gbytes == pytest.approx(TRACE_GPU.intensity)

    assert len(multi.graph) == 4
    assert all(s.parents == () and s.share == 1.0 and s.mem_mb == 16384.0 for s in multi.graph.subtasks)
    assert quarter.graph.subtasks[0].share == 0.25


def test_durations_capped_at_99th_percentile(pod_spec: AlibabaSpec) -> None:
    tasks = alibaba_tasks(pod_spec, 0, seed=0)
    # Raw durations 20, 290, 9795, 9 s: the running pod's 9795 s is capped below itself.
    multi = tasks[2].graph.subtasks[0]
    ref = gpu_model("T4").fp32_tflops * 1e3 * NOMINAL_EFFICIENCY
    assert multi.gflop < 9795 * 0.5 * ref
    assert multi.gflop > 290 * 0.5 * ref


def test_seed_draws_a_window_of_consecutive_pods(pod_spec: AlibabaSpec) -> None:
    every = alibaba_tasks(pod_spec, 0, seed=0)  # kept pods in order: p1, p0, p3, p4
    names = [t.tenant for t in every]
    windows = {}
    for seed in range(40):
        tasks = alibaba_tasks(pod_spec, 2, seed=seed)
        assert [t.id for t in tasks] == [0, 1]
        assert tasks[0].arrival_s == 0.0  # counted from the window's first pod
        start = trace_window_start(len(every), 2, seed)
        assert [t.tenant for t in tasks] == names[start : start + 2]
        windows[seed] = start
    assert set(windows.values()) == {0, 1, 2}  # every window of 2 in 4 pods is drawn
    assert alibaba_tasks(pod_spec, 2, seed=7) == alibaba_tasks(pod_spec, 2, seed=7)
    assert [t.arrival_s for t in alibaba_tasks(pod_spec, 0, seed=5)] == [t.arrival_s for t in every]


def test_pod_list_without_times_is_rejected(tmp_path: Path) -> None:
    pods = _pods_csv(tmp_path, ["p0,1000,1024,1,1000"], header="name,cpu_milli,memory_mib,num_gpu,gpu_milli")
    with pytest.raises(ValueError, match="creation_time"):
        check_pod_csv(pods)
    with pytest.raises(ValueError, match="missing column"):
        alibaba_tasks(AlibabaSpec(str(pods), str(pods)), 0, seed=0)


def test_unknown_gpu_spec_names_file_and_line(tmp_path: Path) -> None:
    pods = _pods_csv(tmp_path, [PODS[0], "p9,1,1,1,1000,X100,LS,Running,1,2,1"])
    with pytest.raises(
        ValueError,
        match=r"pods\.csv: line 3 \(gpu_spec\): expected GPU model names from the catalog, "
        r"joined by \|, got 'X100'",
    ):
        alibaba_tasks(AlibabaSpec(str(pods), str(pods)), 0, seed=0)


def test_missing_files_raise_file_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "nope.csv"
    spec = AlibabaSpec(str(missing), str(missing))
    with pytest.raises(FileNotFoundError, match=r"nope\.csv"):
        alibaba_cluster(spec, seed=0)
    with pytest.raises(FileNotFoundError, match=r"nope\.csv"):
        alibaba_tasks(spec, 10, seed=0)


def test_cluster_sample_is_stratified_and_deterministic(tmp_path: Path) -> None:
    nodes = _nodes_csv(tmp_path, {"T4": 60, "P100": 30, "V100M16": 10, "": 4})
    spec = AlibabaSpec(str(nodes), str(nodes), nodes=26)
    a = alibaba_cluster(spec, seed=1)
    assert len(a) == 26
    counts = Counter(n.gpus[0].name if n.gpus else "" for n in a.nodes)
    assert counts == {"T4": 15, "P100": 8, "V100M16": 2, "": 1}  # 15.0, 7.5, 2.5, 1.0 by largest remainder
    assert alibaba_cluster(spec, seed=1) == a
    assert {n.name for n in alibaba_cluster(spec, seed=2).nodes} != {n.name for n in a.nodes}
    names = [n.name for n in a.nodes]
    assert names == sorted(names)  # file order kept


def test_cluster_node_fields(tmp_path: Path) -> None:
    nodes = _nodes_csv(tmp_path, {"G2": 1, "": 1})
    c = alibaba_cluster(AlibabaSpec(str(nodes), str(nodes), nodes=0), seed=0)
    g2, cpu_only = c.nodes
    assert g2.cpu_cores == 32 and g2.host_mem_gib == 128.0
    assert g2.gpus == (gpu_model("G2"),) * 2
    assert (g2.net_gbps, g2.streams_per_gpu) == (10.0, 4)
    assert cpu_only.gpus == ()


def test_cluster_too_many_nodes(tmp_path: Path) -> None:
    nodes = _nodes_csv(tmp_path, {"T4": 3})
    with pytest.raises(
        ValueError,
        match=r"nodes.csv: <file>: expected at least the 4 nodes asked for \(workload.alibaba.nodes\), got 3",
    ):
        alibaba_cluster(AlibabaSpec(str(nodes), str(nodes), nodes=4), seed=0)


# --- the packaged sample data ---------------------------------------------------------------------

TRACE = packaged_data_dir() / "traces" / "alibaba-gpu-v2023"


def _real_spec(nodes: int = 64) -> AlibabaSpec:
    assert TRACE is not None
    return AlibabaSpec(
        str(TRACE / "openb_node_list_gpu_node.csv"),
        str(TRACE / "openb_pod_list_default.csv"),
        nodes=nodes,
        time_scale=0.001,
    )


def test_real_cluster_keeps_model_proportions() -> None:
    full = alibaba_cluster(_real_spec(0), seed=0)
    sample = alibaba_cluster(_real_spec(64), seed=0)
    assert len(sample) == 64
    share = Counter(n.gpus[0].name for n in full.nodes if n.gpus)
    got = Counter(n.gpus[0].name for n in sample.nodes if n.gpus)
    for model, count in share.items():
        assert abs(got[model] - 64 * count / len(full)) <= 1, model


def test_seeds_of_a_trace_scenario_are_different_runs() -> None:
    """Each seed samples its own nodes (same count) and trace window; the file's seed is the file."""
    from rlsched.scenarios.loader import load_scenario
    from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed

    sc = load_scenario("alibaba")
    assert scenario_for_seed(sc, sc.seed) is sc
    a, b = scenario_for_seed(sc, 20_000), scenario_for_seed(sc, 20_001)
    assert len(a.cluster.nodes) == len(b.cluster.nodes) == len(sc.cluster.nodes) == 64
    assert {n.name for n in a.cluster.nodes} != {n.name for n in b.cluster.nodes}
    assert a.cluster.name == sc.cluster.name
    ta, tb = generate_tasks(a, 20_000), generate_tasks(b, 20_001)
    assert len(ta) == len(tb) == 2000
    assert [t.graph for t in ta] != [t.graph for t in tb]


def test_real_tasks() -> None:
    tasks = alibaba_tasks(_real_spec(), 2000, seed=0)
    assert len(tasks) == 2000
    assert [t.id for t in tasks] == list(range(2000))
    arrivals = [t.arrival_s for t in tasks]
    assert arrivals[0] == 0.0 and arrivals == sorted(arrivals)
    assert arrivals[-1] < 6 * 3600  # hours, not months, at time_scale 1/1000
    assert all(len(t.graph) >= 1 for t in tasks)
    assert any(len(t.graph) == 8 for t in tasks)
    assert all(0 < s.share <= 1 for t in tasks for s in t.graph.subtasks)

"""The live runtime end to end on the NumPy backend: real kernels, real threads, checked results."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rlsched.hardware import gpu_model
from rlsched.policies.placers import core_free, fitting_gpus
from rlsched.policies.registry import parse_scheduler
from rlsched.policies.selectors import MctSelector
from rlsched.scheduler import CPU, TwoStageScheduler
from rlsched.tasks import Device, Subtask, Task
from rlsched.view import ClusterView
from runtime.cluster.config import LiveClusterSpec, LiveGpu, LiveNode, default_live_cluster
from runtime.cluster.live import LiveOptions, LiveResult, run_live
from runtime.cluster.local import LocalCluster
from runtime.cluster.workload import LiveWorkload, build_work
from runtime.kernels import check_result

ALL_APPS = {"intrusion_detection": 1.0, "video_synopsis": 1.0, "face_recognition": 1.0, "matmul": 1.0}


def run(spec: LiveClusterSpec, sched: str, w: LiveWorkload, **opts: object) -> tuple[LiveResult, dict]:
    work = build_work(w)
    res = run_live(LocalCluster(spec, "numpy"), parse_scheduler(sched), work, LiveOptions(**opts))  # type: ignore[arg-type]
    return res, {t.id: d for t, d in work}


@pytest.mark.parametrize("sched", ["round-robin+first-free", "mct+mlsm", "least-loaded+least-loaded"])
def test_results_are_right_whichever_units_ran_them(sched: str) -> None:
    """Trajectories, synopses, faces and products match their ground truth on any placement."""
    w = LiveWorkload(apps=ALL_APPS, streams=4, tasks=24, rate_per_s=60.0, seed=3)
    res, data = run(default_live_cluster(), sched, w)
    assert res.metrics.tasks_completed == 24 and res.metrics.tasks_lost == 0, res.errors
    used = set()
    for tid, out in res.outcomes.items():
        check_result(data[tid], out.outputs)
        assert all(u >= CPU for u in out.units)
        used.update((out.node, u) for u in out.units)
    assert len(used) >= 3, used  # several GPUs (and cores) of both nodes took part


def test_cpu_only_node_and_gpu_only_kinds() -> None:
    """A node without GPUs runs CPU-capable work; GPU-only kinds go to the GPU node."""
    spec = LiveClusterSpec(
        nodes=(LiveNode("cpu", cpu_cores=2), LiveNode("gpu", cpu_cores=1, gpus=(LiveGpu("T4"),)))
    )
    w = LiveWorkload(apps={"kmeans": 1.0, "fft": 1.0}, streams=2, tasks=12, rate_per_s=100.0)
    res, data = run(spec, "round-robin+speedup", w)
    assert res.metrics.tasks_completed == 12, res.errors
    for tid, out in res.outcomes.items():
        check_result(data[tid], out.outputs)
        if out.task.app == "kmeans":
            assert out.node == 1  # kmeans_assign is GPU-only: the CPU node is never feasible


def test_memory_smaller_than_the_workload_evicts_and_loses_nothing() -> None:
    """Matmul streams bring ~9 MB of weights each and FFT chains hold 8 MB intermediate outputs,
    on GPUs of 24 MiB: the cache must evict, and held outputs spill rather than block."""
    gpu = LiveGpu("T4", mem_mib=24)
    spec = LiveClusterSpec(nodes=(LiveNode("n", cpu_cores=1, gpus=(gpu, dataclasses.replace(gpu, index=1))),))
    w = LiveWorkload(apps={"matmul": 1.0, "fft": 1.0}, streams=6, tasks=48, rate_per_s=100.0)
    res, data = run(spec, "mct+mlsm", w)
    assert res.metrics.tasks_completed == 48 and res.metrics.tasks_lost == 0, res.errors
    assert sum(d.evictions for d in res.devices) > 0
    for tid, out in res.outcomes.items():
        check_result(data[tid], out.outputs)


def test_repeated_inputs_halve_host_to_device_bytes() -> None:
    """A stream's weights, filters and centroids are uploaded once per device, then hit."""
    spec = LiveClusterSpec(nodes=(LiveNode("n", cpu_cores=1, gpus=(LiveGpu("V100M16", mem_mib=512),)),))
    w = LiveWorkload(apps={"matmul": 1.0, "fft": 1.0, "kmeans": 1.0}, streams=3, tasks=30, rate_per_s=100.0)
    res, _ = run(spec, "mct+mlsm", w)
    assert res.metrics.tasks_completed == 30, res.errors
    loaded = sum(d.h2d_bytes_loaded for d in res.devices)
    saved = sum(d.h2d_bytes_saved for d in res.devices)
    assert saved / (loaded + saved) >= 0.5, (loaded, saved)


@pytest.mark.parametrize(
    "gpus",
    [
        (LiveGpu("T4", speed=1.0), LiveGpu("T4", index=1, speed=3.0)),
        # Different models: work must be compared in one unit, not each GPU's own datasheet.
        (LiveGpu("P4"), LiveGpu("V100M16", index=1)),
    ],
    ids=["same-model", "p4-v100"],
)
def test_stream_feedback_gives_the_faster_gpu_more_streams(gpus: tuple[LiveGpu, LiveGpu]) -> None:
    """A slow and a ~3x faster emulated GPU on one node, saturated: streams move to the fast one
    and neither is left with idle streams."""
    spec = LiveClusterSpec(
        nodes=(LiveNode("n", cpu_cores=0, gpus=gpus, streams_per_gpu=4),),
        max_streams_per_gpu=7,
        device_concurrency=2,
    )
    cluster = LocalCluster(spec, "numpy")
    w = LiveWorkload(apps={"matmul": 1.0}, streams=4, tasks=400, rate_per_s=2000.0)
    work = build_work(w)
    res = run_live(cluster, parse_scheduler("round-robin+mlsm"), work, LiveOptions(feedback_interval_s=0.1))
    assert res.metrics.tasks_completed == 400, res.errors
    slow, fast = (d.streams for d in res.devices)
    assert fast > slow and slow + fast == 8, (slow, fast)
    history = cluster.agents[0].stream_history
    busy_phase = [h for h in history if h[0] < res.metrics.makespan_s * 0.8][-3:]
    assert busy_phase and all(max(idle) < 1.5 for _, _, idle in busy_phase), busy_phase


def test_work_that_fits_no_gpu_is_reported_not_lost() -> None:
    """GPU-only k-means on a GPU too small for it: stage 1 finds no node; each task says why.
    Matmul (GPU or CPU) on the same node falls back to the core and completes."""
    spec = LiveClusterSpec(nodes=(LiveNode("n", cpu_cores=1, gpus=(LiveGpu("T4", mem_mib=1),)),))
    w = LiveWorkload(apps={"kmeans": 1.0, "matmul": 1.0}, streams=2, tasks=10, rate_per_s=100.0)
    res, data = run(spec, "mct+speedup", w)
    m = res.metrics
    kmeans = [t for t, d in data.items() if d.app == "kmeans"]
    assert m.tasks_unschedulable == len(kmeans) and m.tasks_lost == 0
    assert all(res.errors[t] == "no feasible node" for t in kmeans)
    for tid, out in res.outcomes.items():
        check_result(data[tid], out.outputs)
        assert set(out.units) == {CPU}


@pytest.mark.gpu
def test_the_same_workload_is_right_on_real_gpus() -> None:
    """The agents on the CuPy backend: real streams, pools and copies; every result checked."""
    from runtime.backends.select import cupy_unavailable_reason

    why = cupy_unavailable_reason()
    if why is not None:
        pytest.skip(f"no CuPy backend here: {why}")
    w = LiveWorkload(apps=ALL_APPS, streams=4, tasks=24, rate_per_s=60.0, seed=3)
    work = build_work(w)
    res = run_live(LocalCluster(default_live_cluster(), "cupy"), parse_scheduler("mct+mlsm"), work)
    assert res.backend == "cupy" and res.metrics.tasks_completed == 24, res.errors
    data = {t.id: d for t, d in work}
    for tid, out in res.outcomes.items():
        check_result(data[tid], out.outputs)


class _CoresFirst:
    """Stage 2 that puts every CPU-capable subtask on a free core (to time cores)."""

    name = "cores-first"

    def reset(self, view: ClusterView, seed: int) -> None:
        """Stateless."""

    def place(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        if sub.kind.device is not Device.GPU and core_free(node, view):
            return CPU
        gpus = fitting_gpus(task, sub, node, view)
        return gpus[0] if gpus else None


def _core_seconds(emulate: bool) -> float:
    spec = LiveClusterSpec(
        nodes=(LiveNode("n", cpu_cores=1, gpus=(LiveGpu("V100M16"),)),), emulate_core_speed=emulate
    )
    work = build_work(LiveWorkload(apps={"matmul": 1.0}, streams=1, tasks=1, rate_per_s=100.0))
    sched = TwoStageScheduler(MctSelector(), _CoresFirst())
    res = run_live(LocalCluster(spec, "numpy"), sched, work, LiveOptions())
    (out,) = res.outcomes.values()
    assert out.units == [CPU] and out.error is None
    check_result(work[0][1], out.outputs)
    return out.done_s - out.first_start_s


def test_emulated_cores_run_gpu_capable_kernels_at_the_cost_models_speed() -> None:
    """Without emulate_core_speed a core runs matmul at native host speed (as fast as the
    emulated V100); with it, the cost model's core/V100 ratio (~100x) stretches the run."""
    native, emulated = _core_seconds(False), _core_seconds(True)
    assert emulated > 20 * native, (native, emulated)


def test_a_gpu_slower_than_its_datasheet_shows_in_the_measured_speeds() -> None:
    """Emulated GPUs run 10-1,000x below any datasheet and each kernel kind at its own level, so raw
    nominal/measured speeds say nothing; relative to the cluster, the one GPU emulated 3x slower
    than its model's datasheet reads ~1/3 and the rest ~1 (what LDWP was trained on)."""
    spec = default_live_cluster()
    n0 = spec.nodes[0]
    slow = dataclasses.replace(n0.gpus[0], speed=gpu_model(n0.gpus[0].model).fp32_tflops / 3.0)
    spec = dataclasses.replace(
        spec, nodes=(dataclasses.replace(n0, gpus=(slow, *n0.gpus[1:])), *spec.nodes[1:])
    )
    cluster = LocalCluster(spec, "numpy")
    # At 30 tasks/s, not 60: a measured time includes the host's contention, the same seconds on
    # every GPU, which pulls the slow GPU's ratio toward 1 as load rises (at 60/s it read
    # 0.17-0.76x over 13 runs and failed the 0.7 below twice; at 30/s 0.22-0.29x over 8).
    w = LiveWorkload(
        apps={"intrusion_detection": 1.0, "video_synopsis": 1.0}, tasks=150, rate_per_s=30.0, seed=3
    )
    # Work spread over every GPU: a measured time includes the wait for an engine, so a GPU given
    # more than its share (first-free's first GPU) reads slower for that too.
    res = run_live(cluster, parse_scheduler("round-robin+least-loaded"), build_work(w), LiveOptions(seed=3))
    assert res.metrics.tasks_completed == 150, res.errors
    speeds = {k: v for k, v in cluster.speeds.speeds().items() if k[1] >= 0}
    others = [v for k, v in speeds.items() if k != (0, 0)]
    # Emulation stretches time by FP32 TFLOP/s alone (memory-bound kinds put faithfully emulated
    # models apart too) and 2 host cores run every device (the measured ratios: above).
    assert len(others) == 3 and 0.5 < float(np.median(others)) < 2.0, speeds
    assert speeds[(0, 0)] < 0.7 * float(np.median(others)), speeds
    view = cluster.view.speed_gpu  # what schedulers read: the value after each unit's last run
    typical = float(np.median([view[0, 1], view[1, 0], view[1, 1]]))
    # The value after the last run is noisier than the EMA above: a fresh-clone CI run read 0.64x
    # (2026-12-04); the line is the same 0.7 (a GPU at its datasheet reads ~1).
    assert 0.5 < typical < 2.0 and view[0, 0] < 0.7 * typical, view


def test_mct_drain_runs_live_on_rates_the_runtime_measured() -> None:
    """The live runtime keeps each GPU's aggregate rate as the simulator does (per-run speed x
    co-runners at each finish): mct-drain schedules on measurements, not on the stream counts."""
    cluster = LocalCluster(default_live_cluster(), "numpy")
    start = cluster.view.gpu_rate.copy()
    _run_checked(cluster, "mct-drain+mlsm", tasks=40, seed=5)
    v = cluster.view
    ran = v.gpu_rate_samples > 0
    assert ran.sum() >= 2, v.gpu_rate_samples
    assert np.all(v.gpu_rate[ran] > 0) and not np.allclose(v.gpu_rate[ran], start[ran])
    assert np.allclose(v.node_gpu_rate, (v.gpu_rate * v.gpu_valid).sum(axis=1))


def test_mct_cap_runs_live_on_the_speeds_the_runtime_measured() -> None:
    """``mct-cap`` reads what the live runtime measures (per-run speeds) and its stream counts."""
    from rlsched.estimates import capacity_wait

    cluster = LocalCluster(default_live_cluster(), "numpy")
    _run_checked(cluster, "mct-cap+iawp-pass", tasks=24, seed=6)
    v = cluster.view
    v.backlog_gpu_s[:] = 10.0
    cap = (v.speed_gpu * v.gpu_streams * v.gpu_valid).sum(axis=1)
    assert np.allclose(capacity_wait(v), 10.0 / cap) and not np.allclose(v.speed_gpu[v.gpu_valid], 1.0)


def _run_checked(cluster: LocalCluster, spec: str, tasks: int, seed: int) -> None:
    """Run ``tasks`` tasks of every app with ``spec``; all complete, every result right."""
    work = build_work(LiveWorkload(apps=ALL_APPS, streams=4, tasks=tasks, rate_per_s=60.0, seed=seed))
    data = {t.id: d for t, d in work}
    res = run_live(cluster, parse_scheduler(spec), work, LiveOptions(seed=seed))
    assert res.metrics.tasks_completed == tasks and res.metrics.tasks_lost == 0, res.errors
    for tid, out in res.outcomes.items():
        check_result(data[tid], out.outputs)

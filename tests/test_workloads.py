"""Workloads: kinds, apps and the subtask DAGs they build."""

from __future__ import annotations

import math

import pytest

from rlsched.hardware import CPU_CORE_GFLOPS, gpu_model
from rlsched.tasks import Device
from rlsched.workloads import (
    APPS,
    COLO_PREFIX,
    KINDS,
    PAPER_APPS,
    app_spec,
    build_graph,
    colo_kind,
    default_input_mb,
    is_known_app,
)

CPU_ONLY = {"tracking", "tube_optimisation", "stitching", "load", "compare"}


@pytest.mark.parametrize("app", sorted(APPS))
def test_every_app_builds_a_topological_dag(app: str) -> None:
    x = sum(default_input_mb(app)) / 2
    g = build_graph(app, x)
    assert len(g) == len(APPS[app].stages) > 0
    for i, s in enumerate(g.subtasks):
        assert s.index == i
        assert all(0 <= p < i for p in s.parents)
        assert s.gflop == pytest.approx(s.kind.gflop_per_mb * x)
        assert s.gbytes == pytest.approx(s.kind.gbytes_per_mb * x)
        assert s.mem_mb == pytest.approx(s.kind.fixed_mem_mb + s.kind.mem_mb_per_mb * x)
    # one sink: every subtask leads to the last one, so the task's end is well defined
    assert g.children[-1] == ()
    assert all(c for c in g.children[:-1])


def test_paper_pipelines_follow_the_papers_stage_order() -> None:
    def kinds(app: str) -> list[str]:
        return [s.kind.name for s in APPS[app].stages]

    assert kinds("intrusion_detection") == [
        "gmm", "frame_diff", "gaussian_pyramid", "dog_pyramid", "extrema_detection", "tracking",
    ]  # fmt: skip
    assert kinds("video_synopsis") == [
        "gmm",
        "frame_diff",
        "tube_extraction",
        "tube_optimisation",
        "stitching",
    ]
    assert kinds("face_recognition") == [
        "load",
        "face_locations",
        "landmarks",
        "encodings",
        "distance",
        "compare",
    ]
    assert KINDS["face_locations"].device is Device.GPU


def test_dags_have_real_parallel_branches() -> None:
    for app in ("intrusion_detection", "video_synopsis", "kmeans"):
        children = build_graph(app, 100.0).children
        assert any(len(c) > 1 for c in children), app
    kmeans = build_graph("kmeans", 100.0)
    assert sum(1 for s in kmeans.subtasks if not s.parents) == 2
    assert any(len(s.parents) == 2 for s in kmeans.subtasks)


def test_cpu_only_kinds_are_cpu_only_and_most_gpu_stages_run_on_both() -> None:
    for name in CPU_ONLY:
        assert KINDS[name].device is Device.CPU, name
    assert KINDS["distance"].device is Device.BOTH
    gpu_capable = [k for k in KINDS.values() if k.device is not Device.CPU]
    both = [k for k in gpu_capable if k.device is Device.BOTH]
    assert 0 < len(gpu_capable) - len(both) < len(both)


def test_kinds_span_memory_and_compute_bound() -> None:
    ridge_p4 = 5.5e3 / 192  # FLOP per byte where a P4 turns compute-bound
    intensities = {k.name: k.intensity for k in KINDS.values() if k.device is not Device.CPU}
    for name in ("gmm", "frame_diff"):
        assert intensities[name] < 2
    for name in ("dog_pyramid", "face_locations", "encodings", "matmul"):
        assert intensities[name] > ridge_p4
    assert intensities["gaussian_pyramid"] > 10


def _p4_seconds(app: str) -> tuple[float, float]:
    """GPU seconds on a P4 at 50% of peak FLOP/s and bandwidth, CPU seconds on one core."""
    p4 = gpu_model("P4")
    gpu = cpu = 0.0
    for s in build_graph(app, sum(default_input_mb(app)) / 2).subtasks:
        if s.device is Device.CPU:
            cpu += s.gflop / CPU_CORE_GFLOPS
        else:
            gpu += max(s.gflop / (p4.fp32_tflops * 1e3 * 0.5), s.gbytes / (p4.mem_bw_gbs * 0.5))
    return gpu, cpu


@pytest.mark.parametrize("app", PAPER_APPS)
def test_calibration_of_the_paper_apps(app: str) -> None:
    gpu, cpu = _p4_seconds(app)
    assert 8.0 <= gpu <= 20.0
    assert 1.0 <= cpu <= 8.0


@pytest.mark.parametrize("app", sorted(APPS))
def test_device_memory_per_subtask_fits_a_share_of_a_p4(app: str) -> None:
    for x in default_input_mb(app):
        for s in build_graph(app, x).subtasks:
            if s.device is not Device.CPU:
                assert 150 <= s.mem_mb <= 2048, (app, s.kind.name, x)


def test_colocation_apps() -> None:
    app = f"{COLO_PREFIX}ResNet-18 (batch size 32)"
    assert is_known_app(app)
    g = build_graph(app, 10.0)
    (s,) = g.subtasks
    assert s.kind.name == "ResNet-18 (batch size 32)"
    assert s.device is Device.GPU
    assert (s.gflop, s.gbytes, s.mem_mb) == pytest.approx((10.0, 0.5, 1024.0))
    assert build_graph(app, 20.0).subtasks[0].kind is s.kind  # created once
    assert colo_kind("ResNet-18 (batch size 32)") is s.kind
    assert app_spec(app).stages[0].kind is s.kind


@pytest.mark.parametrize("name", ["nope", "colo:", "colo:gmm", "", "Intrusion_Detection"])
def test_unknown_apps(name: str) -> None:
    assert not is_known_app(name)
    with pytest.raises(KeyError):
        build_graph(name, 10.0)


@pytest.mark.parametrize("x", [0.0, -1.0, math.nan, math.inf])
def test_invalid_input_size(x: float) -> None:
    with pytest.raises(ValueError):
        build_graph("matmul", x)


def test_graphs_are_fresh_values_for_each_size() -> None:
    a, b = build_graph("fft", 100.0), build_graph("fft", 200.0)
    assert [s.gflop * 2 for s in a.subtasks] == pytest.approx([s.gflop for s in b.subtasks])
    assert build_graph("fft", 100.0) == a

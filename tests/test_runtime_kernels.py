"""The live runtime's kernels: every app's results pass their checks, the checks can fail, stages
read only what their DAG allows, generated data is consistent, and CuPy agrees with NumPy."""

from __future__ import annotations

import ast
import inspect
import math
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from rlsched.tasks import Device
from rlsched.workloads import APPS, KINDS, build_graph
from runtime.kernels import (
    KERNELS,
    LIVE_APPS,
    TaskData,
    check_result,
    face_kernels,
    generate_video,
    generic_kernels,
    kernel_for,
    make_task_data,
    ops,
    run_task_numpy,
    stage_plan,
    video_kernels,
)
from runtime.kernels.video import LANE_MARGIN
from runtime.kernels.video_kernels import PYRAMID_SIGMAS

CASES = [(0, 0, 0), (0, 1, 3), (1, 0, 1), (2, 2, 5)]  # (seed, stream, chunk)


def _run(app: str, seed: int = 0, stream: int = 0, chunk: int = 0) -> tuple[TaskData, dict[str, np.ndarray]]:
    task = make_task_data(app, stream, chunk, seed=seed)
    return task, run_task_numpy(task)


@pytest.mark.parametrize("app", LIVE_APPS)
@pytest.mark.parametrize(("seed", "stream", "chunk"), CASES)
def test_results_pass_their_checks(app: str, seed: int, stream: int, chunk: int) -> None:
    task, data = _run(app, seed, stream, chunk)
    check_result(task, data)


@pytest.mark.parametrize("app", ["intrusion_detection", "video_synopsis", "face_recognition"])
def test_detection_apps_hold_over_many_chunks(app: str) -> None:
    """Detection has thresholds; these apps get more streams and chunks than the others."""
    for seed in (3, 4):
        for stream in (0, 1):
            for chunk in (0, 2, 9):
                check_result(*_run(app, seed, stream, chunk))


def _shift_a_track(data: dict[str, np.ndarray]) -> None:
    data["tracks"] = data["tracks"] + np.float32(5.0)


def _drop_a_track(data: dict[str, np.ndarray]) -> None:
    data["tracks"] = data["tracks"][1:]


def _blank_synopsis(data: dict[str, np.ndarray]) -> None:
    data["synopsis"] = np.zeros_like(data["synopsis"]) + np.uint8(128)


def _merge_two_tubes(data: dict[str, np.ndarray]) -> None:
    labels = data["tube_labels"].copy()
    labels[labels == 2] = 1
    data["tube_labels"] = labels


def _rename_a_face(data: dict[str, np.ndarray]) -> None:
    data["identities"] = data["identities"].copy()
    data["identities"][0] = data["identities"][0] + 1


def _drop_a_face(data: dict[str, np.ndarray]) -> None:
    data["face_boxes"], data["identities"] = data["face_boxes"][1:], data["identities"][1:]


def _nudge(name: str, rel: float) -> Callable[[dict[str, np.ndarray]], None]:
    def corrupt(data: dict[str, np.ndarray]) -> None:
        a = data[name].copy()
        a.flat[a.size // 2] += rel * float(np.abs(a).max())
        data[name] = a

    corrupt.__name__ = f"nudge_{name}"
    return corrupt


def _reassign_a_point(data: dict[str, np.ndarray]) -> None:
    a = data["assign_2_1"].copy()
    a[0] = (a[0] + 1) % len(data["centroids"])
    data["assign_2_1"] = a


CORRUPTIONS: list[tuple[str, Callable[[dict[str, np.ndarray]], None]]] = [
    ("intrusion_detection", _shift_a_track),
    ("intrusion_detection", _drop_a_track),
    ("video_synopsis", _blank_synopsis),
    ("video_synopsis", _merge_two_tubes),
    ("face_recognition", _rename_a_face),
    ("face_recognition", _drop_a_face),
    ("matmul", _nudge("output", 1e-3)),
    ("fft", _nudge("convolved", 1e-3)),
    ("kmeans", _nudge("centroids_2", 1e-3)),
    ("kmeans", _reassign_a_point),
]


@pytest.mark.parametrize(("app", "corrupt"), CORRUPTIONS, ids=[f"{a}-{c.__name__}" for a, c in CORRUPTIONS])
def test_a_corrupted_result_fails_its_check(
    app: str, corrupt: Callable[[dict[str, np.ndarray]], None]
) -> None:
    task, data = _run(app)
    check_result(task, data)
    corrupt(data)
    with pytest.raises(AssertionError):
        check_result(task, data)


def _ancestors(app: str, i: int) -> set[int]:
    out: set[int] = set()
    todo = list(APPS[app].stages[i].parents)
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo.extend(APPS[app].stages[p].parents)
    return out


@pytest.mark.parametrize("app", LIVE_APPS)
def test_stages_read_only_inputs_and_outputs_of_their_ancestors(app: str) -> None:
    plans = stage_plan(app)
    inputs = set(make_task_data(app, 0, 0).inputs)
    assert [p.index for p in plans] == list(range(len(APPS[app].stages)))
    written: list[str] = []
    for i, plan in enumerate(plans):
        assert plan.spec.kind == APPS[app].stages[i].kind.name
        assert kernel_for(app, i) is plan.spec
        allowed = inputs | {w for a in _ancestors(app, i) for w in plans[a].writes}
        assert set(plan.reads) <= allowed, f"stage {i} reads {set(plan.reads) - allowed}"
        written.extend(plan.writes)
    assert len(written) == len(set(written)), "two stages write the same name"
    assert not set(written) & inputs, "a stage overwrites a task input"


def test_every_kind_of_the_live_apps_has_a_kernel_named_after_it() -> None:
    kinds = {st.kind.name for app in LIVE_APPS for st in APPS[app].stages}
    assert kinds <= set(KERNELS)
    assert all(KERNELS[k].kind == k and k in KINDS for k in KERNELS)
    with pytest.raises(KeyError):
        stage_plan("colo:ResNet-18 (batch size 32)")


@pytest.mark.parametrize("app", LIVE_APPS)
def test_kernels_never_write_their_inputs(app: str) -> None:
    task = make_task_data(app, 1, 2)
    data = {k: v.copy() for k, v in task.inputs.items()}
    for plan in stage_plan(app):
        for a in data.values():
            a.setflags(write=False)
        out = plan.spec.fn(np, {n: data[n] for n in plan.reads}, plan.params)
        assert set(out) == set(plan.writes)
        assert all(isinstance(v, np.ndarray) for v in out.values())
        data.update(out)


def _gpu_reachable_functions() -> dict[str, Any]:
    """Functions of the kernel modules reachable from a kernel that may run on a GPU."""
    modules: list[ModuleType] = [ops, video_kernels, generic_kernels, face_kernels]
    defined = {
        name: fn
        for m in modules
        for name, fn in vars(m).items()
        if inspect.isfunction(fn) and fn.__module__ == m.__name__
    }
    todo = [s.fn.__name__ for s in KERNELS.values() if KINDS[s.kind].device != Device.CPU]
    seen: dict[str, Any] = {}
    while todo:
        name = todo.pop()
        if name in seen or name not in defined:
            continue
        seen[name] = defined[name]
        tree = ast.parse(inspect.getsource(defined[name]))
        todo.extend(n.id for n in ast.walk(tree) if isinstance(n, ast.Name))
    return seen


def test_gpu_capable_kernels_use_only_the_xp_namespace() -> None:
    """NumPy-only calls would break on CuPy arrays; host-side constants (Gaussian taps) are fine."""
    funcs = _gpu_reachable_functions()
    assert {"gmm", "label_components", "kmeans_update", "face_locations"} <= set(funcs)
    offenders = [
        name
        for name, fn in funcs.items()
        if name != "gaussian_taps"
        and any(isinstance(n, ast.Name) and n.id == "np" for n in ast.walk(ast.parse(inspect.getsource(fn))))
    ]
    assert not offenders, f"GPU-capable code uses numpy directly: {offenders}"


@pytest.mark.parametrize("duty", [1.0, 0.5])
def test_video_chunks_continue_one_stream(duty: float) -> None:
    t = 7
    whole = generate_video(11, 3 * t, 96, 128, 3, start_frame=2 * t, duty=duty)
    for k in range(3):
        part = generate_video(11, t, 96, 128, 3, start_frame=(k + 2) * t, duty=duty)
        np.testing.assert_array_equal(part.frames, whole.frames[k * t : (k + 1) * t])
        np.testing.assert_array_equal(part.trajectories, whole.trajectories[:, k * t : (k + 1) * t])
        np.testing.assert_array_equal(part.visible, whole.visible[:, k * t : (k + 1) * t])
        np.testing.assert_array_equal(part.background, whole.background)
    # smooth motion: no centre jumps by more than the top speed between consecutive frames
    steps = np.linalg.norm(np.diff(whole.trajectories, axis=1), axis=2)
    assert steps.max() <= math.hypot(3.5, 0.8) + 1e-9
    if duty < 1.0:
        assert 0.2 < whole.visible.mean() < 0.8


def test_video_objects_stay_in_their_lanes_and_match_their_trajectories() -> None:
    v = generate_video(5, 40, 96, 128, 3)
    lane = 96 // 3
    for i in range(3):
        t, r, c = np.nonzero(v.object_ids == i + 1)
        assert r.min() >= i * lane + LANE_MARGIN - 1 and r.max() <= (i + 1) * lane - LANE_MARGIN
        centroid = np.array([[r[t == k].mean(), c[t == k].mean()] for k in range(40)])
        assert np.abs(centroid - v.trajectories[i]).max() < 0.75
    with pytest.raises(ValueError, match="rows"):
        generate_video(0, 2, 40, 128, 3)


def test_task_data_ids_and_shared_inputs() -> None:
    shared = {
        "intrusion_detection": {"background"},
        "video_synopsis": {"background"},
        "face_recognition": {"face_template", "encoder", "gallery"},
        "matmul": {"weights"},
        "fft": {"filter_spectra"},
        "kmeans": {"centroids"},
    }
    for app in LIVE_APPS:
        a, b = make_task_data(app, 0, 0), make_task_data(app, 0, 1)
        other_stream, other_seed = make_task_data(app, 1, 0), make_task_data(app, 0, 0, seed=1)
        assert set(a.inputs) == set(a.input_ids)
        for name in a.inputs:
            same = a.input_ids[name] == b.input_ids[name]
            assert same == (name in shared[app]), (app, name)
            if same:
                np.testing.assert_array_equal(a.inputs[name], b.inputs[name])
            assert a.input_ids[name] != other_stream.input_ids[name]
            assert a.input_ids[name] != other_seed.input_ids[name]
        assert len(set(a.input_ids.values())) == len(a.input_ids)
        if app in ("matmul", "fft", "kmeans"):
            repeated = sum(a.inputs[n].nbytes for n in shared[app])
            assert repeated >= 0.6 * a.input_bytes, (
                f"{app}: repeated inputs are {repeated / a.input_bytes:.0%}"
            )
        again = make_task_data(app, 0, 1)
        for name, arr in b.inputs.items():
            np.testing.assert_array_equal(arr, again.inputs[name])
    with pytest.raises(ValueError):
        make_task_data("matmul", 0, 0, scale="huge")
    with pytest.raises(KeyError):
        make_task_data("nope", 0, 0)


def _real_gflop(task: TaskData) -> tuple[int, float]:
    """(main GPU stage, its real GFLOP) computed from array shapes, independently of tasks.py."""
    x = task.inputs
    if task.app == "matmul":
        (n, d), layers = x["rows"].shape, x["weights"].shape[0]
        return 0, 2 * n * d * d * layers / 1e9
    if task.app == "fft":
        (s, _), (f, bins) = x["signal"].shape, x["filter_spectra"].shape
        nfft = 2 * (bins - 1)
        return 2, s * f * 2.5 * nfft * math.log2(nfft) / 1e9
    if task.app == "kmeans":
        (n, d), k = x["points_0"].shape, x["centroids"].shape[0]
        return 0, 2 * n * k * d / 1e9
    if task.app == "face_recognition":
        n, h, w = x["keyframes"].shape
        return 1, n * (7.5 * h * w * math.log2(h * w) + 60 * h * w) / 1e9
    # video: separable taps of the Gaussian pyramid, a multiply and an add per tap
    px = x["frames"].size
    taps = sum(2 * (2 * math.ceil(4 * s) + 1) for s in PYRAMID_SIGMAS)
    return (2 if task.app == "intrusion_detection" else 0), px * 2 * taps / 1e9


@pytest.mark.parametrize("app", [a for a in LIVE_APPS if a != "video_synopsis"])
@pytest.mark.parametrize("scale", ["small", "medium"])
def test_input_mb_gives_the_main_stage_its_real_flops(app: str, scale: str) -> None:
    task = make_task_data(app, 0, 0, scale=scale)
    stage, real = _real_gflop(task)
    nominal = build_graph(app, task.input_mb).subtasks[stage].gflop
    assert 0.5 <= nominal / real <= 2.0, f"{app}: nominal {nominal:.4g} GFLOP vs real {real:.4g}"


def test_video_synopsis_input_mb_is_analysed_pixels() -> None:
    from rlsched.workloads import PX_PER_MB

    task = make_task_data("video_synopsis", 0, 0)
    assert task.input_mb == pytest.approx(task.inputs["frames"].size / PX_PER_MB)


def test_video_pipelines_handle_a_chunk_without_objects() -> None:
    task = make_task_data("video_synopsis", 0, 0)
    still = np.broadcast_to(np.rint(task.inputs["background"]).astype(np.uint8), task.inputs["frames"].shape)
    data: dict[str, Any] = {"frames": still.copy(), "background": task.inputs["background"]}
    for app in ("video_synopsis", "intrusion_detection"):
        for plan in stage_plan(app):
            data.update(plan.spec.fn(np, {n: data[n] for n in plan.reads}, plan.params))
    assert data["tracks"].shape == (0, still.shape[0], 2)
    assert data["tube_boxes"].shape == (0, still.shape[0], 4) and data["tube_shifts"].shape == (0,)
    np.testing.assert_array_equal(data["synopsis"][0], np.rint(data["bg_model"]).astype(np.uint8))


def test_face_pipeline_handles_frames_without_faces() -> None:
    task = make_task_data("face_recognition", 0, 0)
    data: dict[str, Any] = dict(task.inputs)
    data["keyframes"] = np.full_like(task.inputs["keyframes"], 120)
    for plan in stage_plan("face_recognition"):
        data.update(plan.spec.fn(np, {n: data[n] for n in plan.reads}, plan.params))
    assert data["face_boxes"].shape == (0, 3) and data["identities"].shape == (0,)


# --- CuPy ----------------------------------------------------------------------------------------


def _cupy() -> ModuleType:
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception as e:  # CUDARuntimeError without a driver
        pytest.skip(f"no CUDA device: {e}")
    return cupy


@pytest.mark.gpu
@pytest.mark.parametrize("app", LIVE_APPS)
def test_cupy_matches_numpy(app: str) -> None:
    cp = _cupy()
    task = make_task_data(app, 1, 1)
    ref = run_task_numpy(task)
    data: dict[str, Any] = dict(task.inputs)
    for plan in stage_plan(app):
        on_gpu = KINDS[plan.spec.kind].device != Device.CPU
        xp = cp if on_gpu else np
        args = {n: (cp.asarray(data[n]) if on_gpu else cp.asnumpy(data[n])) for n in plan.reads}
        out = plan.spec.fn(xp, args, plan.params)
        assert set(out) == set(plan.writes)
        for name, arr in out.items():
            assert isinstance(arr, cp.ndarray if on_gpu else np.ndarray), (name, type(arr))
        data.update(out)
    host = {k: cp.asnumpy(v) for k, v in data.items()}
    check_result(task, host)
    generic = app in ("matmul", "fft", "kmeans")
    for name, want in ref.items():
        got = host[name]
        assert got.dtype == want.dtype, f"{name}: {got.dtype} on CuPy, {want.dtype} on NumPy"
        if generic and want.dtype.kind in "fc":
            scale = float(np.abs(want).max())
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * scale, err_msg=name)
        elif generic or name == "face_boxes":
            np.testing.assert_array_equal(got, want, err_msg=name)
        elif name.endswith("_mask"):  # thresholds may flip a few pixels with float rounding
            assert got.shape == want.shape and (got != want).mean() <= 0.01, name

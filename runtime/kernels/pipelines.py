"""Kernel registry: one real computation per subtask kind, and each app's stage plan.

Calling convention (the node agent depends on it)::

    plan = stage_plan(app)[i]          # stage i, same order as rlsched.workloads.APPS[app].stages
    out = plan.spec.fn(xp, {name: data[name] for name in plan.reads}, plan.params)
    data.update(out)                   # out has exactly the keys plan.writes

``xp`` is the ``numpy`` or ``cupy`` module and every array in the dict lives in that namespace;
CPU-only kinds always get ``numpy``. Kernels return new arrays and never modify their inputs. A
stage reads only task inputs and outputs of its ancestors in the app's DAG.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from rlsched.workloads import APPS
from runtime.kernels import face_kernels as fk
from runtime.kernels import generic_kernels as gk
from runtime.kernels import video_kernels as vk

KernelFn = Callable[[ModuleType, dict[str, Any], dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class KernelSpec:
    """The kernel of one subtask kind.

    :param kind: subtask kind name (a key of ``rlsched.workloads.KINDS``).
    :param fn: ``fn(xp, data, params) -> {name: new array}``.
    :param reads: generic names of the arrays it reads.
    :param writes: generic names of the arrays it returns.
    """

    kind: str
    fn: KernelFn
    reads: tuple[str, ...]
    writes: tuple[str, ...]


@dataclass(frozen=True)
class StagePlan:
    """One stage of an app, with concrete array names.

    :param index: stage index in ``APPS[app].stages``.
    :param spec: the kernel.
    :param reads: names of the task's arrays it reads (inputs or outputs of ancestor stages).
    :param writes: names of the arrays it adds to the task's data.
    :param params: the kernel's parameters (the ``params`` argument of ``spec.fn``).
    """

    index: int
    spec: KernelSpec
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    params: dict[str, Any] = field(default_factory=dict)


def _spec(kind: str, fn: KernelFn, reads: str, writes: str) -> KernelSpec:
    return KernelSpec(kind, fn, tuple(reads.split()), tuple(writes.split()))


_SPECS: tuple[KernelSpec, ...] = (
    _spec("gmm", vk.gmm, "frames background", "fg_mask bg_model"),
    _spec("frame_diff", vk.frame_diff, "frames fg_mask", "motion_mask"),
    _spec("gaussian_pyramid", vk.gaussian_pyramid, "frames fg_mask bg_model", "pyramid"),
    _spec("dog_pyramid", vk.dog_pyramid, "pyramid", "dog"),
    _spec("extrema_detection", vk.extrema_detection, "dog motion_mask fg_mask", "blob_response"),
    _spec("tracking", vk.tracking, "blob_response", "tracks"),
    _spec("tube_extraction", vk.tube_extraction, "fg_mask motion_mask", "tube_labels tube_boxes"),
    _spec("tube_optimisation", vk.tube_optimisation, "tube_labels tube_boxes", "tube_shifts synopsis_length"),
    _spec(
        "stitching",
        vk.stitching,
        "bg_model frames tube_labels tube_boxes tube_shifts synopsis_length",
        "synopsis",
    ),
    _spec("load", fk.load, "keyframes", "images"),
    _spec("face_locations", fk.face_locations, "images face_template", "face_boxes"),
    _spec("landmarks", fk.landmarks, "images face_boxes", "chips"),
    _spec("encodings", fk.encodings, "chips encoder", "face_encodings"),
    _spec("distance", fk.distance, "face_encodings gallery", "distances"),
    _spec("compare", fk.compare, "distances", "identities"),
    _spec("matmul", gk.matmul, "rows weights", "output"),
    _spec("fft", gk.fft, "signal", "spectrum"),
    _spec("spectral_filter", gk.spectral_filter, "spectrum filter_spectra", "filtered"),
    _spec("ifft", gk.ifft, "filtered", "convolved"),
    _spec("kmeans_assign", gk.kmeans_assign, "points centroids", "assign"),
    _spec(
        "kmeans_update",
        gk.kmeans_update,
        "points_a points_b assign_a assign_b centroids",
        "centroids_out",
    ),
)

#: Every kernel by subtask kind name.
KERNELS: dict[str, KernelSpec] = {s.kind: s for s in _SPECS}


def _plain(app: str) -> tuple[StagePlan, ...]:
    """Stages whose kinds appear once: generic names are the concrete names."""
    return tuple(
        StagePlan(i, KERNELS[st.kind.name], KERNELS[st.kind.name].reads, KERNELS[st.kind.name].writes)
        for i, st in enumerate(APPS[app].stages)
    )


def _renamed(i: int, kind: str, names: dict[str, str]) -> StagePlan:
    spec = KERNELS[kind]
    return StagePlan(
        i,
        spec,
        tuple(names[r] for r in spec.reads),
        tuple(names[w] for w in spec.writes),
        {"names": dict(names)},
    )


def _kmeans() -> tuple[StagePlan, ...]:
    """Two Lloyd iterations over halves ``points_0`` / ``points_1``: iteration ``it`` (1-based)
    assigns against ``centroids`` (it = 1) or ``centroids_1`` and writes ``centroids_<it>``."""
    plans = []
    for it in (1, 2):
        cen = "centroids" if it == 1 else f"centroids_{it - 1}"
        base = 3 * (it - 1)
        for half in (0, 1):
            names = {"points": f"points_{half}", "centroids": cen, "assign": f"assign_{it}_{half}"}
            plans.append(_renamed(base + half, "kmeans_assign", names))
        names = {
            "points_a": "points_0",
            "points_b": "points_1",
            "assign_a": f"assign_{it}_0",
            "assign_b": f"assign_{it}_1",
            "centroids": cen,
            "centroids_out": f"centroids_{it}",
        }
        plans.append(_renamed(base + 2, "kmeans_update", names))
    return tuple(plans)


_PLANS: dict[str, tuple[StagePlan, ...]] = {}


def stage_plan(app: str) -> tuple[StagePlan, ...]:
    """The stages of ``app`` with concrete array names and parameters, in DAG order.

    :param app: a built-in app with kernels (see :data:`LIVE_APPS`).
    :raises KeyError: for an app without kernels.
    """
    if app not in _PLANS:
        if app not in LIVE_APPS:
            raise KeyError(f"no kernels for app {app!r}; apps with kernels: {', '.join(LIVE_APPS)}")
        _PLANS[app] = _kmeans() if app == "kmeans" else _plain(app)
        if len(_PLANS[app]) != len(APPS[app].stages):
            raise AssertionError(f"stage plan of {app} does not match its DAG")
    return _PLANS[app]


def kernel_for(app: str, stage_index: int) -> KernelSpec:
    """The kernel of stage ``stage_index`` of ``app``.

    :param app: app name.
    :param stage_index: index into ``APPS[app].stages``.
    :raises KeyError: for an app without kernels.
    :raises IndexError: for a stage index out of range.
    """
    return stage_plan(app)[stage_index].spec


#: Apps whose every stage has a kernel: every built-in app (co-location ``colo:*`` apps have none).
LIVE_APPS: tuple[str, ...] = tuple(APPS)

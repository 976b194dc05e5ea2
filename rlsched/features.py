"""The one feature encoder: per-node, per-GPU, task and cluster-summary features.

Used by learning policies in the simulator and in the live runtime alike; it reads only a
:class:`ClusterView` and a :class:`Task`. Bump :data:`FEATURE_VERSION` whenever a feature's
meaning, order or scaling changes: checkpoints record it, and a network is always fed the version
it was trained on (:data:`READABLE_FEATURE_VERSIONS`; others are refused).

Scaling: counts and durations go through ``log1p`` and utilisations stay in [0, 1], so every
feature is O(1) on clusters from 4 to 1,024 nodes — what lets one network serve any size.
"""

from __future__ import annotations

import math

import numpy as np
from gymnasium import spaces

from rlsched.estimates import memory_aware_estimates, task_split_seconds
from rlsched.hardware import CPU_CORE_GFLOPS, gpu_model
from rlsched.tasks import Task
from rlsched.view import DYN_COLUMNS, ClusterView

#: What ``rlsched train`` encodes: version 4 costs a task's subtasks running side by side on the
#: node's GPUs (the heuristics' ETC, ``parallel=True``) and reads each node's CPU queue in seconds.
FEATURE_VERSION = 4
#: Versions this build still encodes, for networks trained on them. They differ only in
#: ``exec_gpu_log``, ``exec_cpu_log``, ``etc_log``, ``etc_rel_best`` and ``mem_wait_log``:
#: version 3 costs a task as if all its subtasks ran on one device; version 2 (the LDWP network
#: shipped until 2026-12-05) also divided the CPU-queue wait by the core's GFLOP/s (~25x short;
#: :func:`rlsched.estimates.node_estimates`).
READABLE_FEATURE_VERSIONS: tuple[int, ...] = (2, 3, 4)

NODE_FEATURES: tuple[str, ...] = (
    "alive",
    "cpu_util",
    "host_mem_util",
    "gpu_util",
    "gpu_mem_util",
    "stream_occupancy",
    "net_in_util",
    "net_out_util",
    "idle_streams_log",
    "net_in_busy_log",
    "net_out_busy_log",
    "tasks_on_node_log",
    "ready_waiting_log",
    "backlog_gpu_per_gpu_log",
    "backlog_cpu_per_core_log",
    "speed_gpu",
    "speed_cpu",
    "n_gpus_log",
    "gpu_tflops_log",
    "cores_log",
    "host_mem_log",
    "load",
    # task-conditional: what this task would cost here
    "exec_gpu_log",
    "exec_cpu_log",
    "etc_log",
    "etc_rel_best",
    "feasible",
    # host memory (v2): the admission queue and the task's estimated wait for its memory
    "host_mem_queued",
    "mem_wait_log",
)
GPU_FEATURES: tuple[str, ...] = ("valid", "occupancy", "mem_util", "speed", "tflops_log", "bw_log")
#: Apps with their own one-hot slot; others share the last slot.
APP_VOCAB: tuple[str, ...] = (
    "intrusion_detection",
    "video_synopsis",
    "face_recognition",
    "matmul",
    "fft",
    "kmeans",
    "alibaba",
)
TASK_FEATURES: tuple[str, ...] = (
    *(f"app_{a}" for a in APP_VOCAB),
    "app_other",
    "input_log",
    "priority",
    "has_deadline",
    "slack_log",
    "nominal_gpu_log",
    "nominal_cpu_log",
    "subtasks_log",
    "gpu_fraction",
    "constrained",
    "host_mem_log",
)
#: Node columns averaged over alive nodes into the cluster summary.
_SUMMARY_COLS = [1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 15]
_LOAD_COL = 21
_SUMMARY_AND_LOAD = np.array([*_SUMMARY_COLS, _LOAD_COL])
#: Task-independent node columns (the rest depend on the task being placed).
N_STATE_COLS = 22
CLUSTER_FEATURES: tuple[str, ...] = (
    "nodes_log",
    "alive_frac",
    *(f"mean_{NODE_FEATURES[c]}" for c in _SUMMARY_COLS),
    "load_std",
)
_REF = gpu_model("T4")
_APP_SLOT = {a: i for i, a in enumerate(APP_VOCAB)}


def _l(x: np.ndarray | float) -> np.ndarray:
    return np.log1p(np.maximum(x, 0.0))


def node_state(view: ClusterView) -> np.ndarray:
    """(N, N_STATE_COLS) float32: the task-independent node columns of :data:`NODE_FEATURES`."""
    st = _static(view)
    # One multiply scales the whole dense per-node state (ClusterView.dyn, columns in
    # DYN_COLUMNS order); at 11 nodes numpy's per-call overhead, not arithmetic, is the cost.
    scaled = view.dyn * st["scale"]
    out = np.empty((view.n_nodes, N_STATE_COLS), dtype=np.float32)
    out[:, 0] = view.alive
    out[:, 1:8] = scaled[:, :7]
    np.log1p(np.maximum(scaled[:, 7:14], 0.0), out=out[:, 8:15], casting="same_kind")
    out[:, 15:17] = scaled[:, 14:16]
    out[:, 17:21] = st["cols"]
    out[:, 21] = scaled[:, :4].sum(axis=1) * 0.25  # .mean() costs twice as much at this size
    return out


def encode_nodes(
    view: ClusterView,
    task: Task,
    mask: np.ndarray,
    state: np.ndarray | None = None,
    version: int = FEATURE_VERSION,
) -> np.ndarray:
    """(N, len(NODE_FEATURES)) float32 features of every node for placing ``task``.

    :param view: observable cluster state.
    :param task: the task awaiting a node.
    :param mask: (N,) feasible nodes.
    :param state: :func:`node_state` of ``view`` if already computed.
    :param version: the feature version of the network that reads them
        (:data:`READABLE_FEATURE_VERSIONS`).
    """
    if state is None:
        state = node_state(view)
    g_s, c_s, etc, wait = memory_aware_estimates(
        task, view, legacy_cpu_wait=version < 3, parallel=version >= 4
    )
    best = float(etc[mask].min()) if mask.any() else 1.0
    out = np.empty((view.n_nodes, len(NODE_FEATURES)), dtype=np.float32)
    out[:, :N_STATE_COLS] = state
    out[:, 22:25] = np.log1p(np.stack((g_s, c_s, etc), axis=1) * (1.0 / 60.0))
    rel = etc * (1.0 / max(best, 1e-6)) - 1.0
    out[:, 25] = np.minimum(np.maximum(rel, 0.0), 10.0)  # np.clip has several times the overhead
    out[:, 26] = mask
    out[:, 27] = np.minimum(view.host_mem_queued_mb / view.host_mem_mb, 10.0)
    out[:, 28] = np.log1p(wait * (1.0 / 60.0))
    alive = view.alive
    if not alive.all():
        out[~alive] = 0.0
    return out


def _static(view: ClusterView) -> dict[str, np.ndarray]:
    """Datasheet-derived arrays of the node encoder, computed once per view."""
    cached = view.extra.get("_node_encoder_static")
    if cached is not None:
        return cached
    ngc = np.maximum(view.n_gpus, 1).astype(np.float64)
    cores = np.maximum(view.cores, 1).astype(np.float64)
    one = np.ones(view.n_nodes)
    by_column = {  # multiplier per DYN_COLUMNS entry
        "cpu_busy": 1.0 / cores,
        "host_mem_used_mb": 1.0 / view.host_mem_mb,
        "node_gpus_active": 1.0 / ngc,
        "node_gpu_mem_used_mb": 1.0 / np.maximum(view.node_gpu_mem_mb, 1.0),
        "node_gpu_running": 1.0 / np.maximum(view.node_streams, 1),
        "backlog_gpu_s": 1.0 / (ngc * 60.0),
        "backlog_cpu_s": 1.0 / (cores * 60.0),
        "node_speed_gpu": (view.n_gpus > 0).astype(np.float64),
    }
    scale = np.stack([by_column.get(c, one) for c in DYN_COLUMNS], axis=1)
    cols = np.stack(
        (
            np.log1p(view.n_gpus),
            np.log1p(view.node_tflops),
            np.log1p(view.cores / 8.0),
            np.log1p(view.host_mem_mb / 8192.0),
        ),
        axis=1,
    ).astype(np.float32)
    cached = {"scale": scale, "cols": cols}
    view.extra["_node_encoder_static"] = cached
    return cached


def encode_gpus(view: ClusterView) -> np.ndarray:
    """(N, G, len(GPU_FEATURES)) float32 features of every GPU slot (zeros on padding)."""
    valid = view.gpu_valid
    cols = (
        valid,
        view.gpu_running / np.maximum(view.gpu_streams, 1),
        view.gpu_mem_used_mb / np.maximum(view.gpu_mem_mb, 1.0),
        view.speed_gpu,
        _l(view.gpu_tflops),
        _l(view.gpu_bw_gbs / 100.0),
    )
    return (np.stack(cols, axis=2) * valid[..., None]).astype(np.float32)


def encode_task(task: Task, view: ClusterView) -> np.ndarray:
    """(len(TASK_FEATURES),) float32 features of a task.

    :param task: the task.
    :param view: gives the current time, for deadline slack.
    """
    vals = [0.0] * (len(APP_VOCAB) + 1)
    vals[_APP_SLOT.get(task.app, len(APP_VOCAB))] = 1.0
    g, c = task_split_seconds(task, _REF.fp32_tflops, _REF.mem_bw_gbs, CPU_CORE_GFLOPS)
    slack = (task.deadline_s - view.time_s) if task.deadline_s is not None else 0.0
    log1p = math.log1p  # scalars: math is ~10x cheaper than numpy per call
    vals += (
        log1p(task.input_mb / 100.0),
        task.priority,
        task.deadline_s is not None,
        log1p(max(slack, 0.0) / 60.0),
        log1p(g / 60.0),
        log1p(c / 60.0),
        log1p(len(task.graph)),
        g / max(g + c, 1e-9),
        bool(task.gpu_models),
        log1p(task.host_mem_mb / 8192.0),
    )
    return np.array(vals, dtype=np.float32)


def encode_cluster(view: ClusterView, state: np.ndarray | None = None) -> np.ndarray:
    """(len(CLUSTER_FEATURES),) float32 summary: means of node columns over alive nodes.

    :param view: observable cluster state.
    :param state: :func:`node_state` of ``view`` if already computed.
    """
    if state is None:
        state = node_state(view)
    out = np.zeros(len(CLUSTER_FEATURES), dtype=np.float32)
    out[0] = math.log1p(view.n_nodes)
    alive = view.alive
    rows = state if alive.all() else state[alive]
    k = rows.shape[0]
    if k == 0:
        return out
    out[1] = k / view.n_nodes
    # One reduction gives the means and the load's second moment (np.std is slow on small rows).
    sums = rows[:, _SUMMARY_AND_LOAD].sum(axis=0, dtype=np.float64)
    load = rows[:, _LOAD_COL].astype(np.float64)
    mean = sums[-1] / k
    out[2:-1] = sums[:-1] / k
    out[-1] = math.sqrt(max(float(load @ load) / k - mean * mean, 0.0))
    return out


def encode_observation(
    view: ClusterView, task: Task, mask: np.ndarray, version: int = FEATURE_VERSION
) -> dict[str, np.ndarray]:
    """The stage-1 observation: ``nodes``, ``task``, ``cluster`` and the int8 ``mask``.

    What the Gym environment returns and what the LDWP network reads at decision time.

    :param version: the feature version of the network that reads it.
    :raises ValueError: for a version this build does not encode.
    """
    check_feature_version(version)
    state = node_state(view)
    return {
        "nodes": encode_nodes(view, task, mask, state, version),
        "task": encode_task(task, view),
        "cluster": encode_cluster(view, state),
        "mask": mask.astype(np.int8),
    }


def observation_space(n_nodes: int) -> spaces.Dict:
    """The Gymnasium space of :func:`encode_observation` for a cluster of ``n_nodes`` nodes
    (shared by the simulated and the live environment, so a network moves between them as is)."""
    inf = np.float32(np.inf)
    return spaces.Dict(
        {
            "nodes": spaces.Box(-inf, inf, (n_nodes, len(NODE_FEATURES)), np.float32),
            "task": spaces.Box(-inf, inf, (len(TASK_FEATURES),), np.float32),
            "cluster": spaces.Box(-inf, inf, (len(CLUSTER_FEATURES),), np.float32),
            "mask": spaces.Box(0, 1, (n_nodes,), np.int8),
        }
    )


def terminal_observation(n_nodes: int) -> dict[str, np.ndarray]:
    """A valid-looking observation of :func:`observation_space` for the end of an episode (it is
    never acted on)."""
    return {
        "nodes": np.zeros((n_nodes, len(NODE_FEATURES)), dtype=np.float32),
        "task": np.zeros(len(TASK_FEATURES), dtype=np.float32),
        "cluster": np.zeros(len(CLUSTER_FEATURES), dtype=np.float32),
        "mask": np.ones(n_nodes, dtype=np.int8),
    }


def network_feature_version(net: object) -> int:
    """The feature version a loaded network was trained on (set when its checkpoint is read;
    a network built here and not loaded reads this build's :data:`FEATURE_VERSION`)."""
    version = getattr(net, "feature_version", None)
    return FEATURE_VERSION if version is None else int(version)


def check_feature_version(version: int) -> int:
    """``version`` if this build encodes it (:data:`READABLE_FEATURE_VERSIONS`).

    :raises ValueError: naming ``feature_version`` and the versions it could be.
    """
    if isinstance(version, bool) or version not in READABLE_FEATURE_VERSIONS:
        raise ValueError(f"feature_version: expected one of {READABLE_FEATURE_VERSIONS}, got {version!r}")
    return version

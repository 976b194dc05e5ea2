"""Data files derived from the shipped Alibaba GPU v2023 pod lists, written beside a generated set:
arrival times resampled from the trace, and pod lists with a chosen share of multi-GPU pods and of
pods that ask for particular GPU models.

The shipped lists have few multi-GPU pods (about 1 % of ``default``), none with a ``gpu_spec``,
and ``openb_pod_list_multigpu20.csv``, the list that stresses multi-GPU pods, has no times, so no
scenario can replay it. A derived list takes a window of the ``default`` list's pods that ran (their
times, so their arrivals and durations) and gives a share of its GPU pods the shape (GPUs, cores,
memory) of a multi-GPU pod of ``multigpu20``, and another share a ``gpu_spec``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np

from rlsched.scenarios.data_paths import find_data_dir

#: The shipped trace folder, as a scenario file names it.
TRACE_DIR = "${RLSCHED_DATA}/traces/alibaba-gpu-v2023"
NODE_LIST = "openb_node_list_gpu_node.csv"
#: Pod lists with times, replayable as they are.
POD_LISTS: tuple[str, ...] = ("openb_pod_list_default.csv", "openb_pod_list_gpushare40.csv")
#: The list whose multi-GPU pods lend their shape.
MULTI_GPU_LIST = "openb_pod_list_multigpu20.csv"
#: GPU models every node sample of six or more nodes holds (stratified sampling keeps their
#: shares): a ``gpu_spec`` names at least one of them, so it is always satisfiable.
COMMON_MODELS: tuple[str, ...] = ("G2", "T4", "P100")
#: Rarer models of the node list a ``gpu_spec`` may add.
RARE_MODELS: tuple[str, ...] = ("V100M16", "V100M32", "G3")
#: Pods created in the first months of the trace trickle in; resampling starts after them.
SPARSE_PREFIX = 300
_COLUMNS = (
    "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
    "creation_time", "deletion_time", "scheduled_time",
)  # fmt: skip


def trace_file(name: str) -> Path:
    """The shipped trace file ``name`` (under ``${RLSCHED_DATA}``)."""
    return find_data_dir() / "traces" / "alibaba-gpu-v2023" / name


@cache
def _rows(name: str) -> tuple[dict[str, str], ...]:
    with trace_file(name).open(encoding="utf-8-sig", newline="") as f:
        return tuple({k.strip(): v.strip() for k, v in r.items()} for r in csv.DictReader(f))


def _ran(r: dict[str, str]) -> bool:
    return r.get("pod_phase") != "Pending" and bool(r.get("scheduled_time")) and bool(r.get("deletion_time"))


@cache
def _timed_pods() -> tuple[dict[str, str], ...]:
    """The ``default`` list's pods that ran, in creation order."""
    pods = [r for r in _rows(POD_LISTS[0]) if _ran(r)]
    return tuple(sorted(pods, key=lambda r: int(r["creation_time"])))


def resampled_arrivals(rng: np.random.Generator, n: int) -> str:
    """A CSV (column ``arrival_s``) of ``n`` arrivals: a random run of consecutive gaps between the
    trace's pod creations (past its sparse first months), scaled to a mean gap of one second.
    A scenario sets the rate with ``time_scale`` (seconds per trace second).

    :param rng: the case's random source.
    :param n: arrivals (at least 2).
    """
    t = np.sort(np.array([float(r["creation_time"]) for r in _rows(POD_LISTS[0])]))[SPARSE_PREFIX:]
    gaps = np.diff(t)
    start = int(rng.integers(0, len(gaps) - (n - 1) + 1))
    block = gaps[start : start + n - 1]
    block = block / block.mean() if block.mean() > 0 else np.ones_like(block)
    times = np.concatenate(([0.0], np.cumsum(block)))
    return "arrival_s\n" + "".join(f"{x:.6f}\n" for x in times)


def derived_pod_list(rng: np.random.Generator, n: int, multi_share: float, spec_share: float) -> str:
    """A pod list of ``n`` pods that ran: a window of ``default``'s, with ``multi_share`` of its GPU
    pods given a multi-GPU pod's shape from ``multigpu20`` and ``spec_share`` of them a ``gpu_spec``
    (one to three of :data:`COMMON_MODELS`, maybe one of :data:`RARE_MODELS`).

    :param rng: the case's random source.
    :param n: pods in the list (at most the ran pods past :data:`SPARSE_PREFIX`).
    :param multi_share: share of GPU pods made multi-GPU.
    :param spec_share: share of GPU pods that ask for particular models.
    """
    pods = _timed_pods()
    n = min(n, len(pods) - SPARSE_PREFIX)
    start = int(rng.integers(SPARSE_PREFIX, len(pods) - n + 1))
    shapes = [r for r in _rows(MULTI_GPU_LIST) if int(r["num_gpu"]) > 1]
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=_COLUMNS, lineterminator="\n")
    w.writeheader()
    for i, pod in enumerate(pods[start : start + n]):
        row = {c: pod.get(c, "") for c in _COLUMNS}
        row["name"] = f"gen-pod-{i:05d}"
        if int(row["num_gpu"]) > 0 and rng.random() < multi_share:
            shape = shapes[int(rng.integers(len(shapes)))]
            row.update({k: shape[k] for k in ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli")})
        if int(row["num_gpu"]) > 0 and rng.random() < spec_share:
            row["gpu_spec"] = "|".join(_gpu_spec(rng))
        w.writerow(row)
    return out.getvalue()


def _gpu_spec(rng: np.random.Generator) -> Sequence[str]:
    k = int(rng.integers(1, len(COMMON_MODELS) + 1))
    models = [COMMON_MODELS[i] for i in sorted(rng.choice(len(COMMON_MODELS), size=k, replace=False))]
    if rng.random() < 0.3:
        models.append(RARE_MODELS[int(rng.integers(len(RARE_MODELS)))])
    return models

"""What every section of the live benchmark shares: the run sizes, the scheduler, one live session
run to the end, and the GPUs a spec may name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rlsched.policies.registry import parse_scheduler
from rlsched.tasks import Task
from runtime.cluster.config import LiveClusterSpec, fold_ordinals
from runtime.cluster.live import LiveOptions, LiveResult, LiveSession
from runtime.cluster.local import LocalCluster
from runtime.kernels import TaskData

#: The scheduler of every live section: the strongest heuristic pair of the live demo.
SCHEDULER = "mct+mlsm"
#: Device whose co-location row the interference section prints (and the backend section opens).
MATRIX_DEVICE = "V100M16"


@dataclass(frozen=True)
class Sizes:
    """How much each section runs (full or ``--quick``)."""

    dispatch_tasks: dict[str, int]
    dispatch_batches: tuple[int, ...]
    dispatch_repeats: int
    cache_tasks: int
    cache_streams: int
    feedback_tasks: int
    feedback_seeds: int
    streams_tasks: int
    streams_seeds: int
    backend_scale: str
    backend_reps: int
    profile_fraction: float


FULL = Sizes(
    dispatch_tasks={"matmul": 1500, "kmeans": 250},
    dispatch_batches=(10, 100),
    dispatch_repeats=3,
    cache_tasks=90,
    cache_streams=6,
    feedback_tasks=300,
    feedback_seeds=3,
    streams_tasks=120,
    streams_seeds=2,
    backend_scale="medium",
    backend_reps=5,
    profile_fraction=1.0,
)
QUICK = Sizes(
    dispatch_tasks={"matmul": 200, "kmeans": 40},
    dispatch_batches=(10, 100),
    dispatch_repeats=3,
    cache_tasks=24,
    cache_streams=6,
    feedback_tasks=120,
    feedback_seeds=3,
    streams_tasks=40,
    streams_seeds=1,
    backend_scale="small",
    backend_reps=3,
    profile_fraction=0.5,
)


def run_session(
    cluster: LocalCluster, work: Sequence[tuple[Task, TaskData]], opts: LiveOptions
) -> tuple[LiveResult, float]:
    """``run_live`` spelled out, returning also the session's ``perf_counter`` origin (so stream
    logs can be put on the run's clock)."""
    session = LiveSession(cluster, parse_scheduler(SCHEDULER), work, opts)
    while (task := session.next_decision()) is not None:
        session.assign(task, session.select(task))
    session.finish()
    assert session.result is not None
    return session.result, session.t0


def cuda_count(backend: str) -> int:
    """GPUs a spec may name on ``backend`` (emulated backends: unlimited, reported as 2)."""
    if backend != "cupy":
        return 2
    import cupy

    return int(cupy.cuda.runtime.getDeviceCount())


def on_real_gpus(spec: LiveClusterSpec, backend: str) -> LiveClusterSpec:
    """``spec`` with GPU ordinals folded onto the CUDA devices present (CuPy only)."""
    return fold_ordinals(spec, cuda_count(backend)) if backend == "cupy" else spec

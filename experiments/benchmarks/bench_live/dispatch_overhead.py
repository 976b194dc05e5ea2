"""Section ``dispatch``: runtime time per subtask beyond the kernel's own time (issue target on
the NumPy backend: <= 100 us).

One node, one GPU at full speed (no emulation sleep), one stream and no CPU core (a core would
run a subtask beside the stream's), so exactly one subtask runs at any time. Tiny tasks (kernels
of tens of microseconds, so the overhead is not lost in kernel-time noise) arrive in batches of 10
or 100, or all at 0; a batch is done before the next one arrives, so the batch size bounds the
ready queue, which the agent's dispatch loop scans on every event. The backend is wrapped so each
``stream.run`` logs its wall interval and the kernel seconds the stream reports (the agent's own
measurement, taken in the lane): the per-subtask overhead is the gap between one kernel's end and
the next one's start within a batch (completion bookkeeping, output downloads, the next
placement, the lane hand-off, input uploads). For all-at-0 runs the brief's simplest method is
printed beside it: (session wall - kernel seconds) / subtasks, with kernel seconds from the lane
or from ``run_task_numpy`` on the same data outside the runtime.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from experiments.benchmarks.bench_live.common import SCHEDULER, Sizes, run_session
from experiments.benchmarks.bench_live.logged_backend import LoggedBackend
from experiments.live_demo import mean_std
from rlsched.tasks import Task
from rlsched.workloads import KINDS
from runtime.backends.select import choose_backend
from runtime.cluster.config import LiveClusterSpec, LiveGpu, LiveNode
from runtime.cluster.live import LiveOptions
from runtime.cluster.local import LocalCluster
from runtime.cluster.workload import live_task
from runtime.kernels import TaskData, run_task_numpy, stage_plan

#: Arrival spacing of dispatch batches per subtask of the batch: ~4x a tiny subtask's kernel plus
#: overhead on NumPy, so a batch is done before the next one arrives.
BATCH_S_PER_SUBTASK = 5e-4


def tiny_data(app: str, chunk: int, rng: np.random.Generator) -> TaskData:
    """A task of ``app`` (matmul or kmeans) with kernels of tens of microseconds.

    The stream's repeated input (weights, centroids) has an id shared by all chunks, as in
    ``make_task_data``, so the cache hit path is part of what is measured.
    """
    if app == "matmul":
        rows, d, layers = 16, 64, 4
        ws = np.random.default_rng(0).standard_normal((layers, d, d), dtype=np.float32) / np.float32(8.0)
        ws.setflags(write=False)
        inputs = {"rows": rng.standard_normal((rows, d), dtype=np.float32), "weights": ws}
        shared = {"weights"}
        gflop = 2.0 * rows * d * d * layers / 1e9
        mb = gflop / KINDS["matmul"].gflop_per_mb
    elif app == "kmeans":
        points, d, k = 64, 16, 32
        cen = np.random.default_rng(0).standard_normal((k, d), dtype=np.float32)
        cen.setflags(write=False)
        pts = rng.standard_normal((points, d), dtype=np.float32)
        inputs = {
            "points_0": pts[: points // 2].copy(),
            "points_1": pts[points // 2 :].copy(),
            "centroids": cen,
        }
        shared = {"centroids"}
        gflop = 2.0 * (points // 2) * k * d / 1e9
        mb = gflop / KINDS["kmeans_assign"].gflop_per_mb
    else:
        raise ValueError(f"no tiny task for {app!r}")
    base = f"tiny-{app}/0"
    ids = {n: f"{base}/{n}" if n in shared else f"{base}/{chunk}/{n}" for n in inputs}
    return TaskData(app, 0, chunk, inputs, ids, mb, shared=frozenset(shared))


def tiny_work(app: str, tasks: int, seed: int, batch: int) -> list[tuple[Task, TaskData]]:
    """``tasks`` tiny tasks arriving in batches of ``batch`` (all at 0 when ``batch >= tasks``).

    Batches are spaced by :data:`BATCH_S_PER_SUBTASK` per subtask, so each batch is usually done before the
    next arrives: the ready queue never holds more than one batch (its depth is what the agent's
    dispatch loop scans), and the idle time between batches is left out of the gaps.
    """
    rng = np.random.default_rng([seed, 0xD15])
    period = batch * len(stage_plan(app)) * BATCH_S_PER_SUBTASK
    out = []
    for i in range(tasks):
        data = tiny_data(app, i, rng)
        out.append((live_task(i, data, (i // batch) * period, "small"), data))
    return out


def reference_kernel_s(work: Sequence[tuple[Task, TaskData]]) -> float:
    """Seconds of all stages of ``work`` run by ``run_task_numpy`` in this thread (warm)."""
    run_task_numpy(work[0][1])
    timings: list[float] = []
    for _, data in work:
        run_task_numpy(data, timings)
    return float(sum(timings))


@dataclass
class DispatchRun:
    """One dispatch measurement (times per subtask, us)."""

    subtasks: int
    gaps_us: np.ndarray
    kernel_us: float
    wall_overhead_us: float
    reference_overhead_us: float
    copy_us: float
    placer_us: float
    lost: int


def dispatch_once(app: str, tasks: int, seed: int, backend: str, batch: int) -> DispatchRun:
    """Run ``tasks`` tiny tasks (batches of ``batch``) through one stream; measure the gaps between
    kernels of a batch."""
    spec = LiveClusterSpec(
        nodes=(LiveNode("n", cpu_cores=0, gpus=(LiveGpu("V100M16", mem_mib=1024),), streams_per_gpu=1),),
        max_streams_per_gpu=1,
        min_streams_per_gpu=1,
    )
    logged = LoggedBackend(choose_backend(backend, max_speed=spec.max_speed))
    work = tiny_work(app, tasks, seed, batch)
    res, t0 = run_session(LocalCluster(spec, logged), work, LiveOptions(seed=seed))
    runs = sorted(logged.log.kernels)
    n = len(runs)
    starts = np.array([r[0] for r in runs])
    ends = np.array([r[1] for r in runs])
    secs = np.array([r[2] for r in runs])
    # Everything between the end of one kernel's run call and the start of the next on the only
    # lane is runtime overhead; what the stream timed beyond the kernel inside run (a CUDA sync, a
    # sleep overshoot) is too: so a gap is start[i+1] - end[i] plus (end - start - secs)[i].
    inside = np.maximum(ends - starts - secs, 0.0)
    gaps = (starts[1:] - ends[:-1]) + inside[:-1]
    # A kernel that starts in a later batch's arrival window than its predecessor follows a wait
    # for arrivals (idle, not overhead): leave that gap out.
    period = batch * len(stage_plan(app)) * BATCH_S_PER_SUBTASK
    window = np.floor((starts - t0) / period) if batch < tasks else np.zeros(n)
    same_batch = window[1:] == window[:-1]
    copy_s = sum(c[0] for c in logged.log.copies)
    ref_s = reference_kernel_s(work) if batch >= tasks else math.nan
    return DispatchRun(
        subtasks=n,
        gaps_us=gaps[same_batch] * 1e6,
        kernel_us=float(secs.mean() * 1e6),
        wall_overhead_us=(res.metrics.wall_s - float(secs.sum())) / n * 1e6 if batch >= tasks else math.nan,
        reference_overhead_us=(res.metrics.wall_s - ref_s) / n * 1e6,
        copy_us=copy_s / n * 1e6,
        placer_us=res.dispatch_us_per_subtask,
        lost=res.metrics.not_completed,
    )


def section_dispatch(sz: Sizes, backend: str) -> dict[str, float]:
    """Section 1; returns the mean overhead (us) per app and batch size on ``backend``."""
    print(
        "One node, one GPU (V100M16 at full speed: no emulation sleep), 1 stream, 0 CPU cores (so "
        f"exactly one subtask runs at a time), scheduler {SCHEDULER}. Tasks arrive in batches (a "
        "batch as large as the run = all at 0); a batch is done before the next arrives, so the "
        "batch bounds the ready queue. Overhead per subtask = gap between consecutive kernels of a "
        "batch on the lane (completion bookkeeping, placement, hand-off, uploads and downloads); "
        f"mean ± std over {sz.dispatch_repeats} repeats. Target: mean <= 100 us on NumPy.\n"
    )
    print(
        "| backend | task | batch | subtasks | kernel us | overhead mean us | p50 us | p99 us "
        "| whole-run us | vs reference kernels us | of which copies us | placer us | not completed |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    means: dict[str, float] = {}
    for app, tasks in sz.dispatch_tasks.items():
        per_task = len(stage_plan(app))
        dispatch_once(app, min(tasks, 50), 99, backend, 10)  # warm-up: imports, caches, first launches
        for batch in sorted({min(b, tasks) for b in (*sz.dispatch_batches, tasks)}):
            runs = [dispatch_once(app, tasks, seed, backend, batch) for seed in range(sz.dispatch_repeats)]
            gap_means = [float(r.gaps_us.mean()) for r in runs]
            all_at_0 = batch >= tasks

            def cell(values: list[float], show: bool = True) -> str:
                return mean_std(values, ".1f") if show else "-"

            cells = [
                backend,
                f"tiny {app} ({per_task} subtask{'s' if per_task > 1 else ''}/task)",
                f"{batch} (all at 0)" if all_at_0 else str(batch),
                str(runs[0].subtasks),
                cell([r.kernel_us for r in runs]),
                cell(gap_means),
                cell([float(np.percentile(r.gaps_us, 50)) for r in runs]),
                cell([float(np.percentile(r.gaps_us, 99)) for r in runs]),
                cell([r.wall_overhead_us for r in runs], all_at_0),
                cell([r.reference_overhead_us for r in runs], all_at_0),
                cell([r.copy_us for r in runs]),
                cell([r.placer_us for r in runs]),
                str(sum(r.lost for r in runs)),
            ]
            print("| " + " | ".join(cells) + " |", flush=True)
            means[f"{app}_batch{batch}"] = float(np.mean(gap_means))
    print(
        "\nkernel us: the stream's own time per subtask (measured in the lane); whole-run (all at 0 "
        "only): (session wall - kernel seconds) / subtasks, start-up and shutdown included; vs "
        "reference kernels: the same with kernels timed by run_task_numpy outside the runtime; "
        "placer us: the agent's dispatch_s / subtasks_done (its dispatch loop and the placer, on "
        "lane and main threads)."
    )
    return means

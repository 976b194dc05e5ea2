"""The live runtime's figures (a script, not a test): dispatch overhead, MLSM cache savings, stream
feedback, streams vs throughput, backend speedup per kernel and a measured interference matrix.

Sections (``--sections``, comma-separated; default all):

1. ``dispatch`` — runtime time per subtask beyond the kernel's own time (issue target on the NumPy
   backend: <= 100 us). One node, one GPU at full speed (no emulation sleep), one stream and no CPU
   core (a core would run a subtask beside the stream's), so exactly one subtask runs at any time.
   Tiny tasks (kernels of tens of microseconds, so the overhead is not lost in kernel-time noise)
   arrive in batches of 10 or 100, or all at 0; a batch is done before the next one arrives, so the
   batch size bounds the ready queue, which the agent's dispatch loop scans on every event. The
   backend is wrapped so each ``stream.run`` logs its wall interval and the kernel seconds the
   stream reports (the agent's own measurement, taken in the lane): the per-subtask overhead is the
   gap between one kernel's end and the next one's start within a batch (completion bookkeeping,
   output downloads, the next placement, the lane hand-off, input uploads). For all-at-0 runs the
   brief's simplest method is printed beside it: (session wall - kernel seconds) / subtasks, with
   kernel seconds from the lane or from ``run_task_numpy`` on the same data outside the runtime.
2. ``cache`` — H2D bytes loaded vs saved by the MLSM input cache for streams of matmul, fft and
   kmeans on a two-GPU node, with ample and with deliberately small device memory (issue target:
   saved >= 50 % of what the inputs would have cost; with small memory evictions > 0 and 0 lost;
   a third, smaller memory is a stress case).
3. ``feedback`` — stream feedback on one node with emulated GPUs of speeds 1 and 3 (always the
   NumPy backend: speeds are emulation), saturated by matmul; final streams, idle streams of the
   last busy intervals, direction reversals; ``stream_feedback.svg`` plots streams over time.
4. ``streams`` — tasks/s and GPU util of one GPU with 1, 2, 4, 8 streams (feedback pinned by
   min = max streams), matmul + intrusion_detection, as ratios to one stream.
5. ``backend`` — per kernel kind at scale medium: NumPy (one thread, in a subprocess with the BLAS
   thread variables set to 1) vs CuPy (one stream, CUDA-event time after a warm-up). Skipped
   without a usable CuPy.
6. ``interference`` — ``LiveProfiler`` on the default live cluster: ``colocation.csv`` and
   ``solo.csv`` into ``--out`` and the kind x partner matrix of V100M16.

``--quick`` shrinks every section (~1 minute on 2 cores).

    python -m experiments.benchmarks.bench_live [--backend numpy|cupy] [--out DIR] [--quick]
        [--sections dispatch,cache,feedback,streams,backend,interference]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import numpy as np

from experiments.live_demo import mean_std
from experiments.plot import line_chart
from rlsched.policies.registry import parse_scheduler
from rlsched.tasks import Device as Where
from rlsched.tasks import Task
from rlsched.workloads import KINDS
from runtime.backends.base import BACKEND_ENV, Backend, Device, DeviceConfig, Stream
from runtime.backends.select import choose_backend, cupy_unavailable_reason
from runtime.cluster.config import LiveClusterSpec, LiveGpu, LiveNode, default_live_cluster, fold_ordinals
from runtime.cluster.live import LiveOptions, LiveResult, LiveSession, device_table
from runtime.cluster.local import LocalCluster
from runtime.cluster.workload import VIDEO_APPS, LiveWorkload, build_work, live_task
from runtime.kernels import KERNELS, LIVE_APPS, TaskData, make_task_data, run_task_numpy, stage_plan

T = TypeVar("T")

SECTIONS: tuple[str, ...] = ("dispatch", "cache", "feedback", "streams", "backend", "interference")
#: The scheduler of every live section: the strongest heuristic pair of the live demo.
SCHEDULER = "mct+mlsm"
#: Device whose co-location row the interference section prints.
MATRIX_DEVICE = "V100M16"
#: Variables that pin NumPy's BLAS and OpenMP pools to one thread in the reference subprocess.
ONE_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
#: Arrival spacing of dispatch batches per subtask of the batch: ~4x a tiny subtask's kernel plus
#: overhead on NumPy, so a batch is done before the next one arrives.
BATCH_S_PER_SUBTASK = 5e-4
#: Device memories of the cache section: ample; small enough to evict; smaller than the parked
#: intermediate outputs of a few fft tasks plus the next stage (a stress case).
CACHE_MEM_MIB = (1024, 40, 24)


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


# ---- a backend that logs what its streams do ------------------------------------------------
@dataclass
class StreamLog:
    """What the wrapped streams did, appended from lane threads (``list.append`` is atomic).

    ``kernels``: ``(wall start, wall end, kernel seconds the stream reported)`` of each ``run``;
    ``copies``: ``(wall seconds, bytes)`` of each upload, ``uploads`` only the bytes of uploads.
    """

    kernels: list[tuple[float, float, float]] = field(default_factory=list)
    copies: list[tuple[float, int]] = field(default_factory=list)
    upload_bytes: list[int] = field(default_factory=list)


class LoggedStream:
    """A stream that forwards to ``inner`` and logs kernel and copy times.

    The runtime does not expose per-subtask kernel seconds; the stream is where the agent takes
    them, so logging here measures exactly what the agent measures, without touching it.
    """

    def __init__(self, inner: Stream, log: StreamLog) -> None:
        self.inner = inner
        self.index = inner.index
        self.log = log

    def run(self, fn: Callable[..., T], *args: Any) -> tuple[T, float]:
        """Forward ``run`` and log its wall interval and reported seconds."""
        t0 = time.perf_counter()
        result, secs = self.inner.run(fn, *args)
        self.log.kernels.append((t0, time.perf_counter(), secs))
        return result, secs

    def upload(self, host: np.ndarray) -> Any:
        """Forward ``upload`` and log its wall time and bytes."""
        t0 = time.perf_counter()
        out = self.inner.upload(host)
        self.log.copies.append((time.perf_counter() - t0, int(host.nbytes)))
        self.log.upload_bytes.append(int(host.nbytes))
        return out

    def download(self, arr: Any) -> np.ndarray:
        """Forward ``download`` and log its wall time and bytes."""
        t0 = time.perf_counter()
        out = self.inner.download(arr)
        self.log.copies.append((time.perf_counter() - t0, int(out.nbytes)))
        return out


class LoggedDevice:
    """A device whose streams are :class:`LoggedStream`."""

    def __init__(self, inner: Device, log: StreamLog) -> None:
        self.inner = inner
        self.config: DeviceConfig = inner.config
        self.xp: ModuleType = inner.xp
        self.log = log

    def new_stream(self) -> Stream:
        """A logged stream on the inner device."""
        return LoggedStream(self.inner.new_stream(), self.log)

    def close(self) -> None:
        """Close the inner device."""
        self.inner.close()


class LoggedBackend:
    """Wraps a backend so every device it opens logs into one :class:`StreamLog`."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.xp: ModuleType = inner.xp
        self.log = StreamLog()

    def device_count(self) -> int:
        """The inner backend's device count."""
        return self.inner.device_count()

    def open(self, config: DeviceConfig) -> Device:
        """Open a logged device."""
        return LoggedDevice(self.inner.open(config), self.log)


# ---- helpers ---------------------------------------------------------------------------------
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


def gpu_name() -> str:
    """CUDA device 0's name, or why there is none."""
    reason = cupy_unavailable_reason()
    if reason is not None:
        return f"none ({reason})"
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"]
    count = int(cupy.cuda.runtime.getDeviceCount())
    return f"{name.decode() if isinstance(name, bytes) else name} x {count}"


def cuda_count(backend: str) -> int:
    """GPUs a spec may name on ``backend`` (emulated backends: unlimited, reported as 2)."""
    if backend != "cupy":
        return 2
    import cupy

    return int(cupy.cuda.runtime.getDeviceCount())


def on_real_gpus(spec: LiveClusterSpec, backend: str) -> LiveClusterSpec:
    """``spec`` with GPU ordinals folded onto the CUDA devices present (CuPy only)."""
    return fold_ordinals(spec, cuda_count(backend)) if backend == "cupy" else spec


# ---- 1. dispatch overhead --------------------------------------------------------------------
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


# ---- 2. cache savings ------------------------------------------------------------------------
def section_cache(sz: Sizes, backend: str) -> dict[str, float]:
    """Section 2; returns the saved share and evictions of each memory size."""
    apps = {"matmul": 1.0, "fft": 1.0, "kmeans": 1.0}
    ngpu = min(2, cuda_count(backend))
    w = LiveWorkload(apps=apps, streams=sz.cache_streams, tasks=sz.cache_tasks, rate_per_s=100.0, seed=0)
    print(
        f"One node, {ngpu} x V100M16 + 1 CPU core, scheduler {SCHEDULER}; {w.tasks} tasks of {w.streams} "
        "streams (matmul, fft, kmeans; weights / filter spectra / centroids repeat within a stream) at "
        f"{w.rate_per_s:.0f}/s. saved share = saved / (loaded + saved). Target: >= 50 %.\n"
    )
    print(
        "| device memory | tasks done | not completed | hits | misses | hit rate | evictions | H2D MB loaded "
        "| H2D MB saved | saved share | all uploads MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    out: dict[str, float] = {}
    tables = []
    notes: list[str] = []
    for mem in CACHE_MEM_MIB:
        gpus = tuple(LiveGpu("V100M16", i, mem_mib=mem) for i in range(ngpu))
        spec = on_real_gpus(LiveClusterSpec(nodes=(LiveNode("n", cpu_cores=1, gpus=gpus),)), backend)
        logged = LoggedBackend(choose_backend(backend, max_speed=spec.max_speed))
        res, _ = run_session(LocalCluster(spec, logged), build_work(w), LiveOptions(seed=0))
        d = res.devices
        hits, misses = sum(x.hits for x in d), sum(x.misses for x in d)
        loaded, saved = sum(x.h2d_bytes_loaded for x in d), sum(x.h2d_bytes_saved for x in d)
        share = saved / (loaded + saved) if loaded + saved else math.nan
        evictions = sum(x.evictions for x in d)
        m = res.metrics
        print(
            f"| {mem} MiB | {m.tasks_completed} | {m.not_completed} | {hits} | {misses} "
            f"| {hits / max(hits + misses, 1):.2f} | {evictions} | {loaded / 1e6:.1f} | {saved / 1e6:.1f} "
            f"| {100 * share:.0f} % | {sum(logged.log.upload_bytes) / 1e6:.1f} |",
            flush=True,
        )
        if res.errors:
            reasons = Counter(e.strip().splitlines()[-1][:120] for e in res.errors.values())
            notes.append(f"{mem} MiB: " + "; ".join(f"{n} x {r!r}" for r, n in reasons.most_common(3)))
        tables.append((mem, device_table(d)))
        out[f"saved_share_{mem}"] = share
        out[f"evictions_{mem}"] = float(evictions)
        out[f"lost_{mem}"] = float(m.not_completed)
    print(
        "\nH2D MB loaded / saved: task inputs through the MLSM cache (misses / hits); all uploads: "
        "every host-to-device copy, parent outputs moved between units included."
    )
    for note in notes:
        print(f"\nLost or failed tasks, {note}")
    for mem, table in tables:
        print(f"\nPer GPU, {mem} MiB:\n\n{table}")
    return out


# ---- 3. stream feedback ----------------------------------------------------------------------
def reversals(counts: Sequence[int]) -> int:
    """How often a series of stream counts changed direction (oscillation)."""
    steps = [b - a for a, b in itertools.pairwise(counts) if b != a]
    return sum(1 for a, b in itertools.pairwise(steps) if (a > 0) != (b > 0))


def section_feedback(sz: Sizes, out_dir: Path) -> dict[str, float]:
    """Section 3 (NumPy emulation: speeds are emulated); returns seed 0's final fast-GPU streams."""
    spec = LiveClusterSpec(
        nodes=(
            LiveNode(
                "n",
                cpu_cores=0,
                gpus=(LiveGpu("T4", speed=1.0), LiveGpu("T4", index=1, speed=3.0)),
                streams_per_gpu=4,
            ),
        ),
        device_concurrency=2,
    )
    print(
        "One node, two emulated T4s of speed 1 (GPU0) and 3 (GPU1), 4 streams each, device_concurrency 2, "
        f"streams per GPU in [{spec.min_streams_per_gpu}, {spec.max_streams_per_gpu}], no CPU core; "
        f"{sz.feedback_tasks} matmul tasks (4 streams) at 2000/s, feedback every 0.1 s, scheduler "
        f"{SCHEDULER}; NumPy backend whatever --backend says (the speeds are emulated).\n"
    )
    print(
        "| seed | tasks/s | final streams GPU0 / GPU1 | stream moves | idle streams, last 3 busy "
        "intervals GPU0 / GPU1 | direction reversals GPU1 (busy phase) | intervals |"
    )
    print("|---|---|---|---|---|---|---|")
    plots: dict[str, list[tuple[float, float]]] = {}
    idle_plot: dict[str, list[tuple[float, float]]] = {}
    result: dict[str, float] = {}
    for seed in range(sz.feedback_seeds):
        cluster = LocalCluster(spec, "numpy")
        w = LiveWorkload(
            apps={"matmul": 1.0}, streams=4, tasks=sz.feedback_tasks, rate_per_s=2000.0, seed=seed
        )
        res, _ = run_session(cluster, build_work(w), LiveOptions(seed=seed, feedback_interval_s=0.1))
        hist = cluster.agents[0].stream_history
        final = [d.streams for d in res.devices]
        busy = [h for h in hist if h[0] < res.metrics.makespan_s * 0.8][-3:]
        idle = np.array([h[2] for h in busy]).mean(axis=0) if busy else np.full(2, math.nan)
        # Reversals while the workload saturated the node (the drain at the end idles streams, and
        # moves there answer a different question).
        fast = [h[1][1] for h in hist if h[0] < res.metrics.makespan_s * 0.8]
        print(
            f"| {seed} | {res.metrics.throughput:.1f} | {final[0]} / {final[1]} | {res.stream_moves} "
            f"| {idle[0]:.2f} / {idle[1]:.2f} | {reversals(fast)} | {len(hist)} |",
            flush=True,
        )
        if seed == 0:
            result["final_fast"] = float(final[1])
            for g, name in enumerate(("GPU0 (speed 1)", "GPU1 (speed 3)")):
                plots[name] = [(h[0], float(h[1][g])) for h in hist]
                idle_plot[name] = [(h[0], float(h[2][g])) for h in hist]
    if all(plots.values()):
        (out_dir / "stream_feedback.svg").write_text(
            line_chart(plots, "Stream feedback, seed 0", "time, s", "streams (active in the interval)"),
            encoding="utf-8",
        )
        (out_dir / "stream_feedback_idle.svg").write_text(
            line_chart(idle_plot, "Idle streams per interval, seed 0", "time, s", "idle streams"),
            encoding="utf-8",
        )
        print(f"\nPlots: {out_dir / 'stream_feedback.svg'}, {out_dir / 'stream_feedback_idle.svg'}")
    print(
        "\nidle streams: mean over the last 3 feedback intervals that ended before 80 % of the "
        "makespan (active minus busy streams; negative when a stream taken away was still finishing its "
        "subtask); direction reversals: times GPU1's count turned around before 80 % of the makespan."
    )
    return result


# ---- 4. streams vs throughput ----------------------------------------------------------------
def section_streams(sz: Sizes, backend: str, out_dir: Path) -> dict[str, float]:
    """Section 4; returns tasks/s ratio of each stream count to one stream."""
    counts = (1, 2, 4, 8)
    w0 = LiveWorkload(
        apps={"matmul": 1.0, "intrusion_detection": 1.0}, streams=4, tasks=sz.streams_tasks, rate_per_s=2000.0
    )
    print(
        f"One node, one V100M16 + 1 CPU core, streams pinned (min = max), device_concurrency 2 (emulated "
        f"engines; ignored by CuPy), scheduler {SCHEDULER}; {w0.tasks} tasks of matmul + "
        f"intrusion_detection at {w0.rate_per_s:.0f}/s; mean ± std over {sz.streams_seeds} seed(s).\n"
    )
    print("| streams | tasks/s | x 1 stream | GPU util | x 1 stream | latency p50 s | not completed |")
    print("|---|---|---|---|---|---|---|")
    rows: dict[int, tuple[list[float], list[float], list[float], int]] = {}
    for c in counts:
        node = LiveNode("n", cpu_cores=1, gpus=(LiveGpu("V100M16"),), streams_per_gpu=c)
        spec = on_real_gpus(
            LiveClusterSpec(nodes=(node,), max_streams_per_gpu=c, min_streams_per_gpu=c), backend
        )
        tput, util, p50, lost = [], [], [], 0
        for seed in range(sz.streams_seeds):
            w = dataclasses.replace(w0, seed=seed)
            res, _ = run_session(LocalCluster(spec, backend), build_work(w), LiveOptions(seed=seed))
            tput.append(res.metrics.throughput)
            util.append(res.devices[0].util)
            p50.append(res.metrics.latency_p50_s)
            lost += res.metrics.not_completed
        rows[c] = (tput, util, p50, lost)
    base_t, base_u = float(np.mean(rows[1][0])), float(np.mean(rows[1][1]))
    ratios: dict[str, float] = {}
    for c, (tput, util, p50, lost) in rows.items():
        rt, ru = float(np.mean(tput)) / base_t, float(np.mean(util)) / base_u
        ratios[f"tput_x_{c}"] = rt
        print(
            f"| {c} | {mean_std(tput, '.1f')} | {rt:.2f} | {mean_std(util, '.2f')} | {ru:.2f} "
            f"| {mean_std(p50, '.2f')} | {lost} |"
        )
    series = {
        "tasks/s vs 1 stream": [(float(c), ratios[f"tput_x_{c}"]) for c in counts],
        "GPU util vs 1 stream": [(float(c), float(np.mean(rows[c][1])) / base_u) for c in counts],
    }
    (out_dir / "streams_throughput.svg").write_text(
        line_chart(series, "One GPU: streams vs throughput", "streams per GPU", "ratio to 1 stream"),
        encoding="utf-8",
    )
    print(f"\nPlot: {out_dir / 'streams_throughput.svg'}")
    return ratios


# ---- 5. backend speedup ----------------------------------------------------------------------
def kind_inputs(scale: str) -> dict[str, tuple[str, dict[str, np.ndarray], dict[str, Any]]]:
    """For every kind of :data:`KERNELS`: (first app that has it, the inputs its stage reads in
    that app's reference task, the stage's params)."""
    found: dict[str, tuple[str, dict[str, np.ndarray], dict[str, Any]]] = {}
    for app in LIVE_APPS:
        every = run_task_numpy(make_task_data(app, 0, 0, seed=0, scale=scale))
        for plan in stage_plan(app):
            if plan.spec.kind not in found:
                found[plan.spec.kind] = (app, {n: every[n] for n in plan.reads}, plan.params)
    return {k: found[k] for k in KERNELS if k in found}


def numpy_kernel_seconds(scale: str, reps: int) -> dict[str, float]:
    """Median NumPy seconds of every kind's kernel in this thread, after one warm-up run."""
    out = {}
    for kind, (_, inputs, params) in kind_inputs(scale).items():
        fn = KERNELS[kind].fn
        fn(np, inputs, params)
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn(np, inputs, params)
            times.append(time.perf_counter() - t0)
        out[kind] = statistics.median(times)
    return out


def numpy_one_thread(scale: str, reps: int) -> dict[str, float]:
    """:func:`numpy_kernel_seconds` in a subprocess whose BLAS uses one thread (the variables are
    read when NumPy loads, so this process cannot change its own pool)."""
    env = {**os.environ, **dict.fromkeys(ONE_THREAD_ENV, "1")}
    code = (
        "import json; from experiments.benchmarks.bench_live import numpy_kernel_seconds; "
        f"print(json.dumps(numpy_kernel_seconds({scale!r}, {reps})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=Path(__file__).resolve().parents[2],  # the repository root, where ``experiments`` lives
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    times: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return times


def device_kernel_seconds(backend: Backend, scale: str, reps: int) -> dict[str, tuple[float, float] | str]:
    """Per kind: (median device seconds, median host wall of the synchronised run) on one stream of
    device 0 after a warm-up run, or why it could not run."""
    dev = backend.open(DeviceConfig(0, MATRIX_DEVICE, 16 << 30))
    stream = dev.new_stream()
    out: dict[str, tuple[float, float] | str] = {}
    try:
        for kind, (_app, inputs, params) in kind_inputs(scale).items():
            if KINDS[kind].device is Where.CPU:
                out[kind] = "CPU-only kind"
                continue
            fn = KERNELS[kind].fn
            try:
                on_dev = {n: stream.upload(a) for n, a in inputs.items()}
                stream.run(fn, on_dev, params)  # warm-up: CuPy compiles kernels on first launch
                secs, walls = [], []
                for _ in range(reps):
                    t0 = time.perf_counter()
                    secs.append(stream.run(fn, on_dev, params)[1])
                    walls.append(time.perf_counter() - t0)
                out[kind] = (statistics.median(secs), statistics.median(walls))
            except Exception as exc:  # one broken kernel must not cost the rest of a short GPU session
                out[kind] = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
    finally:
        dev.close()
    return out


def section_backend(sz: Sizes, backend: str, device_backend: Backend | None = None) -> dict[str, float]:
    """Section 5; ``device_backend`` overrides the CuPy backend (a NumPy one exercises the code
    path on machines without a GPU). Returns each kind's speedup."""
    if device_backend is None:
        reason = cupy_unavailable_reason()
        if backend != "cupy" or reason is not None:
            why = reason or "CuPy is usable but --backend numpy was asked for"
            print(f"Skipped: {why}.")
            return {}
        device_backend = choose_backend("cupy")
    print(
        f"Scale {sz.backend_scale}; median of {sz.backend_reps} runs after a warm-up. NumPy: one thread "
        f"({', '.join(ONE_THREAD_ENV)} = 1, in a subprocess); {device_backend.name}: one stream of device 0, "
        "device seconds (CUDA events) and host wall of the synchronised run.\n"
    )
    cpu = numpy_one_thread(sz.backend_scale, sz.backend_reps)
    dev = device_kernel_seconds(device_backend, sz.backend_scale, sz.backend_reps)
    print(
        f"| kind | app | NumPy 1 thread ms | {device_backend.name} device ms | {device_backend.name} wall ms "
        "| speedup (device) | speedup (wall) |"
    )
    print("|---|---|---|---|---|---|---|")
    apps = {k: a for k, (a, _, _) in kind_inputs("small").items()}
    out: dict[str, float] = {}
    for kind, c in cpu.items():
        d = dev.get(kind, "not measured")
        if isinstance(d, str):
            print(f"| {kind} | {apps.get(kind, '?')} | {c * 1e3:.2f} | {d} | | | |")
            continue
        sd, sw = d
        out[kind] = c / max(sd, 1e-9)
        print(
            f"| {kind} | {apps.get(kind, '?')} | {c * 1e3:.2f} | {sd * 1e3:.3f} | {sw * 1e3:.3f} "
            f"| {out[kind]:.1f} | {c / max(sw, 1e-9):.1f} |"
        )
    return out


# ---- 6. interference matrix ------------------------------------------------------------------
def section_interference(sz: Sizes, backend: str, out_dir: Path) -> dict[str, float]:
    """Section 6; returns the number of measured pairs."""
    from rlsched.interference.measurements import read_colocation_csv
    from runtime.profiler import DEFAULT_REPS, LiveProfiler, profile_to_csv

    spec = on_real_gpus(default_live_cluster(), backend)
    print(
        f"LiveProfiler on the default live cluster ({backend}), apps {', '.join(VIDEO_APPS)}, fraction "
        f"{sz.profile_fraction}, {DEFAULT_REPS} timed co-runs per pair, seed 0.\n"
    )
    with LiveProfiler(spec, backend, VIDEO_APPS, DEFAULT_REPS) as prof:
        colo, solo = profile_to_csv(prof, out_dir, sz.profile_fraction, seed=0)
        pairs = prof.measured_pairs
    data = read_colocation_csv(colo)
    cells: dict[tuple[str, str], list[float]] = {}
    for dv, k, p, y in zip(data.device, data.kind, data.partner, data.y, strict=True):
        if dv == MATRIX_DEVICE:
            cells.setdefault((k, p), []).append(float(y))
    kinds = sorted({k for k, _ in cells} | {p for _, p in cells})
    print(f"norm_throughput on {MATRIX_DEVICE} (row: measured kind, column: partner; '-' not measured):\n")
    print("| kind \\ partner | " + " | ".join(kinds) + " |")
    print("|---" * (len(kinds) + 1) + "|")
    for k in kinds:
        row = [f"{np.mean(cells[k, p]):.2f}" if (k, p) in cells else "-" for p in kinds]
        print(f"| {k} | " + " | ".join(row) + " |")
    print(f"\n{pairs} (device, kind, partner) triples measured; wrote {colo} and {solo}")
    return {"pairs": float(pairs)}


# ---- main ------------------------------------------------------------------------------------
def resolve_backend(name: str | None) -> str:
    """The backend the run uses: the flag, else ``$RLSCHED_BACKEND``, else CuPy when usable."""
    name = name or os.environ.get(BACKEND_ENV, "").strip() or None
    if name is None:
        return "cupy" if cupy_unavailable_reason() is None else "numpy"
    return choose_backend(name).name  # validates the name and CuPy's availability


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Run the chosen sections; return their headline figures by section."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--backend", choices=("numpy", "cupy"), default=None, help="default: automatic")
    ap.add_argument("--out", default="bench_live_out", help="folder for plots and CSVs")
    ap.add_argument("--quick", action="store_true", help="shrink every section (~1 minute on 2 cores)")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated of {','.join(SECTIONS)}")
    args = ap.parse_args(argv)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        ap.error(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    backend = resolve_backend(args.backend)
    sz = QUICK if args.quick else FULL
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    shown = argv if argv is not None else sys.argv[1:]
    print("# command: " + " ".join(["python -m experiments.benchmarks.bench_live", *shown]))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    print(
        f"# machine: {platform.platform()}, {platform.processor() or platform.machine()}, python "
        f"{platform.python_version()}, numpy {np.__version__}, usable cpus {cpus}, load average {load}"
    )
    print(f"# backend: {backend}; GPU: {gpu_name()}\n")
    titles = {
        "dispatch": "1. Dispatch overhead per subtask",
        "cache": "2. Host-to-device bytes saved by the MLSM cache",
        "feedback": "3. Stream feedback convergence",
        "streams": "4. Throughput with 1, 2, 4, 8 streams per GPU",
        "backend": "5. Backend speedup per kernel",
        "interference": "6. Measured interference matrix",
    }
    results: dict[str, dict[str, float]] = {}
    walls: dict[str, float] = {}
    t_all = time.perf_counter()
    for s in SECTIONS:
        if s not in sections:
            continue
        print(f"## {titles[s]}\n", flush=True)
        t0 = time.perf_counter()
        if s == "dispatch":
            results[s] = section_dispatch(sz, "numpy")
            if backend == "cupy":
                print()
                results["dispatch_cupy"] = section_dispatch(sz, "cupy")
        elif s == "cache":
            results[s] = section_cache(sz, backend)
        elif s == "feedback":
            results[s] = section_feedback(sz, out_dir)
        elif s == "streams":
            results[s] = section_streams(sz, backend, out_dir)
        elif s == "backend":
            results[s] = section_backend(sz, backend)
        else:
            results[s] = section_interference(sz, backend, out_dir)
        walls[s] = time.perf_counter() - t0
        print(f"\n_section wall: {walls[s]:.1f} s_\n", flush=True)
    total = time.perf_counter() - t_all
    print("## Wall time per section\n")
    print("| section | wall s |")
    print("|---|---|")
    for s, wall in walls.items():
        print(f"| {s} | {wall:.1f} |")
    print(f"| total | {total:.1f} |")
    if hasattr(os, "getloadavg"):
        print(f"\n# load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return results


if __name__ == "__main__":
    main()

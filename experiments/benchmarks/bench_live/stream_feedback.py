"""Section ``feedback``: stream feedback on one node with emulated GPUs of speeds 1 and 3 (always
the NumPy backend: speeds are emulation), saturated by matmul; final streams, idle streams of the
last busy intervals, direction reversals; ``stream_feedback.svg`` plots streams over time.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from experiments.benchmarks.bench_live.common import SCHEDULER, Sizes, run_session
from experiments.plot import line_chart
from runtime.cluster.config import LiveClusterSpec, LiveGpu, LiveNode
from runtime.cluster.live import LiveOptions
from runtime.cluster.local import LocalCluster
from runtime.cluster.workload import LiveWorkload, build_work


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

"""Section ``streams``: tasks/s and GPU util of one GPU with 1, 2, 4, 8 streams (feedback pinned
by min = max streams), matmul + intrusion_detection, as ratios to one stream.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from experiments.benchmarks.bench_live.common import SCHEDULER, Sizes, on_real_gpus, run_session
from experiments.live_demo import mean_std
from experiments.plot import line_chart
from runtime.cluster.config import LiveClusterSpec, LiveGpu, LiveNode
from runtime.cluster.live import LiveOptions
from runtime.cluster.local import LocalCluster
from runtime.cluster.workload import LiveWorkload, build_work


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

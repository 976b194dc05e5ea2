"""How long one scenario's report figures take to draw (a script, not a test).

    python -m experiments.benchmarks.bench_report_figures [--schedulers 3,12,38] [--gpus 16]

``rlsched evaluate`` draws, per scenario, bars of throughput and utilisation, a latency CDF and a
map of which GPUs were busy over time for every scheduler; a generated set of 40 cases with 38
schedulers draws some 160 of them. This draws each kind once per scheduler count, from seeded
random data of the shapes a report passes (``--gpus`` GPUs, 200 time samples, 500 latencies per
scheduler), into a temporary folder, and prints the seconds each took.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from experiments import report_plots as plots
from experiments.report_stats import summarise


def _time(draw: Callable[..., object], *args: object) -> float:
    t0 = time.perf_counter()
    draw(*args)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schedulers", default="3,12,38", help="comma-separated scheduler counts")
    ap.add_argument("--gpus", type=int, default=16, help="GPUs in the busy-over-time maps")
    args = ap.parse_args(argv)
    print("# " + shlex.join(["python", "-m", "experiments.benchmarks.bench_report_figures", *sys.argv[1:]]))
    rng = np.random.default_rng(0)
    t = np.linspace(0.0, 100.0, 200)
    print(
        "\n| schedulers | GPUs busy over time, s | throughput bars, s | latency CDF, s |\n|---|---|---|---|"
    )
    with tempfile.TemporaryDirectory() as d:
        for n in (int(x) for x in args.schedulers.split(",")):
            names = [f"selector-{i}+placer" for i in range(n)]
            maps = {s: (t, rng.random((args.gpus, t.size))) for s in names}
            bars = {s: summarise(list(rng.random(3) * 100)) for s in names}
            lat = {s: list(rng.exponential(1.0, 500)) for s in names}
            a = _time(plots.device_utilisation, Path(d) / f"m{n}.png", "busy", maps)
            b = _time(plots.bars_with_intervals, Path(d) / f"b{n}.png", "bars", [("tasks/min", bars, None)])
            c = _time(plots.latency_cdf, Path(d) / f"c{n}.png", "latency", lat, [], "lower bound")
            print(f"| {n} | {a:.2f} | {b:.2f} | {c:.2f} |")


if __name__ == "__main__":
    main()

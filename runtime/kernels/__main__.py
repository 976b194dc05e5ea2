"""``python -m runtime.kernels [--scale small|medium] [--tasks N]``: the NumPy time per task and
per stage of every app, each result checked (``OMP_NUM_THREADS=1`` for one core)."""

from __future__ import annotations

import argparse

import numpy as np

from runtime.kernels.checks import check_result
from runtime.kernels.pipelines import LIVE_APPS
from runtime.kernels.run_local import run_task_numpy
from runtime.kernels.tasks import SCALES, make_task_data


def main(argv: list[str] | None = None) -> None:
    """Print the median NumPy time per task and per stage of every app."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scale", choices=SCALES, default="small")
    ap.add_argument("--tasks", type=int, default=5)
    args = ap.parse_args(argv)
    print(f"{'app':20s} {'ms/task':>8s} {'input MB':>9s} {'input_mb':>9s}  ms per stage (median)")
    for app in LIVE_APPS:
        runs = []
        for chunk in range(args.tasks + 1):  # the first run warms caches up and is dropped
            task = make_task_data(app, 0, chunk, scale=args.scale)
            stages: list[float] = []
            check_result(task, run_task_numpy(task, stages))
            runs.append(stages)
        per_stage = np.median(np.array(runs[1:]), axis=0) * 1e3
        total = float(np.median(np.array(runs[1:]).sum(axis=1))) * 1e3
        stages_ms = " ".join(f"{t:.1f}" for t in per_stage)
        print(f"{app:20s} {total:8.1f} {task.input_bytes / 1e6:9.2f} {task.input_mb:9.3g}  {stages_ms}")


if __name__ == "__main__":
    main()

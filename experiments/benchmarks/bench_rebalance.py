"""What moving not-yet-started tasks off an overloaded node buys (a script, not a test).

    python -m experiments.benchmarks.bench_rebalance [--tasks 40] [--seeds 20000,20001,20002]

Two nodes, one T4 each; node ``slow``'s GPU runs 20x slower than its datasheet (a throttled or
shared GPU: what stage 1 was told is not what it gets). Each seed's live workload (all tasks
arriving at once) runs through an in-process service with the overload watch on and off, for
two stage-1 policies: ``first`` (always the first feasible node: a policy that never adapts)
and ``mct`` (which learns the measured speed as tasks finish). Figure: seconds until every task
completed, mean ± sample std over the seeds (the value alone for one seed), and the ratio on / off
per seed, all measured in one run.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from experiments.report_stats import mean_pm
from rlsched.hardware import gpu_model
from rlsched.policies import parse_scheduler
from rlsched.scheduler import TwoStageScheduler
from rlsched.seeds import describe
from rlsched.tasks import Task
from rlsched.view import ClusterView
from runtime.cluster.config import LiveClusterSpec, LiveGpu, LiveNode
from runtime.cluster.local import LocalCluster
from runtime.cluster.workload import LiveWorkload, build_work
from runtime.service.config import ServiceConfig, Tenant, hash_token
from runtime.service.service import Service
from runtime.service.store import NewTask


class FirstNode:
    """Stage 1 that always takes the first feasible node (it never adapts to measured speed)."""

    name = "first"

    def reset(self, view: ClusterView, seed: int) -> None:
        pass

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        return int(np.flatnonzero(mask)[0])


def slow_and_fast() -> LiveClusterSpec:
    """Node ``slow`` (a T4 running 20x under its datasheet) before node ``fast`` (a T4)."""
    slow = gpu_model("T4").fp32_tflops / 20
    return LiveClusterSpec(
        nodes=(
            LiveNode("slow", 1, (LiveGpu("T4", speed=slow),), streams_per_gpu=2),
            LiveNode("fast", 1, (LiveGpu("T4"),), streams_per_gpu=2),
        )
    )


def makespan(selector: str, rebalance: bool, tasks: int, seed: int, folder: Path) -> float:
    """Seconds until ``tasks`` tasks of the seed's workload, submitted at once, all completed."""
    work = build_work(LiveWorkload(tasks=tasks, rate_per_s=1e6, seed=seed))
    db = folder / f"{selector}-{rebalance}-{seed}.db"
    cfg = ServiceConfig(tenants=(Tenant("b", hash_token("t")),), db=str(db), rebalance=rebalance)
    placer = parse_scheduler("mct+mlsm").placer
    stage1 = FirstNode() if selector == "first" else parse_scheduler(selector).selector
    svc = Service(
        cfg, cluster=LocalCluster(slow_and_fast(), "numpy"), scheduler=TwoStageScheduler(stage1, placer)
    )
    svc.start()
    try:
        t0 = time.perf_counter()
        svc.store.submit("b", [NewTask(t.app, d.stream, d.chunk, 0, None, None) for t, d in work])
        while svc.store.counts().get(("b", "done"), 0) + svc.store.counts().get(("b", "failed"), 0) < tasks:
            time.sleep(0.02)
        return time.perf_counter() - t0
    finally:
        svc.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=40)
    p.add_argument("--seeds", default="20000,20001,20002")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"# command: python -m experiments.benchmarks.bench_rebalance {' '.join(sys.argv[1:])}")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    print(f"# machine: {platform.machine()}, python {platform.python_version()}, usable cpus {cpus}")
    print(f"# seeds: {describe(seeds)}")
    print("\n| stage 1 | watch off: s | watch on: s | on / off per seed |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for selector in ("first", "mct"):
            off, on = [], []
            for s in seeds:  # interleaved, so drift of this machine's speed hits both alike
                off.append(makespan(selector, False, args.tasks, s, Path(d)))
                on.append(makespan(selector, True, args.tasks, s, Path(d)))
            ratios = ", ".join(f"{b / a:.2f}" for a, b in zip(off, on, strict=True))
            cells = (mean_pm(x, ".2f") for x in (off, on))
            print(f"| {selector} | {' | '.join(cells)} | {ratios} |")


if __name__ == "__main__":
    main()

"""Stage-1 decision latency of the LDWP selector (a script, not a test).

Times ``LdwpSelector.select`` — feature encoding plus one forward pass, batch of one, CPU, one
torch thread — at every decision of a simulated run, at 11, 128 and 1,024 nodes, and prints p50
and p99. Targets (issue 3): p99 <= 1 ms at 128 nodes, <= 5 ms at 1,024 nodes.

    python -m experiments.benchmarks.bench_decision [--model DIR] [--decisions N]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import numpy as np
import torch

from envs.simulator import Simulator
from rlsched.cluster import ClusterSpec
from rlsched.policies.ldwp import LdwpSelector
from rlsched.policies.registry import make_placer
from rlsched.scenarios.loader import load_scenario
from rlsched.scenarios.spec import Scenario
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.scheduler import TwoStageScheduler
from rlsched.tasks import Task
from rlsched.view import ClusterView


class _Timed:
    """Wraps the selector and records the wall time of each decision."""

    name = "ldwp"

    def __init__(self, inner: LdwpSelector) -> None:
        self.inner = inner
        self.times: list[float] = []

    def reset(self, view: ClusterView, seed: int) -> None:
        self.inner.reset(view, seed)

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        t0 = time.perf_counter()
        a = self.inner.select(task, view, mask)
        self.times.append(time.perf_counter() - t0)
        return a


def scenario_with(nodes: int, base: Scenario, tasks: int) -> Scenario:
    """``base`` cut (or tiled) to ``nodes`` nodes, with ``tasks`` tasks."""
    pool = list(base.cluster.nodes)
    chosen = [dataclasses.replace(pool[i % len(pool)], name=f"n{i}") for i in range(nodes)]
    wl = dataclasses.replace(base.workload, tasks=tasks)
    return dataclasses.replace(base, cluster=ClusterSpec(tuple(chosen)), workload=wl)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="checkpoint directory (default: the shipped model)")
    p.add_argument("--decisions", type=int, default=1500)
    args = p.parse_args()
    torch.set_num_threads(1)
    print(f"# command: python -m experiments.benchmarks.bench_decision {' '.join(sys.argv[1:])}")
    sel = LdwpSelector(args.model)
    print("| nodes | decisions | p50 ms | p99 ms |\n|---|---|---|---|")
    for n, base_name in ((11, "paper"), (128, "large"), (1024, "large")):
        base = load_scenario(base_name)
        sc = base if n == 11 else scenario_with(n, base, args.decisions)
        tasks = generate_tasks(sc, 0)[: args.decisions]
        timed = _Timed(sel)
        placer = make_placer("speedup")
        Simulator(sc, tasks, placer, 0).run(TwoStageScheduler(timed, placer))
        t = np.array(timed.times) * 1e3
        print(f"| {n} | {len(t)} | {np.percentile(t, 50):.3f} | {np.percentile(t, 99):.3f} |")


if __name__ == "__main__":
    main()

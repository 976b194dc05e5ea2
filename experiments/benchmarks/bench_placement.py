"""Stage-2 decision cost: wall time per ``place`` call on nodes with 8 GPUs (a script, not a test).

Runs the ``interference`` workload on two nodes of 8 GPUs x 8 streams, with ``mct`` picking nodes,
and times every call of the placer — the real calls of a run, on real node states. Target
(issue 4): p99 <= 200 us per decision for ``iawp``.

    python -m experiments.benchmarks.bench_placement [--placers iawp,iawp-cosine,speedup] [--tasks N]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import numpy as np

from envs.simulator import Simulator
from rlsched.cluster import ClusterSpec
from rlsched.hardware import gpu_model
from rlsched.interference.calibration import Survey, SurveyRequest
from rlsched.policies.registry import make_placer, make_selector
from rlsched.scenarios.loader import load_scenario
from rlsched.scenarios.spec import Scenario
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.scheduler import SubtaskPlacer, TwoStageScheduler
from rlsched.tasks import Subtask, Task
from rlsched.view import ClusterView


class TimedPlacer:
    """Wraps a placer, forwarding its learning hooks, and records the time of each ``place``."""

    def __init__(self, inner: SubtaskPlacer) -> None:
        self.inner = inner
        self.name = inner.name
        self.times: list[float] = []
        if hasattr(inner, "calibrate"):
            self.survey_request = self._survey_request
            self.calibrate = self._calibrate
        if hasattr(inner, "observe"):
            self.observe = inner.observe

    def _survey_request(self) -> SurveyRequest:
        return self.inner.survey_request()  # type: ignore[attr-defined]

    def _calibrate(self, survey: Survey) -> None:
        self.inner.calibrate(survey)  # type: ignore[attr-defined]

    def reset(self, view: ClusterView, seed: int) -> None:
        self.inner.reset(view, seed)

    def place(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        t0 = time.perf_counter()
        unit = self.inner.place(task, sub, node, view)
        self.times.append(time.perf_counter() - t0)
        return unit


def eight_gpu_scenario(tasks: int) -> Scenario:
    """``interference`` on two nodes of 8 V100s with 8 streams each, saturated."""
    base = load_scenario("interference")
    node = dataclasses.replace(base.cluster.nodes[0], gpus=(gpu_model("V100M16"),) * 8, streams_per_gpu=8)
    nodes = tuple(dataclasses.replace(node, name=f"v100x8-{i}") for i in range(2))
    wl = dataclasses.replace(base.workload, tasks=tasks)
    return dataclasses.replace(base, cluster=ClusterSpec(nodes, name="v100x8"), workload=wl)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--placers", default="iawp,iawp-cosine,speedup,mlsm")
    ap.add_argument("--tasks", type=int, default=3000)
    args = ap.parse_args()
    sc = eight_gpu_scenario(args.tasks)
    tasks = generate_tasks(sc, 0)
    print(f"# command: python -m experiments.benchmarks.bench_placement {' '.join(sys.argv[1:])}".rstrip())
    print("| placer | decisions | p50 us | p99 us | max us |")
    print("|---|---|---|---|---|")
    for name in args.placers.split(","):
        placer = TimedPlacer(make_placer(name))
        sim = Simulator(sc, tasks, placer, seed=0)
        sim.run(TwoStageScheduler(make_selector("mct"), placer))
        t = np.array(placer.times) * 1e6
        p50, p99 = np.percentile(t, [50, 99])
        print(f"| {name} | {len(t)} | {p50:.1f} | {p99:.1f} | {t.max():.0f} |")


if __name__ == "__main__":
    main()

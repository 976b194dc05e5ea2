"""What a scheduler's capacity is, for ``evaluate --load-of`` (a script, not a test).

    python -m experiments.benchmarks.saturated_capacity [--seed 10001] [--scheduler mct+mlsm]

``evaluate --load-of SELECTOR+PLACER`` sets offered loads relative to that scheduler's capacity.
Three readings of one run with arrivals at twice the LP bound, and the knee:

* ``thr`` — completed tasks over the whole run (the drain after the last arrival in it);
* ``win`` — completions per second over the middle 80 % of the arrivals;
* ``busy`` — completions per second from the first 5 % of completions to the last arrival;
* ``knee`` — the highest arrival rate at which it keeps up, bisected
  (:func:`experiments.load_curves.capacities`, what ``evaluate`` uses).

A capacity ``c`` is right when the scheduler keeps up at 0.9 c and not at 1.1 c: the script runs it
at both and prints ``served_share`` (1 keeping up; about capacity over arrival rate when not),
and each reading over the LP bound.
"""

from __future__ import annotations

import argparse
import math
import platform
import sys

import numpy as np

from envs.capacity import task_latency_bounds
from envs.simulator import Simulator
from experiments.evaluation import load_entry
from experiments.load_curves import capacities
from rlsched.metrics import served_share
from rlsched.policies.registry import parse_scheduler
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed
from rlsched.seeds import describe

SCENARIOS = (
    "alibaba#200",
    "paper#300",
    "hetero-saturated#300",
    "interference-saturated#400",
    "interference-saturated#2000",
    "alibaba-dense",
    "paper",
    "dynamic",
    "transfer-32",
    "interference-saturated",
    "hetero-saturated",
)


def _run(entry: str, spec: str, seed: int, scale: float) -> tuple[float, np.ndarray, np.ndarray, float]:
    scenario = scenario_for_seed(load_entry(entry, None, arrival_scale=scale), seed)
    tasks = generate_tasks(scenario, seed)
    sched = parse_scheduler(spec)
    sim = Simulator(scenario, tasks, sched.placer, seed=seed)
    m = sim.run(sched)
    a = np.array([r.arrival_s for r in sim.records])
    d = np.array([r.done_s for r in sim.records])
    return m.throughput, a, d, served_share(a, d, task_latency_bounds(scenario, tasks))


#: Completions a window needs for its rate to be read.
MIN_SERVED = 100


def _window_rate(a: np.ndarray, d: np.ndarray) -> float:
    order = np.sort(a)
    t0, t1 = order[int(0.1 * len(a))], order[int(0.9 * len(a)) - 1]
    n = np.count_nonzero((d >= t0) & (d <= t1))
    return n / (t1 - t0) if n >= MIN_SERVED and t1 > t0 else math.nan


def _busy(a: np.ndarray, d: np.ndarray) -> float:
    done = np.sort(d[~np.isnan(d)])
    t0, t1 = done[int(0.05 * len(done))], a.max()
    n = np.count_nonzero((d >= t0) & (d <= t1))
    return n / (t1 - t0) if n >= MIN_SERVED and t1 > t0 else math.nan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=10001)
    ap.add_argument("--scheduler", default="mct+mlsm")
    args = ap.parse_args()
    print(f"# command: python -m experiments.benchmarks.saturated_capacity {' '.join(sys.argv[1:])}".rstrip())
    print(f"# machine: {platform.machine()}, python {platform.python_version()}; {describe([args.seed])}")
    print("scenario | measure | capacity/min | of the LP bound | served_share at 0.9 | at 1.1")
    for entry in SCENARIOS:
        cap, own = capacities([entry], [args.seed], "bound", 1, False, 600)[(entry, args.seed)]
        knee = capacities([entry], [args.seed], args.scheduler, 1, False, 600)[(entry, args.seed)][0] / 60.0
        thr, a, d, _ = _run(entry, args.scheduler, args.seed, 2.0 * cap / own)
        readings = (("thr", thr), ("win", _window_rate(a, d)), ("busy", _busy(a, d)), ("knee", knee))
        for name, c in readings:
            if math.isnan(c):
                print(f"{entry} | {name} | under {MIN_SERVED} completions in its window | | | ")
                continue
            shares = [_run(entry, args.scheduler, args.seed, f * c * 60.0 / own)[3] for f in (0.9, 1.1)]
            row = f"{entry} | {name} | {60 * c:.0f} | {60 * c / cap:.2f} | {shares[0]:.3f} | {shares[1]:.3f}"
            print(row, flush=True)


if __name__ == "__main__":
    main()

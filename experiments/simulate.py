"""Run scenarios in the simulator with named schedulers, and compare them over seeds."""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm import tqdm

from envs.simulator import Simulator
from rlsched.metrics import RunMetrics
from rlsched.policies.registry import SHIPPED, PolicyOptions, describe_auto, parse_scheduler
from rlsched.scenarios.spec import Scenario
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed


def simulate(scenario: Scenario, scheduler: str, seed: int | None = None, **options: Any) -> RunMetrics:
    """Run one scenario to completion: :func:`simulate_run`'s metrics (the same parameters)."""
    return simulate_run(scenario, scheduler, seed, **options).metrics


@dataclass(frozen=True)
class SimRun:
    """One run's metrics, and what ``auto`` saw and chose in it (``None`` for another scheduler:
    :func:`rlsched.policies.auto.describe`)."""

    metrics: RunMetrics
    auto: dict[str, Any] | None


def simulate_run(
    scenario: Scenario,
    scheduler: str,
    seed: int | None = None,
    progress: bool = False,
    options: PolicyOptions = SHIPPED,
    rebalance: bool = False,
) -> SimRun:
    """Run one scenario to completion; its metrics and what ``auto`` chose.

    :param scenario: the scenario.
    :param scheduler: ``SELECTOR[+PLACER]``.
    :param seed: tasks and drift seed (``None`` = the scenario's).
    :param progress: show a progress bar of decisions on stderr.
    :param options: checkpoints of learned policies (``ldwp``, ``iawp-rl``).
    :param rebalance: move not-started tasks off nodes that stay overloaded or to idle GPU
        nodes, as the service does.
    """
    seed = scenario.seed if seed is None else seed
    sched = parse_scheduler(scheduler, options)
    scenario = scenario_for_seed(scenario, seed)
    tasks = generate_tasks(scenario, seed)
    sim = Simulator(scenario, tasks, sched.placer, seed=seed, rebalance=rebalance)
    if not progress:
        return SimRun(sim.run(sched), describe_auto(sched))
    desc = f"{scenario.name} {scheduler}"
    # Rebalancing decides a moved task again: the decision count may pass the task count.
    total, unit = (None, "decision") if rebalance else (len(tasks), "task")
    with tqdm(total=total, desc=desc, unit=unit, leave=False, disable=None) as bar:
        return SimRun(sim.run(sched, on_decision=bar.update), describe_auto(sched))


def auto_lines(auto: dict[str, Any]) -> list[tuple[str, str]]:
    """``auto``'s decisions as (name, value) rows of ``rlsched simulate``'s table."""
    choice, second = auto["choice"], auto["second"]
    if choice is None:  # fewer tasks than its window: the default ran throughout
        return [("auto_chose", f"{auto['default']} (its default: the run ended within its window)")]
    far = "; far from every training case" if choice.get("far") else ""
    rows = [("auto_chose", f"{choice['pair']} (after {auto['window']} tasks on {auto['default']}{far})")]
    if second is not None:
        kept = second["pair"] == second["running"]
        rows.append(("auto_second", f"kept {second['pair']}" if kept else f"switched to {second['pair']}"))
    return rows


@dataclass
class Comparison:
    """Metrics of several schedulers over the same seeds."""

    scenario: str
    seeds: list[int]
    runs: dict[str, list[RunMetrics]]

    def mean_std(self, scheduler: str, metric: str) -> tuple[float, float]:
        """Mean and sample standard deviation of a metric over seeds."""
        xs = np.array([getattr(m, metric) for m in self.runs[scheduler]], dtype=float)
        return float(xs.mean()), float(xs.std(ddof=1)) if len(xs) > 1 else 0.0


def compare(
    scenario: Scenario, schedulers: Sequence[str], seeds: Sequence[int], progress: bool = True
) -> Comparison:
    """Run every scheduler on every seed (same tasks per seed for all schedulers)."""
    runs: dict[str, list[RunMetrics]] = {s: [] for s in schedulers}
    jobs = [(s, seed) for s in schedulers for seed in seeds]
    bar = tqdm(jobs, desc=f"{scenario.name}", unit="run", disable=None if progress else True, leave=False)
    # Without a terminal (CI, a log file) tqdm stays silent: say one line per run instead, so a
    # minutes-long comparison never looks hung.
    plain = progress and bar.disable
    t0 = time.perf_counter()
    for i, (s, seed) in enumerate(bar, 1):
        m = simulate(scenario, s, seed)
        runs[s].append(m)
        if plain:
            print(
                f"[{i}/{len(jobs)}] {scenario.name} {s} seed {seed}: {m.throughput * 60:,.1f} tasks/min "
                f"({time.perf_counter() - t0:.0f} s elapsed)",
                file=sys.stderr,
                flush=True,
            )
    return Comparison(scenario.name, list(seeds), runs)


TABLE_METRICS: tuple[tuple[str, str, float], ...] = (
    ("throughput", "tasks/min", 60.0),
    ("gpu_util", "GPU util", 1.0),
    ("load_balance", "load bal.", 1.0),
    ("latency_p50_s", "p50 s", 1.0),
    ("latency_p95_s", "p95 s", 1.0),
    ("makespan_s", "makespan s", 1.0),
)


def throughput_bounds(scenario: Scenario, seeds: Sequence[int]) -> list[float]:
    """The capacity bound's throughput (tasks/s) for each seed's tasks: no schedule exceeds it."""
    from envs.capacity import capacity_bound

    out = []
    for seed in seeds:
        sc = scenario_for_seed(scenario, seed)
        out.append(capacity_bound(sc, generate_tasks(sc, seed)).throughput_ub)
    return out


def _of_bound(throughputs: Sequence[float], bounds: Sequence[float]) -> str:
    """Mean fraction of each seed's bound; a dash where a bound is 0 (no task can run)."""
    if any(b <= 0 for b in bounds):
        return "—"
    return f"{statistics.fmean(t / b for t, b in zip(throughputs, bounds, strict=True)):.3f}"


def format_table(
    cmp: Comparison, baseline: str | None = "random+speedup", bounds: Sequence[float] | None = None
) -> str:
    """Markdown table: mean ± std per metric, throughput relative to ``baseline`` and, given each
    seed's bound (tasks/s), its fraction of the bound."""
    head = ["scheduler", *[h for _, h, _ in TABLE_METRICS], "not completed"]
    if bounds is not None:
        head.insert(2, "of bound")
    base = math.nan
    if baseline is not None and baseline in cmp.runs:
        head.append(f"thr. vs {baseline.split('+')[0]}")
        base = cmp.mean_std(baseline, "throughput")[0]
    has_base = not math.isnan(base) and base > 0  # nothing completed: no ratio to give
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in cmp.runs:
        # A reference that read the simulator's ground truth says so next to its name.
        cells = [f"{s} (clairvoyant)" if any(m.clairvoyant for m in cmp.runs[s]) else s]
        for key, _, scale in TABLE_METRICS:
            m, sd = cmp.mean_std(s, key)
            prec = 3 if scale == 1.0 and m < 10 else 1
            cells.append(f"{m * scale:.{prec}f} ± {sd * scale:.{prec}f}")
            if key == "throughput" and bounds is not None:
                cells.append(_of_bound([r.throughput for r in cmp.runs[s]], bounds))
        cells.append(f"{sum(m.not_completed for m in cmp.runs[s])}")
        if has_base:
            cells.append(f"{cmp.mean_std(s, 'throughput')[0] / base:.3f}×")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)

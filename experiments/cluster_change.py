"""The paper's cluster-change experiment: how long until throughput is stable after nodes join or leave.

For each churn instant of a scenario (nodes' ``join_s`` / ``leave_s``), throughput is measured in a
sliding window; the new level is the mean windowed throughput over the second half of the period
until the next change (or the last arrival); the settling time is the first moment after the
change from which the windowed throughput stays within ``band`` of that level until the period
ends. Tasks-to-stable counts the tasks that arrived between the change and that moment. With
Poisson arrivals at 50/min a 180 s window holds ~150 completions, whose count alone varies by
~8%: the band must be wider than that noise (default ±20%).

    python -m experiments.cluster_change [--scenario dynamic] [--schedulers mct,ldwp] [--seeds 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np

from envs.simulator import Simulator
from experiments.report_stats import mean_pm
from rlsched.policies.registry import PolicyOptions, parse_scheduler
from rlsched.scenarios.arrivals import mean_rate_per_min
from rlsched.scenarios.loader import load_scenario
from rlsched.scenarios.spec import Scenario
from rlsched.scenarios.taskgen import generate_tasks


def change_times(sc: Scenario) -> list[float]:
    """Sorted distinct instants at which nodes join or leave."""
    t = {n.join_s for n in sc.cluster.nodes if n.join_s > 0}
    t |= {n.leave_s for n in sc.cluster.nodes if n.leave_s is not None}
    return sorted(t)


def windowed_throughput(done_s: np.ndarray, t: np.ndarray, window_s: float) -> np.ndarray:
    """Completions per minute in the window ending at each time of ``t``."""
    done = np.sort(done_s[~np.isnan(done_s)])
    hi = np.searchsorted(done, t, side="right")
    lo = np.searchsorted(done, t - window_s, side="right")
    return (hi - lo) * 60.0 / window_s


def settling(
    done_s: np.ndarray, arrivals: np.ndarray, changes: list[float], window_s: float = 120.0, band: float = 0.1
) -> list[dict[str, float]]:
    """Per change: the new level, the settling time after the change and the tasks that arrived meanwhile."""
    end = float(arrivals.max())
    out = []
    for i, c in enumerate(changes):
        stop = changes[i + 1] if i + 1 < len(changes) else end
        t = np.arange(c + window_s, stop + 1e-9, 5.0)
        if len(t) < 4:
            continue
        thr = windowed_throughput(done_s, t, window_s)
        level = float(thr[len(thr) // 2 :].mean())
        outside = np.flatnonzero(np.abs(thr - level) > band * level)
        # Settled from the first sample after the last excursion (the window's start counts).
        k = 0 if len(outside) == 0 else int(outside[-1]) + 1
        settled_at = float(t[k] - window_s) if k < len(t) else float("nan")
        out.append(
            {
                "change_s": c,
                "level_per_min": level,
                "settle_s": settled_at - c,
                "tasks": float(((arrivals >= c) & (arrivals < settled_at)).sum()),
            }
        )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default="dynamic")
    p.add_argument("--schedulers", default="mct,mlsm,least-loaded,ldwp")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--model", default=None, help="checkpoint for ldwp (default: shipped)")
    p.add_argument("--window", type=float, default=180.0, help="throughput window, s (default 180)")
    p.add_argument("--band", type=float, default=0.2, help="relative band around the new level (default 0.2)")
    p.add_argument(
        "--steady",
        action="store_true",
        help="replace the arrival process by Poisson at its mean rate (bursty arrivals alone move "
        "throughput by more than the band, as the paper's steady 50/min did not)",
    )
    args = p.parse_args()
    sc = load_scenario(args.scenario)
    if args.steady:
        arr = dataclasses.replace(
            sc.workload.arrival, process="poisson", rate_per_min=mean_rate_per_min(sc.workload.arrival)
        )
        sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, arrival=arr))
    changes = change_times(sc)
    print(f"# command: python -m experiments.cluster_change {' '.join(sys.argv[1:])}")
    print(
        f"# {sc.name}: changes at {changes} s; window {args.window:g} s, band ±{args.band:.0%}; "
        f"mean ± std over {args.seeds} seeds (runs that never settle are counted apart)"
    )
    head = " | ".join(f"after {c:.0f} s: settle s | tasks" for c in changes)
    print(f"| scheduler | {head} |\n|---|" + "---|---|" * len(changes))
    for spec in [s.strip() for s in args.schedulers.split(",") if s.strip()]:
        per: list[list[dict[str, float]]] = []
        for seed in range(args.seeds):
            tasks = generate_tasks(sc, seed)
            sched = parse_scheduler(spec, PolicyOptions(selector_model=args.model))
            sim = Simulator(sc, tasks, sched.placer, seed)
            sim.run(sched)
            done = np.array([r.done_s for r in sim.records])
            arrivals = np.array([t.arrival_s for t in tasks])
            per.append(settling(done, arrivals, changes, args.window, args.band))
        cells = []
        for j in range(len(changes)):
            s = np.array([run[j]["settle_s"] for run in per if j < len(run)])
            n = np.array([run[j]["tasks"] for run in per if j < len(run)])
            ok = ~np.isnan(s)
            miss = f" ({int((~ok).sum())} never)" if not ok.all() else ""
            if ok.any():
                cells.append(f"{mean_pm(s[ok], '.0f')}{miss} | {mean_pm(n[ok], '.0f')}")
            else:
                cells.append(f"never{miss} | –")
        print(f"| {spec} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

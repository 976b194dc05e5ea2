"""Latency against offered load: each scenario run at the arrival rates that give chosen loads.

Offered load is a scenario's arrival rate over a capacity, for its task mix on each seed:

* ``bound`` (default): the LP capacity bound (``envs/capacity.py``), what no scheduler can pass;
* ``SELECTOR+PLACER``: that scheduler's knee, the highest arrival rate at which it keeps up on
  the same seed, found by bisection (:func:`capacities`). Where the bound is far above what schedulers
  serve (1.45x on a 16-node mixed cluster measured outside the project), a grid defined on the
  bound alone puts every point past the knee; one defined on a good heuristic does not.

A run *keeps up* when it completes its arrivals as fast as they come: over the middle 80 % of
the arrival window, at least :data:`KEEP_UP` of the tasks that arrived completed
(:func:`rlsched.metrics.served_share`), and none was lost. The load at which a scheduler *stops
keeping up* is the lowest load at which most of its seeds' runs do not.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from experiments.case_folders import split_suffix
from experiments.evaluation import LOAD_RANGE, BoundCase, Case, CaseResult, parse_entry, run_grid
from experiments.report_stats import Summary
from rlsched.errors import InputError

#: Rounds of the bisection for a reference's knee: [0, KNEE_TOP x bound] halves each round
#: (1.05 / 2^7: within 1 % of the bound).
KNEE_ROUNDS = 7
#: The top of the bracket, times the LP bound (a finite run may keep up a little past it).
KNEE_TOP = 1.05
#: Tasks a scenario needs for its knee to be more than noise (it warns under this).
KNEE_MIN_TASKS = 1000
#: Share of the bound's throughput a run must reach to keep up with its arrivals.
KEEP_UP = 0.99


@dataclass(frozen=True)
class LoadPoint:
    """One scenario, seed and offered load, and how much faster than the scenario's own its
    arrivals come to give that load."""

    scenario: str
    seed: int
    load: float
    arrival_scale: float


def parse_loads(text: str) -> tuple[float, ...]:
    """``"0.5,0.7,0.9"`` -> sorted distinct loads.

    :raises InputError: naming ``--loads``, for a value that is not a number in :data:`LOAD_RANGE`.
    """
    out = set()
    for part in (p.strip() for p in text.split(",")):
        try:
            x = float(part)
        except ValueError:
            x = math.nan
        if not (LOAD_RANGE[0] <= x <= LOAD_RANGE[1]):
            lo, hi = LOAD_RANGE
            raise InputError("--loads", "value", f"comma-separated offered loads in [{lo}, {hi}]", part)
        out.add(x)
    return tuple(sorted(out))


def check_entries(scenarios: Sequence[str]) -> None:
    """``--loads`` sets every rate: entries may not carry their own ``@RATE`` or ``~LOAD``.

    :raises InputError: naming ``--scenarios`` and the entry.
    """
    for entry in scenarios:
        name, rate, _ = parse_entry(entry, None)
        if rate is not None or "~" in split_suffix(name)[1]:  # ~LOAD was dropped, its label kept
            what = "@RATE" if rate is not None else "~LOAD"
            raise InputError("--scenarios", entry, f"no {what} with --loads (the loads set the rate)", entry)


def capacities(
    scenarios: Sequence[str], seeds: Sequence[int], load_of: str, jobs: int, progress: bool, timeout_s: float
) -> dict[tuple[str, int], tuple[float, float]]:
    """(capacity, own arrival rate), tasks/min, of each (scenario, seed): what its loads are
    relative to, and the rate its arrivals come at unscaled.

    :param load_of: ``"bound"`` or a ``SELECTOR+PLACER`` spec.
    :raises InputError: naming ``--scenarios`` or ``--load-of``, when one cannot be measured.
    """
    bounds = [BoundCase(sc, seed) for sc in scenarios for seed in seeds]
    _, got = run_grid([], bounds, jobs, progress)
    out: dict[tuple[str, int], tuple[float, float]] = {}
    for b in bounds:
        res = got.get(b)
        if not isinstance(res, dict):
            raise InputError(
                "--scenarios", b.scenario, "a scenario whose capacity bound can be computed", res
            )
        out[(b.scenario, b.seed)] = (float(res["capacity_per_min"]), float(res["arrival_rate_per_min"]))
    if load_of == "bound":
        return out
    return {k: (knee, own) for k, knee, own in _knees(out, load_of, jobs, progress, timeout_s)}


def _knees(
    bounds: dict[tuple[str, int], tuple[float, float]],
    load_of: str,
    jobs: int,
    progress: bool,
    timeout_s: float,
) -> list[tuple[tuple[str, int], float, float]]:
    """(key, knee, own rate) of each (scenario, seed): the highest arrival rate, tasks/min, at
    which ``load_of`` keeps up, bisected in [0, :data:`KNEE_TOP` x its bound] over
    :data:`KNEE_ROUNDS` rounds (one run per key a round, the keys' runs in parallel).

    A single saturated run cannot say this: completions over the whole run count the drain after
    the last arrival (0.5-0.8x the knee on ``paper`` and ``dynamic``: the scheduler then kept up
    at 1.1 of that "capacity"), and completions over the middle of the arrivals favour the tasks
    that finish first (1.8-2.8x the knee on ``alibaba-dense``). BENCHMARKS, "Saturated
    throughput".
    """
    lo = dict.fromkeys(bounds, 0.0)
    tasks: dict[tuple[str, int], int] = {}
    hi = {k: KNEE_TOP * cap for k, (cap, _) in bounds.items()}
    for n in range(KNEE_ROUNDS):
        if progress:
            print(f"evaluate: where {load_of} stops keeping up: round {n + 1}/{KNEE_ROUNDS}", file=sys.stderr)
        mid = {k: (lo[k] + hi[k]) / 2.0 for k in bounds}
        cases = [
            Case(sc, load_of, seed, timeout_s=timeout_s, detail=False, arrival_scale=mid[sc, seed] / own)
            for (sc, seed), (_, own) in bounds.items()
        ]
        results, _ = run_grid(cases, [], jobs, progress)
        for r in results:
            key = (r.case.scenario, r.case.seed)
            tasks[key] = int(r.metrics.get("tasks_total") or 0)
            if _kept_up(r, load_of):
                lo[key] = mid[key]
            else:
                hi[key] = mid[key]
    out = []
    for key, (_, own) in bounds.items():
        if lo[key] == 0.0:  # it kept up at no rate tried: the lowest is the best said of it
            warnings.warn(
                f"--load-of {load_of}: it kept up on {key[0]} (seed {key[1]}) at no rate tried, down to "
                f"{hi[key]:.3g} tasks/min; loads are relative to that",
                stacklevel=3,
            )
        out.append((key, lo[key] or hi[key], own))
    short = sorted({sc for (sc, _), n in tasks.items() if n < KNEE_MIN_TASKS})
    if short:
        warnings.warn(
            f"--load-of {load_of}: {', '.join(short)}: under {KNEE_MIN_TASKS:,} tasks, whether a run keeps "
            "up varies by a few per cent of served share from run to run, and the knee found with it "
            'by much more (BENCHMARKS, "Saturated throughput"); give them more tasks (#TASKS) or use '
            "--load-of bound",
            stacklevel=3,
        )
    return out


def _kept_up(r: CaseResult, load_of: str) -> bool:
    """Whether a bisection run kept up.

    :raises InputError: it timed out (naming ``--timeout``), failed, or has too few tasks to tell.
    """
    where = f"{r.case.scenario} (seed {r.case.seed})"
    if r.status == "timeout":  # the limit is what to change, not the scheduler
        raise InputError(
            "--timeout",
            "value",
            f"a time limit the --load-of reference {load_of} runs {where} within",
            r.case.timeout_s,
        )
    if r.status != "ok":
        raise InputError("--load-of", load_of, "a scheduler that runs every scenario", r.error)
    done = r.metrics.get("tasks_completed") or 0
    up = keeps_up({**r.metrics, "not_completed": (r.metrics.get("tasks_total") or 0) - done})
    if up is None:
        raise InputError(
            "--scenarios", r.case.scenario, "at least 20 tasks, to tell whether --load-of keeps up", where
        )
    return up


def load_points(
    loads: Sequence[float], capacity: dict[tuple[str, int], tuple[float, float]]
) -> list[LoadPoint]:
    """Every (scenario, seed, load), with the arrival scale that gives it."""
    return [
        LoadPoint(sc, seed, load, load * cap / own)
        for (sc, seed), (cap, own) in capacity.items()
        for load in loads
    ]


def keeps_up(row: dict) -> bool | None:
    """Whether a run completed its arrivals as fast as they came (``None``: it failed)."""
    share = row.get("served_share")
    if share is None or share != share:
        return None
    return bool(share >= KEEP_UP and not row.get("not_completed"))


@dataclass(frozen=True)
class Curve:
    """One scheduler's latency on one scenario at each load (means over seeds).

    ``mean_s``, ``p95_s``: the summary over seeds per load; ``knee``: the lowest load at
    which it stops keeping up (``None``: it keeps up everywhere on the grid).
    """

    loads: list[float]
    mean_s: list[Summary]
    p95_s: list[Summary]
    keep_up: list[float]
    knee: float | None


def curves(rows: Sequence[dict]) -> dict[str, dict[str, Curve]]:
    """scenario -> scheduler -> :class:`Curve`, from evaluation rows that carry a ``load``."""
    from experiments.report_stats import summarise

    by: dict[tuple[str, str], dict[float, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r.get("load") is not None and r["status"] == "ok":
            by[(r["scenario"], r["scheduler"])][r["load"]].append(r)
    out: dict[str, dict[str, Curve]] = defaultdict(dict)
    for (sc, sched), per_load in by.items():
        loads = sorted(per_load)
        mean = [summarise([r["latency_mean_s"] for r in per_load[x]]) for x in loads]
        p95 = [summarise([r["latency_p95_s"] for r in per_load[x]]) for x in loads]
        up = [sum(bool(keeps_up(r)) for r in per_load[x]) / len(per_load[x]) for x in loads]
        knee = next((x for x, u in zip(loads, up, strict=True) if u < 0.5), None)
        out[sc][sched] = Curve(loads, mean, p95, up, knee)
    return dict(out)


def latency_floor(rows: Sequence[dict]) -> dict[str, list[tuple[float, float, float]]]:
    """scenario -> (load, mean, p95) of the latency lower bound (each task's fastest critical
    path), averaged over seeds."""
    by: dict[str, dict[float, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r.get("load") is not None and r.get("bound_latency_lb_mean_s") is not None:
            by[r["scenario"]][r["load"]].append(r)
    out = {}
    for sc, per_load in by.items():
        pts = []
        for x in sorted(per_load):
            rs = per_load[x]
            pts.append(
                (
                    x,
                    sum(r["bound_latency_lb_mean_s"] for r in rs) / len(rs),
                    sum(r["bound_latency_lb_p95_s"] for r in rs) / len(rs),
                )
            )
        out[sc] = pts
    return out


def tag_rows(rows: list[dict], points: Sequence[LoadPoint]) -> None:
    """Add each row's offered ``load`` (from the point its rate was made from) and ``keeps_up``."""
    at = {(p.scenario, p.seed, p.arrival_scale): p.load for p in points}
    for r in rows:
        r["load"] = at.get((r["scenario"], r["seed"], r["arrival_scale"]))
        r["keeps_up"] = keeps_up(r)

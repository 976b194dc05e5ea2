"""How far a look-ahead could take ``auto``'s second decision (a script, not a test).

``auto`` runs its pair to the ``--at``-th decision of a run; there the whole simulated world is
copied (the simulator, ``auto`` and every candidate's state) and continued once per candidate pair:

- on the true future (the tasks that really come next): the best of these is an oracle;
- on ``--futures`` other futures: the tasks not yet arrived are replaced by draws, with
  replacement, of tasks already seen, arriving as a Poisson stream at the rate seen so far; or,
  with ``--jitter J``, the true tasks arrive with each gap between arrivals scaled by a uniform
  draw in [1 - J, 1 + J].

A look-ahead (a "twin") picks the pair best on the other futures. This twin knows more than
a scheduler could — the true queues, speeds, churn, drift and interference, and how many tasks
are still to come — so what it gains is an upper bound on any look-ahead from the present state.
Two other futures also say how much of a pair's lead is in the state, and how much in which
future happens to come: the pair best on one future, scored on another drawn from the same state
and the same distribution.

It reaches into the simulator's event queue to swap the future (an experiment, not product code).
Each line of ``--out`` is one run: the pair kept, and every candidate's throughput (tasks/min) on
the true and on each other future.

    python -m experiments.benchmarks.twin_switch --scenarios gen-val11 --seeds 10001,10002 \\
        --at 200 --futures 2 --out twin.jsonl --grid GRID/results.json
"""

from __future__ import annotations

import argparse
import copy
import functools
import heapq
import json
import shlex
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from envs import simulator as simmod
from envs.simulator import Simulator
from experiments.evaluation import load_entry
from experiments.report_generalisation import best_heuristic, case_means, geomean, is_heuristic_row
from rlsched.policies.auto import Switchboard, switchboard
from rlsched.policies.registry import parse_scheduler
from rlsched.records import TaskRecord
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed
from rlsched.scheduler import TwoStageScheduler

World = tuple[Simulator, TwoStageScheduler]


def decide_until(sim: Simulator, sched: TwoStageScheduler, n: int) -> bool:
    """Make stage-1 decisions until ``n`` are made; ``False`` if the run ran out of them first."""
    while sim.decisions < n:
        task = sim.next_decision()
        if task is None:
            return False
        sim.assign(task, sched.selector.select(task, sim.view, sim.mask(task)))
    return True


def _board(sched: TwoStageScheduler) -> Switchboard:
    board = switchboard(sched)
    assert board is not None, "the world runs auto"
    return board


def continue_with(world: World, pair: str, future_seed: list[int] | None, jitter: float = 0.0) -> float:
    """Throughput (tasks/min) of a copy of ``world`` run to the end with ``pair``.

    :param future_seed: ``None`` keeps the true future; otherwise it seeds another one.
    :param jitter: 0 resamples the future; otherwise the other future is the true tasks, each gap
        between arrivals scaled by a uniform draw in [1 - jitter, 1 + jitter].
    """
    sim, sched = copy.deepcopy(world)
    if future_seed is not None:
        resample_future(sim, np.random.default_rng(np.random.SeedSequence(future_seed)), jitter)
    _board(sched).current = pair  # both stages follow auto's switchboard
    decide_until(sim, sched, sys.maxsize)
    return sim.finish().throughput * 60


def resample_future(sim: Simulator, rng: np.random.Generator, jitter: float = 0.0) -> None:
    """Replace every task not yet arrived by a draw of one that has, at the rate seen so far
    (``jitter`` 0), or keep the tasks and scale each gap between arrivals by a uniform draw in
    [1 - jitter, 1 + jitter]."""
    future = sorted(o for (_, kind, _, o, _) in sim._events if kind == simmod._ARRIVE)
    if not future:
        return
    todo = set(future)
    seen = [t for t in sim.tasks if t.id not in todo]
    rate = len(seen) / max(sim.now - seen[0].arrival_s, 1e-9)
    sim._events = [e for e in sim._events if e[1] != simmod._ARRIVE]
    heapq.heapify(sim._events)
    at, last = sim.now, sim.now
    for i in future:
        if jitter:
            src = sim.tasks[i]
            at += (src.arrival_s - last) * float(rng.uniform(1 - jitter, 1 + jitter))
            last = src.arrival_s
        else:
            at += float(rng.exponential(1.0 / rate))
            src = seen[int(rng.integers(len(seen)))]
        task = copy.deepcopy(src)
        task.id, task.arrival_s = i, at
        if src.deadline_s is not None:
            task.deadline_s = at + (src.deadline_s - src.arrival_s)
        sim.tasks[i] = task
        sim.records[i] = TaskRecord(at, deadline_s=task.deadline_s)
        sim._needs[i] = None
        sim._static_ok[i] = None
        sim._push(at, simmod._ARRIVE, i)


def start_world(case: str, seed: int) -> World:
    """``auto`` on ``case`` and ``seed``, reset and calibrated, before its first decision."""
    sc = scenario_for_seed(load_entry(case, None), seed)
    sched = parse_scheduler("auto")
    sim = Simulator(sc, generate_tasks(sc, seed), sched.placer, seed=seed)
    sched.reset(sim.view, sim.seed)
    sim.calibrate_placer()
    return sim, sched


def probe(case: str, seed: int, at: int, futures: int, jitter: float = 0.0) -> dict[str, Any] | None:
    """One run of ``auto`` on ``case`` and ``seed``, copied at its ``at``-th decision."""
    sim, sched = start_world(case, seed)
    if not decide_until(sim, sched, at) or len(sim.tasks) <= at:
        return None
    board = _board(sched)
    world = (sim, sched)  # each continuation runs on its own copy
    real, twin = {}, {}
    for pair in board.recogniser.candidates:
        real[pair] = continue_with(world, pair, None)
        twin[pair] = [continue_with(world, pair, [seed, r, 99], jitter) for r in range(futures)]
    return {
        "case": Path(case).name,
        "seed": seed,
        "at": at,
        "jitter": jitter,
        "keep": board.current,
        "real": real,
        "twin": twin,
    }


def _gm(x: list[float]) -> str:
    a = np.asarray(x)
    return f"{geomean(x):.3f} / {100 * (a >= 0.99).mean():.0f} % / min {a.min():.3f}"


def summarise(runs: list[dict[str, Any]], grid: str | None) -> list[str]:
    """The figures: per run against the best continuation, and per case against the grid's best pair."""

    def twin_pick(r: dict[str, Any], margin: float) -> str:
        tw = {p: float(np.mean(v)) for p, v in r["twin"].items()}
        p = max(tw, key=tw.__getitem__)
        return p if tw[p] > tw[r["keep"]] * (1 + margin) else r["keep"]

    rules: dict[str, Callable[[dict[str, Any]], str]] = {
        "keep (auto as shipped)": lambda r: r["keep"],
        "oracle (true future)": lambda r: max(r["real"], key=r["real"].__getitem__),
    }
    for m in (0.0, 0.01, 0.02, 0.05):
        rules[f"twin, margin {m}"] = functools.partial(twin_pick, margin=m)
    out = ["| second decision | per run: / best continuation (geomean / >= 0.99x / min) | switches |"]
    out.append("|---|---|---|")
    for name, pick in rules.items():
        ratios = [r["real"][pick(r)] / max(r["real"].values()) for r in runs]
        out.append(f"| {name} | {_gm(ratios)} | {sum(pick(r) != r['keep'] for r in runs)} of {len(runs)} |")
    cross = []
    for r in runs:
        n = len(next(iter(r["twin"].values())))
        for a in range(n):
            for b in range(n):
                if a != b:
                    p = max(r["twin"], key=lambda q: r["twin"][q][a])
                    cross.append(r["twin"][p][b] / max(v[b] for v in r["twin"].values()))
    if cross:
        out.append(f"Best pair on one other future, on another from the same state: {_gm(cross)}")
    if grid:
        rows = [r for r in json.loads(Path(grid).read_text())["rows"] if is_heuristic_row(r)]
        heuristics = {r["scheduler"] for r in rows}
        best = {}  # the reference: best_heuristic, as the report's section picks it
        for (scenario, _), means in case_means(rows).items():
            pair = best_heuristic(means, heuristics)
            if pair is not None:
                best[Path(scenario).name] = (means[pair].throughput or 0.0) * 60
        for name, pick in rules.items():
            per: dict[str, list[float]] = defaultdict(list)
            for r in runs:
                per[r["case"]].append(r["real"][pick(r)])
            ratios = [float(np.mean(v)) / best[c] for c, v in per.items() if c in best]
            out.append(
                f"Per case, / the grid's best heuristic pair, {name}: {_gm(ratios)} ({len(ratios)} cases)"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", required=True, help="a folder of scenario files, or comma-separated files")
    ap.add_argument("--seeds", default="10001,10002", help="run seeds (validation by default)")
    ap.add_argument("--at", type=int, default=200, help="the decision at which the world is copied")
    ap.add_argument(
        "--futures", type=int, default=2, help="resampled futures per pair (>= 2 for the cross figure)"
    )
    ap.add_argument(
        "--jitter",
        type=float,
        default=0.0,
        help="0: resampled futures; J > 0: the true tasks, each gap between arrivals scaled by U(1-J, 1+J)",
    )
    ap.add_argument("--out", required=True, help="JSON lines, appended (a rerun skips what is there)")
    ap.add_argument(
        "--grid", help="results.json of an evaluate run with heuristic pairs on the same cases and seeds"
    )
    args = ap.parse_args(argv)
    print(
        "$ python -m experiments.benchmarks.twin_switch " + shlex.join(sys.argv[1:] if argv is None else argv)
    )
    src = Path(args.scenarios)
    cases = sorted(str(p) for p in src.glob("*.toml")) if src.is_dir() else args.scenarios.split(",")
    out = Path(args.out)
    runs = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    done = {(r["case"], r["seed"]) for r in runs}
    with out.open("a") as fh:
        for seed in (int(s) for s in args.seeds.split(",")):
            for case in cases:
                if (Path(case).name, seed) in done:
                    continue
                t0 = time.perf_counter()
                r = probe(case, seed, args.at, args.futures, args.jitter)
                if r is not None:
                    runs.append(r)
                    fh.write(json.dumps(r) + "\n")
                    fh.flush()
                print(
                    f"{Path(case).name} {seed}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True
                )
    print("\n".join(summarise(runs, args.grid)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Probe: backup copies of straggling tasks on idle nodes (speculative execution).

Where the pairs differ on generated cases, much of the difference is the run's tail: the time
after the last task started, 10-60 % of the makespan on half the validation cases, with the last
task on a slow device while faster nodes stand idle. MapReduce's backup tasks and Spark's
speculation answer that with a copy on an idle machine; the first copy to finish wins and the
other is cancelled. This probe adds that to the simulator (a subclass: nothing of the shipped
simulator changes) and measures whether it narrows the learned pairs' gap to the best heuristic
pair, every scheduler running with it alike.

The rule (observable state only, read every :data:`~rlsched.overload.TICK_S` of simulated time):
when no task awaits stage 1 and an alive node holds no task, the started task elsewhere whose
estimated remaining time most exceeds a fresh run's on that node gets a copy there, if the fresh
run (input transfer plus nominal work on the idle node's datasheet) is under :data:`MARGIN` of
what it has left (nominal work not yet done on its node). One copy per task; a copy never
copies.

``python -m experiments.benchmarks.speculate --scenarios DIR --seeds 2 --first-seed 10001
--schedulers A,B --jobs 2 --out F.json`` runs every (case, scheduler, seed) with and without
copies and prints the judgement against the best heuristic pair per case.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from envs.rebalancing import release
from envs.sim_runs import TaskRun
from envs.simulator import Simulator
from rlsched.estimates import backlog_seconds
from rlsched.scheduler import CPU
from rlsched.tasks import Task
from rlsched.view import SPEED_EMA

#: A copy starts only if a fresh run on the idle node is estimated under this share of what the
#: task has left where it runs (fixed before any run; not tuned).
MARGIN = 0.5
#: Started tasks (most work left first) each idle node weighs per tick.
CANDIDATES = 32


class _NoMoves:
    """A watch that never moves a task: ticks run, rebalancing does not."""

    def moves(self, view: object, busy: set[int]) -> list[tuple[int, int]]:
        return []


class SpeculatingSimulator(Simulator):
    """The simulator with backup copies of straggling tasks on idle nodes (see the module)."""

    def _init_state(self) -> None:
        super()._init_state()
        if self._watch is not None:
            raise ValueError("the probe runs without rebalancing (a withdrawn copy would run twice)")
        self._watch = _NoMoves()  # type: ignore[assignment]
        self._twin: dict[int, tuple[TaskRun, TaskRun]] = {}
        self.copies = 0
        self.copies_won = 0

    # -- the rule --------------------------------------------------------------------------
    def _tick(self) -> None:
        super()._tick()
        if self.pending:
            return
        f = self.view.fast
        idle = [
            n
            for n in range(len(self.nodes))
            if self.view.alive[n] and f.cpu_busy[n] == 0 and not self._on_node[n]
        ]
        if not idle:
            return
        # The tasks with most work left first; a few per idle node are enough to find a copy.
        cand = [
            (self._left_s(tr), tr)
            for tasks in self._on_node
            for tid, tr in tasks.items()
            if tid not in self._twin and any(tr.started)
        ]
        cand.sort(key=lambda x: -x[0])
        for node in idle:
            self._copy_to(node, cand[:CANDIDATES])

    def _copy_to(self, node: int, cand: list[tuple[float, TaskRun]]) -> None:
        best, gain = None, 0.0
        for left, tr in cand:
            task = tr.task
            if task.id in self._twin or not self._feasible(task, node):
                continue
            fresh = self._fresh_s(task, node)
            if fresh < MARGIN * left and left - fresh > gain:
                best, gain = tr, left - fresh
        if best is None:
            return
        task = best.task
        rec_node = self.records[task.id].node
        super()._to_node(task, node)
        self.records[task.id].node = rec_node
        self._twin[task.id] = (best, self._on_node[node][task.id])
        self.copies += 1

    def _feasible(self, task: Task, node: int) -> bool:
        static = self._static_ok[task.id]
        if static is None:
            return bool(self.mask(task)[node])
        return bool(static[node])

    def _running(self, tr: TaskRun) -> list[tuple[int, Any]]:
        node = tr.node
        out = [(g, r) for g, runs in enumerate(self._gpu_runs[node]) for r in runs if r.tr is tr]
        out += [(CPU, r) for r in self._cpu_runs[node] if r.tr is tr]
        return out

    def _left_s(self, tr: TaskRun) -> float:
        """Nominal seconds of work ``tr`` has not done: subtasks not started, and the part left
        of those running."""
        left = sum(g + c for g, c, s in zip(tr.gpu_nominal, tr.cpu_nominal, tr.started, strict=True) if not s)
        for _, r in self._running(tr):
            i = r.sub.index
            done = (self.now - r.t_last) * r.rate
            left += (tr.gpu_nominal[i] + tr.cpu_nominal[i]) * max(r.remaining - done, 0.0)
        return left

    def _fresh_s(self, task: Task, node: int) -> float:
        tf, bw, cgf = self._tf_mean[node], self._bw_mean[node], self._cpu_gf[node]
        gpu, cpu = backlog_seconds(task, tf, bw, cgf, tf > 0)
        return task.input_mb / self._net[node] + sum(gpu) + sum(cpu)

    # -- first finisher wins ------------------------------------------------------------------
    def _task_done(self, tr: TaskRun) -> None:
        if tr.withdrawn:
            return  # the other copy finished first
        pair = self._twin.pop(tr.task.id, None)
        super()._task_done(tr)
        if pair is not None:
            loser = pair[1] if pair[0] is tr else pair[0]
            self.copies_won += pair[1] is tr
            self.records[tr.task.id].node = tr.node
            self._cancel(loser)

    def _cancel(self, tr: TaskRun) -> None:
        v, node = self.view, tr.node
        tr.withdrawn = True
        if tr.epoch != self._epoch[node] or self._on_node[node].get(tr.task.id) is not tr:
            return  # its node left meanwhile
        running = self._running(tr)
        unfinished = {i for i, s in enumerate(tr.started) if not s} | {r.sub.index for _, r in running}
        for g, r in running:
            r.version += 1  # its completion event is void
            if g == CPU:
                del self._cpu_runs[node][r]
                v.cpu_finished(node, 0.0, SPEED_EMA)  # no speed sample
            else:
                self._gpu_runs[node][g].remove(r)
                v.gpu_finished(node, g, r.sub.mem_mb, r.sub.kind.name, 0.0, SPEED_EMA)
                self._rerate(node, g)
        release(self, tr, unfinished)
        self._admit_tasks(node)
        self._drain(node)

    def _leave(self, node: int) -> None:
        # A task with a copy elsewhere is not handed back to stage 1: its copy goes on.
        for tid in list(self._on_node[node]):
            pair = self._twin.pop(tid, None)
            if pair is not None:
                gone = self._on_node[node].pop(tid)
                gone.withdrawn = True
        super()._leave(node)


def run_one(arg: tuple[str, str, int, bool]) -> dict[str, Any]:
    """One (case, scheduler, seed, copies on) run; its figures."""
    from experiments.evaluation import load_entry
    from rlsched.policies.registry import PolicyOptions, parse_scheduler
    from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed

    path, spec, seed, on = arg
    sc = scenario_for_seed(load_entry(path, None), seed)
    tasks = generate_tasks(sc, seed)
    sched = parse_scheduler(spec, PolicyOptions(None, None, None))
    cls = SpeculatingSimulator if on else Simulator
    sim = cls(sc, tasks, sched.placer, seed=seed)
    m = sim.run(sched)
    assert all(r.completions <= 1 for r in sim.records)
    return {
        "case": path,
        "scheduler": spec,
        "seed": seed,
        "copies_on": on,
        "throughput": m.throughput,
        "latency_mean_s": m.latency_mean_s,
        "tasks_completed": m.tasks_completed,
        "copies": getattr(sim, "copies", 0),
        "copies_won": getattr(sim, "copies_won", 0),
    }


def _geo(xs: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else math.nan


def judge(rows: list[dict[str, Any]], learned: tuple[str, ...]) -> dict[str, Any]:
    """Per variant: each learned pair against the best heuristic pair per case (seed means)."""
    out: dict[str, Any] = {}
    for on in (False, True):
        mean: dict[tuple[str, str], tuple[float, float]] = {}
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for r in rows:
            if r["copies_on"] == on:
                groups.setdefault((r["case"], r["scheduler"]), []).append(r)
        for k, g in groups.items():
            mean[k] = (
                statistics.fmean(x["throughput"] for x in g),
                statistics.fmean(x["latency_mean_s"] for x in g),
            )
        cases = sorted({c for c, _ in mean})
        res: dict[str, Any] = {}
        for pair in learned:
            ratios, lat = [], []
            for c in cases:
                heur = {s: v for (cc, s), v in mean.items() if cc == c and s not in learned}
                best = max(heur, key=lambda s: heur[s][0])
                t, lt = mean[(c, pair)]
                ratios.append(t / heur[best][0])
                if abs(t / heur[best][0] - 1) <= 0.01:
                    lat.append(lt / heur[best][1])
            res[pair] = {
                "geomean": _geo(ratios),
                "min": min(ratios),
                "median": statistics.median(ratios),
                "share_099": sum(x >= 0.99 for x in ratios) / len(ratios),
                "share_097": sum(x >= 0.97 for x in ratios) / len(ratios),
                "latency_ties_105": (sum(x <= 1.05 for x in lat) / len(lat)) if lat else math.nan,
                "ties": len(lat),
            }
        out["with copies" if on else "without"] = res
    per: dict[str, dict[str, float]] = {}
    for s in sorted({r["scheduler"] for r in rows}):
        a = {(r["case"], r["seed"]): r for r in rows if r["scheduler"] == s and not r["copies_on"]}
        b = {(r["case"], r["seed"]): r for r in rows if r["scheduler"] == s and r["copies_on"]}
        keys = sorted(set(a) & set(b))
        per[s] = {
            "throughput": _geo([b[k]["throughput"] / a[k]["throughput"] for k in keys]),
            "latency": _geo([b[k]["latency_mean_s"] / a[k]["latency_mean_s"] for k in keys]),
            "copies_per_run": statistics.fmean(b[k]["copies"] for k in keys),
        }
    out["copies against none, per scheduler"] = per
    return out


def _no_nan(x: Any) -> Any:
    """``x`` with NaN as ``null`` (strict JSON readers refuse NaN)."""
    if isinstance(x, float) and x != x:
        return None
    if isinstance(x, dict):
        return {k: _no_nan(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_no_nan(v) for v in x]
    return x


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.benchmarks.speculate")
    p.add_argument("--scenarios", required=True, help="folder of scenario files")
    p.add_argument("--schedulers", required=True, help="comma-separated; learned pairs named by --learned")
    p.add_argument("--learned", default="auto,ldwp+iawp", help="the learned pairs, each also in --schedulers")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--first-seed", type=int, default=10001)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    print(
        "command: python -m experiments.benchmarks.speculate "
        + " ".join(sys.argv[1:] if argv is None else argv)
    )
    cases = sorted(str(x) for x in Path(a.scenarios).glob("*.toml"))
    specs = a.schedulers.split(",")
    missing = sorted(set(a.learned.split(",")) - set(specs))
    if missing:  # judged after every run: said now, not once the runs are done
        p.error(f"--learned: {', '.join(missing)} not in --schedulers")
    args = [
        (c, s, seed, on)
        for c in cases
        for s in specs
        for seed in range(a.first_seed, a.first_seed + a.seeds)
        for on in (False, True)
    ]
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(a.jobs) as pool:
        for i, r in enumerate(pool.map(run_one, args, chunksize=4), 1):
            rows.append(r)
            if i % 100 == 0:
                print(f"{i}/{len(args)} runs, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    Path(a.out).write_text(json.dumps({"rows": rows}, indent=1))  # the runs kept, whatever comes next
    verdict = judge(rows, tuple(a.learned.split(",")))
    Path(a.out).write_text(json.dumps(_no_nan({"rows": rows, "judgement": verdict}), indent=1))
    print(json.dumps(verdict, indent=1))
    print(f"{len(rows)} runs in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

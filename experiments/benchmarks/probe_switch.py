"""A second decision that tries instead of predicting (a script, not a test).

``auto``'s learnt second decision (``rlsched fit-revisit``) predicts from how the run looks; on the
training cases nothing it measures separates the runs a switch helps from those it hurts
(BENCHMARKS.md). This one asks the run: between the first decision and the ``AT``-th arrival
every other arriving task is sent where the probe's selector (``mlsm``) would send it, the others
where the running pair would; at the ``AT``-th arrival it compares the two halves' mean latency
so far (a task not yet done counts the time it has waited: what the service sees of it) and
switches to ``THEN`` when the probe's half is faster by more than ``DELTA``. The threshold is
fixed here, not tuned. With ``--split`` the halves do not share state: the nodes are dealt into
two groups alike in hardware, and each half's tasks go only to its own group's nodes (a real A/B;
a task that fits no node of its group may use any). Each (case, seed) is one run; it prints, over
the runs of a ``rlsched fit-revisit`` runs file (the same cases and seeds), the geometric mean of
this run's throughput over keeping the pair (the file's "stay") and of the best of keeping and
switching there.

    python -m experiments.benchmarks.probe_switch --rows revisit/train.jsonl --jobs 2
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import shlex
import sys
from typing import Any

import numpy as np

from envs.simulator import Simulator
from experiments.evaluation import load_entry
from experiments.revisit_fit import read_rows
from experiments.revisit_runs import Fixed
from experiments.worker_pool import worker_init
from rlsched.cluster import ClusterSpec
from rlsched.policies.auto import AutoSelector, build_auto
from rlsched.policies.recogniser import load_recogniser
from rlsched.policies.registry import make_placer, make_selector
from rlsched.policies.revisit import SecondChoice
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed
from rlsched.tasks import Task
from rlsched.view import ClusterView

AT = 200
PROBE = "mlsm"
THEN = "mlsm+iawp-pass"
#: The probe's half must be this much faster (mean latency) for a switch; fixed before any run.
DELTA = 0.10


class ProbingSelector(AutoSelector):
    """``auto``'s stage 1 that, between its decisions, routes every other arrival by ``PROBE``."""

    def __init__(self, inner: AutoSelector, sim_records: list, probe: Probe, by: Any) -> None:
        super().__init__(inner.board)
        self.records = sim_records
        self.probe = probe
        self.by = by
        self.routed: dict[int, bool] = {}  # task id -> by the probe
        self.group: np.ndarray | None = None  # per node: the probe's group (with --split)

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        b = self.board
        self.probe.now = view.time_s  # the second decision, made in note(), reads the clock
        b.note(task, view)
        if b.choice is not None and b.second is None and task.id not in self.routed:
            by_probe = len(self.routed) % 2 == 1
            self.routed[task.id] = by_probe
            own = mask
            if self.group is not None:
                own = mask & (self.group if by_probe else ~self.group)
                own = own if own.any() else mask
            if by_probe:
                return int(self.by.select(task, view, own))
            return b.selector.select(task, view, own)
        return b.selector.select(task, view, mask)

    def halves(self, now: float) -> tuple[float, float]:
        """Mean latency so far (waiting time for tasks not done) of the running pair's half and
        of the probe's half."""
        out: dict[bool, list[float]] = {False: [], True: []}
        for tid, by_probe in self.routed.items():
            r = self.records[tid]
            end = r.done_s if not math.isnan(r.done_s) else now
            out[by_probe].append(end - r.arrival_s)
        return float(np.mean(out[False] or [0.0])), float(np.mean(out[True] or [0.0]))


class Probe(Fixed):
    """The second decision: switch to ``THEN`` when the probe's half was faster by ``DELTA``."""

    selector: ProbingSelector | None = None
    now: float = 0.0
    halves: tuple[float, float] = (0.0, 0.0)

    def decide(self, x: np.ndarray, running: str) -> SecondChoice:
        assert self.selector is not None
        self.halves = mine, theirs = self.selector.halves(self.now)
        self.then = THEN if theirs < (1.0 - DELTA) * mine else None
        return super().decide(x, running)


def split(cluster: ClusterSpec) -> np.ndarray:
    """Deal the nodes, sorted by their hardware, alternately into two groups (True: the probe's)."""
    key = [
        (tuple(g.name for g in n.gpus), n.streams_per_gpu, n.cpu_cores, i)
        for i, n in enumerate(cluster.nodes)
    ]
    group = np.zeros(len(key), dtype=bool)
    for rank, k in enumerate(sorted(key)):
        group[k[-1]] = rank % 2 == 1
    return group


def run(job: tuple[str, int, bool]) -> dict[str, Any]:
    case, seed, halved = job
    sc = scenario_for_seed(load_entry(case, None), seed)
    probe = Probe(AT, None)
    sched = build_auto(load_recogniser(None), make_selector, make_placer, probe)
    sim = Simulator(sc, generate_tasks(sc, seed), sched.placer, seed=seed)
    sel = ProbingSelector(sched.selector, sim.records, probe, make_selector(PROBE))  # type: ignore[arg-type]
    probe.selector = sel
    if halved:
        sel.group = split(sc.cluster)
    sched.selector = sel
    m = sim.run(sched)
    return {"case": case, "seed": seed, "throughput": float(m.throughput), "switched": probe.then is not None,
            "halves": probe.halves}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", required=True, help="a runs file of rlsched fit-revisit")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--split", action="store_true", help="each half on its own group of nodes")
    args = ap.parse_args(argv)
    shown = sys.argv[1:] if argv is None else argv
    print("$ python -m experiments.benchmarks.probe_switch " + shlex.join(shown), flush=True)
    rows = read_rows(args.rows)
    with multiprocessing.get_context("spawn").Pool(args.jobs, initializer=worker_init) as pool:
        got = pool.map(run, [(r["case"], r["seed"], args.split) for r in rows])
    ratio = [g["throughput"] / r["stay"] for g, r in zip(got, rows, strict=True)]
    best = [max(r["stay"], r["switch"][THEN]) / r["stay"] for r in rows]
    print(f"runs {len(rows)}, switched {sum(g['switched'] for g in got)}")
    print(f"probe then decide, over keeping: {math.exp(np.mean(np.log(ratio))):.4f}")
    print(f"best of keeping and switching to {THEN} at {AT} (oracle): {math.exp(np.mean(np.log(best))):.4f}")
    pairs = [(g["halves"][1] / g["halves"][0], r["switch"][THEN] / r["stay"])
             for g, r in zip(got, rows, strict=True) if g["halves"][0] > 0]  # fmt: skip
    gap = [p for p, _ in pairs]
    print(f"probe's half over the running pair's, mean latency at the decision: median {np.median(gap):.3f}, "
          f"range {min(gap):.3f}-{max(gap):.3f}")  # fmt: skip
    big = [p for p, gain in pairs if gain > 1.03]
    if big:
        print(f"... where switching gains > 3 % ({len(big)} runs): median {np.median(big):.3f}")
    switched = [x for x, g in zip(ratio, got, strict=True) if g["switched"]]
    if switched:
        gaining = sum(x > 1 for x in switched)
        print(f"on the switched runs: {math.exp(np.mean(np.log(switched))):.4f}, gaining {gaining}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

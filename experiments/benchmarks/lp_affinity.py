"""Would a selector that follows an allocation LP beat the greedy ones? (a probe, not a policy)

    python -m experiments.benchmarks.lp_affinity --scenarios gen-val11 \\
        --cases classes-19503,generations-19525 --seed 10001 [--placer iawp-pass]

Every selector rlsched ships is greedy: a task goes where its own estimated completion is soonest.
This probe's selector prices node groups with a fluid allocation LP instead: nodes grouped by
hardware; every ``EVERY`` decisions, a min-makespan LP (HiGHS) over the last ``WINDOW`` tasks'
estimated GPU and core seconds on each group, whose capacity duals price each group; a task goes
to the soonest-ETC node among the groups within ``slack`` of its lowest priced cost (and, with
``delta``, only where that node's ETC is at most ``1 + delta`` times the unrestricted choice's),
while the LP's makespan is over ``RHO`` of the window's arrival span. It reads what ``mct`` reads
(datasheets corrected by measured speeds), never ground truth. It is registered for this process
only, runs each case once per variant in the simulator and prints throughput (tasks/s) and mean
latency. BENCHMARKS.md, "A selector that follows an allocation LP", has what it found (it loses).
"""

from __future__ import annotations

import argparse
import functools
import shlex
import sys
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from experiments import inputs
from experiments.simulate import simulate
from rlsched.estimates import drain_estimates, memory_aware_estimates, node_estimates
from rlsched.metrics import RunMetrics
from rlsched.policies.registry import register_selector
from rlsched.policies.selectors import EtcSelector, masked_argmin
from rlsched.tasks import Task
from rlsched.view import ClusterView

#: Tasks the LP allocates (the latest), decisions between solves, least tasks before the first.
WINDOW, EVERY, FIRST = 256, 16, 32
#: The LP's makespan over the window's arrival span above which its prices are followed.
RHO = 0.8


class LpAffinitySelector(EtcSelector):
    """Greedy ETC restricted to the node groups an allocation LP prices lowest for the task.

    :param base: ``"mem"`` (``mct-mem``'s ETC) or ``"drain"`` (``mct-drain``'s).
    :param slack: groups within this share of the task's least priced cost are allowed.
    :param delta: fall back to the greedy choice when the allowed node's ETC is more than
        ``1 + delta`` times it (``None``: never).
    """

    name = "lp-affinity"

    def __init__(self, base: str = "mem", slack: float = 0.05, delta: float | None = None) -> None:
        super().__init__()
        self.base, self.slack, self.delta = base, slack, delta

    def reset(self, view: ClusterView, seed: int) -> None:
        super().reset(view, seed)
        self._hist: deque[tuple[float, np.ndarray, np.ndarray, np.ndarray]] = deque(maxlen=WINDOW)
        self._n, self._k = -1, 0
        self._price: tuple[np.ndarray, np.ndarray] | None = None

    def _group(self, view: ClusterView) -> None:
        key = np.stack(
            [
                view.n_gpus,
                view.node_tflops_mean.round(2),
                view.node_bw_mean.round(),
                view.cores,
                view.cpu_gflops.round(2),
            ],
            axis=1,
        )
        self._type = np.unique(key, axis=0, return_inverse=True)[1].ravel()
        self._nt, self._n = int(self._type.max()) + 1, view.n_nodes
        self._hist.clear()
        self._price = None

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        if view.n_nodes != self._n:
            self._group(view)
        etc = drain_estimates(task, view) if self.base == "drain" else memory_aware_estimates(task, view)[2]
        g1, c1, _ = node_estimates(task, view, parallel=False)  # device-seconds of the whole task
        nog = view.n_gpus == 0  # a node without GPUs runs GPU-capable work on its cores
        c1, g1 = np.where(nog, c1 + g1, c1), np.where(nog, 0.0, g1)
        t, live = self._type, mask & view.alive.astype(bool)
        cnt = np.bincount(t[live], minlength=self._nt)
        g = np.bincount(t[live], weights=g1[live], minlength=self._nt) / np.maximum(cnt, 1)
        c = np.bincount(t[live], weights=c1[live], minlength=self._nt) / np.maximum(cnt, 1)
        self._hist.append((task.arrival_s, g, c, cnt > 0))
        self._k += 1
        if self._k % EVERY == 0 and len(self._hist) >= FIRST:
            self._solve(view)
        best = masked_argmin(etc, mask)
        if self._price is None:
            return best
        p, q = self._price
        cost = p[t] * g1 + q[t] * c1
        pick = masked_argmin(etc, mask & (cost <= (1 + self.slack) * cost[mask].min() + 1e-12))
        if self.delta is not None and etc[pick] > (1 + self.delta) * etc[best]:
            return best
        return pick

    def _solve(self, view: ClusterView) -> None:
        """Min makespan ``T``: each windowed task split over the groups that can run it, each
        group's GPU and core seconds at most ``T`` times its GPUs and cores."""
        nt, t, alive = self._nt, self._type, view.alive.astype(bool)
        gpus = np.bincount(t[alive], weights=view.n_gpus[alive].astype(float), minlength=nt)
        cores = np.bincount(t[alive], weights=view.cores[alive].astype(float), minlength=nt)
        hist = list(self._hist)
        task_of, group, gv, cv = [], [], [], []
        for i, (_, g, c, ok) in enumerate(hist):
            for k in np.flatnonzero(ok):
                task_of.append(i)
                group.append(k)
                gv.append(g[k])
                cv.append(c[k])
        nv = len(group)
        if nv == 0:
            return
        var, grp = np.arange(nv), np.array(group)
        a_eq = coo_matrix((np.ones(nv), (np.array(task_of), var)), shape=(len(hist), nv + 1))
        rows = np.concatenate([grp, nt + grp, np.arange(2 * nt)])
        cols = np.concatenate([var, var, np.full(2 * nt, nv)])
        vals = np.concatenate([gv, cv, -gpus, -cores])
        a_ub = coo_matrix((vals, (rows, cols)), shape=(2 * nt, nv + 1))
        cost = np.zeros(nv + 1)
        cost[-1] = 1.0
        res = linprog(
            cost,
            A_ub=a_ub.tocsr(),
            b_ub=np.zeros(2 * nt),
            A_eq=a_eq.tocsr(),
            b_eq=np.ones(len(hist)),
            method="highs",
        )
        if res.status != 0:
            return
        if res.x[-1] < RHO * max(hist[-1][0] - hist[0][0], 1e-9):
            self._price = None  # the window's work fits its arrivals: nothing to allocate
            return
        dual = -res.ineqlin.marginals
        self._price = (np.maximum(dual[:nt], 0.0), np.maximum(dual[nt:], 0.0))


#: Variant name -> selector arguments.
VARIANTS: dict[str, dict[str, Any]] = {
    "lp": {},
    "lp-d10": {"delta": 0.1},
    "lp-d30": {"delta": 0.3},
    "lp-drain-d10": {"base": "drain", "delta": 0.1},
}


def _simulate(case: Path, spec: str, seed: int) -> RunMetrics:
    """What ``rlsched simulate --scenario CASE --scheduler SPEC --seed SEED`` runs, in this process
    (the probe's selectors are registered here only)."""
    return simulate(inputs.scenario(str(case), None), spec, seed)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", required=True, help="a folder of scenario files")
    ap.add_argument("--cases", required=True, help="comma-separated file names, without .toml")
    ap.add_argument("--seed", type=int, default=10001, help="run seed (default: the first validation seed)")
    ap.add_argument("--placer", default="iawp-pass")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"of {', '.join(VARIANTS)}")
    args = ap.parse_args(argv)
    print("# " + shlex.join(["python", "-m", "experiments.benchmarks.lp_affinity", *sys.argv[1:]]))
    variants = args.variants.split(",")
    for v in variants:
        register_selector(v, functools.partial(LpAffinitySelector, **VARIANTS[v]))
    pairs = [f"{s}+{args.placer}" for s in ("mct-mem", *variants, "mct-drain")]
    print("\nthroughput tasks/s (mean latency s)\n\n| case | " + " | ".join(pairs) + " |")
    print("|---" * (len(pairs) + 1) + "|")
    for name in args.cases.split(","):
        case = Path(args.scenarios) / f"{name}.toml"
        cells = [_simulate(case, p, args.seed) for p in pairs]
        row = " | ".join(f"{m.throughput:.1f} ({m.latency_mean_s:.2f})" for m in cells)
        print(f"| {name} | {row} |", flush=True)


if __name__ == "__main__":
    main()

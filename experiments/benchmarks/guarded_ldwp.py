"""Would LDWP lose less if it chose only among nodes its teacher's estimate finds near the best?
(a probe, not a policy)

    python -m experiments.benchmarks.guarded_ldwp --scenarios gen-val14 --first-seed 10001 \\
        --seeds 2 --guards g1.1,d1.5 --out val14-guard

:class:`GuardedLdwp` (``r``) lets the network choose only among feasible nodes whose memory-aware
estimated completion time (``mct-mem``'s, the estimate it was cloned from) is at most ``r`` times
the least (``gR``); ``dR`` reads ``mct-drain``'s estimate instead (GPU waits at the streams'
measured rates); ``g0`` is the shipped selector. Each guard runs ``ldwp+PLACER`` on every case of
the folder and seed, two processes at a time, and is written as an evaluation's ``results.json``
(rows of the same fields), one folder per guard (``OUT/g1.5/results.json``), so that
:mod:`experiments.benchmarks.against_best` reads it as a candidate beside a heuristic grid.
"""

from __future__ import annotations

import argparse
import functools
import json
import shlex
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from experiments import inputs
from experiments.simulate import simulate
from experiments.worker_pool import worker_init
from rlsched.estimates import drain_estimates, memory_aware_estimates
from rlsched.policies.ldwp import LdwpSelector
from rlsched.tasks import Task
from rlsched.view import ClusterView


class GuardedLdwp(LdwpSelector):
    """The shipped LDWP, choosing only among nodes whose estimated completion time is at most
    ``guard`` times the least.

    :param guard: the factor; 0 = every feasible node (the shipped selector).
    :param etc: the estimate read: ``"mem"`` (``mct-mem``'s, the teacher's) or ``"drain"``
        (``mct-drain``'s: GPU waits at the streams' measured rates).
    """

    def __init__(self, guard: float, etc: str) -> None:
        super().__init__()
        self.guard, self.etc = guard, etc

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        q = self.q_values(task, view, mask)
        if self.guard > 0.0:
            est = (
                drain_estimates(task, view) if self.etc == "drain" else memory_aware_estimates(task, view)[2]
            )
            etc = np.where(mask, est, np.inf)
            q = np.where(etc <= self.guard * etc.min(), q, -np.inf)
        return int(q.argmax())


def _run(case: str, placer: str, guard: str, seed: int) -> dict[str, Any]:
    """One run's row: ``ldwp+PLACER`` with the guard, as ``rlsched evaluate`` would name it."""
    from rlsched.policies import registry

    name = f"ldwp-{guard}"
    if name not in registry.SELECTORS:
        etc = "drain" if guard.startswith("d") else "mem"
        registry.register_selector(name, functools.partial(GuardedLdwp, float(guard[1:]), etc))
    m = simulate(inputs.scenario(case, None), f"{name}+{placer}", seed)
    return {
        "scenario": case,  # as evaluate names a folder's cases
        "scheduler": f"ldwp+{placer}",
        "seed": seed,
        "status": "ok",
        "throughput": m.throughput,
        "latency_mean_s": m.latency_mean_s,
        "guard": guard,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--scenarios", required=True, help="a folder of generated cases (cases.json), or built-in entries"
    )
    ap.add_argument("--first-seed", type=int, default=10001)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--guards", default="g1.1,g1.25,g1.5,g2", help="gR: mct-mem's ETC; dR: mct-drain's")
    ap.add_argument("--placer", default="iawp")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    print("# " + shlex.join(["python", "-m", "experiments.benchmarks.guarded_ldwp", *sys.argv[1:]]))
    folder = Path(args.scenarios)
    if (folder / "cases.json").is_file():
        index = json.loads((folder / "cases.json").read_text())
        cases = [str(folder / c["file"]) for c in index["cases"]]
    else:  # built-in entries, as evaluate takes them (large#3000)
        cases = args.scenarios.split(",")
    guards = args.guards.split(",")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    jobs = [(c, args.placer, g, s) for g in guards for c in cases for s in seeds]
    t0 = time.monotonic()
    ctx = get_context("spawn")
    with ProcessPoolExecutor(args.jobs, mp_context=ctx, initializer=worker_init) as pool:
        rows = list(pool.map(_run, *zip(*jobs, strict=True)))
    for g in guards:
        out = Path(args.out) / g
        out.mkdir(parents=True, exist_ok=True)
        mine = [r for r in rows if r["guard"] == g]
        (out / "results.json").write_text(json.dumps({"rows": mine}, indent=1))
    print(f"{len(rows)} runs in {time.monotonic() - t0:.0f} s; one folder per guard in {args.out}")


if __name__ == "__main__":
    main()

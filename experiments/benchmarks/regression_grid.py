"""Simulator regression grid: scheduler x scenario x seed, written as JSON and compared bit for bit.

A refactor that must not change what the simulator computes is checked by running this grid before
and after it::

    python -m experiments.benchmarks.regression_grid --out before.json
    # ... change the code ...
    python -m experiments.benchmarks.regression_grid --out after.json --compare before.json

``experiments/benchmarks/regression_reference.json`` is the committed reference: the grid as the
code computed it on 2026-12-05, after the shipped LDWP network became one trained on feature
version 4 (the heuristics' ETC, subtasks side by side). Against the reference before that change
(commit 40f6c63) only the ``ldwp`` and ``ldwp+iawp`` runs differ (36 of 276; 9 of the 46
full-size runs) and the Gym environment's digests (its observations are version 4 now); every
heuristic run is bit-identical. (The reference before that one, of the same day, differed from
its predecessor only in the ``mct`` and ``mct-mem`` runs: their ETC began to count a task's
subtasks running side by side. The reference before that one differed from issue 14's only by
the CPU-queue fix of the ``mct`` family and LDWP feature version 3 in the Gym observations.)

The reference is of the machine that made it. On another container (2026-12-07) the code of the
reference's own commit (41ecbb1) differed from it in 7 runs of ``paper@60`` and
``interference-saturated#1200`` alone (14 of the grid's 276 at 14448e2), every one a run through
torch: ``ldwp`` (its network's scores) and placers fitted by NCF (``iawp-rl``, ``iawp-cosine``,
``coloc-greedy``); torch's floating-point results depend on the CPU's instruction set. To check a
change, run the grid before and after it on one machine (``--out before.json`` in a worktree of
the old commit, ``--compare before.json`` in the new one).

Each run keeps every metric except wall-clock ones (and the ``clairvoyant`` label), and a
SHA-256 of its per-task latencies and completion times (``repr`` of each float, so one changed bit
in one task shows). The Gym environment is covered too: a fixed round-robin-over-feasible-nodes
policy, and a digest of every observation, reward and mask it saw. ``--compare`` exits 1 naming
each run that differs.

The grid covers every selector and placer of the BENCHMARKS tables on every built-in scenario the
simulator tables use, at capped task counts (``NAME#TASKS``) so that the whole grid runs in about
ten minutes on 2 cores; the capped runs execute the same code paths as the full ones.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

#: Scenario entries (``NAME[@RATE][#TASKS]``) and the schedulers each runs.
_BASE = (
    "random",
    "round-robin",
    "least-loaded",
    "pats",
    "mlsm+mlsm",
    "mlsm",
    "mct",
    "mct+mlsm",
    "mct+first-free",
    "mct+least-loaded",
    "mct-mem",
    "ldwp",
)
_STAGE2 = (
    "mct+iawp",
    "mct+iawp-pass",
    "mct+iawp-rl",
    "mct+iawp-cosine",
    "mct+coloc-greedy",
    "ldwp+iawp",
    "mct-mem+iawp",
)
GRID: dict[str, tuple[str, ...]] = {
    "paper@60": (*_BASE, "oracle", "ldwp+iawp", "mct+iawp"),
    "transfer-4": (*_BASE, "oracle", "ldwp+iawp"),
    "dynamic": (*_BASE, "oracle", "ldwp+iawp"),
    "transfer-32#1200": (*_BASE, "ldwp+iawp"),
    "interference#1500": (*_BASE, *_STAGE2),
    "interference-gavel#2000": ("mct", "mct+iawp", "mct+coloc-greedy"),
    "interference-saturated#1200": (*_BASE, *_STAGE2, "oracle"),
    "hetero-saturated#1200": (*_BASE, *_STAGE2),
    "priority-saturated#1200": ("mct", "mct+iawp", "mct+iawp-pass", "ldwp+iawp", "mct-mem"),
    "alibaba-dense#800": ("least-loaded", "mct", "mct-mem", "ldwp", "mct-mem+iawp", "oracle"),
    "alibaba#600": ("random", "least-loaded", "mct", "mct-mem", "ldwp"),
    "large#1500": ("random", "least-loaded", "mct", "mct-mem", "ldwp"),
}
SEEDS = (20000, 20001)
#: ``--full``: the BENCHMARKS tables' headline pairs on the full-size built-ins, one test seed
#: (about 10 minutes on 2 cores). The default grid covers more pairs on capped task counts.
_HEADLINE = ("mct", "mct-mem", "mct+iawp", "mct+iawp-pass", "ldwp+iawp")
FULL_GRID: dict[str, tuple[str, ...]] = {
    "paper@60": (*_HEADLINE, "oracle"),
    "dynamic": _HEADLINE,
    "transfer-4": _HEADLINE,
    "transfer-32": _HEADLINE,
    "interference": _HEADLINE,
    "interference-saturated": _HEADLINE,
    "hetero-saturated": _HEADLINE,
    "priority-saturated": _HEADLINE,
    "alibaba-dense": ("least-loaded", "mct", "mct-mem", "ldwp", "mct-mem+iawp"),
}
FULL_SEEDS = (20000,)
#: Gym env checks: (scenario, seed, steps).
GYM = (("paper", 0, 1500), ("interference-saturated#1200", 1, 1200), ("large#300", 2, 300))
_WALL = ("wall_s", "decisions_per_s")
#: Labels of a run rather than what the simulator computed (``clairvoyant``: the policy read the
#: ground truth; added after the reference was written, and fixed by the scheduler's name).
_LABELS = ("clairvoyant",)


def _digest(values: list[float]) -> str:
    return hashlib.sha256(",".join(repr(float(v)) for v in values).encode()).hexdigest()


def _key(scenario: str, scheduler: str, seed: int) -> str:
    return f"{scenario} | {scheduler} | {seed}"


def run_sim_grid(grid: dict[str, tuple[str, ...]], seeds: tuple[int, ...], jobs: int) -> dict[str, Any]:
    """Every (scenario, scheduler, seed) run's metrics without wall-clock fields, and digests."""
    from experiments.evaluation import Case, run_grid

    cases = [Case(sc, sched, seed) for sc, scheds in grid.items() for sched in scheds for seed in seeds]
    results, _ = run_grid(cases, [], jobs, progress=sys.stderr.isatty())
    out: dict[str, Any] = {}
    for r in results:
        entry: dict[str, Any] = {"status": r.status, "error": r.error}
        entry["metrics"] = {k: v for k, v in r.metrics.items() if k not in _WALL + _LABELS}
        entry["latencies_sha256"] = _digest(r.latencies)
        entry["done_sha256"] = _digest(r.done_s)
        out[_key(r.case.scenario, r.case.scheduler, r.case.seed)] = entry
    return out


def run_gym(entry: str, seed: int, steps: int) -> dict[str, Any]:
    """Digest of a fixed policy's trajectory through the stage-1 Gym environment."""
    from envs.gym_env import ClusterSchedulingEnv
    from experiments.evaluation import load_entry

    env = ClusterSchedulingEnv(load_entry(entry, None))
    h = hashlib.sha256()
    obs, _ = env.reset(seed=seed)
    total, nxt, episodes = 0.0, 0, 0
    for _ in range(steps):
        for k in sorted(obs):
            h.update(k.encode())
            h.update(np.ascontiguousarray(obs[k]).tobytes())
        mask = obs["mask"]
        a = nxt % len(mask)
        while not mask[a]:
            a = (a + 1) % len(mask)
        nxt = a + 1
        obs, reward, term, trunc, info = env.step(a)
        h.update(repr((float(reward), bool(term), bool(trunc), info.get("dt_s"))).encode())
        total += float(reward)
        if term or trunc:
            episodes += 1
            obs, _ = env.reset()
    return {"sha256": h.hexdigest(), "reward_sum": total, "episodes": episodes}


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Lines naming each run that is missing, extra or different (empty when identical)."""
    diffs = []
    for section in ("runs", "gym"):
        b, a = before.get(section, {}), after.get(section, {})
        for k in sorted(set(b) | set(a)):
            if k not in a:
                diffs.append(f"{section}: {k}: missing after")
            elif k not in b:
                diffs.append(f"{section}: {k}: new (not in the reference)")
            elif a[k] != b[k]:
                fields = sorted(f for f in set(a[k]) | set(b[k]) if a[k].get(f) != b[k].get(f))
                detail = ", ".join(f"{f}: {b[k].get(f)!r} -> {a[k].get(f)!r}" for f in fields)
                diffs.append(f"{section}: {k}: {detail}")
    return diffs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="JSON file to write")
    p.add_argument("--compare", type=Path, help="reference JSON: exit 1 naming every difference")
    p.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), help="worker processes")
    p.add_argument("--only", help="comma-separated scenario entries of the grid to run (default: all)")
    p.add_argument("--full", action="store_true", help="the full-size headline grid instead (no Gym part)")
    args = p.parse_args(argv)
    print(f"# command: python -m experiments.benchmarks.regression_grid {' '.join(sys.argv[1:])}")
    print(f"# machine: {platform.machine()}, python {platform.python_version()}, jobs {args.jobs}")
    grid, seeds = (FULL_GRID, FULL_SEEDS) if args.full else (GRID, SEEDS)
    if args.only:
        wanted = args.only.split(",")
        unknown = [w for w in wanted if w not in grid]
        if unknown:
            p.error(f"--only: not in the grid: {', '.join(unknown)}; known: {', '.join(grid)}")
        grid = {k: grid[k] for k in wanted}
    t0 = time.perf_counter()
    result = {
        "runs": run_sim_grid(grid, seeds, args.jobs),
        "gym": {
            f"{e} | seed {s} | {n} steps": run_gym(e, s, n) for e, s, n in GYM if not (args.only or args.full)
        },
    }
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    failed = [k for k, v in result["runs"].items() if v["status"] != "ok"]
    print(
        f"{len(result['runs'])} runs ({len(failed)} not ok), {len(result['gym'])} env trajectories, "
        f"{time.perf_counter() - t0:.0f} s -> {args.out}"
    )
    for k in failed:
        print(f"  not ok: {k}: {result['runs'][k]['error']}")
    if args.compare is None:
        return 0
    ref = json.loads(args.compare.read_text())
    if args.only or args.full:
        keep = {k: v for k, v in ref["runs"].items() if k.split(" | ")[0] in grid}
        ref = {"runs": keep, "gym": {}}
    diffs = compare(ref, result)
    for line in diffs:
        print(f"DIFFERS {line}")
    print("identical to the reference" if not diffs else f"{len(diffs)} differences from {args.compare}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())

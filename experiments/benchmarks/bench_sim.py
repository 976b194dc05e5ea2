"""Simulator and environment benchmarks (a script, not a test).

Prints: wall time of the ``paper`` scenario with ``mct``; Gym env steps per second with a trivial
policy (next feasible node, round-robin) at 11 and 1,024 nodes, both for the sealed env an RL
library holds (its simulator in a worker process, ``envs.env_worker``) and for the same env logic
in-process (``rlsched.scheduling_env.SchedulingEnv`` over the simulated worlds: the trusted side,
what the process boundary costs is the difference); and, with ``--table``, the baselines on
``paper`` at 60 tasks/min as mean ± std over seeds.

    python -m experiments.benchmarks.bench_sim [--table] [--seeds 5]

Pin to one core for the single-core figures: ``taskset -c 0 python -m ...``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import gymnasium as gym
import numpy as np

from envs.gym_env import ClusterSchedulingEnv
from envs.simulated_worlds import SimulatedWorlds
from experiments.simulate import compare, format_table, simulate
from rlsched.scenarios.loader import load_scenario
from rlsched.scheduling_env import SchedulingEnv

TABLE_SCHEDULERS = (
    "random+speedup",
    "round-robin+speedup",
    "least-loaded+speedup",
    "pats+speedup",
    "mlsm+mlsm",
    "mlsm+speedup",
    "mct+speedup",
    "mct+mlsm",
    "mct+first-free",
    "oracle+speedup",
)


def bench_paper_mct(repeats: int = 3) -> list[float]:
    """Wall seconds of full ``paper`` runs with ``mct`` (task generation included)."""
    sc = load_scenario("paper")
    out = []
    for seed in range(repeats):
        t0 = time.perf_counter()
        m = simulate(sc, "mct", seed)
        out.append(time.perf_counter() - t0)
        assert m.tasks_lost == 0
    return out


def in_process_env(scenario: str) -> SchedulingEnv:
    """The simulated env's logic without the process boundary (never handed to an RL library)."""
    return SchedulingEnv(SimulatedWorlds([load_scenario(scenario)], "speedup", None))


def bench_env(scenario: str, steps: int, sealed: bool = True) -> float:
    """Env steps per second with a round-robin-over-feasible-nodes policy (resets included).

    :param scenario: a built-in scenario name.
    :param steps: steps to time.
    :param sealed: the env an RL library gets (``False``: its logic in-process).
    """
    env: gym.Env = ClusterSchedulingEnv(scenario) if sealed else in_process_env(scenario)
    obs, _ = env.reset(seed=0)
    n_nodes = len(obs["mask"])
    nxt = 0
    t0 = time.perf_counter()
    for _ in range(steps):
        mask = obs["mask"]
        a = nxt % n_nodes
        while not mask[a]:
            a = (a + 1) % n_nodes
        nxt = a + 1
        obs, _, term, _, _ = env.step(a)
        if term:
            obs, _ = env.reset()
    rate = steps / (time.perf_counter() - t0)
    env.close()
    return rate


def bench_step_breakdown(steps: int = 1400, repeats: int = 3) -> tuple[float, float]:
    """Steps/s on ``paper`` with and without building observations (no resets; median of repeats),
    in-process (the observation is built on the simulator's side of the sealed env).

    The difference is the cost of the observation; the rest is the simulator and the env.
    """
    env = in_process_env("paper")
    real_obs = env._obs

    def rate(with_obs: bool) -> float:
        env._obs = real_obs if with_obs else (lambda: {"mask": env._mask.astype(np.int8)})  # type: ignore[method-assign]
        out = []
        for rep in range(repeats):
            obs, _ = env.reset(seed=rep)
            nxt = 0
            t0 = time.perf_counter()
            for _ in range(steps):
                mask, a = obs["mask"], nxt % len(obs["mask"])
                while not mask[a]:
                    a = (a + 1) % len(mask)
                nxt = a + 1
                obs, *_ = env.step(a)
            out.append(steps / (time.perf_counter() - t0))
        return sorted(out)[len(out) // 2]

    return rate(True), rate(False)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", action="store_true", help="also run the baseline table on paper at 60/min")
    p.add_argument(
        "--seeds", type=int, default=5, help="seeds of --table (the wall-time line runs its own 3)"
    )
    p.add_argument(
        "--steps", type=int, default=6000, help="env steps at 11 nodes (1,024 nodes: a third, at least 500)"
    )
    args = p.parse_args()
    print(f"# command: python -m experiments.benchmarks.bench_sim {' '.join(sys.argv[1:])}")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    cpu = platform.processor() or platform.machine()
    print(f"# machine: {cpu}, python {platform.python_version()}, usable cpus {cpus}")
    walls = bench_paper_mct()
    print(f"paper + mct, 1,500 tasks: {np.mean(walls):.3f} s wall (min {min(walls):.3f}, {len(walls)} seeds)")
    for name, steps in (("paper", args.steps), ("large", max(args.steps // 3, 500))):
        sealed, inside = bench_env(name, steps), bench_env(name, steps, sealed=False)
        print(
            f"env steps/s, {name}: {sealed:,.0f} sealed (simulator in a worker process), {inside:,.0f} "
            f"in-process ({steps} steps, round-robin over feasible nodes)"
        )
    with_obs, without = bench_step_breakdown()
    per_obs = 1e6 / with_obs - 1e6 / without
    print(
        f"paper, 1,400 steps without resets: {with_obs:,.0f} steps/s; {without:,.0f} without building "
        f"observations (simulator + env {1e6 / without:.0f} us/step, observation {per_obs:.0f} us/step)"
    )
    if args.table:
        sc = load_scenario("paper", rate_per_min=60)
        cmp = compare(sc, TABLE_SCHEDULERS, list(range(args.seeds)))
        print(f"\n## paper at 60 tasks/min, {args.seeds} seeds\n")
        print(format_table(cmp))


if __name__ == "__main__":
    main()

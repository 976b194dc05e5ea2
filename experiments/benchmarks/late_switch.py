"""What a late switch to another pair recovers (a script, not a test).

``auto`` decides once, after its first tasks. Where it chose wrong, could a second decision later
in the run still help, or has the first pair done the damage by then (work concentrated on a few
nodes, queues built)? This runs pair ``FIRST`` for the first W tasks and pair ``THEN`` after (through
``auto``'s own switchboard, with a stand-in recogniser that always answers ``THEN``: an oracle for
the decision, not a scheduler), and prints its throughput over that of ``THEN`` from the start.

    python -m experiments.benchmarks.late_switch --case gen-val/arrivals-10019.toml \\
        --first mct-drain+iawp-pass --then mlsm+iawp-pass --windows 50,100,200 --seeds 10001,10002
"""

from __future__ import annotations

import argparse
import functools
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.simulator import Simulator
from experiments.evaluation import load_entry
from rlsched.policies.auto import build_auto
from rlsched.policies.recogniser import Choice
from rlsched.policies.registry import make_placer, make_selector, parse_scheduler
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed
from rlsched.scheduler import TwoStageScheduler


@dataclass
class AlwaysThen:
    """A stand-in recogniser: runs ``default`` for ``window`` tasks, then always answers ``then``."""

    default: str
    then: str
    window: int

    @property
    def candidates(self) -> list[str]:
        return list(dict.fromkeys((self.default, self.then)))

    def choose(self, x: np.ndarray) -> Choice:
        return Choice(self.then, {}, ())


def _switching(rec: Any) -> TwoStageScheduler:
    """``auto`` over the stand-in recogniser ``rec`` (duck-typed: candidates, default, window, choose)."""
    return build_auto(rec, make_selector, make_placer)


def mean_throughput(case: str, seeds: list[int], make: Callable[[], TwoStageScheduler]) -> float:
    """Mean throughput (tasks/s) of the scheduler ``make`` builds on ``case`` over ``seeds``."""
    out = []
    for seed in seeds:
        sc = scenario_for_seed(load_entry(case, None), seed)
        sched = make()
        out.append(Simulator(sc, generate_tasks(sc, seed), sched.placer, seed=seed).run(sched).throughput)
    return float(np.mean(out))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", required=True, help="scenario file or built-in")
    ap.add_argument("--first", required=True, help="the pair run first")
    ap.add_argument("--then", required=True, help="the pair switched to")
    ap.add_argument("--windows", default="50,100,200", help="tasks before the switch")
    ap.add_argument("--seeds", default="10001,10002", help="validation seeds")
    args = ap.parse_args(argv)
    print(
        "$ python -m experiments.benchmarks.late_switch " + shlex.join(sys.argv[1:] if argv is None else argv)
    )
    seeds = [int(s) for s in args.seeds.split(",")]
    ref = mean_throughput(args.case, seeds, lambda: parse_scheduler(args.then))
    first = mean_throughput(args.case, seeds, lambda: parse_scheduler(args.first))
    cells = [f"{args.then} alone {ref:.3f} tasks/s", f"{args.first} alone {first / ref:.3f}x"]
    for w in (int(x) for x in args.windows.split(",")):
        rec = AlwaysThen(args.first, args.then, w)
        got = mean_throughput(args.case, seeds, functools.partial(_switching, rec))
        cells.append(f"switch after {w}: {got / ref:.3f}x")
    print(f"{args.case}: " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

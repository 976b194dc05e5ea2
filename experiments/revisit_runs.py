"""Runs that teach ``auto``'s second decision: what switching after ``at`` arrivals gives.

For each case and seed it runs ``auto`` (a recogniser's first decision) with a second decision
that only watches and keeps the running pair (the "stay" run), and records the run's features at
the ``at``-th arrival (:mod:`rlsched.policies.run_features`) and the pair running then; then, for
each target pair, the same run switching to it there. Runs are deterministic (the same case,
seed and pair give the same figures), so the stay run's first ``at`` arrivals are those of every
switch. One row per (case, seed): what a :class:`~rlsched.policies.revisit.Revisit` is fitted
from (training seeds) or judged on (validation seeds).
"""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from envs.simulator import Simulator
from experiments.evaluation import load_entry
from experiments.worker_pool import worker_init
from rlsched.policies.auto import build_auto
from rlsched.policies.names import REVISIT_AT, REVISIT_TARGETS
from rlsched.policies.recogniser import load_recogniser
from rlsched.policies.registry import make_placer, make_selector
from rlsched.policies.revisit import SecondChoice
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed

#: Arrivals before the second decision and the pairs it may switch to, by default.
AT, TARGETS = REVISIT_AT, REVISIT_TARGETS


@dataclass
class Fixed:
    """A second decision that switches to ``then`` (``None``: keeps the running pair) and
    records what it was shown."""

    at: int
    then: str | None
    targets: tuple[str, ...] = TARGETS
    seen: list[tuple[str, tuple[float, ...]]] = field(default_factory=list)

    def decide(self, x: np.ndarray, running: str) -> SecondChoice:
        feats = tuple(float(v) for v in x)
        self.seen.append((running, feats))
        return SecondChoice(self.then or running, running, {}, feats)


@dataclass(frozen=True)
class Job:
    """One (case, seed) to run.

    :param case: scenario file or built-in.
    :param seed: the run's seed.
    :param at: arrivals before the second decision.
    :param targets: pairs to switch to.
    :param recogniser: the first decision's folder (``None``: the shipped one).
    """

    case: str
    seed: int
    at: int = AT
    targets: tuple[str, ...] = TARGETS
    recogniser: str | None = None


def _throughput(job: Job, second: Fixed) -> float:
    sc = scenario_for_seed(load_entry(job.case, None), job.seed)
    sched = build_auto(load_recogniser(job.recogniser), make_selector, make_placer, second)
    return float(
        Simulator(sc, generate_tasks(sc, job.seed), sched.placer, seed=job.seed).run(sched).throughput
    )


def row(job: Job) -> dict[str, Any] | None:
    """The stay run and every switch of one (case, seed); ``None`` when fewer than ``at`` tasks
    arrive (no second decision to learn)."""
    watch = Fixed(job.at, None, job.targets)
    stay = _throughput(job, watch)
    if not watch.seen:
        return None
    running, feats = watch.seen[0]
    switch = {
        t: stay if t == running else _throughput(job, Fixed(job.at, t, job.targets)) for t in job.targets
    }
    return {"case": job.case, "seed": job.seed, "running": running, "features": list(feats),
            "stay": stay, "switch": switch}  # fmt: skip


def collect(
    jobs: list[Job], out: Path, workers: int = 1, progress: Callable[[int, int], None] | None = None
) -> list[dict[str, Any]]:
    """Run ``jobs`` (``workers`` processes) and write their rows to ``out``, one JSON line each,
    as they finish (an interrupted collection keeps what it has); the rows, in job order."""
    rows: list[dict[str, Any]] = []
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        results: Iterable[dict[str, Any] | None]
        # Spawned with one thread each, as `evaluate`'s workers (a fork of a process that started
        # torch's or BLAS's thread pools can deadlock).
        ctx = multiprocessing.get_context("spawn")
        pool = ctx.Pool(workers, initializer=worker_init) if workers > 1 else None
        try:
            results = pool.imap(row, jobs) if pool is not None else map(row, jobs)
            for i, r in enumerate(results, 1):
                if r is not None:
                    rows.append(r)
                    f.write(json.dumps(r) + "\n")
                    f.flush()
                if progress is not None:
                    progress(i, len(jobs))
        finally:
            if pool is not None:
                pool.terminate()
    return rows

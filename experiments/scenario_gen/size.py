"""Sizing a generated run to its fleet: as many tasks as make the run many times longer than one
task's stay, so that a queue can build and a steady state be reached at the offered load (not a
single wave of tasks that the fleet swallows at once).

By Little's law the fleet holds ``capacity x latency`` tasks at once when it runs at capacity
(:func:`envs.capacity.capacity_bound`: tasks per second, and the mean of the tasks' latency lower
bounds). A run gets :data:`RUN_LENGTH` times that, within its family's bounds and at most
:data:`MAX_SUBTASKS` subtasks (so that a run of one pair on one seed takes a few seconds). The
latency bound is optimistic (the fastest unit, no contention), so the true ratio is lower; the
fleets' shapes (``fleet.MAX_SLOTS``) keep it from falling far.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from envs.capacity import capacity_bound
from rlsched.scenarios.spec import Scenario
from rlsched.scenarios.taskgen import generate_tasks

from .load import compress

#: Tasks per task the fleet holds at once at capacity.
RUN_LENGTH = (10.0, 20.0)
#: Most subtasks in a run: a run's cost grows with its subtasks (a video task has five to seven,
#: a kernel one to three), and faster than linearly once a queue builds (placers retry queued
#: subtasks as GPUs free up).
MAX_SUBTASKS = 3000


def sized(
    rng: np.random.Generator, sc: Scenario, bounds: tuple[int, int], write: Callable[[Scenario], Scenario]
) -> Scenario:
    """``sc`` with its task count set to the fleet (within ``bounds``), its times stretched alike
    so that churn, bursts and drift keep their places in the run.

    :param rng: the case's random source (draws the run length).
    :param sc: the scenario as its family drew it.
    :param bounds: least and most tasks.
    :param write: writes a scenario file and returns it loaded back.
    """
    loaded = write(sc)
    tasks = generate_tasks(loaded)
    b = capacity_bound(loaded, tasks, latency=True)
    held = b.capacity_per_min / 60.0 * b.latency_lb_mean_s
    want = round(held * float(rng.uniform(*RUN_LENGTH)))
    per_task = sum(len(t.graph.subtasks) for t in tasks) / len(tasks)
    n = min(max(want, bounds[0]), bounds[1], int(MAX_SUBTASKS / per_task))
    wl = dataclasses.replace(sc.workload, tasks=n)
    return compress(dataclasses.replace(sc, workload=wl), sc.workload.tasks / n)

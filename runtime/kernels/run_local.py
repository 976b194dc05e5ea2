"""Run a task's stages one after another on NumPy in this thread: the reference result."""

from __future__ import annotations

import time

import numpy as np

from runtime.kernels.pipelines import stage_plan
from runtime.kernels.task_data import TaskData


def run_task_numpy(task: TaskData, timings: list[float] | None = None) -> dict[str, np.ndarray]:
    """All of a task's arrays (inputs and every stage's outputs) after running its stages in DAG
    order with ``xp = numpy``.

    :param task: the task.
    :param timings: if given, the wall time of each stage, s, is appended to it.
    :raises AssertionError: when a kernel returns other names than its stage plan says.
    """
    data: dict[str, np.ndarray] = dict(task.inputs)
    for plan in stage_plan(task.app):
        t0 = time.perf_counter()
        out = plan.spec.fn(np, {name: data[name] for name in plan.reads}, plan.params)
        if timings is not None:
            timings.append(time.perf_counter() - t0)
        if set(out) != set(plan.writes):
            raise AssertionError(
                f"{task.app} stage {plan.index}: wrote {sorted(out)}, its plan says {plan.writes}"
            )
        data.update(out)
    return data

"""Live workloads: tasks of several streams with real data, arriving in wall-clock time.

A live task is a :class:`~rlsched.tasks.Task` (what schedulers see: app, input size, the app's
subtask DAG with nominal costs from ``rlsched.workloads``) plus its
:class:`~runtime.kernels.TaskData` (the arrays the kernels compute on). The DAG's per-subtask
memory is *measured*: the bytes a stage reads on the reference run of the same app and size plus,
for a kind that may run on a GPU, what its kernel allocates while it runs (temporaries and
outputs; :mod:`runtime.kernels.working_memory`) — what a profiler would report as its peak, and
what placers must find room for; not the nominal model of the simulator, whose fixed parts
(framework state, model weights of real networks) our small kernels do not have.
"""

from __future__ import annotations

import functools

import numpy as np

from rlsched.tasks import Device, Subtask, SubtaskGraph, Task
from rlsched.workloads import KINDS, build_graph
from runtime.cluster.workload_spec import VIDEO_APPS, LiveWorkload
from runtime.kernels import TaskData, make_task_data, run_task_numpy, stage_plan
from runtime.kernels.working_memory import working_bytes

MIB = float(1 << 20)
__all__ = ["VIDEO_APPS", "LiveWorkload", "build_work", "input_id", "live_task", "stage_mem_mb", "stream_apps"]


def input_id(task_id: int, data: TaskData, name: str) -> str:
    """The cache key of a task input: its data id, or one unique to the task."""
    return data.input_ids.get(name) or f"task{task_id}/{name}"


@functools.cache
def stage_mem_mb(app: str, scale: str) -> tuple[float, ...]:
    """Measured MB each stage of ``app`` takes at its peak (reference run of chunk 0): what it
    reads, plus its kernel's working memory where it may run on a GPU (else what it writes)."""
    data = make_task_data(app, 0, 0, seed=0, scale=scale)
    out = run_task_numpy(data)
    every: dict[str, np.ndarray] = {**data.inputs, **out}
    mems = []
    for plan in stage_plan(app):
        reads = sum(int(np.asarray(every[n]).nbytes) for n in set(plan.reads) if n in every)
        if KINDS[plan.spec.kind].device is Device.CPU:
            extra = sum(int(np.asarray(every[n]).nbytes) for n in set(plan.writes) if n in every)
        else:
            extra = working_bytes(plan.spec.kind, reads)
        mems.append((reads + extra) / MIB)
    return tuple(mems)


def live_task(task_id: int, data: TaskData, arrival_s: float, scale: str = "small") -> Task:
    """The scheduler's view of a live task: nominal DAG costs, measured memory."""
    nominal = build_graph(data.app, data.input_mb)
    mems = stage_mem_mb(data.app, scale)
    subs = tuple(
        Subtask(s.index, s.kind, s.gflop, s.gbytes, max(mems[s.index], 0.01), s.parents)
        for s in nominal.subtasks
    )
    host_mb = sum(int(a.nbytes) for a in data.inputs.values()) / MIB
    return Task(task_id, data.app, data.input_mb, arrival_s, SubtaskGraph(subs), host_mem_mb=host_mb)


def stream_apps(w: LiveWorkload) -> list[str]:
    """The app of each stream (largest-remainder split of streams by weight)."""
    names = sorted(w.apps)
    total = sum(w.apps.values())
    share = [w.streams * w.apps[a] / total for a in names]
    counts = [max(int(s), 0) for s in share]
    for i in np.argsort([c - s for c, s in zip(counts, share, strict=True)])[: w.streams - sum(counts)]:
        counts[int(i)] += 1
    return [a for a, c in zip(names, counts, strict=True) for _ in range(c)]


def build_work(w: LiveWorkload) -> list[tuple[Task, TaskData]]:
    """Tasks with their data, ids dense from 0 in arrival order."""
    rng = np.random.default_rng(np.random.SeedSequence([w.seed, 0x11FE]))
    apps = stream_apps(w)
    gaps = rng.exponential(1.0 / w.rate_per_s, size=w.tasks)
    arrivals = np.cumsum(gaps) - gaps[0] if w.tasks else gaps
    chunk = [0] * w.streams
    out = []
    for i in range(w.tasks):
        s = int(rng.integers(w.streams))
        data = make_task_data(apps[s], s, chunk[s], seed=w.seed, scale=w.scale)
        chunk[s] += 1
        out.append((live_task(i, data, float(arrivals[i]), w.scale), data))
    return out

"""Generating the tasks of a scenario's workload.

Each random aspect (which app, input size, arrival time) draws from its own child of
``numpy.random.SeedSequence(seed)``, so changing one aspect of a scenario — say the arrival rate —
leaves the others' draws unchanged, and comparisons between scenarios stay paired.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from rlsched.scenarios.arrivals import arrival_times
from rlsched.scenarios.spec import Scenario, TaskClass, WorkloadSpec
from rlsched.tasks import Task
from rlsched.workloads import PAPER_APPS, build_graph, default_input_mb, is_known_app

#: Host memory a task holds besides twice its input (decode buffers, results), MB.
HOST_MEM_BASE_MB = 256.0


def scenario_for_seed(scenario: Scenario, seed: int) -> Scenario:
    """``scenario`` as run with ``seed``: on a trace scenario the seed draws the node sample.

    Generated clusters are fixed by the file, so other scenarios come back unchanged; so does a
    trace scenario that takes every node. Node groups a trace scenario adds stay as they are.
    Run a seed's tasks (:func:`generate_tasks`) on the scenario this returns for the same seed.

    :param scenario: the loaded scenario (its cluster drawn with ``scenario.seed``).
    :param seed: the run's seed.
    """
    ali = scenario.workload.alibaba
    if ali is None or ali.nodes == 0 or seed == scenario.seed:
        return scenario
    from rlsched.scenarios.traces import alibaba_cluster  # lazy, as in generate_tasks

    sample = alibaba_cluster(ali, seed)
    added = scenario.cluster.nodes[ali.nodes :]  # the file's own node groups follow the sample
    cluster = replace(sample, nodes=sample.nodes + added, name=scenario.cluster.name)
    return replace(scenario, cluster=cluster, seed=seed)


def generate_tasks(scenario: Scenario, seed: int | None = None) -> list[Task]:
    """The tasks of ``scenario``'s workload, with dense ids 0..n-1 in arrival order.

    With ``workload.alibaba`` set, tasks come from the Alibaba trace (``rlsched.scenarios.traces``): the
    seed draws which window of the trace is replayed.
    Otherwise apps are drawn by their shares (the paper's three video apps in equal shares when
    none are given), input sizes uniformly from ``workload.input_mb`` or each app's default range,
    arrival times from the arrival process; tenants are assigned round-robin.

    :param scenario: the scenario.
    :param seed: random seed; ``None`` uses ``scenario.seed``. Same scenario and seed give
        identical tasks.
    :raises ValueError: naming the app for unknown apps or invalid shares or sizes.
    """
    wl = scenario.workload
    seed = scenario.seed if seed is None else seed
    if wl.alibaba is not None:
        from rlsched.scenarios.traces import alibaba_tasks  # lazy: trace parsing is only needed for traces

        return alibaba_tasks(wl.alibaba, wl.tasks, seed)
    n = wl.tasks
    if n < 0:
        raise ValueError(f"workload.tasks must be >= 0, got {n}")
    apps, probs = _app_shares(wl)
    # A fourth stream for classes: the first three are the same with or without it, so adding
    # classes to a workload changes no task's app, size or arrival.
    app_rng, size_rng, arrival_rng, class_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4)
    )
    app_idx = app_rng.choice(len(apps), size=n, p=probs)
    sizes = _input_sizes(wl, apps, app_idx, size_rng)
    arrivals = arrival_times(wl.arrival, n, arrival_rng)
    classes = _class_of(wl, n, class_rng)
    return [
        _task(i, apps[a], x, t, wl, c)
        for i, (a, x, t, c) in enumerate(zip(app_idx, sizes, arrivals.tolist(), classes, strict=True))
    ]


def _class_of(wl: WorkloadSpec, n: int, rng: np.random.Generator) -> list[TaskClass | None]:
    """Each task's class, drawn by share (``None`` for every task without classes)."""
    if not wl.classes:
        return [None] * n
    w = np.array([c.share for c in wl.classes], dtype=np.float64)
    return [wl.classes[i] for i in rng.choice(len(w), size=n, p=w / w.sum())]


def _app_shares(wl: WorkloadSpec) -> tuple[list[str], np.ndarray]:
    shares = wl.apps or dict.fromkeys(PAPER_APPS, 1.0)
    apps = list(shares)
    for a in apps:
        if not is_known_app(a):
            raise ValueError(f"workload.apps: unknown app {a!r}")
        if not (shares[a] >= 0 and np.isfinite(shares[a])):
            raise ValueError(f"workload.apps.{a}: share must be >= 0 and finite, got {shares[a]}")
    w = np.array([shares[a] for a in apps], dtype=np.float64)
    if w.sum() <= 0:
        raise ValueError("workload.apps: shares must not all be 0")
    return apps, w / w.sum()


def _input_sizes(
    wl: WorkloadSpec, apps: list[str], app_idx: np.ndarray, rng: np.random.Generator
) -> list[float]:
    # One uniform per task whatever the ranges, so changing a range rescales sizes but keeps pairing.
    u = rng.random(len(app_idx))
    ranges = np.array([wl.input_mb or default_input_mb(a) for a in apps], dtype=np.float64)
    lo, hi = ranges[:, 0], ranges[:, 1]
    if not (np.all(lo > 0) and np.all(lo <= hi) and np.isfinite(hi).all()):
        raise ValueError(f"workload.input_mb must satisfy 0 < low <= high, got {wl.input_mb}")
    return (lo[app_idx] + u * (hi - lo)[app_idx]).tolist()


def _task(
    i: int, app: str, input_mb: float, arrival_s: float, wl: WorkloadSpec, cls: TaskClass | None
) -> Task:
    deadline = wl.deadline_s if cls is None else cls.deadline_s
    return Task(
        id=i,
        app=app,
        input_mb=input_mb,
        arrival_s=arrival_s,
        graph=build_graph(app, input_mb),
        tenant=wl.tenants[i % len(wl.tenants)] if wl.tenants else "default",
        deadline_s=None if deadline is None else arrival_s + deadline,
        priority=0 if cls is None else cls.priority,
        host_mem_mb=2.0 * input_mb + HOST_MEM_BASE_MB,
    )

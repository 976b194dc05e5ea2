"""The scenario families: each a function ``(rng, case seed) -> Draft`` that draws one case.

Together they vary what the held-out results (``HELD-OUT.md``) show matters: fleet size (3 to
1,000 nodes), the mix of GPU generations (old ones with few co-location profiles included) and
CPU-only nodes, streams per GPU, the share of multi-GPU tasks, the app and kernel mix, the
arrival process (Poisson, bursts and lulls, trace resampling), churn and speed drift, priority
classes and deadlines, and measured co-location. The offered load is not theirs to set: a family
writes arrivals at a nominal pace (:data:`BASE_RATE_PER_MIN`, every other time a share of the
expected span), and :mod:`experiments.scenario_gen.load` compresses time to the target load.

Families in :data:`TEST_ONLY` are held out: training and validation never see them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from rlsched.cluster import ClusterSpec, NodeSpec
from rlsched.interference.measurements import read_colocation_csv
from rlsched.scenarios import traces
from rlsched.scenarios.data_paths import find_data_dir
from rlsched.scenarios.spec import (
    AlibabaSpec,
    ArrivalSpec,
    DriftSpec,
    InterferenceSpec,
    Scenario,
    WorkloadSpec,
)
from rlsched.workloads import COLO_PREFIX

from . import fleet, trace_data
from . import workload as wk

#: The folder of a set, relative to it, where cases write the data files they name.
DATA_DIR = "data"

#: Nominal arrival rate a family writes (tasks/min); the load step rescales it.
BASE_RATE_PER_MIN = 60.0


@dataclass(frozen=True)
class Draft:
    """One case as a family draws it.

    :param scenario: the scenario; a file of :attr:`data` is named by its path relative to the
        set's folder (``data/...``), a shipped file by its absolute path.
    :param data: files the scenario names: path relative to the set's folder -> text.
    :param tasks: least and most tasks the run may be given (:mod:`experiments.scenario_gen.size`
        sizes it to the fleet); ``None``: the drawn count stays.
    """

    scenario: Scenario
    data: dict[str, str] = field(default_factory=dict)
    tasks: tuple[int, int] | None = None


@dataclass(frozen=True)
class Family:
    """A family of generated scenarios.

    :param name: what ``--family`` takes.
    :param make: draws one case from the case's random source and seed.
    :param test_only: held out: only test seeds (or ad-hoc ones past them) may generate it.
    """

    name: str
    make: Callable[[np.random.Generator, int], Draft]
    test_only: bool


def _span(tasks: int) -> float:
    """Expected span of arrivals at the nominal rate, seconds."""
    return tasks / BASE_RATE_PER_MIN * 60.0


def _scenario(
    family: str,
    seed: int,
    nodes: list[NodeSpec],
    wl: WorkloadSpec,
    description: str,
    drift: DriftSpec | None = None,
    interference: InterferenceSpec | None = None,
) -> Scenario:
    name = f"{family}-{seed}"
    return Scenario(
        name=name,
        cluster=ClusterSpec(nodes=tuple(nodes), name=name),
        workload=wl,
        drift=drift or DriftSpec(),
        interference=interference or InterferenceSpec(),
        seed=seed,
        description=description,
    )


def _models_text(nodes: list[NodeSpec]) -> str:
    gpus = sorted({g.name for n in nodes for g in n.gpus})
    cpu = sum(1 for n in nodes if not n.gpus)
    return ", ".join(gpus) + (f" + {cpu} CPU-only" if cpu else "")


# --- generations ------------------------------------------------------------------------------

#: Nodes of a ``generations`` case.
GEN_NODES = (3, 40)
#: GPU models in a ``generations`` fleet.
GEN_MODELS = (2, 7)
#: Streams per GPU (1 to 8).
STREAMS = (1, 8)
#: Share of CPU-only nodes, when a fleet has any.
CPU_ONLY_SHARE = (0.05, 0.2)
#: Least and most tasks of a ``generations`` case (sized to the fleet by :mod:`.size`).
GEN_TASKS = (400, 1500)


def generations(rng: np.random.Generator, seed: int) -> Draft:
    """Mixed GPU generations: 3 to 40 nodes of 2 to 7 catalog models (K80, P4 and P100 twice as
    likely as each newer one), 1 to 8 streams per GPU and 1 to 8 GPUs per node (fewer on big
    fleets: ``fleet.MAX_SLOTS``), CPU-only nodes in two cases of five; a mix of compute-bound,
    memory-bound and mixed kernels (matmul, fft, kmeans), a video app in some, input sizes drawn;
    Poisson arrivals, light drift in some.
    """
    nodes_n = int(rng.integers(GEN_NODES[0], GEN_NODES[1] + 1))
    k = int(rng.integers(GEN_MODELS[0], min(GEN_MODELS[1], nodes_n) + 1))
    cpu = _cpu_only(rng, nodes_n - k)
    streams, gpus = fleet.shape(rng, nodes_n, STREAMS)
    nodes = fleet.mixed_fleet(rng, nodes_n, fleet.pick_models(rng, k), streams, cpu, gpus)
    tasks = GEN_TASKS[0]  # the least; size.py sets the count
    apps = wk.app_shares(rng, wk.KERNEL_APPS)
    if rng.random() < 0.3:
        apps[wk.VIDEO_APPS[int(rng.integers(3))]] = 0.1
    wl = WorkloadSpec(
        tasks=tasks,
        apps=apps,
        arrival=wk.poisson(BASE_RATE_PER_MIN),
        input_mb=wk.input_range(rng, (10.0, 60.0), (1.5, 4.0)) if rng.random() < 0.7 else None,
    )
    text = f"{nodes_n} nodes ({_models_text(nodes)}), {streams} streams/GPU, apps {'/'.join(apps)}"
    sc = _scenario("generations", seed, nodes, wl, drift=_light_drift(rng, tasks), description=text)
    return Draft(sc, tasks=GEN_TASKS)


def _cpu_only(rng: np.random.Generator, room: int) -> int:
    """CPU-only nodes of a fleet: none in three cases of five, else a share of :data:`CPU_ONLY_SHARE`."""
    if rng.random() < 0.6 or room < 1:
        return 0
    return max(1, min(room, round(float(rng.uniform(*CPU_ONLY_SHARE)) * (room + 1))))


def _light_drift(rng: np.random.Generator, tasks: int) -> DriftSpec:
    return wk.drift(rng, _span(tasks)) if rng.random() < 0.4 else DriftSpec()


# --- churn ------------------------------------------------------------------------------------

#: Nodes of a ``churn`` case.
CHURN_NODES = (4, 30)
#: Share of the nodes that join late or leave early.
CHURN_SHARE = (0.1, 0.4)
#: Least and most tasks of a ``churn`` case (sized to the fleet by :mod:`.size`).
CHURN_TASKS = (400, 1500)


def churn(rng: np.random.Generator, seed: int) -> Draft:
    """Churn and drift: 4 to 30 nodes of 2 to 5 models (old generations three times likelier),
    10 to 40 % of them (at least one) joining late or leaving early, GPU speeds drifting; the TPDS
    video apps, kernels beside them in some; Poisson or bursty arrivals.
    """
    nodes_n = int(rng.integers(CHURN_NODES[0], CHURN_NODES[1] + 1))
    k = int(rng.integers(2, min(5, nodes_n) + 1))
    streams, gpus = fleet.shape(rng, nodes_n, (2, 6), (1, 2, 4))
    nodes = fleet.mixed_fleet(rng, nodes_n, fleet.pick_models(rng, k, 3.0), streams, gpus_per_node=gpus)
    tasks = CHURN_TASKS[0]  # the least; size.py sets the count
    span = _span(tasks)
    nodes = fleet.with_churn(rng, nodes, float(rng.uniform(*CHURN_SHARE)), span)
    apps = wk.app_shares(rng, wk.VIDEO_APPS)
    if rng.random() < 0.3:
        apps.update(wk.app_shares(rng, wk.KERNEL_APPS, 0.5))
    bursts = rng.random() < 0.5
    arrival = wk.bursty(rng, BASE_RATE_PER_MIN, span) if bursts else wk.poisson(BASE_RATE_PER_MIN)
    drift = wk.drift(rng, span)
    if drift.sigma == 0.0:
        drift = DriftSpec(sigma=0.05, interval_s=span / 20)
    wl = WorkloadSpec(tasks=tasks, apps=apps, arrival=arrival)
    moving = sum(1 for n in nodes if n.join_s or n.leave_s is not None)
    text = (
        f"{nodes_n} nodes ({_models_text(nodes)}), {moving} join or leave, "
        f"drift {drift.sigma:g}, {arrival.process}"
    )
    return Draft(_scenario("churn", seed, nodes, wl, drift=drift, description=text), tasks=CHURN_TASKS)


# --- alibaba-pods -----------------------------------------------------------------------------

#: Nodes sampled from the trace's node list.
ALI_NODES = (6, 48)
#: Share of GPU pods made multi-GPU in a derived pod list.
MULTI_GPU_SHARE = (0.05, 0.4)
#: Share of GPU pods that ask for particular models in a derived pod list.
GPU_SPEC_SHARE = (0.0, 0.3)
#: Pods replayed.
ALI_TASKS = (800, 2500)
#: A derived pod list holds this many windows' worth of pods, so run seeds draw different ones.
ALI_WINDOWS = 2
#: Trace seconds per simulated second (as the built-in ``alibaba`` scenarios).
ALI_TIME_SCALE = 0.001


def alibaba_pods(rng: np.random.Generator, seed: int) -> Draft:
    """Alibaba GPU v2023 pods on nodes sampled from its node list (6 to 48; P100, T4, V100, G2, G3),
    CPU-only nodes beside them in half the cases; the pods of a shipped list (``default``,
    ``gpushare40``) or of one derived from it with 5 to 40 % multi-GPU pods (shapes of
    ``multigpu20``) and up to 30 % pods that ask for particular GPU models.
    """
    tasks = int(rng.integers(ALI_TASKS[0], ALI_TASKS[1] + 1))
    data: dict[str, str] = {}
    pick = rng.random()
    if pick < 0.5:
        multi, spec = float(rng.uniform(*MULTI_GPU_SHARE)), float(rng.uniform(*GPU_SPEC_SHARE))
        pods = f"{DATA_DIR}/pods-{seed}.csv"
        data[pods] = trace_data.derived_pod_list(rng, tasks * ALI_WINDOWS, multi, spec)
        what = f"derived pod list ({multi:.0%} multi-GPU, {spec:.0%} with gpu_spec)"
    else:
        name = trace_data.POD_LISTS[0 if pick < 0.75 else 1]
        pods, what = str(trace_data.trace_file(name)), name
    ali = AlibabaSpec(
        node_csv=str(trace_data.trace_file(trace_data.NODE_LIST)),
        pod_csv=pods,
        nodes=int(rng.integers(ALI_NODES[0], ALI_NODES[1] + 1)),
        time_scale=ALI_TIME_SCALE,
    )
    nodes = list(traces.alibaba_cluster(ali, seed).nodes)
    if rng.random() < 0.5:
        nodes += fleet.cpu_group(rng, "cpu", int(rng.integers(1, 4)))
    arrival = ArrivalSpec(process="trace", trace_path=pods, time_scale=ALI_TIME_SCALE)
    wl = WorkloadSpec(tasks=tasks, apps={}, arrival=arrival, alibaba=ali)
    text = f"{ali.nodes} trace nodes ({_models_text(nodes)}), {what}"
    return Draft(_scenario("alibaba-pods", seed, nodes, wl, description=text), data)


# --- classes ----------------------------------------------------------------------------------

#: Nodes of a ``classes`` case.
CLASS_NODES = (4, 20)
#: Deadline of the interactive class on kernel work, seconds (video work gets four times it).
DEADLINE_S = (5.0, 30.0)
#: Least and most tasks of a ``classes`` case (sized to the fleet by :mod:`.size`).
CLASS_TASKS = (400, 1500)


def classes(rng: np.random.Generator, seed: int) -> Draft:
    """Priority classes and deadlines: an interactive class (priority 1, a 5 to 30 s deadline on
    kernels, four times that on video), batch, sometimes a middle class with a looser deadline;
    4 to 20 nodes of 2 to 4 models, 2 to 8 streams; Poisson or bursty arrivals.
    """
    nodes_n = int(rng.integers(CLASS_NODES[0], CLASS_NODES[1] + 1))
    k = int(rng.integers(2, min(4, nodes_n) + 1))
    streams, gpus = fleet.shape(rng, nodes_n, (2, 8), (1, 2, 4))
    nodes = fleet.mixed_fleet(rng, nodes_n, fleet.pick_models(rng, k), streams, gpus_per_node=gpus)
    tasks = CLASS_TASKS[0]  # the least; size.py sets the count
    video = rng.random() < 0.3
    apps = wk.app_shares(rng, wk.VIDEO_APPS if video else wk.KERNEL_APPS)
    scale = 4.0 if video else 1.0
    cls = wk.two_classes(rng, (DEADLINE_S[0] * scale, DEADLINE_S[1] * scale))
    bursts = rng.random() < 0.5
    span = _span(tasks)
    arrival = wk.bursty(rng, BASE_RATE_PER_MIN, span) if bursts else wk.poisson(BASE_RATE_PER_MIN)
    wl = WorkloadSpec(tasks=tasks, apps=apps, arrival=arrival, classes=cls)
    text = (
        f"{nodes_n} nodes ({_models_text(nodes)}), {len(cls)} classes, "
        f"interactive deadline {cls[0].deadline_s:g} s, {arrival.process}"
    )
    return Draft(_scenario("classes", seed, nodes, wl, description=text), tasks=CLASS_TASKS)


# --- arrivals ---------------------------------------------------------------------------------

#: Nodes of an ``arrivals`` case.
ARR_NODES = (4, 24)
#: Least and most tasks of an ``arrivals`` case (sized to the fleet by :mod:`.size`).
ARR_TASKS = (400, 1500)


def arrivals(rng: np.random.Generator, seed: int) -> Draft:
    """Arrival processes: bursts and lulls (the high rate 3 to 20 times the low, 2 to 8 bursts a
    run) or arrivals resampled from the Alibaba trace's pod creations; 4 to 24 nodes of 2 to 5
    models, 2 to 8 streams; kernels and video apps mixed.
    """
    nodes_n = int(rng.integers(ARR_NODES[0], ARR_NODES[1] + 1))
    k = int(rng.integers(2, min(5, nodes_n) + 1))
    streams, gpus = fleet.shape(rng, nodes_n, (2, 8), (1, 2, 4))
    nodes = fleet.mixed_fleet(rng, nodes_n, fleet.pick_models(rng, k), streams, gpus_per_node=gpus)
    tasks = ARR_TASKS[0]  # the least; size.py sets the count
    apps = wk.app_shares(rng, wk.KERNEL_APPS + wk.VIDEO_APPS, 0.5)
    data: dict[str, str] = {}
    if rng.random() < 0.5:
        arrival = wk.bursty(rng, BASE_RATE_PER_MIN, _span(tasks))
    else:
        path = f"{DATA_DIR}/arrivals-{seed}.csv"
        data[path] = trace_data.resampled_arrivals(rng, ARR_TASKS[1])
        # The file's mean gap is 1 s: time_scale 60 / rate makes it about the nominal rate.
        arrival = ArrivalSpec(process="trace", trace_path=path, time_scale=60.0 / BASE_RATE_PER_MIN)
    wl = WorkloadSpec(tasks=tasks, apps=apps, arrival=arrival)
    kind = "bursty" if arrival.process == "bursty" else "resampled Alibaba arrivals"
    text = f"{nodes_n} nodes ({_models_text(nodes)}), {streams} streams/GPU, {kind}"
    return Draft(_scenario("arrivals", seed, nodes, wl, description=text), data, ARR_TASKS)


# --- gavel (test-only) ------------------------------------------------------------------------

#: Nodes of a ``gavel`` case.
GAVEL_NODES = (3, 16)
#: Measured kinds in a ``gavel`` workload.
GAVEL_KINDS = (4, 26)
#: Least and most tasks of a ``gavel`` case (sized to the fleet by :mod:`.size`).
GAVEL_TASKS = (400, 1500)
_GAVEL = "colocation/gavel-v100-p100.csv"
_GAVEL_SOLO = "colocation/gavel-solo-v100-p100.csv"


@cache
def _gavel_kinds() -> tuple[str, ...]:
    return tuple(dict.fromkeys(read_colocation_csv(find_data_dir() / _GAVEL).kind))


def gavel(rng: np.random.Generator, seed: int) -> Draft:
    """Measured co-location (held out): Gavel's V100/P100 pairwise throughputs of deep-learning
    jobs; 3 to 16 nodes of V100 (16 or 32 GB) and P100, CPU-only nodes in some, 2 to 8 streams,
    100 Gbit/s; 4 to 26 of the measured kinds in uneven shares; Poisson or bursty arrivals.
    """
    nodes_n = int(rng.integers(GAVEL_NODES[0], GAVEL_NODES[1] + 1))
    models = ["P100", *(["V100M16", "V100M32"][i] for i in rng.permutation(2)[: int(rng.integers(1, 3))])]
    cpu = _cpu_only(rng, nodes_n - len(models))
    streams, gpus = fleet.shape(rng, nodes_n, (2, 8), (1, 2, 4))
    nodes = fleet.mixed_fleet(rng, nodes_n, sorted(models), streams, cpu, gpus)
    nodes = [dataclasses.replace(n, net_gbps=100.0) for n in nodes]
    kinds = _gavel_kinds()
    chosen = rng.choice(len(kinds), size=int(rng.integers(GAVEL_KINDS[0], GAVEL_KINDS[1] + 1)), replace=False)
    apps = wk.app_shares(rng, [COLO_PREFIX + kinds[i] for i in sorted(chosen)], 1.0)
    tasks = GAVEL_TASKS[0]  # the least; size.py sets the count
    bursts = rng.random() < 0.4
    arrival = wk.bursty(rng, BASE_RATE_PER_MIN, _span(tasks)) if bursts else wk.poisson(BASE_RATE_PER_MIN)
    ix = InterferenceSpec(
        model="csv",
        colocation_csv=str(find_data_dir() / _GAVEL),
        solo_csv=str(find_data_dir() / _GAVEL_SOLO),
    )
    wl = WorkloadSpec(tasks=tasks, apps=apps, arrival=arrival)
    text = f"{nodes_n} nodes ({_models_text(nodes)}), {len(apps)} measured kinds, {arrival.process}"
    sc = _scenario("gavel", seed, nodes, wl, interference=ix, description=text)
    return Draft(sc, tasks=GAVEL_TASKS)


# --- large (test-only) ------------------------------------------------------------------------

#: Nodes of a ``large`` case.
LARGE_NODES = (100, 1000)
#: Least and most tasks of a ``large`` case: few, so that a run stays short.
LARGE_TASKS = (300, 1200)
#: Tasks per node of a ``large`` case.
LARGE_TASKS_PER_NODE = (1.0, 1.5)


def large(rng: np.random.Generator, seed: int) -> Draft:
    """Large fleets (held out): 100 to 1,000 nodes of 3 to 6 models, 1 to 8 GPUs per node, 1 to 8
    streams, a few CPU-only nodes in some; a few hundred tasks of kernels and video apps (a run
    stays short), Poisson arrivals.
    """
    nodes_n = int(rng.integers(LARGE_NODES[0], LARGE_NODES[1] + 1))
    k = int(rng.integers(3, 7))
    cpu = int(rng.integers(1, nodes_n // 20 + 1)) if rng.random() < 0.4 else 0
    streams = int(rng.integers(STREAMS[0], STREAMS[1] + 1))
    nodes = fleet.mixed_fleet(rng, nodes_n, fleet.pick_models(rng, k), streams, cpu)
    per_node = float(rng.uniform(*LARGE_TASKS_PER_NODE))
    tasks = min(max(int(nodes_n * per_node), LARGE_TASKS[0]), LARGE_TASKS[1])
    apps = wk.app_shares(rng, wk.KERNEL_APPS + wk.VIDEO_APPS, 0.5)
    wl = WorkloadSpec(tasks=tasks, apps=apps, arrival=wk.poisson(BASE_RATE_PER_MIN))
    text = f"{nodes_n} nodes ({_models_text(nodes)}), {streams} streams/GPU, {tasks} tasks"
    return Draft(_scenario("large", seed, nodes, wl, description=text))


#: Every family by name, in the order ``--family``-less generation takes them (round-robin).
FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("generations", generations, False),
        Family("churn", churn, False),
        Family("alibaba-pods", alibaba_pods, False),
        Family("classes", classes, False),
        Family("arrivals", arrivals, False),
        Family("gavel", gavel, True),
        Family("large", large, True),
    )
}
#: Families held out for testing: only test seeds (or seeds outside every set) generate them.
TEST_ONLY: frozenset[str] = frozenset(n for n, f in FAMILIES.items() if f.test_only)

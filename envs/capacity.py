"""The capacity bound: the most throughput any schedule could reach on a scenario's tasks.

Like the ``oracle`` it reads the simulator's ground truth, so it appears in reports only and no
policy may use it. Unlike the oracle (a clairvoyant *greedy* scheduler, which a non-myopic policy
can beat) it is a bound: no schedule of these tasks on this cluster finishes sooner.

The bound is a fluid relaxation of the simulator, solved as a linear program (HiGHS):

* Work is divisible and needs no transfer: each *work class* (subtasks of one kind, GPU share,
  allowed GPU models and FLOP/byte ratio, whose run time on any unit is proportional to its size)
  may be split over every unit that can run it, in any proportion, with no dependencies, host
  memory admission or network delay.
* A GPU runs a *mix* at a time: a multiset of classes no larger than its streams whose smallest
  members fit its memory together. Each mix progresses at the rates the ground truth gives its
  co-runners (``GroundTruth.factors``), so complementary kinds that progress faster together count
  as they do in the simulator. The LP chooses how long each group of identical GPUs spends in
  each mix. Where the mixes of ``k`` co-runners are too many to list (``MAX_MIXES``), each runner
  gets instead the highest factor it could have among ``k`` (``GroundTruth.factor_ceiling``):
  looser, still a bound.
* GPUs run at the highest drift factor the scenario allows, every node is up all the time.
* CPU cores run one subtask each at its true solo speed.

The LP maximises the share of the work done per second, ``lam``; the whole set takes at least
``1 / lam`` seconds. A run's makespan (first arrival to last completion, as in ``RunMetrics``) is
then at least the largest of: that time; for a cut at any arrival, the time up to the cut plus the
fluid time of the work arriving after it; each task's arrival plus its own latency bound (input
transfer, critical path of its DAG on the fastest units of the node, result upload); and all
inputs (and outputs) over all NICs. Throughput is bounded by tasks over that makespan.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from envs.ground_truth import GroundTruth
from rlsched.feasibility import static_feasible, task_needs
from rlsched.hardware import GpuModel
from rlsched.scenarios.spec import Scenario
from rlsched.tasks import Device, KindSpec, Subtask, Task
from rlsched.view import ClusterView

#: Most mixes listed per GPU group; larger mixes get the per-runner ceiling instead.
MAX_MIXES = 20_000
#: Arrival quantiles where the bound cuts the run (the fluid time of what arrives later).
CUTS = (0.0, 0.25, 0.5, 0.75, 0.9)
#: Relative slack on the LP optimum, for the solver's tolerances.
SOLVER_SLACK = 1e-6


@dataclass(frozen=True)
class CapacityBound:
    """Bounds for one scenario's task set (see the module docstring).

    :param tasks: tasks counted (those some node could ever run).
    :param capacity_per_min: tasks per minute the cluster could sustain for this mix of work (its
        GPUs and cores, and its NICs).
    :param arrival_rate_per_min: tasks over the span of their arrivals, per minute.
    :param offered_load: arrival rate over capacity (< 0.8: arrival-bound).
    :param makespan_lb_s: no schedule finishes the tasks sooner (first arrival to last completion).
    :param throughput_ub: tasks per second no schedule exceeds (``RunMetrics.throughput``).
    :param latency_lb_mean_s: lower bound on the mean latency.
    :param latency_lb_p50_s: lower bound on the median latency.
    :param latency_lb_p95_s: lower bound on the 95th percentile latency.
    :param binding: which term sets the makespan bound: ``capacity``, ``arrivals``, ``network``.
    :param method: ``exact mixes`` or the stream count above which per-runner ceilings are used.
    :param solve_s: wall time of the computation.
    """

    tasks: int
    capacity_per_min: float
    arrival_rate_per_min: float
    offered_load: float
    makespan_lb_s: float
    throughput_ub: float
    latency_lb_mean_s: float
    latency_lb_p50_s: float
    latency_lb_p95_s: float
    binding: str
    method: str
    solve_s: float

    @property
    def arrival_bound(self) -> bool:
        """Offered load under 0.8: arrivals, not the schedule, set the throughput."""
        return self.offered_load < 0.8

    def to_dict(self) -> dict[str, float | int | str | bool]:
        """Plain-JSON dictionary."""
        return {**asdict(self), "arrival_bound": self.arrival_bound}


@dataclass
class _Class:
    """Subtasks whose run time on every unit is proportional to their size (``units``)."""

    kind: KindSpec
    device: Device
    share: float
    models: frozenset[str]
    rep: Subtask  # a member, for per-unit times
    min_mem_mb: float


@dataclass
class _GpuGroup:
    model: GpuModel
    streams: int
    mem_mb: float
    count: int = 0


@dataclass
class _Lp:
    """Columns and rows of the fluid LP, built once per task set's classes."""

    n_cls: int
    cols: int = 0
    rows: int = 0
    data: list[float] = field(default_factory=list)
    ri: list[int] = field(default_factory=list)
    ci: list[int] = field(default_factory=list)
    b: list[float] = field(default_factory=list)

    def col(self) -> int:
        self.cols += 1
        return self.cols - 1

    def row(self, rhs: float) -> int:
        self.b.append(rhs)
        self.rows += 1
        return self.rows - 1

    def put(self, r: int, c: int, v: float) -> None:
        self.ri.append(r)
        self.ci.append(c)
        self.data.append(v)


def _units(s: Subtask) -> float:
    return s.gflop + s.gbytes


def _class_key(t: Task, s: Subtask) -> tuple:
    ratio = round(s.gflop / s.gbytes, 9) if s.gbytes > 0 else math.inf
    return (s.kind.name, s.share, t.gpu_models, ratio)


class _Model:
    """Classes, unit groups and per-unit times of one scenario's task set."""

    def __init__(self, scenario: Scenario, tasks: list[Task]) -> None:
        spec = scenario.cluster
        self.view = v = ClusterView.from_spec(spec)
        self.nodes = spec.nodes
        rng = np.random.default_rng(0)  # drives drift only, which the bound does not step
        self.truth = GroundTruth(scenario.interference, scenario.drift, [n.gpus for n in spec.nodes], rng)
        d = scenario.drift
        self.speed = max(1.0, d.max_factor) if d.sigma > 0 else 1.0
        self.feasible = [bool(static_feasible(task_needs(t), v).any()) for t in tasks]
        self.tasks = [t for t, ok in zip(tasks, self.feasible, strict=True) if ok]
        self.classes: list[_Class] = []
        index: dict[tuple, int] = {}
        self.cls_of: list[list[int]] = []
        for t in self.tasks:
            ids = []
            for s in t.graph.subtasks:
                key = _class_key(t, s)
                c = index.get(key)
                if c is None:
                    c = index[key] = len(self.classes)
                    self.classes.append(_Class(s.kind, s.kind.device, s.share, t.gpu_models, s, s.mem_mb))
                cl = self.classes[c]
                cl.min_mem_mb = min(cl.min_mem_mb, s.mem_mb)
                ids.append(c)
            self.cls_of.append(ids)
        groups: dict[tuple, _GpuGroup] = {}
        for n, node in enumerate(spec.nodes):
            for g, model in enumerate(node.gpus):
                key = (model.name, int(v.gpu_streams[n, g]), float(v.gpu_mem_mb[n, g]))
                grp = groups.setdefault(key, _GpuGroup(model, key[1], key[2]))
                grp.count += 1
        self.gpu_groups = list(groups.values())
        cores: dict[float, int] = defaultdict(int)
        for node in spec.nodes:
            cores[node.cpu_core_gflops] += node.cpu_cores
        self.cpu_groups = [(gf, n) for gf, n in cores.items() if n > 0]

    def gpu_time(self, c: int, grp: _GpuGroup) -> float:
        """Solo seconds per unit of class ``c`` on a GPU of the group at full speed (inf: cannot)."""
        cl = self.classes[c]
        if cl.device is Device.CPU or (cl.models and grp.model.name not in cl.models):
            return math.inf
        if cl.min_mem_mb > grp.mem_mb:
            return math.inf
        return self.truth.gpu_solo_seconds(cl.rep, grp.model) / _units(cl.rep) / self.speed

    def cpu_time(self, c: int, gflops: float) -> float:
        """Seconds per unit of class ``c`` on one core (inf: cannot)."""
        cl = self.classes[c]
        if cl.device is Device.GPU:
            return math.inf
        return self.truth.cpu_solo_seconds(cl.rep, gflops) / _units(cl.rep)

    def unit_matrix(self) -> np.ndarray:
        """(tasks, classes) work units of each task in each class."""
        u = np.zeros((len(self.tasks), len(self.classes)))
        for i, t in enumerate(self.tasks):
            for s, c in zip(t.graph.subtasks, self.cls_of[i], strict=True):
                u[i, c] += _units(s)
        return u


def _mix_count(n: int, k: int) -> int:
    return sum(math.comb(n + j - 1, j) for j in range(1, k + 1))


def _add_gpu_group(lp: _Lp, m: _Model, grp: _GpuGroup, cls_rows: list[int], scale: np.ndarray) -> str:
    """Columns for one GPU group: listed mixes, then per-runner ceilings; returns the method."""
    times = {c: m.gpu_time(c, grp) for c in range(len(m.classes))}
    allowed = [c for c, t in times.items() if math.isfinite(t)]
    if not allowed:
        return "exact mixes"
    cap = lp.row(float(grp.count))
    k0 = grp.streams
    while k0 > 1 and _mix_count(len(allowed), k0) > MAX_MIXES:
        k0 -= 1
    for k in range(1, k0 + 1):
        _add_mixes(lp, m, grp, allowed, times, k, cap, cls_rows, scale)
    partners = [(m.classes[c].kind, m.classes[c].share) for c in allowed]
    for k in range(k0 + 1, grp.streams + 1):
        theta = lp.col()
        lp.put(cap, theta, 1.0)
        row = lp.row(0.0)
        lp.put(row, theta, -float(k))
        for c in allowed:
            cl = m.classes[c]
            ceil = m.truth.factor_ceiling(cl.kind, cl.share, partners, k, grp.model)
            x = lp.col()  # units/s of class c run at multiplicity k
            lp.put(row, x, times[c] / ceil)
            lp.put(cls_rows[c], x, -1.0 / scale[c])
    return "exact mixes" if k0 == grp.streams else f"exact mixes up to {k0} co-runners"


def _add_mixes(
    lp: _Lp,
    m: _Model,
    grp: _GpuGroup,
    allowed: list[int],
    times: dict[int, float],
    k: int,
    cap: int,
    cls_rows: list[int],
    scale: np.ndarray,
) -> None:
    """A column per mix of ``k`` of the ``allowed`` classes that fits the group's memory: one
    unit of the group's time in it, and the work per second it does in each of its classes.
    Vectorised over the mixes; the columns and entries are those a loop over
    ``combinations_with_replacement`` would add, in its order, with the same values."""
    a = np.array(allowed)
    pos = np.array(list(itertools.combinations_with_replacement(range(len(allowed)), k)), dtype=np.intp)
    pos = pos.reshape(-1, k)
    mem = np.array([m.classes[c].min_mem_mb for c in allowed])[pos]
    total = mem[:, 0].copy()
    for j in range(1, k):  # summed in the mix's order, as the loop did
        total += mem[:, j]
    pos = pos[~(total > grp.mem_mb)]
    if not len(pos):
        return
    kinds = [m.classes[c].kind for c in allowed]
    shares = [m.classes[c].share for c in allowed]
    rate = m.truth.mix_factors(kinds, shares, pos, grp.model) / np.array([times[c] for c in allowed])[pos]
    # Equal classes sit side by side in a mix: each run of them is one entry, its rates summed.
    new_run = np.ones(pos.shape, dtype=bool)
    new_run[:, 1:] = pos[:, 1:] != pos[:, :-1]
    acc = rate.copy()
    for j in range(1, k):
        acc[:, j] = np.where(new_run[:, j], rate[:, j], acc[:, j - 1] + rate[:, j])
    run_end = np.ones(pos.shape, dtype=bool)
    run_end[:, :-1] = new_run[:, 1:]
    cols = np.arange(lp.cols, lp.cols + len(pos))
    lp.cols += len(pos)
    rows = np.array(cls_rows)[a][pos]
    # Per column: the group's time row first, then its classes' rows in the mix's order.
    keep = np.concatenate([np.ones((len(pos), 1), dtype=bool), run_end], axis=1)
    r = np.concatenate([np.full((len(pos), 1), cap), rows], axis=1)[keep]
    v = np.concatenate([np.ones((len(pos), 1)), -acc / scale[a][pos]], axis=1)[keep]
    c = np.repeat(cols, keep.sum(axis=1))
    lp.ri.extend(r.tolist())
    lp.ci.extend(c.tolist())
    lp.data.extend(v.tolist())


class FluidLp:
    """The fluid LP of a scenario's task set; solve it for any amounts of work per class."""

    def __init__(self, m: _Model, scale: np.ndarray) -> None:
        self.scale = scale
        n = len(m.classes)
        lp = _Lp(n)
        self.lam = lp.col()
        cls_rows = [lp.row(0.0) for _ in range(n)]
        methods = [_add_gpu_group(lp, m, grp, cls_rows, scale) for grp in m.gpu_groups]
        for gflops, cores in m.cpu_groups:
            row = lp.row(float(cores))
            for c in range(n):
                t = m.cpu_time(c, gflops)
                if math.isfinite(t):
                    y = lp.col()  # units/s of class c on these cores
                    lp.put(row, y, t)
                    lp.put(cls_rows[c], y, -1.0 / scale[c])
        exact = [x for x in methods if x != "exact mixes"]
        self.method = "exact mixes" if not exact else "; ".join(sorted(set(exact)))
        self.cls_rows = cls_rows
        self.a = coo_matrix((lp.data, (lp.ri, lp.ci)), shape=(lp.rows, lp.cols)).tocsr()
        self.b = np.array(lp.b)
        self.cols = lp.cols

    def seconds(self, work: np.ndarray) -> float:
        """Fluid time to do ``work`` (units per class), at least; 0 for no work."""
        w = work / self.scale
        if not (w > 0).any():
            return 0.0
        a = self.a.tolil(copy=True)
        for c, row in enumerate(self.cls_rows):
            a[row, self.lam] = w[c]
        cost = np.zeros(self.cols)
        cost[self.lam] = -1.0
        res = linprog(cost, A_ub=a.tocsr(), b_ub=self.b, bounds=(0, None), method="highs")
        if res.status != 0:
            raise RuntimeError(f"capacity LP failed: {res.message}")
        lam = -res.fun * (1.0 + SOLVER_SLACK)
        return 1.0 / lam if lam > 0 else math.inf


def _best_times(m: _Model) -> tuple[np.ndarray, np.ndarray]:
    """(node types, classes) fastest seconds per unit on one node; (node types,) NIC MB/s."""
    v = m.view
    types: dict[tuple, list[int]] = {}
    for n, node in enumerate(m.nodes):
        gpus = tuple(
            (g.name, int(v.gpu_streams[n, i]), float(v.gpu_mem_mb[n, i])) for i, g in enumerate(node.gpus)
        )
        types.setdefault((gpus, node.cpu_cores, node.cpu_core_gflops, float(v.net_mbps[n])), []).append(n)
    best = np.full((len(types), len(m.classes)), np.inf)
    net = np.zeros(len(types))
    groups = {(g.model.name, g.streams, g.mem_mb): g for g in m.gpu_groups}
    # Mixes may run faster than solo where measured pairs exceed 1; never slower than this ceiling.
    fmax = _max_factor(m)
    for i, ((gpus, cores, gflops, mbps), _) in enumerate(types.items()):
        net[i] = mbps
        for c in range(len(m.classes)):
            t = min((m.gpu_time(c, groups[key]) / fmax for key in gpus), default=math.inf)
            if cores > 0:
                t = min(t, m.cpu_time(c, gflops))
            best[i, c] = t
    return best, net


def _max_factor(m: _Model) -> float:
    """The largest progress factor any runner can have (1 unless measured pairs exceed 1)."""
    if m.truth.pairs is None or max(m.truth.pairs.values(), default=0.0) <= 1.0:
        return 1.0
    f = 1.0
    for grp in m.gpu_groups:
        allowed = [c for c in range(len(m.classes)) if math.isfinite(m.gpu_time(c, grp))]
        partners = [(m.classes[c].kind, m.classes[c].share) for c in allowed]
        for c in allowed:
            cl = m.classes[c]
            for k in range(2, grp.streams + 1):
                f = max(f, m.truth.factor_ceiling(cl.kind, cl.share, partners, k, grp.model))
    return f


def _task_latency(t: Task, cls: list[int], best: np.ndarray, net: np.ndarray) -> float:
    fin = np.zeros((len(t.graph), best.shape[0]))
    for s, c in zip(t.graph.subtasks, cls, strict=True):
        start = fin[list(s.parents)].max(axis=0) if s.parents else 0.0
        fin[s.index] = start + _units(s) * best[:, c]
    path = fin.max(axis=0) + (t.input_mb + t.output_mb) / net
    return float(path.min())


def task_latency_bounds(scenario: Scenario, tasks: list[Task]) -> np.ndarray:
    """Per task, the least time from arrival to completion any schedule could give it.

    Input transfer at the full NIC speed, the critical path of its DAG with every subtask on the
    fastest unit of the node that may run it, and the upload of its results; the best node wins.
    NaN for a task no node could ever run.
    """
    m = _Model(scenario, tasks)
    best, net = _best_times(m)
    out = np.full(len(tasks), np.nan)
    idx = [i for i, ok in enumerate(m.feasible) if ok]
    for i, t, c in zip(idx, m.tasks, m.cls_of, strict=True):
        out[i] = _task_latency(t, c, best, net)
    return out


def capacity_bound(scenario: Scenario, tasks: list[Task], latency: bool = True) -> CapacityBound:
    """The capacity, makespan, throughput and latency bounds of a scenario's task set.

    :param scenario: the scenario (cluster, interference source, drift).
    :param tasks: its tasks for one seed (``rlsched.scenarios.taskgen.generate_tasks``).
    :param latency: also compute the run's makespan, throughput and latency bounds; without it
        only the capacity and offered load are filled (the rest NaN).
    """
    t0 = time.perf_counter()
    m = _Model(scenario, tasks)
    n = len(m.tasks)
    if n == 0:
        return CapacityBound(0, 0.0, 0.0, 0.0, 0.0, 0.0, *(math.nan,) * 3, "none", "none", 0.0)
    units = m.unit_matrix()
    total = units.sum(axis=0)
    lp = FluidLp(m, np.where(total > 0, total, 1.0))
    arr = np.array([t.arrival_s for t in m.tasks])
    first = float(arr.min())
    fluid = lp.seconds(total)
    total_net = float(m.view.net_mbps.sum())
    net_term = max(sum(t.input_mb for t in m.tasks), sum(t.output_mb for t in m.tasks)) / total_net
    span = float(arr.max()) - first
    rate = n / span * 60.0 if span > 0 else math.inf
    capacity = n / max(fluid, net_term) * 60.0
    if not latency:
        nan = math.nan
        return CapacityBound(
            n,
            capacity,
            rate,
            rate / capacity,
            nan,
            nan,
            nan,
            nan,
            nan,
            "–",
            lp.method,
            time.perf_counter() - t0,
        )
    order = np.argsort(arr, kind="stable")
    cap_term = fluid
    for q in CUTS[1:]:
        i = int(q * n)
        rest = units[order[i:]].sum(axis=0)
        cap_term = max(cap_term, float(arr[order[i]]) - first + lp.seconds(rest))
    best, net = _best_times(m)
    lat = np.array([_task_latency(t, c, best, net) for t, c in zip(m.tasks, m.cls_of, strict=True)])
    arrivals_term = float((arr + lat).max()) - first
    terms = {"capacity": cap_term, "arrivals": arrivals_term, "network": net_term}
    binding = max(terms, key=lambda k: terms[k])
    makespan = terms[binding]
    return CapacityBound(
        tasks=n,
        capacity_per_min=capacity,
        arrival_rate_per_min=rate,
        offered_load=rate / capacity,
        makespan_lb_s=makespan,
        throughput_ub=n / makespan if makespan > 0 else math.inf,
        latency_lb_mean_s=float(lat.mean()),
        latency_lb_p50_s=float(np.percentile(lat, 50)),
        latency_lb_p95_s=float(np.percentile(lat, 95)),
        binding=binding,
        method=lp.method,
        solve_s=time.perf_counter() - t0,
    )

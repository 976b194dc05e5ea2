"""Property tests of the discrete-event simulator (``envs.simulator``).

Random small scenarios (2-5 nodes, random cores, host memory, GPUs of catalog models, streams,
app mixes, arrival rates, input sizes, drift and node churn) run under every stage-1 selector and
stage-2 placer; the execution trace is replayed to check the simulator's documented invariants.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envs.simulator import PlacementError, Simulator
from rlsched.cluster import ClusterSpec, NodeSpec
from rlsched.hardware import CATALOG, GpuModel
from rlsched.policies.registry import make_selector, parse_scheduler, placer_names, selector_names
from rlsched.scenarios.spec import ArrivalSpec, DriftSpec, Scenario, WorkloadSpec
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.scheduler import CPU, NodeSelector, TwoStageScheduler, is_clairvoyant
from rlsched.tasks import Device, Subtask, Task
from rlsched.view import ClusterView, FastState
from tests.conftest import examples

#: Catalog models plus small-memory variants, drawn often, so that device memory, not streams,
#: often binds (and some GPU-only subtasks fit no GPU at all).
SMALL_GPUS = {f"T4-{g}G": dataclasses.replace(CATALOG["T4"], name=f"T4-{g}G", mem_gib=g) for g in (1.5, 3.0)}
GPU_MODELS = {**CATALOG, **SMALL_GPUS}
MODELS = sorted(CATALOG)
APP_NAMES = ("intrusion_detection", "video_synopsis", "face_recognition", "matmul", "fft", "kmeans")
SPECS = [f"{s}+{p}" for s in selector_names() for p in placer_names()]
PROPS = settings(max_examples=examples(50), deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---- strategies ------------------------------------------------------------------------------
any_model = st.one_of(st.sampled_from(MODELS), st.sampled_from(sorted(SMALL_GPUS)))


@st.composite
def node_specs(draw: st.DrawFn, i: int, churn: bool) -> NodeSpec:
    join_s, leave_s = 0.0, None
    if churn:
        if draw(st.booleans()):
            join_s = draw(st.floats(1.0, 300.0))
        if draw(st.booleans()):
            leave_s = join_s + draw(st.floats(1.0, 600.0))
    return NodeSpec(
        name=f"n{i}",
        cpu_cores=draw(st.integers(1, 8)),
        host_mem_gib=draw(st.sampled_from([0.5, 1.0, 2.0, 8.0, 64.0])),
        gpus=tuple(GPU_MODELS[m] for m in draw(st.lists(any_model, max_size=4))),
        streams_per_gpu=draw(st.integers(1, 4)),
        net_gbps=draw(st.sampled_from([1.0, 10.0])),
        join_s=join_s,
        leave_s=leave_s,
    )


@st.composite
def scenarios(draw: st.DrawFn, churn: bool = True) -> Scenario:
    n = draw(st.integers(2, 5))
    nodes = tuple(draw(node_specs(i, churn)) for i in range(n))
    apps = draw(st.dictionaries(st.sampled_from(APP_NAMES), st.floats(0.1, 3.0), min_size=1))
    input_mb = None
    if draw(st.booleans()):
        lo = draw(st.floats(1.0, 200.0))
        input_mb = (lo, lo + draw(st.floats(0.0, 200.0)))
    drift = DriftSpec()
    if draw(st.booleans()):
        drift = DriftSpec(sigma=draw(st.floats(0.01, 0.3)), interval_s=draw(st.floats(5.0, 60.0)))
    wl = WorkloadSpec(
        tasks=draw(st.integers(5, 40)),
        apps=apps,
        arrival=ArrivalSpec(rate_per_min=draw(st.floats(5.0, 300.0))),
        input_mb=input_mb,
    )
    return Scenario("prop", ClusterSpec(nodes), wl, drift=drift, seed=draw(st.integers(0, 2**16)))


# ---- running and checking ----------------------------------------------------------------------
def simulate(
    scenario: Scenario, spec: str | TwoStageScheduler, seed: int = 0, tasks: list[Task] | None = None
) -> tuple[Simulator, dict]:
    tasks = generate_tasks(scenario) if tasks is None else tasks
    sched = parse_scheduler(spec) if isinstance(spec, str) else spec
    sim = Simulator(scenario, tasks, sched.placer, seed, trace=True)
    m = sim.run(sched)
    return sim, m.to_dict()


def check_accounting(sim: Simulator, m: dict) -> None:
    """Every task completes exactly once, or is reported unschedulable; nothing is lost."""
    assert m["tasks_lost"] == 0
    assert m["tasks_completed"] + m["tasks_unschedulable"] == m["tasks_total"] == len(sim.tasks)
    for t, r in zip(sim.tasks, sim.records, strict=True):
        assert r.completions in (0, 1)
        assert (r.completions == 1) == (not math.isnan(r.done_s))
        if r.completions == 0:
            # Reported unschedulable: no node alive at the end could ever run it.
            assert not sim.mask(t).any(), f"task {t.id} not run although a node could take it"
        else:
            assert r.done_s >= r.first_start_s >= t.arrival_s
    assert sum(r.completions for r in sim.records) == m["tasks_completed"]
    assert sim.done


def check_trace(sim: Simulator) -> None:
    """Replay the trace: DAG order, units, streams, device memory and cores within capacity."""
    assert sim.trace is not None
    v0 = ClusterView.from_spec(sim.scenario.cluster)
    nodes = sim.scenario.cluster.nodes
    gpu_running: dict[tuple[int, int], int] = defaultdict(int)
    gpu_mem: dict[tuple[int, int], float] = defaultdict(float)
    cpu_running: dict[int, int] = defaultdict(int)
    running: dict[tuple[int, int, int], tuple[float, int]] = {}  # (task, sub, node) -> (start, unit)
    done: dict[tuple[int, int, int], float] = {}
    starts: dict[tuple[int, int, int], int] = defaultdict(int)
    last_t = -math.inf
    for kind, t, tid, idx, n, unit in sim.trace:
        assert t >= last_t, "trace out of time order"
        last_t = t
        spec = nodes[n]
        assert t >= spec.join_s and (spec.leave_s is None or t <= spec.leave_s), "work on an absent node"
        sub: Subtask = sim.tasks[tid].graph.subtasks[idx]
        key = (tid, idx, n)
        if kind == "start":
            assert t >= sim.tasks[tid].arrival_s
            starts[key] += 1
            assert starts[key] == 1, f"subtask {key} started twice on one node"
            for p in sub.parents:
                assert (tid, p, n) in done, f"subtask {idx} of task {tid} started before parent {p}"
                assert done[(tid, p, n)] <= t
            running[key] = (t, unit)
            if unit == CPU:
                assert sub.device is not Device.GPU
                cpu_running[n] += 1
                assert cpu_running[n] <= spec.cpu_cores
            else:
                assert sub.device is not Device.CPU
                assert 0 <= unit < len(spec.gpus)
                gpu_running[n, unit] += 1
                gpu_mem[n, unit] += sub.mem_mb
                assert gpu_running[n, unit] <= v0.gpu_streams[n, unit]
                assert gpu_mem[n, unit] <= v0.gpu_mem_mb[n, unit] + 1e-6
        else:
            assert kind == "done"
            t0, u0 = running.pop(key)
            assert u0 == unit and t >= t0
            done[key] = t
            if unit == CPU:
                cpu_running[n] -= 1
            else:
                gpu_running[n, unit] -= 1
                gpu_mem[n, unit] -= sub.mem_mb
    # Runs left without a "done" were dropped by a node leaving.
    for _, _, n in running:
        assert nodes[n].leave_s is not None
    # A completed task ran every subtask once, to the end, on the node it is recorded on, and
    for t, r in zip(sim.tasks, sim.records, strict=True):
        if r.completions:
            ends = [done.get((t.id, i, r.node)) for i in range(len(t.graph))]
            assert None not in ends
            # Then its results crossed the uplink: at least their size over the NIC bandwidth.
            upload = t.output_mb / (nodes[r.node].net_gbps * 125.0)
            assert r.done_s >= max(ends) + upload * (1 - 1e-9)  # type: ignore[operator]
            other = {n for (tid, _, n) in done if tid == t.id} - {r.node}
            assert all(nodes[n].leave_s is not None for n in other)
            assert r.requeues >= len(other)
    churn = any(nd.leave_s is not None for nd in nodes)
    if not churn:
        assert not running
        assert all(r.requeues == 0 for r in sim.records)


def check_view(view: ClusterView) -> None:
    """The view's per-node aggregates agree with its per-GPU arrays; usage is within capacity."""
    valid = view.gpu_valid
    np.testing.assert_array_equal(view.node_gpu_running, (view.gpu_running * valid).sum(axis=1))
    np.testing.assert_array_equal(view.node_gpus_active, ((view.gpu_running > 0) & valid).sum(axis=1))
    np.testing.assert_allclose(view.node_gpu_mem_used_mb, view.gpu_mem_used_mb.sum(axis=1), atol=1e-6)
    ng = np.maximum(view.n_gpus, 1)
    speed = np.where(view.n_gpus > 0, (view.speed_gpu * valid).sum(axis=1) / ng, 1.0)
    np.testing.assert_allclose(view.node_speed_gpu, speed, rtol=1e-9)
    assert np.all(view.gpu_running <= view.gpu_streams) and np.all(view.gpu_running >= 0)
    assert np.all(view.gpu_mem_used_mb <= view.gpu_mem_mb + 1e-6)
    assert np.all((view.cpu_busy >= 0) & (view.cpu_busy <= view.cores))
    assert np.all(view.host_mem_used_mb <= view.host_mem_mb + 1e-6)
    assert sum(len(k) for row in view.gpu_kinds for k in row) == view.gpu_running.sum()
    for arr in (view.tasks_on_node, view.ready_waiting, view.net_in_busy_s):
        assert np.all(arr >= 0)
    assert np.all(view.speed_gpu > 0) and np.all(view.speed_cpu > 0)
    # The Python mirrors placers and the event loop read are the arrays, exactly.
    fresh = FastState.of(view)
    assert fresh == view.fast


def check_idle_at_end(sim: Simulator) -> None:
    """Once every task is done, the view shows an idle cluster again."""
    v = sim.view
    check_view(v)
    for arr in (v.cpu_busy, v.gpu_running, v.tasks_on_node, v.ready_waiting):
        assert not arr.any()
    for arr in (v.host_mem_used_mb, v.gpu_mem_used_mb, v.backlog_gpu_s, v.backlog_cpu_s):
        np.testing.assert_allclose(arr, 0.0, atol=1e-6)


class CheckingSelector:
    """Wraps a selector; at every decision checks the view, the time and which nodes are alive."""

    def __init__(self, inner: NodeSelector, sim: Simulator) -> None:
        self.inner, self.sim, self.name = inner, sim, inner.name
        self.decisions = 0
        self.clairvoyant = is_clairvoyant(inner)  # declares what it wraps (the oracle)

    def reset(self, view: ClusterView, seed: int) -> None:
        self.inner.reset(view, seed)

    def bind_simulator(self, sim: Simulator) -> None:
        self.inner.bind_simulator(sim)  # type: ignore[attr-defined]

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        self.decisions += 1
        now = self.sim.now
        assert view.time_s == now and task.arrival_s <= now
        assert mask.any() and not (mask & ~view.alive).any()
        for n, spec in enumerate(self.sim.scenario.cluster.nodes):
            leave = math.inf if spec.leave_s is None else spec.leave_s
            if spec.join_s < now < leave:  # (at a join or leave instant either state is right)
                assert view.alive[n]
            elif now < spec.join_s or now > leave:
                assert not view.alive[n]
        check_view(self.sim.view)  # the world's own (a wrapper from outside rlsched reads it read-only)
        node = self.inner.select(task, view, mask)
        assert mask[node]
        return node


def comparable(m: dict) -> dict:
    return {k: v for k, v in m.items() if k not in ("wall_s", "decisions_per_s")}


# ---- invariants ----------------------------------------------------------------------------------
@PROPS
@given(scenarios(), st.sampled_from(selector_names()), st.sampled_from(placer_names()), st.integers(0, 99))
def test_invariants_hold_for_every_policy(scenario: Scenario, selector: str, placer: str, seed: int) -> None:
    tasks = generate_tasks(scenario)
    sched = parse_scheduler(f"{selector}+{placer}")
    sim = Simulator(scenario, tasks, sched.placer, seed, trace=True)
    checking = CheckingSelector(sched.selector, sim)
    m = sim.run(TwoStageScheduler(checking, sched.placer)).to_dict()
    # One decision per placement: every completed task once, plus once more per requeue before it.
    assert checking.decisions == sim.decisions == m["tasks_completed"] + m["tasks_requeued"]
    check_accounting(sim, m)
    check_trace(sim)
    check_idle_at_end(sim)


@pytest.mark.parametrize("spec", SPECS)
def test_invariants_on_a_churning_cluster_for_every_pair(spec: str, small_scenario, node) -> None:
    """Every selector+placer pair on one heterogeneous scenario with drift, a late and a leaving node."""
    sc = small_scenario(
        nodes=(
            node("a", cores=4, mem_gib=4, gpus=("T4", "P4"), streams=2),
            node("b", cores=2, mem_gib=8, gpus=()),
            node("c", cores=8, mem_gib=32, gpus=("V100M16",), streams=3, leave_s=120.0),
            node("d", cores=8, mem_gib=32, gpus=("A10", "K80"), streams=1, join_s=60.0),
        ),
        apps=dict.fromkeys(APP_NAMES, 1.0),
        tasks=40,
        rate_per_min=40.0,
        drift_sigma=0.05,
        drift_interval_s=20.0,
    )
    sim, m = simulate(sc, spec, seed=3)
    check_accounting(sim, m)
    check_trace(sim)
    assert m["tasks_completed"] == 40


@settings(max_examples=examples(25), deadline=None)
@given(scenarios(), st.sampled_from(selector_names()), st.sampled_from(placer_names()), st.integers(0, 99))
def test_same_seed_same_result(scenario: Scenario, selector: str, placer: str, seed: int) -> None:
    sim1, m1 = simulate(scenario, f"{selector}+{placer}", seed)
    sim2, m2 = simulate(scenario, f"{selector}+{placer}", seed)
    assert comparable(m1) == comparable(m2)
    assert sim1.trace == sim2.trace
    assert [dataclasses.astuple(r) for r in sim1.records] == [dataclasses.astuple(r) for r in sim2.records]


def test_different_drift_seed_changes_the_run(small_scenario) -> None:
    """The determinism test is not vacuous: the seed does reach the dynamics."""
    sc = small_scenario(tasks=30, rate_per_min=120.0, drift_sigma=0.3, drift_interval_s=2.0)
    _, m1 = simulate(sc, "mct+mlsm", seed=1)
    _, m2 = simulate(sc, "mct+mlsm", seed=2)
    assert comparable(m1) != comparable(m2)


# ---- faster GPUs never slow a fixed schedule ------------------------------------------------------
class ReplaySelector:
    """Sends each task to the node it had in a recorded run."""

    name = "replay"

    def __init__(self, nodes: dict[int, int]) -> None:
        self.nodes = nodes

    def reset(self, view: ClusterView, seed: int) -> None:
        pass

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        return self.nodes[task.id]


class ReplayPlacer:
    """Puts each subtask on its recorded unit, and each unit starts its subtasks in recorded order
    (waiting, by returning ``None``, until the subtask is next on its unit and the unit is free)."""

    name = "replay"

    def __init__(self, trace: list[tuple]) -> None:
        self.unit: dict[tuple[int, int], int] = {}
        self.order: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
        for kind, _, tid, idx, n, unit in trace:
            if kind == "start":
                self.unit[tid, idx] = unit
                self.order[n, unit].append((tid, idx))
        self.pos: dict[tuple[int, int], int] = defaultdict(int)

    def reset(self, view: ClusterView, seed: int) -> None:
        pass

    def place(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        key = (task.id, sub.index)
        unit = self.unit[key]
        q = (node, unit)
        if self.order[q][self.pos[q]] != key:
            return None
        if unit == CPU:
            free = view.cpu_busy[node] < view.cores[node]
        else:
            free = view.gpu_running[node, unit] < view.gpu_streams[node, unit]
        if not free:
            return None
        self.pos[q] += 1
        return unit


def scale_gpus(scenario: Scenario, factor: float) -> Scenario:
    """The scenario with every GPU's FP32 rate and memory bandwidth multiplied by ``factor``."""

    def g(m: GpuModel) -> GpuModel:
        return dataclasses.replace(m, fp32_tflops=m.fp32_tflops * factor, mem_bw_gbs=m.mem_bw_gbs * factor)

    nodes = tuple(dataclasses.replace(n, gpus=tuple(g(m) for m in n.gpus)) for n in scenario.cluster.nodes)
    return dataclasses.replace(scenario, cluster=ClusterSpec(nodes))


@st.composite
def fixed_schedule_scenarios(draw: st.DrawFn) -> Scenario:
    """Every unit a single server — one stream per GPU (no co-location, so no interference) and one
    core — ample host memory, and every task arriving and transferred within nanoseconds, so a
    recorded schedule can always be replayed: the simulator offers each waiting subtask once per
    event, and with single servers the subtask next on a unit never misses a free unit."""
    nodes = tuple(
        NodeSpec(
            name=f"n{i}",
            cpu_cores=1,
            host_mem_gib=256.0,
            gpus=tuple(CATALOG[m] for m in draw(st.lists(st.sampled_from(MODELS), min_size=1, max_size=3))),
            streams_per_gpu=1,
            net_gbps=1e9,
        )
        for i in range(draw(st.integers(1, 3)))
    )
    drift = DriftSpec()
    if draw(st.booleans()):
        drift = DriftSpec(sigma=draw(st.floats(0.01, 0.3)), interval_s=draw(st.floats(2.0, 30.0)))
    wl = WorkloadSpec(
        tasks=draw(st.integers(3, 25)),
        apps=draw(st.dictionaries(st.sampled_from(APP_NAMES), st.floats(0.1, 3.0), min_size=1)),
        arrival=ArrivalSpec(rate_per_min=1e12),
    )
    return Scenario("fixed", ClusterSpec(nodes), wl, drift=drift, seed=draw(st.integers(0, 2**16)))


def replay_done_times(
    scenario: Scenario, spec: str, factor: float, seed: int
) -> tuple[np.ndarray, np.ndarray, Simulator]:
    """(original completion times, completion times of the same schedule on GPUs x factor, replay)."""
    tasks = generate_tasks(scenario)
    sim, _ = simulate(scenario, spec, seed, tasks)
    assert sim.trace is not None
    sched = TwoStageScheduler(
        ReplaySelector({i: r.node for i, r in enumerate(sim.records)}), ReplayPlacer(sim.trace)
    )
    re, m = simulate(scale_gpus(scenario, factor), sched, seed, tasks)
    check_accounting(re, m)
    # The replay ran the recorded schedule: same units, same order on every unit.
    assert re.trace is not None
    starts = lambda tr: [e[2:] for e in tr if e[0] == "start"]  # noqa: E731
    assert sorted(starts(re.trace)) == sorted(starts(sim.trace))
    by_unit = lambda tr: sorted(starts(tr), key=lambda e: (e[2], e[3]))  # noqa: E731  stable: keeps order
    assert by_unit(re.trace) == by_unit(sim.trace)
    done = lambda s: np.array([r.done_s for r in s.records])  # noqa: E731
    return done(sim), done(re), re


@settings(max_examples=examples(40), deadline=None)
@given(
    fixed_schedule_scenarios(),
    st.sampled_from(selector_names()),
    st.sampled_from(placer_names()),
    st.floats(1.0, 4.0),
    st.integers(0, 99),
)
def test_faster_gpus_never_delay_a_fixed_schedule(
    scenario: Scenario, selector: str, placer: str, factor: float, seed: int
) -> None:
    before, after, _ = replay_done_times(scenario, f"{selector}+{placer}", factor, seed)
    ok = ~np.isnan(before)
    assert np.array_equal(ok, ~np.isnan(after))
    assert np.all(after[ok] <= before[ok] * (1 + 1e-9)), np.max(after[ok] - before[ok])


def test_replay_at_equal_speed_reproduces_the_run(small_scenario, node) -> None:
    sc = small_scenario(
        nodes=(node("a", cores=1, gpus=("T4", "P4"), streams=1, net_gbps=1e9),),
        apps=dict.fromkeys(APP_NAMES, 1.0),
        tasks=25,
        rate_per_min=1e12,
    )
    before, after, _ = replay_done_times(sc, "mct+speedup", 1.0, 0)
    np.testing.assert_allclose(after, before, rtol=1e-12)


def test_slower_gpus_do_delay_a_fixed_schedule(small_scenario, node) -> None:
    """The monotonicity check can fail: slowing the GPUs makes some task finish later."""
    sc = small_scenario(
        nodes=(node("a", cores=1, gpus=("T4", "P4"), streams=1, net_gbps=1e9),),
        apps=dict.fromkeys(APP_NAMES, 1.0),
        tasks=25,
        rate_per_min=1e12,
    )
    before, after, _ = replay_done_times(sc, "mct+speedup", 0.5, 0)
    assert np.any(after > before * (1 + 1e-9))
    before, after, _ = replay_done_times(sc, "mct+speedup", 2.0, 0)
    assert np.all(after <= before) and np.any(after < before)


# ---- invalid placements ----------------------------------------------------------------------------
class FixedPlacer:
    """Returns whatever ``choose`` says, with no checks."""

    name = "broken"

    def __init__(self, choose: Callable[[Task, Subtask], int | None]) -> None:
        self.choose = choose

    def reset(self, view: ClusterView, seed: int) -> None:
        pass

    def place(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        return self.choose(task, sub)


def run_with_placer(
    scenario: Scenario, choose: Callable[[Task, Subtask], int | None], tasks: list[Task] | None = None
) -> None:
    sched = TwoStageScheduler(make_selector("round-robin"), FixedPlacer(choose))
    simulate(scenario, sched, 0, tasks)


def test_placer_returning_a_full_gpu_raises(small_scenario, node) -> None:
    sc = small_scenario(nodes=(node("a", gpus=("T4", "T4"), streams=1),), apps={"kmeans": 1}, tasks=3)
    with pytest.raises(PlacementError, match=r"GPU 0 of node 0"):
        run_with_placer(sc, lambda t, s: 0)


def test_placer_sending_a_cpu_kind_to_a_gpu_raises(small_scenario, node) -> None:
    sc = small_scenario(nodes=(node("a"),), apps={"face_recognition": 1}, tasks=2)
    with pytest.raises(PlacementError, match=r"cannot take load"):
        run_with_placer(sc, lambda t, s: 0)


def test_placer_exceeding_gpu_memory_raises(small_scenario, node) -> None:
    tiny = dataclasses.replace(CATALOG["T4"], name="T4-tiny", mem_gib=0.25)
    sc = small_scenario(nodes=(dataclasses.replace(node("a"), gpus=(tiny,)),), apps={"matmul": 1}, tasks=2)
    with pytest.raises(PlacementError, match=r"cannot take matmul"):
        run_with_placer(sc, lambda t, s: 0)
    # The same run with a real placer puts matmul on the CPU instead.
    sim, m = simulate(sc, "round-robin+first-free")
    assert m["tasks_completed"] == 2 and all(e[5] == CPU for e in sim.trace)  # type: ignore[union-attr]


def test_placer_ignoring_a_gpu_model_constraint_raises(small_scenario, node) -> None:
    sc = small_scenario(nodes=(node("a", gpus=("T4",)),), apps={"matmul": 1}, tasks=2)
    tasks = [dataclasses.replace(t, gpu_models=frozenset({"A100"})) for t in generate_tasks(sc)]
    with pytest.raises(PlacementError):
        run_with_placer(sc, lambda t, s: 0, tasks)
    sim, m = simulate(sc, "round-robin+mlsm", tasks=tasks)
    assert m["tasks_completed"] == 2 and all(e[5] == CPU for e in sim.trace)  # type: ignore[union-attr]


@pytest.mark.parametrize("unit", [1, 7, -2])
def test_placer_returning_a_missing_unit_raises(unit: int, small_scenario, node) -> None:
    sc = small_scenario(nodes=(node("a", gpus=("T4",)),), apps={"matmul": 1}, tasks=2)
    with pytest.raises(PlacementError):
        run_with_placer(sc, lambda t, s: unit)


def test_placer_using_a_busy_core_raises(small_scenario, node) -> None:
    sc = small_scenario(
        nodes=(node("a", cores=1, gpus=("T4",), streams=1),), apps={"matmul": 1}, tasks=3, rate_per_min=1e6
    )
    with pytest.raises(PlacementError, match=r"no CPU core"):
        run_with_placer(sc, lambda t, s: CPU)


def test_placer_that_never_places_raises_instead_of_hanging(small_scenario, node) -> None:
    sc = small_scenario(nodes=(node("a"),), apps={"matmul": 1}, tasks=2)
    with pytest.raises(PlacementError, match=r"waiting on idle node"):
        run_with_placer(sc, lambda t, s: None)


# ---- node churn ---------------------------------------------------------------------------------------
def test_leaving_node_requeues_its_tasks_and_they_complete(small_scenario, node) -> None:
    sc = small_scenario(
        # b leaves while arrivals (~20 s of them) still keep both nodes busy.
        nodes=(node("a", gpus=("P4",), streams=2), node("b", gpus=("P4",), streams=2, leave_s=12.0)),
        apps={"intrusion_detection": 1},
        tasks=20,
        rate_per_min=60.0,
    )
    sim, m = simulate(sc, "round-robin+speedup")
    check_accounting(sim, m)
    check_trace(sim)
    assert m["tasks_requeued"] > 0
    assert m["tasks_completed"] == 20 and m["tasks_unschedulable"] == 0
    assert all(r.node == 0 for r in sim.records if r.requeues)
    assert all(r.done_s > 12.0 for r in sim.records if r.requeues)


def test_requeued_task_without_another_feasible_node_is_unschedulable(small_scenario, node) -> None:
    sc = small_scenario(
        nodes=(node("gpu", gpus=("P4",), leave_s=30.0), node("cpu", gpus=())),
        apps={"face_recognition": 1, "matmul": 1},
        tasks=20,
        rate_per_min=120.0,
    )
    sim, m = simulate(sc, "mct+speedup")
    check_accounting(sim, m)
    check_trace(sim)
    faces = {t.id for t in sim.tasks if t.app == "face_recognition"}
    assert m["tasks_requeued"] > 0
    assert m["tasks_unschedulable"] > 0
    unfinished = {i for i, r in enumerate(sim.records) if not r.completions}
    assert unfinished <= faces
    assert all(sim.records[i].completions for i in range(20) if i not in faces)


def test_task_whose_only_feasible_node_is_gone_is_unschedulable(small_scenario, node) -> None:
    """GPU-only work arriving after the only GPU node left is reported, not lost or run."""
    sc = small_scenario(
        nodes=(node("gpu", gpus=("T4",), leave_s=1.0), node("cpu", gpus=())),
        apps={"face_recognition": 1, "matmul": 1},
        tasks=12,
    )
    tasks = [dataclasses.replace(t, arrival_s=100.0 + t.id) for t in generate_tasks(sc)]
    sim, m = simulate(sc, "mct", tasks=tasks)
    check_accounting(sim, m)
    faces = sum(t.app == "face_recognition" for t in tasks)
    assert 0 < faces < 12
    assert m["tasks_unschedulable"] == faces
    assert m["tasks_completed"] == 12 - faces
    assert m["tasks_lost"] == 0 and m["tasks_requeued"] == 0


def test_task_waits_for_its_only_feasible_node_to_join(small_scenario, node) -> None:
    sc = small_scenario(
        nodes=(node("cpu", gpus=()), node("gpu", gpus=("T4",), join_s=500.0)),
        apps={"face_recognition": 1},
        tasks=5,
    )
    sim, m = simulate(sc, "least-loaded")
    check_accounting(sim, m)
    check_trace(sim)
    assert m["tasks_completed"] == 5 and m["tasks_unschedulable"] == 0
    assert all(r.node == 1 and r.first_start_s >= 500.0 for r in sim.records)


def test_a_scheduler_with_another_placer_is_refused(small_scenario) -> None:  # type: ignore[no-untyped-def]
    """The world has one placer, handed over at construction; a second one is an error, not a
    silent replacement."""
    sc = small_scenario(tasks=3)
    sim = Simulator(sc, generate_tasks(sc, 0), parse_scheduler("mct").placer)
    with pytest.raises(ValueError, match="its placer is not the one"):
        sim.run(parse_scheduler("mct"))

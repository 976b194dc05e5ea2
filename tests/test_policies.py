"""Stage-1 selectors, stage-2 placers and the ``SELECTOR+PLACER`` registry."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.simulator import Simulator
from rlsched.cluster import ClusterSpec, NodeSpec
from rlsched.feasibility import feasible_nodes, task_needs
from rlsched.hardware import CATALOG
from rlsched.policies.placers import (
    FirstFreePlacer,
    LeastLoadedPlacer,
    MlsmPlacer,
    SpeedupPlacer,
    cpu_seconds,
    gpus_ever_fitting,
)
from rlsched.policies.registry import (
    DEFAULT_PLACER,
    make_placer,
    parse_scheduler,
    placer_names,
    selector_names,
)
from rlsched.policies.registry import make_selector as registry_selector
from rlsched.policies.selectors import MctSelector
from rlsched.scenarios.spec import Scenario, WorkloadSpec
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.scheduler import CPU, NodeSelector, SubtaskPlacer, TwoStageScheduler, is_clairvoyant
from rlsched.tasks import Device, Subtask, Task
from rlsched.view import ClusterView
from rlsched.workloads import APPS, build_graph

MODELS = sorted(CATALOG)


# ---- random clusters, states and tasks ----------------------------------------------------------
@st.composite
def clusters(draw: st.DrawFn, max_nodes: int = 6) -> ClusterSpec:
    nodes = []
    for i in range(draw(st.integers(1, max_nodes))):
        gpus = tuple(CATALOG[m] for m in draw(st.lists(st.sampled_from(MODELS), max_size=4)))
        nodes.append(
            NodeSpec(
                name=f"n{i}",
                cpu_cores=draw(st.integers(1, 16)),
                host_mem_gib=draw(st.floats(0.5, 128.0)),
                gpus=gpus,
                streams_per_gpu=draw(st.integers(1, 4)),
                net_gbps=draw(st.sampled_from([1.0, 10.0, 25.0])),
            )
        )
    return ClusterSpec(tuple(nodes))


def randomise_state(view: ClusterView, rng: np.random.Generator) -> None:
    """Fill a view's dynamic arrays with a random but consistent busy state."""
    n, g = view.gpu_valid.shape
    valid = view.gpu_valid
    view.alive[:] = rng.random(n) < 0.8
    view.cpu_busy[:] = rng.integers(0, view.cores + 1)
    view.host_mem_used_mb[:] = view.host_mem_mb * rng.random(n)
    view.gpu_running[:] = np.where(valid, rng.integers(0, view.gpu_streams + 1), 0)
    # Memory: often nearly full, sometimes empty, so that placers must really check it.
    frac = rng.choice([0.0, 0.3, 0.7, 0.9, 0.97, 1.0], size=(n, g))
    view.gpu_mem_used_mb[:] = np.where(valid, view.gpu_mem_mb * frac, 0.0)
    view.net_in_busy_s[:] = rng.exponential(5.0, n)
    view.tasks_on_node[:] = rng.integers(0, 20, n)
    view.ready_waiting[:] = rng.integers(0, 10, n)
    view.backlog_gpu_s[:] = rng.exponential(100.0, n)
    view.backlog_cpu_s[:] = rng.exponential(100.0, n)
    view.speed_gpu[:] = np.where(valid, rng.uniform(0.3, 2.0, (n, g)), 1.0)
    view.speed_cpu[:] = rng.uniform(0.3, 2.0, n)
    view.time_s = float(rng.uniform(0, 1000))
    resync(view)


def resync(view: ClusterView) -> None:
    """Recompute the view's aggregates and mirrors after a test wrote its per-GPU arrays directly."""
    view.resync()


@st.composite
def tasks(draw: st.DrawFn, models: list[str] | None = None) -> Task:
    app = draw(st.sampled_from(sorted(APPS)))
    x = draw(st.floats(1.0, 400.0))
    constraint: frozenset[str] = frozenset()
    if models is not None and draw(st.booleans()):
        constraint = frozenset(draw(st.lists(st.sampled_from(models), min_size=1, max_size=3)))
    return Task(
        id=draw(st.integers(0, 1000)),
        app=app,
        input_mb=x,
        arrival_s=0.0,
        graph=build_graph(app, x),
        priority=draw(st.integers(0, 3)),
        gpu_models=constraint,
        host_mem_mb=2 * x + 256.0,
    )


def make_selector(name: str, spec: ClusterSpec, seed: int) -> tuple[NodeSelector, ClusterView]:
    """A reset selector and the view it reads (the oracle gets a simulator bound to that view)."""
    sel = registry_selector(name)
    scenario = Scenario("sel", spec, WorkloadSpec(tasks=0))
    sim = Simulator(scenario, [], FirstFreePlacer(), seed)
    sel.reset(sim.view, seed)
    if is_clairvoyant(sel):  # the oracle: a declared clairvoyant reference
        sel.bind_simulator(sim)  # type: ignore[attr-defined]
    return sel, sim.view


# ---- selectors --------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(
    clusters(),
    st.sampled_from(selector_names()),
    st.lists(tasks(), min_size=1, max_size=6),
    st.integers(0, 2**32 - 1),
)
def test_selectors_only_pick_masked_in_nodes(
    spec: ClusterSpec, name: str, task_list: list[Task], seed: int
) -> None:
    """Random masks within the feasible nodes (the contract: masked-in nodes can run the task)."""
    assert "oracle" in selector_names()
    sel, view = make_selector(name, spec, seed)
    rng = np.random.default_rng(seed)
    for task in task_list:
        randomise_state(view, rng)
        feasible = feasible_nodes(task_needs(task), view)
        if not feasible.any():
            continue
        mask = feasible & (rng.random(view.n_nodes) < rng.uniform(0.1, 1.0))
        if not mask.any():
            mask[rng.choice(np.flatnonzero(feasible))] = True
        node = sel.select(task, view, mask)
        assert isinstance(node, int)
        assert 0 <= node < view.n_nodes and mask[node], (name, mask, node)


@settings(max_examples=60, deadline=None)
@given(
    clusters(),
    st.sampled_from(sorted(set(selector_names()) - {"oracle"})),
    st.lists(tasks(), min_size=1, max_size=6),
    st.integers(0, 2**32 - 1),
)
def test_observable_selectors_pick_masked_in_nodes_for_any_mask(
    spec: ClusterSpec, name: str, task_list: list[Task], seed: int
) -> None:
    """Even a mask that includes nodes unable to run the task (or excludes all that can) is obeyed.

    Not the oracle: it scores a node that cannot run the task as infinitely slow, and with only such
    nodes masked in it has nothing to choose from (outside its contract).
    """
    sel, view = make_selector(name, spec, seed)
    rng = np.random.default_rng(seed)
    for task in task_list:
        randomise_state(view, rng)
        mask = rng.random(view.n_nodes) < rng.uniform(0.1, 0.9)
        if not mask.any():
            mask[rng.integers(view.n_nodes)] = True
        node = sel.select(task, view, mask)
        assert isinstance(node, int)
        assert 0 <= node < view.n_nodes and mask[node], (name, mask, node)


@pytest.mark.parametrize("name", selector_names())
def test_selectors_with_a_single_feasible_node_pick_it(name: str) -> None:
    spec = ClusterSpec(tuple(NodeSpec(f"n{i}", 4, 16, (CATALOG["T4"],)) for i in range(5)))
    sel, view = make_selector(name, spec, 0)
    task = Task(0, "matmul", 100.0, 0.0, build_graph("matmul", 100.0))
    for k in (4, 0, 2):
        mask = np.zeros(5, dtype=bool)
        mask[k] = True
        assert sel.select(task, view, mask) == k


# ---- parse_scheduler ------------------------------------------------------------------------------
def test_parse_scheduler_pairs_a_selector_and_a_placer() -> None:
    s = parse_scheduler("mct+mlsm")
    assert isinstance(s, TwoStageScheduler)
    assert isinstance(s.selector, MctSelector) and isinstance(s.placer, MlsmPlacer)
    assert s.name == "mct+mlsm"


@pytest.mark.parametrize("sel", selector_names())
def test_bare_selector_gets_the_default_placer(sel: str) -> None:
    s = parse_scheduler(sel)
    assert s.selector.name == sel
    assert isinstance(s.placer, type(make_placer(DEFAULT_PLACER)))
    assert s.name == f"{sel}+{DEFAULT_PLACER}"


@pytest.mark.parametrize("sel", selector_names())
@pytest.mark.parametrize("plc", placer_names())
def test_every_registered_pair_parses(sel: str, plc: str) -> None:
    s = parse_scheduler(f"{sel}+{plc}")
    assert isinstance(s.selector, NodeSelector) and isinstance(s.placer, SubtaskPlacer)
    assert (s.selector.name, s.placer.name) == (sel, plc)


@pytest.mark.parametrize(
    ("spec", "bad", "part"),
    [
        ("nope", "nope", "selector"),
        ("nope+mlsm", "nope", "selector"),
        ("mct+nope", "nope", "placer"),
        ("MCT", "MCT", "selector"),
        ("", "", "selector"),
        ("mct+mlsm+x", "mlsm+x", "placer"),
    ],
)
def test_unknown_names_raise_naming_the_bad_part(spec: str, bad: str, part: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"unknown {part} '{bad}'")) as e:
        parse_scheduler(spec)
    assert "known:" in str(e.value)


# ---- selectors on a real run ------------------------------------------------------------------------
def test_mct_favours_the_much_faster_node(small_scenario, node) -> None:
    sc = small_scenario(
        nodes=(node("slow", cores=4, gpus=("P4",)), node("fast", cores=4, gpus=("H100", "H100"))),
        apps={"matmul": 1.0, "kmeans": 1.0},
        tasks=60,
        rate_per_min=60.0,
    )
    task_list = generate_tasks(sc)
    share = {}
    for spec in ("mct", "random"):
        sched = parse_scheduler(spec)
        sim = Simulator(sc, task_list, sched.placer, seed=1)
        m = sim.run(sched)
        assert m.tasks_completed == 60
        share[spec] = Counter(r.node for r in sim.records)[1] / 60
    assert share["mct"] > share["random"]
    assert share["mct"] > 0.7 and 0.25 < share["random"] < 0.75


# ---- placers ----------------------------------------------------------------------------------------
#: Placers that never leave a subtask waiting while a unit it may use is free (MLSM keeps work that
#: may use a GPU waiting for one; speedup may wait for a GPU it predicts to be faster).
WORK_CONSERVING = (FirstFreePlacer, LeastLoadedPlacer)


@settings(max_examples=60, deadline=None)
@given(
    clusters(max_nodes=3),
    st.sampled_from(placer_names()),
    st.data(),
    st.integers(0, 2**32 - 1),
)
def test_placers_only_return_units_that_can_take_the_subtask(
    spec: ClusterSpec, name: str, data: st.DataObject, seed: int
) -> None:
    view = ClusterView.from_spec(spec)
    rng = np.random.default_rng(seed)
    placer = make_placer(name)
    placer.reset(view, seed)
    models = [*MODELS, "not-a-model"]
    for _ in range(8):
        randomise_state(view, rng)
        task = data.draw(tasks(models))
        node = int(rng.integers(view.n_nodes))
        for sub in task.graph.subtasks:
            unit = placer.place(task, sub, node, view)
            free = [
                g
                for g in range(view.max_gpus)
                if view.gpu_valid[node, g]
                and view.gpu_running[node, g] < view.gpu_streams[node, g]
                and view.gpu_mem_used_mb[node, g] + sub.mem_mb <= view.gpu_mem_mb[node, g]
                and (not task.gpu_models or view.model_names[view.gpu_model[node, g]] in task.gpu_models)
                and sub.device is not Device.CPU
            ]
            core = view.cpu_busy[node] < view.cores[node] and sub.device is not Device.GPU
            if unit is None:
                if isinstance(placer, WORK_CONSERVING):
                    assert not free and not core, "a work-conserving placer left a free unit idle"
                # No placer idles the only kind of unit a subtask can use.
                assert not (sub.device is Device.GPU and free), f"{name} idled a free GPU"
                assert not (sub.device is Device.CPU and core), f"{name} idled a free core"
                continue
            assert isinstance(unit, int)
            if unit == CPU:
                assert core, f"{name} put {sub.kind.name} on a busy or forbidden CPU"
            else:
                assert unit in free, f"{name} returned GPU {unit} that cannot take {sub.kind.name}"


def test_speedup_placer_sends_cpu_friendly_work_to_a_free_core() -> None:
    """The speedup rule is not 'GPU always': a tiny memory-bound kind on a busy slow GPU goes to a core."""
    spec = ClusterSpec((NodeSpec("n", 8, 64, (CATALOG["P4"],), streams_per_gpu=4),))
    view = ClusterView.from_spec(spec)
    task = Task(0, "face_recognition", 100.0, 0.0, build_graph("face_recognition", 100.0))
    landmarks = task.graph.subtasks[2]
    assert landmarks.kind.name == "landmarks" and landmarks.device is Device.BOTH
    view.gpu_running[0, 0] = 3
    view.speed_gpu[0, 0] = 0.1  # measured 10x slower than its datasheet
    resync(view)
    assert SpeedupPlacer().place(task, landmarks, 0, view) == CPU
    assert FirstFreePlacer().place(task, landmarks, 0, view) == 0


def test_speedup_placer_counts_every_busy_stream_when_it_predicts_the_wait_for_a_gpu() -> None:
    """With every stream busy, a GPU drains its queue at streams x measured speed: a GPU-heavy
    subtask waits for a stream unless the queue ahead is longer than the core's run time.

    Counting one stream per GPU overstated the wait eightfold here and sent matmul to cores,
    where it ran ~100x slower (the collapse of ``speedup`` on ``interference-saturated``).
    """
    spec = ClusterSpec((NodeSpec("n", 8, 64, (CATALOG["V100M16"],), streams_per_gpu=8),))
    view = ClusterView.from_spec(spec)
    task = Task(0, "matmul", 100.0, 0.0, build_graph("matmul", 100.0))
    sub = task.graph.subtasks[0]
    view.gpu_running[0, 0] = 8
    view.speed_gpu[0, 0] = 0.5  # co-runners halve each stream's speed
    resync(view)
    placer = SpeedupPlacer()
    t_cpu = cpu_seconds(sub, 0, view)
    drain = 8 * 0.5  # nominal GPU seconds finished per second
    # Queued work the eight streams finish in half the core's run time (one stream: in four).
    view.backlog_gpu_s[0] = 0.5 * t_cpu * drain
    assert placer.place(task, sub, 0, view) is None, "waits: a stream frees long before a core finishes"
    view.backlog_gpu_s[0] = 2.0 * t_cpu * drain
    assert placer.place(task, sub, 0, view) == CPU, "a queue longer than the core's run time: take the core"


def test_why_infeasible_names_the_requirement_no_node_meets(small_scenario, node) -> None:  # type: ignore[no-untyped-def]
    from rlsched.feasibility import TaskNeeds, why_infeasible
    from rlsched.view import ClusterView

    sc = small_scenario(nodes=(node("a", cores=2, gpus=("T4",)),))
    v = ClusterView.from_spec(sc.cluster)
    big_host = TaskNeeds(1e9, 0.0, 0.0, False, True, frozenset())
    assert why_infeasible(big_host, v).startswith("need 1,000,000,000 MB of host memory")
    wrong_model = TaskNeeds(10.0, 100.0, 100.0, True, False, frozenset({"H100"}))
    assert why_infeasible(wrong_model, v) == "need a GPU of model H100 (the cluster has none)"
    big_gpu = TaskNeeds(10.0, 1e7, 1e7, True, False, frozenset())
    assert why_infeasible(big_gpu, v).startswith("need 10,000,000 MB on one GPU")


def test_the_gpus_a_subtask_ever_fits_read_from_the_lists_are_the_masks(small_scenario, node) -> None:  # type: ignore[no-untyped-def]
    """``gpus_ever_fitting`` (the placers' list read) marks the GPUs the view's arrays say could
    ever take the subtask (the numpy mask it replaced, kept here as the reference): on nodes
    of none, one and four GPUs (padded columns), for subtasks of every size and tasks limited to
    some GPU models, and after a node joins (the view grows its columns)."""
    sc = small_scenario(
        nodes=(
            node("cpu", gpus=()),
            node("one", gpus=("T4",)),
            node("mix", gpus=("K80", "A100", "T4", "V100M16")),
        ),
        apps=dict.fromkeys(APPS, 1.0),
        tasks=40,
    )
    view = ClusterView.from_spec(sc.cluster)
    view.append_nodes(ClusterView.from_spec(ClusterSpec((node("late", gpus=("H100", "P4")),))))
    limits = (frozenset(), frozenset({"T4"}), frozenset({"A100", "H100", "K80"}))
    seen = 0
    for i, task in enumerate(generate_tasks(sc, 0)):
        task = dataclasses.replace(task, gpu_models=limits[i % len(limits)])
        # mem_mb 0 as well: a padded column has no memory, so only its mask keeps it out then.
        for sub in (*task.graph.subtasks, dataclasses.replace(task.graph.subtasks[0], mem_mb=0.0)):
            for n in range(len(view.node_names)):
                want = [int(g) for g in np.flatnonzero(_ever_fits(task, sub, n, view))]
                assert gpus_ever_fitting(task, sub, n, view) == want, (task.gpu_models, sub.mem_mb, n)
                seen += bool(want)
    assert seen > 100


def _ever_fits(task: Task, sub: Subtask, node: int, view: ClusterView) -> np.ndarray:
    """The reference: (G,) GPUs that could take ``sub`` once idle, from the view's arrays."""
    valid = view.gpu_valid[node] & (view.gpu_mem_mb[node] >= sub.mem_mb)
    if task.gpu_models:
        allowed = [i for i, m in enumerate(view.model_names) if m in task.gpu_models]
        valid &= np.isin(view.gpu_model[node], allowed)
    return valid

"""IAWP: the simulator's profiling instrument, the ``iawp`` and ``iawp-cosine`` placers, two-stage runs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from envs.simulated_instrument import SimulatedProfiler
from envs.simulator import Simulator
from rlsched.interference.calibration import ObservingPlacer
from rlsched.interference.instrument import ProfilingInstrument
from rlsched.interference.kind_profiles import METRICS
from rlsched.interference.predictor import ColocationData, fit_interference
from rlsched.policies.iawp import ONLINE_BATCH, ColocGreedyPlacer, IawpPlacer
from rlsched.policies.iawp_cosine import IawpCosinePlacer
from rlsched.policies.registry import make_selector, parse_scheduler
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.scheduler import CPU, TwoStageScheduler
from rlsched.tasks import Subtask, Task
from rlsched.view import ClusterView
from tests.conftest import node, small_scenario


def _sim(**kw: object) -> Simulator:
    sc = small_scenario(
        nodes=(node("a", cores=4, gpus=("V100M16", "V100M16"), streams=4), node("b", gpus=("P100",))),
        apps={"matmul": 1.0, "fft": 1.0, "kmeans": 1.0},
        **kw,  # type: ignore[arg-type]
    )
    return Simulator(sc, generate_tasks(sc, 0), parse_scheduler("mct").placer)


def test_profiler_measures_a_fraction_of_pairs_close_to_the_co_run_truth() -> None:
    sim = _sim(tasks=30)
    prof = SimulatedProfiler(sim.testbed())
    assert isinstance(prof, ProfilingInstrument)
    assert prof.devices() == ["P100", "V100M16"]
    kinds = [k.name for k in prof.kinds()]
    assert "matmul" in kinds and "load" not in kinds  # CPU-only kinds never share a GPU
    data = prof.colocation(0.5, seed=3)
    n_all = len(prof.devices()) * len(kinds) ** 2
    assert 0.3 * n_all < len(data.y) < 0.7 * n_all
    seen = {(d, k) for d, k in zip(data.device, data.kind, strict=True)}
    assert seen == {(d, k) for d in prof.devices() for k in kinds}
    by_name = {k.name: k for k in prof.kinds()}
    models = {g.name: g for n in sim.nodes for g in n.gpus}
    for d, k, p, y in zip(data.device, data.kind, data.partner, data.y, strict=True):
        truth = sim.truth.factors([by_name[k], by_name[p]], [1.0, 1.0], models[d])[0]
        assert abs(np.log(y / truth)) < 0.1  # 2% noise, five sigma
    again = prof.colocation(0.5, seed=3)
    assert again.kind == data.kind and np.array_equal(again.y, data.y)


def test_profiler_kind_profiles_two_metrics_each() -> None:
    prof = SimulatedProfiler(_sim(tasks=10).testbed())
    s = prof.kind_profiles(2, seed=0)
    counts: dict[str, int] = {}
    for k in s.kinds:
        counts[k] = counts.get(k, 0) + 1
    assert set(counts) == {k.name for k in prof.kinds()} and set(counts.values()) == {2}
    assert set(s.metric) <= set(METRICS)


def _view_two_gpus(running: tuple[list[str], list[str]] = ([], []), busy_cores: int = 0) -> ClusterView:
    """One node of two V100s (4 streams each) and 2 cores, with these kinds running per GPU."""
    sc = small_scenario(nodes=(node("a", cores=2, gpus=("V100M16", "V100M16"), streams=4),))
    v = ClusterView.from_spec(sc.cluster)
    for g, kinds in enumerate(running):
        for k in kinds:
            v.gpu_started(0, g, 100.0, k)
    for _ in range(busy_cores):
        v.cpu_started(0)
    return v


def _ready(kind: str, app: str) -> tuple[Task, Subtask]:
    """A task of ``app`` and its first subtask of ``kind``."""
    task = generate_tasks(small_scenario(apps={app: 1.0}, tasks=1), 0)[0]
    return task, next(s for s in task.graph.subtasks if s.kind.name == kind)


def _pair_data(bad: str, good: str, kinds: list[str]) -> ColocationData:
    """matmul suffers with ``bad`` (0.3) and barely with ``good`` (0.95); other pairs 0.7."""
    d, k, p, y = [], [], [], []
    for _ in range(4):  # repeated rows: the model sees the pattern clearly
        for a in kinds:
            for b in kinds:
                v = 0.7
                if {a, b} == {"matmul", bad}:
                    v = 0.3
                elif {a, b} == {"matmul", good}:
                    v = 0.95
                d.append("V100M16")
                k.append(a)
                p.append(b)
                y.append(v)
    return ColocationData(d, k, p, np.array(y))


@pytest.fixture(scope="module")
def fitted() -> IawpPlacer:
    kinds = ["matmul", "fft", "kmeans_assign"]
    pred = fit_interference(_pair_data("fft", "kmeans_assign", kinds), "ncf", seed=0)
    placer = IawpPlacer(predictor=pred, online=False)
    placer._fill(kinds, ["V100M16"])
    return placer


def test_iawp_avoids_the_gpu_whose_co_runner_interferes(fitted: IawpPlacer) -> None:
    task, sub = _ready("matmul", "matmul")
    # No free core, so the choice is between the GPUs.
    assert fitted.place(task, sub, 0, _view_two_gpus((["fft"], ["kmeans_assign"]), busy_cores=2)) == 1
    # Swap the co-runners: the choice follows the predicted interference, not the index.
    assert fitted.place(task, sub, 0, _view_two_gpus((["kmeans_assign"], ["fft"]), busy_cores=2)) == 0


def test_coloc_greedy_joins_the_co_runner_that_adds_most_progress(fitted: IawpPlacer) -> None:
    placer = ColocGreedyPlacer(predictor=fitted.predictor)
    placer._fill(["matmul", "fft", "kmeans_assign"], ["V100M16"])
    task, sub = _ready("matmul", "matmul")
    for pair, best in (((["fft"], ["kmeans_assign"]), 1), ((["kmeans_assign"], ["fft"]), 0)):
        v = _view_two_gpus(pair, busy_cores=2)
        assert placer._gain("matmul", 0, best, v) > placer._gain("matmul", 0, 1 - best, v)
        assert placer.place(task, sub, 0, v) == best
    # An empty GPU adds a whole subtask's progress: it beats joining anyone.
    assert placer.place(task, sub, 0, _view_two_gpus(([], ["kmeans_assign"]), busy_cores=2)) == 0


def test_coloc_greedy_waits_for_a_stream_rather_than_a_slow_core(fitted: IawpPlacer) -> None:
    """With every stream taken, matmul (hundreds of times slower on a core) waits for a stream:
    sending it to the free core at once cut throughput from ~5,500 to ~320 tasks/min on a
    saturated mixed-generation cluster."""
    placer = ColocGreedyPlacer(predictor=fitted.predictor)
    placer._fill(["matmul", "fft", "kmeans_assign"], ["V100M16"])
    task, sub = _ready("matmul", "matmul")
    full = (["fft"] * 4, ["kmeans_assign"] * 4)
    assert placer.place(task, sub, 0, _view_two_gpus(full, busy_cores=0)) is None


def test_iawp_hold_rules_differ_in_who_may_pass_a_held_subtask(fitted: IawpPlacer) -> None:
    """Both GPUs run fft, which matmul suffers with (gain -0.4 < 0.3): matmul is held back. With
    ``line`` the kmeans subtask behind it (gain 0.4) waits too; with ``pass`` it takes the stream
    matmul refused."""
    v = _view_two_gpus((["fft"], ["fft"]), busy_cores=2)
    held_task, held = _ready("matmul", "matmul")
    next_task, nxt = _ready("kmeans_assign", "kmeans")
    next_task = dataclasses.replace(next_task, id=held_task.id + 1)
    for hold, expect_next in (("line", None), ("pass", 0)):
        placer = IawpPlacer(predictor=fitted.predictor, online=False, min_gain=0.3, hold=hold)
        placer._fill(["matmul", "fft", "kmeans_assign"], ["V100M16"])
        assert placer.place(held_task, held, 0, v) is None, hold
        assert placer.place(next_task, nxt, 0, v) == expect_next, hold
    with pytest.raises(ValueError, match="hold"):
        IawpPlacer(hold="skip")


def test_a_held_subtask_does_not_hold_back_higher_priorities(fitted: IawpPlacer) -> None:
    """``line``: a batch matmul held back (fft everywhere) keeps equal-priority kmeans behind it,
    but an interactive kmeans (priority 1) is not in its line and takes the stream."""
    v = _view_two_gpus((["fft"], ["fft"]), busy_cores=2)
    held_task, held = _ready("matmul", "matmul")
    batch_task, batch = _ready("kmeans_assign", "kmeans")
    batch_task = dataclasses.replace(batch_task, id=held_task.id + 1)
    urgent_task = dataclasses.replace(batch_task, id=held_task.id + 2, priority=1)
    placer = IawpPlacer(predictor=fitted.predictor, online=False, min_gain=0.3, hold="line")
    placer._fill(["matmul", "fft", "kmeans_assign"], ["V100M16"])
    assert placer.place(held_task, held, 0, v) is None
    assert placer.place(batch_task, batch, 0, v) is None
    assert placer.place(urgent_task, batch, 0, v) == 0
    assert placer.place(batch_task, batch, 0, v) is None  # the batch line is still held


def test_the_line_lets_its_held_subtask_in_and_ends_when_the_gpus_are_idle(fitted: IawpPlacer) -> None:
    """``line``: the held subtask itself is admitted as soon as joining gains enough (a GPU fell
    idle while another still runs), and a node whose GPUs run nothing holds no line: a younger
    subtask then takes a stream. (The placer refuses a subtask behind the line without scoring
    its GPUs; these are the cases where it must not.)"""
    held_task, held = _ready("matmul", "matmul")
    batch_task, batch = _ready("kmeans_assign", "kmeans")
    batch_task = dataclasses.replace(batch_task, id=held_task.id + 1)
    placer = IawpPlacer(predictor=fitted.predictor, online=False, min_gain=0.3, hold="line")
    placer._fill(["matmul", "fft", "kmeans_assign"], ["V100M16"])
    assert placer.place(held_task, held, 0, _view_two_gpus((["fft"], ["fft"]), busy_cores=2)) is None
    one_idle = _view_two_gpus((["fft"], []), busy_cores=2)
    assert placer.place(batch_task, batch, 0, one_idle) is None  # behind the line
    assert placer.place(held_task, held, 0, one_idle) == 1  # the held one goes first
    assert placer.place(held_task, held, 0, _view_two_gpus((["fft"], ["fft"]), busy_cores=2)) is None
    assert placer.place(batch_task, batch, 0, _view_two_gpus(([], []), busy_cores=2)) == 0


def test_iawp_learns_online_from_observed_co_runs() -> None:
    kinds = ["matmul", "fft"]
    data = _pair_data("kmeans_assign", "fft", kinds)  # fft with matmul profiled at 0.95
    placer = IawpPlacer(predictor=fit_interference(data, "ncf", seed=0), online=True)
    assert isinstance(placer, ObservingPlacer)
    placer._fill(kinds, ["V100M16"])
    before = placer._slow[("V100M16", "fft")]["matmul"]
    # The placer keeps the sums it scores GPUs by; an update must reach them too.
    assert placer._corun_terms("V100M16", "fft", ["matmul"])[0] == before
    beside_matmul = _view_two_gpus((["matmul"], []))
    gain = placer._gain("fft", 0, 0, beside_matmul)
    placer.observe("V100M16", "fft", (), 1.0)  # solo reference
    for _ in range(ONLINE_BATCH * 3):
        placer.observe("V100M16", "fft", ("matmul",), 0.3)  # measured: far slower than predicted
    assert placer.updates == 3
    after = placer._slow[("V100M16", "fft")]["matmul"]
    assert after > before + 0.3  # the predicted slowdown (1/n - 1) moved toward 1/0.3 - 1
    assert placer._corun_terms("V100M16", "fft", ["matmul"])[0] == after
    assert placer._gain("fft", 0, 0, beside_matmul) < gain - 0.1  # joining matmul now gains less


def test_a_co_run_with_a_partner_half_the_time_teaches_twice_the_pair_slowdown() -> None:
    """A partner beside the subtask half its run (share 0.5) that slowed it by ``x`` in all slows
    it by ``2x`` when beside it the whole time; a brief overlap teaches nothing, none is a solo run."""
    kinds = ["matmul", "fft"]

    def learnt(partners: tuple[str, ...], shares: tuple[float, ...] | None, speed: float) -> float:
        placer = IawpPlacer(predictor=fit_interference(_pair_data("kmeans_assign", "fft", kinds), "ncf", 0))
        placer._fill(kinds, ["V100M16"])
        placer.observe("V100M16", "fft", (), 1.0)
        for _ in range(ONLINE_BATCH):
            placer.observe("V100M16", "fft", partners, speed, shares)
        assert placer.updates == 1, placer.seen
        return placer._slow[("V100M16", "fft")]["matmul"]

    whole = learnt(("matmul",), None, 0.5)  # slowdown 1 the whole time
    half = learnt(("matmul",), (0.5,), 1 / 1.5)  # slowdown 0.5 over half the run: the same pair
    assert abs(whole - half) < 0.02, (whole, half)
    placer = IawpPlacer(predictor=fit_interference(_pair_data("kmeans_assign", "fft", kinds), "ncf", 0))
    placer.observe("V100M16", "fft", ("matmul",), 0.5, (0.01,))
    placer.observe("V100M16", "fft", ("matmul",), 0.5, (0.1,))
    assert placer.seen == {"solo": 1, "co_run": 0, "no_reference": 0, "brief": 1}


def test_co_runners_are_counted_by_the_time_they_ran_beside_a_subtask() -> None:
    from runtime.cluster.corunners import CoRunners

    c = CoRunners(2)
    a = c.started(0, "fft", 0.0)
    b = c.started(0, "matmul", 1.0)  # beside fft from 1 to 3 of fft's 4 seconds
    other = c.started(1, "matmul", 0.0)  # another GPU: not a co-runner
    assert c.finished(0, "matmul", b, 3.0) == {"fft": 1.0}
    d = c.started(0, "fft", 3.0)  # a second fft from 3 to 4
    assert c.finished(0, "fft", a, 4.0) == {"fft": 0.25, "matmul": 0.5}
    assert c.finished(0, "fft", d, 5.0) == {"fft": 0.5}  # beside the first fft from 3 to 4
    assert c.finished(1, "matmul", other, 5.0) == {}


def test_iawp_cosine_prefers_dissimilar_co_runners() -> None:
    placer = IawpCosinePlacer()
    placer._index = {"matmul": 0, "fft": 1, "kmeans_assign": 2}
    placer._similarity = np.array([[1.0, 0.2, 0.9], [0.2, 1.0, 0.3], [0.9, 0.3, 1.0]])
    placer._speedup = np.array([50.0, 3.0, 40.0])
    task, sub = _ready("matmul", "matmul")
    assert placer.place(task, sub, 0, _view_two_gpus((["kmeans_assign"], ["fft"]))) == 1  # fft: least like it
    # A kind with a low predicted speedup takes a free core when its GPU share is worth less.
    t_fft, fft = _ready("fft", "fft")
    v = _view_two_gpus((["kmeans_assign", "fft", "fft"], ["fft", "fft", "fft"]))
    assert placer.place(t_fft, fft, 0, v) == CPU


@pytest.mark.parametrize("placer", ["iawp", "iawp-cosine", "coloc-greedy"])
def test_two_stage_runs_complete_every_task(placer: str) -> None:
    sc = small_scenario(
        nodes=(node("a", cores=4, gpus=("V100M16", "V100M16"), streams=4), node("b", gpus=("P100",))),
        apps={"matmul": 1.0, "fft": 1.0, "kmeans": 1.0},
        tasks=60,
        rate_per_min=600.0,
    )
    sched = TwoStageScheduler(make_selector("mct"), parse_scheduler(f"mct+{placer}").placer)
    m = Simulator(sc, generate_tasks(sc, 0), sched.placer, seed=0).run(sched)
    assert m.tasks_completed == 60 and m.tasks_lost == 0
    if placer in ("iawp", "coloc-greedy"):
        assert sched.placer.predictor is not None  # type: ignore[attr-defined]


@pytest.mark.parametrize("placer", ["iawp", "iawp-cosine"])
def test_a_cluster_without_gpus_needs_no_interference_model(placer: str) -> None:
    """Found by the simulator's property test: nothing to profile must not stop a run."""
    sc = small_scenario(nodes=(node("a", cores=2, gpus=()), node("b", cores=2, gpus=())), apps={"fft": 1.0})
    sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, tasks=6))
    sched = parse_scheduler(f"mct+{placer}")
    m = Simulator(sc, generate_tasks(sc, 0), sched.placer).run(sched)
    assert m.tasks_completed == 6 and m.tasks_lost == 0


def test_a_gpu_model_whose_predictions_prove_wrong_is_placed_by_speedup(fitted: IawpPlacer) -> None:
    """Both GPUs run fft, which matmul is predicted to suffer with: ``iawp`` holds matmul back.
    Once the co-runs it sees on that GPU model run far from its predictions (judged after
    ``ERROR_MIN_RUNS``), the placer falls back to ``speedup``'s rule there, which holds nothing
    back; when its predictions come right again, it trusts them again. Without ``fallback`` the
    same observations change nothing."""
    from rlsched.interference.prediction_error import ERROR_MIN_RUNS
    from rlsched.policies.placers import SpeedupPlacer

    v = _view_two_gpus((["fft"], ["fft"]), busy_cores=2)
    task, sub = _ready("matmul", "matmul")
    for fallback in (0.0, 0.2):
        placer = IawpPlacer(
            predictor=fitted.predictor, online=False, min_gain=0.3, hold="line", fallback=fallback
        )
        placer._fill(["matmul", "fft", "kmeans_assign"], ["V100M16"])
        assert placer.place(task, sub, 0, v) is None
        right = 1.0 / (1.0 + placer._pair_slowdown("V100M16", "fft", "matmul"))
        for _ in range(ERROR_MIN_RUNS - 1):  # measured at a third of the predicted speed
            placer.observe("V100M16", "fft", ("matmul",), right / 3.0)
        assert placer.place(task, sub, 0, v) is None, "judged before ERROR_MIN_RUNS co-runs"
        placer.observe("V100M16", "fft", ("matmul",), right / 3.0)
        report = placer.prediction_error()["V100M16"]
        assert report["co_runs"] == ERROR_MIN_RUNS and report["error"] > 1.0
        expected = SpeedupPlacer().place(task, sub, 0, v) if fallback else None
        assert expected is not None or not fallback
        assert placer.place(task, sub, 0, v) == expected, fallback
        assert report["fallback"] is bool(fallback)
        for _ in range(100):  # predictions right again: the EMA falls under the line
            placer.observe("V100M16", "fft", ("matmul",), right)
        assert placer.place(task, sub, 0, v) is None, fallback
        assert placer.prediction_error()["V100M16"]["fallback"] is False

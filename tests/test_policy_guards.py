"""What a policy written outside rlsched can and cannot do to the world it is judged in, and what
a researcher's own decision loop over the ``World`` interface gets (``/tmp/walk-E`` findings,
2026-12-07): each test failed before its fix."""

from __future__ import annotations

import numpy as np
import pytest

from envs.simulator import PlacementError, Simulator
from rlsched import TwoStageScheduler, generate_tasks, load_scenario, make_placer


class InPlace:
    """A selector with one missing ``.copy()``: it subtracts into the view's own array."""

    name = "in-place"

    def reset(self, view: object, seed: int) -> None:
        pass

    def select(self, task: object, view: object, mask: np.ndarray) -> int:
        free = view.host_mem_mb  # type: ignore[attr-defined]
        free -= view.host_mem_used_mb  # type: ignore[attr-defined]
        return int(np.argmax(np.where(mask, free, -np.inf)))


class OpensTheMask(InPlace):
    name = "opens-the-mask"

    def select(self, task: object, view: object, mask: np.ndarray) -> int:
        mask[:] = True
        return 0


class Says(InPlace):
    """A selector that returns a fixed value."""

    def __init__(self, value: object) -> None:
        self.value, self.name = value, f"says-{value!r}"

    def select(self, task: object, view: object, mask: np.ndarray) -> object:  # type: ignore[override]
        return self.value


def _sim(n: int = 50, placer: object = None) -> tuple[Simulator, object]:
    sc = load_scenario("paper", max_tasks=n)
    p = placer if placer is not None else make_placer("speedup")
    return Simulator(sc, generate_tasks(sc, 0), p, seed=0), p  # type: ignore[arg-type]


@pytest.mark.parametrize("selector", [InPlace(), OpensTheMask()])
def test_a_foreign_policy_cannot_write_into_the_world(selector: InPlace) -> None:
    """The slip ran: 24 of 200 tasks completed, 176 "unschedulable", the host memory negative; a
    selector that opened the mask ran tasks on a node not yet joined."""
    sim, p = _sim()
    before = sim.view.host_mem_mb.copy()
    with pytest.raises(ValueError, match="read-only"):
        sim.run(TwoStageScheduler(selector, p))  # type: ignore[arg-type]
    assert np.array_equal(sim.view.host_mem_mb, before)


def test_a_foreign_placer_gets_the_view_read_only_and_a_bad_answer_is_named() -> None:
    class Subtracts:
        name = "subtracts"

        def reset(self, view: object, seed: int) -> None:
            pass

        def place(self, task: object, sub: object, node: int, view: object) -> int | None:
            view.gpu_streams[node] -= 1  # type: ignore[attr-defined]
            return None

    class Floats(Subtracts):
        name = "floats"

        def place(self, task: object, sub: object, node: int, view: object) -> int | None:
            return 0.0  # type: ignore[return-value]

    sim, p = _sim(placer=Subtracts())
    with pytest.raises(ValueError, match="read-only"):
        sim.run(_sched("mct", p))
    sim, p = _sim(placer=Floats())
    with pytest.raises(PlacementError, match=r"floats: place returned 0\.0 .* expected a GPU index"):
        sim.run(_sched("mct", p))


class CountsInFast(InPlace):
    """A selector that keeps its own count in the view's per-event mirror: it reads it first (as
    a list reads), then adds to it."""

    name = "counts-in-fast"

    def select(self, task: object, view: object, mask: np.ndarray) -> int:
        fast = view.fast  # type: ignore[attr-defined]
        n = int(np.flatnonzero(mask)[0])
        assert len(fast.cpu_busy) == len(mask) and fast.cpu_busy == list(fast.cpu_busy)
        assert fast.cpu_busy[:] == tuple(fast.cpu_busy)
        assert sum(fast.gpu_streams[n]) == sum(list(fast.gpu_streams)[n])  # a list of lists reads too
        fast.cpu_busy[n] += 1
        return n


class TakesAStreamInFast(InPlace):
    name = "takes-a-stream-in-fast"

    def select(self, task: object, view: object, mask: np.ndarray) -> int:
        n = int(np.flatnonzero(mask)[0])
        view.fast.gpu_running[n][0] += 1  # type: ignore[attr-defined]
        return n


@pytest.mark.parametrize("selector", [CountsInFast(), TakesAStreamInFast()])
def test_a_foreign_policy_cannot_write_into_the_views_per_event_lists(selector: InPlace) -> None:
    """``view.fast``'s lists are the world's own mirrors (feasibility and the placers read them
    on every event): written through, the run went on from a state no event made. Read-only to a
    foreign policy, as the arrays are; reads as lists do."""
    sim, p = _sim()
    before = (list(sim.view.fast.cpu_busy), [list(g) for g in sim.view.fast.gpu_running])
    with pytest.raises(TypeError, match="does not support item assignment"):
        sim.run(TwoStageScheduler(selector, p))  # type: ignore[arg-type]
    assert (sim.view.fast.cpu_busy, sim.view.fast.gpu_running) == before


def _sched(selector: str, placer: object) -> TwoStageScheduler:
    from rlsched import make_selector

    return TwoStageScheduler(make_selector(selector), placer)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [True, np.True_, 1.0, None])
def test_a_selector_that_returns_no_node_index_is_named(value: object) -> None:
    """``True`` indexed the mask as a boolean array: numpy's "truth value ... ambiguous"."""
    sim, p = _sim()
    with pytest.raises(
        ValueError, match=r"selector 'says-.*': select returned .* expected the index of a node"
    ):
        sim.run(TwoStageScheduler(Says(value), p))  # type: ignore[arg-type]


def test_a_simulator_runs_once() -> None:
    """A second run returned the first run's metrics, whatever the second scheduler."""
    sim, p = _sim()
    sim.run(_sched("mct", p))
    with pytest.raises(ValueError, match="a Simulator runs once"):
        sim.run(_sched("round-robin", p))


def test_finish_runs_the_assigned_tasks_to_their_end() -> None:
    """After 10 of 50 decisions, finish() stopped at the next arrival: 0 completed, 49 "lost"."""
    sim, p = _sim()
    p.reset(sim.view, 0)  # type: ignore[attr-defined]
    sim.calibrate_placer()
    for _ in range(10):
        t = sim.next_decision()
        assert t is not None
        sim.assign(t, int(np.flatnonzero(sim.mask(t))[0]))
    m = sim.finish()
    assert (m.tasks_completed, m.tasks_unschedulable, m.tasks_lost) == (10, 40, 0), m


def test_what_reset_hands_a_foreign_policy_is_read_only_too() -> None:
    """A policy that kept the view it was reset with could write into it on any later call."""

    class Keeps(InPlace):
        name = "keeps"

        def reset(self, view: object, seed: int) -> None:
            self.view = view

        def select(self, task: object, view: object, mask: np.ndarray) -> int:
            self.view.tasks_on_node[:] = 0  # type: ignore[attr-defined]
            return int(np.flatnonzero(mask)[0])

    sim, p = _sim()
    with pytest.raises(ValueError, match="read-only"):
        sim.run(TwoStageScheduler(Keeps(), p))  # type: ignore[arg-type]


class _Writes:
    """A placer from outside rlsched that writes into the view on its first offer of a root
    subtask (``late=False``: made by the driver's submit) or of a child (``late=True``: made on a
    lane thread when its parent finished); ``mlsm`` decides."""

    name = "writes"

    def __init__(self, late: bool) -> None:
        self.inner, self.late, self.wrote = make_placer("mlsm"), late, False

    def reset(self, view: object, seed: int) -> None:
        self.inner.reset(view, seed)  # type: ignore[arg-type]

    def place(self, task: object, sub: object, node: int, view: object) -> int | None:
        if not self.wrote and bool(sub.parents) == self.late:  # type: ignore[attr-defined]
            self.wrote = True
            view.gpu_streams[node] -= 1  # type: ignore[attr-defined]
        return self.inner.place(task, sub, node, view)  # type: ignore[arg-type]


def test_a_live_node_agent_hands_a_foreign_placer_the_view_read_only() -> None:
    """The live agents handed a plug-in placer the cluster's own view: its slip took a stream
    from the node for the rest of the run, without an error. Now it raises where the placer runs:
    at a task's first offer the driver's call fails; on a later offer (a lane thread) that task
    fails with the error, and the run goes on."""
    from rlsched.policies.selectors import MctSelector
    from runtime.cluster.config import default_live_cluster
    from runtime.cluster.live import LiveOptions, run_live
    from runtime.cluster.local import LocalCluster
    from runtime.cluster.workload import LiveWorkload, build_work

    def run(late: bool) -> tuple[LocalCluster, object]:
        cluster = LocalCluster(default_live_cluster(), "numpy")
        work = build_work(LiveWorkload(apps={"video_synopsis": 1.0}, streams=1, tasks=6, rate_per_s=100.0))
        sched = TwoStageScheduler(MctSelector(), _Writes(late))  # type: ignore[arg-type]
        return cluster, run_live(cluster, sched, work, LiveOptions())

    streams = default_live_cluster().view().gpu_streams.copy()
    with pytest.raises(ValueError, match="read-only"):
        run(late=False)
    cluster, res = run(late=True)
    assert res.metrics.tasks_completed == 5 and len(res.errors) == 1, res.errors  # type: ignore[attr-defined]
    assert "read-only" in next(iter(res.errors.values()))  # type: ignore[attr-defined]
    assert np.array_equal(cluster.view.gpu_streams, streams)

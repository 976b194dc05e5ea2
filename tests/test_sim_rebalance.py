"""The simulator's rebalancing, the service's overload watch in simulated time: queued tasks move
off a node that stays overloaded, nothing that started moves, and every task runs once."""

from __future__ import annotations

import dataclasses

from envs.rebalancing import withdraw
from envs.simulator import Simulator
from experiments.benchmarks.bench_rebalance import FirstNode
from rlsched.overload import OverloadWatch
from rlsched.policies.registry import make_placer, parse_scheduler
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.scheduler import TwoStageScheduler
from tests.test_simulator import check_accounting, check_view


def _run(sc, tasks, rebalance: bool, watch: OverloadWatch | None = None) -> tuple[Simulator, dict]:  # type: ignore[no-untyped-def]
    placer = make_placer("mlsm")
    sim = Simulator(sc, tasks, placer, 0, trace=True, rebalance=rebalance)
    if watch is not None:
        sim._watch = watch  # the watch with one rule off
    return sim, sim.run(TwoStageScheduler(FirstNode(), placer)).to_dict()


def test_queued_tasks_move_off_an_overloaded_node_and_each_runs_once_where_it_started(
    small_scenario, node
) -> None:
    """Everything sent to node a, a burst of 60 tasks: without rebalancing node b never works;
    with it, tasks that had not started move to b, the run ends sooner, and every task's subtasks
    all ran on the node it completed on (a task that had started never moved)."""
    sc = small_scenario(
        nodes=(node("a", cores=2, gpus=("T4",)), node("b", cores=2, gpus=("T4",))),
        tasks=60,
        rate_per_min=1200.0,
    )
    tasks = generate_tasks(sc)
    off, m_off = _run(sc, tasks, rebalance=False)
    on, m_on = _run(sc, tasks, rebalance=True)
    for sim, m in ((off, m_off), (on, m_on)):
        check_accounting(sim, m)
        check_view(sim.view)
    assert {r.node for r in off.records} == {0} and off.moved == 0
    assert on.moved > 0 and m_on["tasks_requeued"] == on.moved == sum(r.requeues for r in on.records)
    assert {r.node for r in on.records} == {0, 1}
    # Measured: 41.0 s against 59.8 s (49.0 s without the steal: the overload rule moves only the
    # excess over a round of units, and only while the other node has nothing waiting).
    assert m_on["makespan_s"] < 0.9 * m_off["makespan_s"], (m_on["makespan_s"], m_off["makespan_s"])
    assert on.trace is not None
    ran_on: dict[int, set[int]] = {}
    for kind, _, tid, _, n, _ in on.trace:
        if kind == "start":
            ran_on.setdefault(tid, set()).add(n)
    assert all(ran_on[t.id] == {on.records[t.id].node} for t in tasks)
    # One decision per placement: each task once, plus once per move.
    assert on.decisions == len(tasks) + on.moved


def test_an_idle_node_takes_queued_tasks_the_overload_rule_leaves(small_scenario, node) -> None:
    """Twelve tasks at once, all sent to node a: never more than a round of its units waits, so
    the overload rule alone moves nothing; with the steal, node b (idle) takes tasks whose wait on
    a outlasts their run on b, the run ends sooner (measured 14.0 s against 16.0 s), and every task
    runs once, on the node it completes on."""
    sc = small_scenario(
        nodes=(node("a", cores=2, gpus=("T4",)), node("b", cores=2, gpus=("T4",))),
        tasks=12,
        rate_per_min=6000.0,
    )
    tasks = generate_tasks(sc)
    rule, m_rule = _run(sc, tasks, rebalance=True, watch=OverloadWatch(steal=False))
    steal, m_steal = _run(sc, tasks, rebalance=True)
    assert rule.moved == 0 and {r.node for r in rule.records} == {0}
    check_accounting(steal, m_steal)
    check_view(steal.view)
    assert steal.moved > 0 and {r.node for r in steal.records} == {0, 1}
    assert m_steal["makespan_s"] < 0.95 * m_rule["makespan_s"], (m_steal["makespan_s"], m_rule["makespan_s"])
    assert steal.trace is not None
    for kind, _, tid, _, n, _ in steal.trace:
        assert kind != "start" or n == steal.records[tid].node


def test_a_task_no_node_can_run_does_not_keep_the_watch_ticking(small_scenario, node) -> None:
    """The watch ticks while nodes hold work; an unschedulable task stays in the system for ever
    and must not keep the run from ending."""
    sc = small_scenario(nodes=(node("a", gpus=("T4",)),), apps={"kmeans": 1}, tasks=4)
    tasks = generate_tasks(sc)
    tasks[1] = dataclasses.replace(tasks[1], gpu_models=frozenset({"A100"}))
    sched = parse_scheduler("mct+mlsm")
    sim = Simulator(sc, tasks, sched.placer, 0, rebalance=True)
    m = sim.run(sched).to_dict()
    assert m["tasks_completed"] == 3 and m["tasks_unschedulable"] == 1 and sim.done


def test_withdrawing_takes_only_tasks_none_of_whose_subtasks_started(small_scenario, node) -> None:
    """Asked for every task of a busy node, the withdrawal takes only those that have not started;
    they run elsewhere (the node they left is masked out), the others finish where they are."""
    sc = small_scenario(
        nodes=(node("a", cores=2, gpus=("T4",)), node("b", cores=2, gpus=("T4",))),
        tasks=30,
        rate_per_min=6000.0,
    )
    tasks = generate_tasks(sc)
    placer = make_placer("mlsm")
    sim = Simulator(sc, tasks, placer, 0, trace=True)
    sched = TwoStageScheduler(FirstNode(), placer)
    sched.reset(sim.view, 0)
    sim.calibrate_placer()
    while sim.decisions < len(tasks):
        task = sim.next_decision()
        assert task is not None
        sim.assign(task, 0)
    while not any(any(tr.started) for tr in sim._on_node[0].values()):
        sim._step_event()
    started = {tid for tid, tr in sim._on_node[0].items() if any(tr.started)}
    waiting = set(sim._on_node[0]) - started
    assert started and waiting
    assert withdraw(sim, 0, 10**6) == len(waiting)
    assert set(sim._on_node[0]) == started and set(sim.pending) == waiting
    m = _finish(sim, sched)
    check_accounting(sim, m)
    assert {sim.records[t].node for t in waiting} == {1} and {sim.records[t].node for t in started} == {0}
    assert sim.trace is not None
    assert all(n == sim.records[tid].node for kind, _, tid, _, n, _ in sim.trace if kind == "start")


def _finish(sim: Simulator, sched: TwoStageScheduler) -> dict:
    while (task := sim.next_decision()) is not None:
        sim.assign(task, sched.selector.select(task, sim.view, sim.mask(task)))
    return sim.metrics().to_dict()

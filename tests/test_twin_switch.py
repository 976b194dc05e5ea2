"""The look-ahead experiment's copies of a world (experiments/benchmarks/twin_switch.py)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from envs import simulator as simmod
from envs.simulator import Simulator
from experiments.benchmarks.twin_switch import (
    World,
    continue_with,
    decide_until,
    resample_future,
    start_world,
)
from experiments.evaluation import load_entry
from rlsched.policies.auto import switchboard
from rlsched.policies.registry import parse_scheduler
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed

CASE, SEED, AT = "transfer-4#150", 10001, 10


def _world() -> World:
    return start_world(CASE, SEED)


def test_a_copy_continued_with_the_running_pair_is_the_run() -> None:
    """After another pair has continued a copied world, the running pair's continuation still
    equals the run never copied: a copy shares no state with the world it was taken from, and
    its view's dense matrix follows its updates (``ClusterView.__setstate__``: without it, the
    copy's LDWP read the view as it was at the copy). Copied in ``auto``'s window, while LDWP runs."""
    sched = parse_scheduler("auto")
    sc = scenario_for_seed(load_entry(CASE, None), SEED)
    whole = Simulator(sc, generate_tasks(sc, SEED), sched.placer, seed=SEED).run(sched).throughput * 60
    sim, sched = _world()
    assert decide_until(sim, sched, AT)
    world = (sim, sched)
    board = switchboard(sched)
    assert board is not None
    keep = board.current
    other = next(p for p in board.recogniser.candidates if p.split("+")[0] != keep.split("+")[0])
    assert continue_with(world, other, None) != pytest.approx(whole, rel=1e-6)
    assert continue_with(world, keep, None) == pytest.approx(whole, rel=1e-12)


def test_a_resampled_future_draws_seen_tasks_after_now() -> None:
    sim, sched = _world()
    assert decide_until(sim, sched, AT)
    future = sorted(o for (_, kind, _, o, _) in sim._events if kind == simmod._ARRIVE)
    seen_apps = {t.app for t in sim.tasks if t.id not in set(future)}
    twin = copy.deepcopy(sim)
    resample_future(twin, np.random.default_rng(0))
    arrivals = sorted(o for (_, kind, _, o, _) in twin._events if kind == simmod._ARRIVE)
    assert arrivals == future  # each future task once, under its own id
    times = [twin.tasks[i].arrival_s for i in future]
    assert times[0] > sim.now and (np.diff(times) > 0).all()
    assert {twin.tasks[i].app for i in future} <= seen_apps
    assert [t.arrival_s for t in sim.tasks] != [t.arrival_s for t in twin.tasks]  # the original is untouched


def test_a_jittered_future_keeps_the_tasks_and_their_order() -> None:
    sim, sched = _world()
    assert decide_until(sim, sched, AT)
    future = sorted(o for (_, kind, _, o, _) in sim._events if kind == simmod._ARRIVE)
    twin = copy.deepcopy(sim)
    resample_future(twin, np.random.default_rng(0), jitter=0.05)
    assert [twin.tasks[i].input_mb for i in future] == [sim.tasks[i].input_mb for i in future]
    gaps = np.diff([sim.now] + [sim.tasks[i].arrival_s for i in future])
    new = np.diff([sim.now] + [twin.tasks[i].arrival_s for i in future])
    assert (new >= 0.95 * gaps - 1e-12).all() and (new <= 1.05 * gaps + 1e-12).all()
    assert not np.allclose(new, gaps)

"""The simulated variant of the stage-1 Gymnasium environment (:mod:`rlsched.scheduling_env`).

Each episode is a :class:`~envs.simulator.Simulator` on one scenario (of one or several) and a
seed: unseeded episodes draw a training seed (:mod:`rlsched.seeds`), never a validation or test
one. Spaces, reward and ``info`` are those of :class:`rlsched.scheduling_env.SchedulingEnv`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from envs.simulator import Simulator
from rlsched.policies.registry import make_placer, placer_names
from rlsched.scenarios.loader import load_scenario
from rlsched.scenarios.spec import Scenario
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed
from rlsched.scheduling_env import INVALID_PENALTY, SchedulingEnv
from rlsched.seeds import TRAINING
from rlsched.world import World

__all__ = ["INVALID_PENALTY", "ClusterSchedulingEnv", "SimulatedWorlds"]


class SimulatedWorlds:
    """Opens a simulator per episode on one of ``scenarios``.

    :param scenarios: the scenarios episodes are drawn from (``options={"scenario": i}`` picks).
    :param placer: stage-2 policy on every node (a registry name).
    :param max_tasks: cap on tasks per episode (``None`` = the scenario's count).
    """

    def __init__(self, scenarios: Sequence[Scenario], placer: str, max_tasks: int | None) -> None:
        if placer not in placer_names():
            raise ValueError(f"unknown placer {placer!r}; known: {', '.join(placer_names())}")
        self.scenarios = list(scenarios)
        self.placer_name = placer
        self.max_tasks = max_tasks
        self.scenario = self.scenarios[0]

    @property
    def n_nodes(self) -> int:
        return max(len(s.cluster.nodes) for s in self.scenarios)

    def open(self, seed: int | None, rng: np.random.Generator, options: dict[str, Any] | None) -> World:
        run_seed = int(rng.integers(len(TRAINING))) if seed is None else int(seed)
        pick = (options or {}).get("scenario")
        if pick is None:
            pick = int(rng.integers(len(self.scenarios))) if len(self.scenarios) > 1 else 0
        if not 0 <= int(pick) < len(self.scenarios):
            raise ValueError(f"options['scenario']: expected an index < {len(self.scenarios)}, got {pick}")
        self.scenario = self.scenarios[int(pick)]
        scenario = scenario_for_seed(self.scenario, run_seed)
        tasks = generate_tasks(scenario, run_seed)
        if self.max_tasks is not None:
            tasks = tasks[: self.max_tasks]
        placer = make_placer(self.placer_name)
        sim = Simulator(scenario, tasks, placer, seed=run_seed)
        placer.reset(sim.view, run_seed)
        sim.calibrate_placer()
        return sim

    def abandon(self, world: World) -> None:
        """Nothing to release: an unfinished simulation is dropped."""


class ClusterSchedulingEnv(SchedulingEnv):
    """Stage-1 scheduling of one scenario's task stream, or of several, in the simulator.

    With several scenarios each episode draws one (``reset(options={"scenario": i})`` picks it),
    and observations are padded to the largest cluster.

    :param scenario: a built-in scenario name, a path, a :class:`Scenario`, or a sequence of these.
    :param placer: stage-2 policy used on every node.
    :param max_tasks: cap on tasks per episode (``None`` = the scenario's count).
    :param reward: ``"latency"`` or ``"throughput"``.
    :param rate_per_min: override the scenario's arrival rate.
    """

    def __init__(
        self,
        scenario: str | Scenario | Sequence[str | Scenario] = "paper",
        placer: str = "speedup",
        max_tasks: int | None = None,
        reward: str = "latency",
        rate_per_min: float | None = None,
    ) -> None:
        many = [scenario] if isinstance(scenario, str | Scenario) else list(scenario)
        if not many:
            raise ValueError("scenario: expected at least one scenario")
        scenarios = [load_scenario(s, rate_per_min=rate_per_min) if isinstance(s, str) else s for s in many]
        self.worlds = SimulatedWorlds(scenarios, placer, max_tasks)
        super().__init__(self.worlds, reward)
        self.scenarios = scenarios
        self.placer_name = placer
        self.max_tasks = max_tasks

    @property
    def scenario(self) -> Scenario:
        """The scenario of the current episode (the first before any)."""
        return self.worlds.scenario

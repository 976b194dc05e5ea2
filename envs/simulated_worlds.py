"""The worlds of the simulated Gym environment: a simulator per episode, on one of its scenarios.

They run in the env's worker process (:mod:`envs.env_worker`), never in the process of the env an
RL library holds (:mod:`envs.gym_env`): that is what seals the simulator away from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from envs.simulator import Simulator
from rlsched.policies.registry import make_placer, placer_names
from rlsched.scenarios.spec import Scenario
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed
from rlsched.seeds import TRAINING
from rlsched.world import World

__all__ = ["SimulatedWorlds"]


class SimulatedWorlds:
    """Opens a simulator per episode on one of ``scenarios`` (inside the env's worker process).

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
        #: Index of the current episode's scenario (the first before any).
        self.index = 0
        self.scenario = self.scenarios[0]

    @property
    def n_nodes(self) -> int:
        return max(len(s.cluster.nodes) for s in self.scenarios)

    def open(self, seed: int | None, rng: np.random.Generator, options: dict[str, Any] | None) -> World:
        run_seed = int(rng.integers(len(TRAINING))) if seed is None else int(seed)
        unknown = sorted(set(options or {}) - {"scenario"})
        if unknown:  # a misspelt option was ignored: the episode ran on a scenario not asked for
            raise ValueError(f"reset options: unknown {', '.join(map(repr, unknown))}; known: 'scenario'")
        pick = (options or {}).get("scenario")
        if pick is None:
            pick = int(rng.integers(len(self.scenarios))) if len(self.scenarios) > 1 else 0
        if not 0 <= int(pick) < len(self.scenarios):
            raise ValueError(f"options['scenario']: expected an index < {len(self.scenarios)}, got {pick}")
        self.index = int(pick)
        self.scenario = self.scenarios[self.index]
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

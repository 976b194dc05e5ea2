"""Gymnasium environment for stage 1: pick a node for each arriving task.

Observation (``Dict``): ``nodes`` (N, F) per-node features for the task at hand, ``task`` (T,),
``cluster`` (S,) summary, ``mask`` (N,) int8 feasible nodes — never all zero. The action is a node
index. An infeasible action is replaced by the feasible node with the best nominal completion time
and costs :data:`INVALID_PENALTY` (agents should mask; the checkers sample unmasked actions).

Reward (``reward="latency"``, default): minus the task-seconds spent in the system between two
decisions, in task-minutes — summed over an episode it is minus the total latency of all tasks,
so maximising it minimises mean latency, and with a fixed arrival stream keeps throughput up (by
Little's law the backlog, and the makespan, stay small). ``reward="throughput"`` is the paper's:
the change in completed tasks per minute between decisions.

``info["dt_s"]`` is the simulated time from a decision to the next, for semi-MDP discounting
(:mod:`models.time_discount`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.simulator import Simulator
from rlsched.features import encode_observation, observation_space, terminal_observation
from rlsched.policies.registry import PLACERS
from rlsched.policies.selectors import MctSelector
from rlsched.scenario import Scenario
from rlsched.scenario_io import load_scenario
from rlsched.seeds import TRAINING
from rlsched.taskgen import generate_tasks, scenario_for_seed
from rlsched.tasks import Task
from rlsched.view import ClusterView

INVALID_PENALTY = 1.0


class ClusterSchedulingEnv(gym.Env):
    """Stage-1 scheduling of one scenario's task stream, or of several.

    With several scenarios each episode draws one (``reset(options={"scenario": i})`` picks it),
    and observations are padded to the largest cluster: padded nodes are zeros with mask 0, so
    the per-node network (which scores any number of nodes) never chooses them.

    :param scenario: a built-in scenario name, a path, a :class:`Scenario`, or a sequence of these.
    :param placer: stage-2 policy used on every node.
    :param max_tasks: cap on tasks per episode (``None`` = the scenario's count).
    :param reward: ``"latency"`` or ``"throughput"``.
    :param rate_per_min: override the scenario's arrival rate.
    """

    metadata = {"render_modes": []}  # noqa: RUF012

    def __init__(
        self,
        scenario: str | Scenario | Sequence[str | Scenario] = "paper",
        placer: str = "speedup",
        max_tasks: int | None = None,
        reward: str = "latency",
        rate_per_min: float | None = None,
    ) -> None:
        super().__init__()
        many = [scenario] if isinstance(scenario, str | Scenario) else list(scenario)
        if not many:
            raise ValueError("scenario: expected at least one scenario")
        self.scenarios = [
            load_scenario(s, rate_per_min=rate_per_min) if isinstance(s, str) else s for s in many
        ]
        scenario = self.scenarios[0]
        if reward not in ("latency", "throughput"):
            raise ValueError(f"reward must be 'latency' or 'throughput', got {reward!r}")
        if placer not in PLACERS:
            raise ValueError(f"unknown placer {placer!r}; known: {', '.join(sorted(PLACERS))}")
        self.scenario = scenario
        self.placer_name = placer
        self.max_tasks = max_tasks
        self.reward_kind = reward
        n = max(len(s.cluster.nodes) for s in self.scenarios)
        self.observation_space = observation_space(n)
        self.action_space = spaces.Discrete(n)
        self.n_max = n
        self._sim: Simulator | None = None
        self._task: Task | None = None
        self._mask = np.zeros(n, dtype=bool)

    # ---- gym API ---------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        # Unseeded episodes are training episodes: drawn from the training set, never from the
        # validation or test seeds (rlsched.seeds).
        run_seed = int(self.np_random.integers(len(TRAINING))) if seed is None else int(seed)
        pick = (options or {}).get("scenario")
        if pick is None:
            pick = int(self.np_random.integers(len(self.scenarios))) if len(self.scenarios) > 1 else 0
        if not 0 <= int(pick) < len(self.scenarios):
            raise ValueError(f"options['scenario']: expected an index < {len(self.scenarios)}, got {pick}")
        self.scenario = self.scenarios[int(pick)]
        self._mask = np.zeros(len(self.scenario.cluster.nodes), dtype=bool)
        scenario = scenario_for_seed(self.scenario, run_seed)
        tasks = generate_tasks(scenario, run_seed)
        if self.max_tasks is not None:
            tasks = tasks[: self.max_tasks]
        placer = PLACERS[self.placer_name]()
        self._sim = Simulator(scenario, tasks, placer, seed=run_seed)
        placer.reset(self._sim.view, run_seed)
        self._sim.calibrate_placer()
        self._area = self._completed = 0.0
        self._advance()
        return self._obs(), {"time_s": self._sim.now}

    def step(self, action: int) -> tuple[dict, float, bool, bool, dict]:
        sim, task = self._sim, self._task
        if sim is None or task is None:
            raise RuntimeError("step() called before reset() or after the episode ended")
        node = int(action)
        invalid = not (0 <= node < len(self._mask) and self._mask[node])
        if invalid:
            node = int(np.argmin(np.where(self._mask, MctSelector.etc(task, sim.view), np.inf)))
        t0 = sim.now
        sim.assign(task, node)
        done = self._advance()
        reward = self._reward() - (INVALID_PENALTY if invalid else 0.0)
        info: dict[str, Any] = {
            "time_s": sim.now,
            "dt_s": sim.now - t0,
            "node": node,
            "invalid_action": invalid,
        }
        if done:
            info["metrics"] = sim.metrics().to_dict()
        return self._obs(), reward, done, False, info

    @property
    def task(self) -> Task | None:
        """The task awaiting a node (``None`` once the episode is over)."""
        return self._task

    @property
    def view(self) -> ClusterView:
        """The observable cluster state behind the current observation."""
        if self._sim is None:
            raise RuntimeError("no episode yet: call reset() first")
        return self._sim.view

    def action_masks(self) -> np.ndarray:
        """Feasible actions (the sb3-contrib convention), padded to the largest cluster."""
        return self._pad_mask(self._mask)

    def _pad_mask(self, mask: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n_max, dtype=mask.dtype)
        out[: len(mask)] = mask
        return out

    # ---- internals -------------------------------------------------------------------------
    def _advance(self) -> bool:
        """Run the simulator to the next decision; True when the episode is over."""
        sim = self._sim
        assert sim is not None
        self._task = sim.next_decision()
        if self._task is None:
            sim.finish()
            return True
        self._mask = sim.mask(self._task)
        return False

    def _reward(self) -> float:
        sim = self._sim
        assert sim is not None
        if self.reward_kind == "latency":
            r = -(sim.area - self._area) / 60.0
            self._area = sim.area
            return float(r)
        r = float(sim.completed - self._completed)
        self._completed = sim.completed
        return r

    def _obs(self) -> dict[str, np.ndarray]:
        sim, task = self._sim, self._task
        assert sim is not None
        if task is None:  # terminal: any valid-looking observation; it is never acted on
            return terminal_observation(self.n_max)
        obs = encode_observation(sim.view, task, self._mask)
        n = len(self._mask)
        if n < self.n_max:
            nodes = np.zeros((self.n_max, obs["nodes"].shape[1]), dtype=np.float32)
            nodes[:n] = obs["nodes"]
            obs["nodes"], obs["mask"] = nodes, self._pad_mask(obs["mask"])
        return obs

"""The simulated variant of the stage-1 Gymnasium environment (:mod:`rlsched.scheduling_env`).

Each episode is a :class:`~envs.simulator.Simulator` on one scenario (of one or several) and a
seed, opened by :class:`~envs.simulated_worlds.SimulatedWorlds`: unseeded episodes draw a
training seed (:mod:`rlsched.seeds`), never a validation or test one. Spaces, reward and ``info`` are
those of :class:`rlsched.scheduling_env.SchedulingEnv`.

Sealed by construction: the simulators run in a worker process (:mod:`envs.env_worker`), and the
env an RL library holds references none of them, so nothing reachable from it leads to the ground
truth, a future arrival or true remaining work (``tests/test_sealed.py`` walks its object graph).
What crosses over is what a policy may see: observations, rewards, ``info``, the action mask, and
on request copies of the observable view and of the task awaiting a node.
"""

from __future__ import annotations

import numbers
import os
import weakref
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.env_worker import EnvWorker
from rlsched.features import FEATURE_VERSION, check_feature_version, observation_space
from rlsched.metrics import RunMetrics
from rlsched.policies.registry import placer_names
from rlsched.scenarios.loader import load_scenario
from rlsched.scenarios.spec import Scenario
from rlsched.scheduling_env import INVALID_PENALTY, REWARDS
from rlsched.tasks import Task
from rlsched.view import ClusterView

__all__ = ["INVALID_PENALTY", "ClusterSchedulingEnv"]


class ClusterSchedulingEnv(gym.Env):
    """Stage-1 scheduling of one scenario's task stream, or of several, in the simulator.

    With several scenarios each episode draws one (``reset(options={"scenario": i})`` picks it),
    and observations are padded to the largest cluster. The simulator of each episode runs in
    this env's worker process, started at the first :meth:`reset` and stopped by :meth:`close`
    (or when the env is collected); the env itself holds only a pipe to it.

    :param scenario: a built-in scenario name, a path, a :class:`Scenario`, or a sequence of these.
    :param placer: stage-2 policy used on every node.
    :param max_tasks: cap on tasks per episode (``None`` = the scenario's count).
    :param reward: ``"latency"`` or ``"throughput"``.
    :param rate_per_min: override the scenario's arrival rate.
    :param feature_version: the observations' feature version (the network's being trained:
        fine-tuning a network of an earlier version feeds it that version).
    :raises ValueError: for an unknown reward, placer or feature version.
    """

    metadata = {"render_modes": []}  # noqa: RUF012

    def __init__(
        self,
        scenario: str | os.PathLike[str] | Scenario | Sequence[str | os.PathLike[str] | Scenario] = "paper",
        placer: str = "speedup",
        max_tasks: int | None = None,
        reward: str = "latency",
        rate_per_min: float | None = None,
        feature_version: int = FEATURE_VERSION,
    ) -> None:
        super().__init__()
        if reward not in REWARDS:
            raise ValueError(f"reward must be 'latency' or 'throughput', got {reward!r}")
        self.feature_version = check_feature_version(feature_version)
        if placer not in placer_names():
            raise ValueError(f"unknown placer {placer!r}; known: {', '.join(placer_names())}")
        if max_tasks is not None and (
            isinstance(max_tasks, bool) or not isinstance(max_tasks, numbers.Integral) or max_tasks < 1
        ):  # a negative one sliced tasks off the end; 0 made episodes that were over at reset()
            raise ValueError(f"max_tasks must be an integer >= 1 or None, got {max_tasks!r}")
        many = [scenario] if isinstance(scenario, str | os.PathLike | Scenario) else list(scenario)
        if not many:
            raise ValueError("scenario: expected at least one scenario")
        self.scenarios = [
            s if isinstance(s, Scenario) else load_scenario(s, rate_per_min=rate_per_min) for s in many
        ]
        self.placer_name = placer
        self.max_tasks = max_tasks
        self.reward_kind = reward
        self.n_max = max(len(s.cluster.nodes) for s in self.scenarios)
        self.observation_space = observation_space(self.n_max)
        self.action_space = spaces.Discrete(self.n_max)
        #: Metrics of the last episode that ran to its end.
        self.metrics: RunMetrics | None = None
        self._worker: EnvWorker | None = None
        self._index = 0
        self._mask = np.zeros(self.n_max, dtype=bool)
        self._started = self._over = False
        self._view: ClusterView | None = None
        self._task: Task | None = None
        self._task_known = False

    # ---- gym API ---------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        if self._worker is None:
            self._worker = EnvWorker(
                self.scenarios, self.placer_name, self.max_tasks, self.reward_kind, self.feature_version
            )
            # Stops the worker when the env is collected without close() (holds the worker, not the env).
            weakref.finalize(self, self._worker.close)
        obs, info, self._mask, self._index = self._worker.call("reset", seed, options)
        self.metrics = None
        self._started, self._over = True, False
        self._forget()
        return obs, info

    def step(self, action: int) -> tuple[dict, float, bool, bool, dict]:
        if self._worker is None or not self._started or self._over:
            raise RuntimeError("step() called before reset() or after the episode ended")
        obs, reward, terminated, truncated, info, self._mask, metrics = self._worker.call("step", action)
        self._forget()
        if terminated:
            self.metrics, self._over = metrics, True
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        """Stop the worker (a later :meth:`reset` starts a new one)."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        self._started = False
        self._forget()

    def action_masks(self) -> np.ndarray:
        """Feasible actions (the sb3-contrib convention), padded to the largest cluster."""
        return self._mask.copy()

    # ---- what a policy may look at besides the observation -----------------------------------
    @property
    def task(self) -> Task | None:
        """A copy of the task awaiting a node (``None`` once the episode is over)."""
        if not self._task_known and self._worker is not None and self._started:
            self._task, self._task_known = self._worker.call("task"), True
        return self._task

    @property
    def view(self) -> ClusterView:
        """A copy of the observable cluster state behind the current observation."""
        if self._worker is None or not self._started:
            raise RuntimeError("no episode yet: call reset() first")
        if self._view is None:
            self._view = self._worker.call("view")
        return self._view

    @property
    def scenario(self) -> Scenario:
        """The scenario of the current episode (the first before any)."""
        return self.scenarios[self._index]

    def _forget(self) -> None:
        """Drop the copies of the view and task: the world moved on."""
        self._view, self._task, self._task_known = None, None, False

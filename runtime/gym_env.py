"""Gymnasium environment over the live runtime: stage 1 on real executions.

Same spaces and reward as the simulator's ``envs.gym_env.ClusterSchedulingEnv`` (one observation
per arriving task: per-node features, task features, cluster summary, feasibility mask; the action
is a node), so a network trained in simulation continues training here unchanged. An episode is
one live workload: ``reset`` starts the cluster's agents, each ``step`` sends the task to the
chosen node and waits, in wall-clock time, for the next arrival.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec

from rlsched.features import encode_observation, observation_space, terminal_observation
from rlsched.policies.base import TwoStageScheduler
from rlsched.policies.registry import PLACERS
from rlsched.policies.selectors import MctSelector
from rlsched.tasks import Task
from rlsched.view import ClusterView
from runtime.cluster import ClusterBackend
from runtime.config import LiveClusterSpec
from runtime.live import LiveOptions, LiveResult, LiveSession
from runtime.workload import LiveWorkload, build_work

#: Cost of an infeasible action (the simulator's environment uses the same).
INVALID_PENALTY = 1.0


class LiveSchedulingEnv(gym.Env):
    """Stage-1 scheduling of a live workload.

    :param spec: the live cluster.
    :param make_cluster: builds a fresh cluster backend for an episode (LocalCluster, RayCluster).
    :param workload: tasks per episode, streams and rate (its seed is drawn per episode).
    :param placer: stage-2 policy on every node (a registry name).
    :param calibrate: called with each episode's placer before it runs (IAWP calibration).
    """

    metadata = {"render_modes": []}  # noqa: RUF012

    def __init__(
        self,
        spec: LiveClusterSpec,
        make_cluster: Callable[[], ClusterBackend],
        workload: LiveWorkload,
        placer: str = "mlsm",
        calibrate: Callable[[object], None] | None = None,
    ) -> None:
        super().__init__()
        # Real executions: the same seed and actions give other timings, so other rewards.
        self.spec = EnvSpec(
            "rlsched/LiveScheduling-v0",
            entry_point=lambda **_: LiveSchedulingEnv(spec, make_cluster, workload, placer, calibrate),
            nondeterministic=True,
            disable_env_checker=True,
        )
        if placer not in PLACERS:
            raise ValueError(f"unknown placer {placer!r}; known: {', '.join(sorted(PLACERS))}")
        self.cluster_spec, self.make_cluster, self.workload = spec, make_cluster, workload
        self.placer_name, self.calibrate = placer, calibrate
        n = len(spec.nodes)
        self.observation_space = observation_space(n)
        self.action_space = spaces.Discrete(n)
        self.session: LiveSession | None = None
        self.result: LiveResult | None = None
        self._task: Task | None = None
        self._mask = np.zeros(n, dtype=bool)
        self._area = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        if self.session is not None and self.result is None:
            self.session.finish()  # an abandoned episode still lets its tasks finish and stops agents
        run_seed = int(self.np_random.integers(2**31 - 1)) if seed is None else int(seed)
        work = build_work(dataclasses.replace(self.workload, seed=run_seed))
        sched = TwoStageScheduler(MctSelector(), PLACERS[self.placer_name]())
        self.session = LiveSession(
            self.make_cluster(), sched, work, LiveOptions(seed=run_seed), self.calibrate
        )
        self.result = None
        self._area = 0.0
        self._advance()
        return self._obs(), {"time_s": self.session.now}

    def step(self, action: int) -> tuple[dict, float, bool, bool, dict]:
        s, task = self.session, self._task
        if s is None or task is None:
            raise RuntimeError("step() called before reset() or after the episode ended")
        node = int(action)
        invalid = not (0 <= node < len(self._mask) and self._mask[node])
        if invalid:
            with s.cluster.lock:
                node = int(np.argmin(np.where(self._mask, MctSelector.etc(task, s.cluster.view), np.inf)))
        s.assign(task, node)
        done = self._advance()
        area = s.in_system_area()
        reward = -(area - self._area) / 60.0 - (INVALID_PENALTY if invalid else 0.0)
        self._area = area
        info: dict[str, Any] = {"time_s": s.now, "node": node, "invalid_action": invalid}
        if done:
            self.result = s.finish()
            info["metrics"] = self.result.metrics.to_dict()
        return self._obs(), float(reward), done, False, info

    @property
    def view(self) -> ClusterView:
        """The observable cluster state behind the current observation."""
        if self.session is None:
            raise RuntimeError("no episode yet: call reset() first")
        return self.session.cluster.view

    def action_masks(self) -> np.ndarray:
        """Feasible actions (the sb3-contrib convention)."""
        return self._mask.copy()

    def close(self) -> None:
        if self.session is not None and self.result is None:
            self.result = self.session.finish()

    def _advance(self) -> bool:
        assert self.session is not None
        self._task = self.session.next_decision()
        if self._task is None:
            return True
        self._mask = self.session.mask(self._task)
        return False

    def _obs(self) -> dict[str, np.ndarray]:
        s, task = self.session, self._task
        assert s is not None
        if task is None:
            return terminal_observation(len(self._mask))
        with s.cluster.lock:
            s.cluster.view.time_s = s.now
            return encode_observation(s.cluster.view, task, self._mask)

"""The Gymnasium environment of stage 1, over any world (simulated or live).

Observation (``Dict``): ``nodes`` (N, F) per-node features for the task at hand, ``task`` (T,),
``cluster`` (S,) summary, ``mask`` (N,) int8 feasible nodes — never all zero. The action is a node
index. An infeasible action is replaced by the feasible node with the best expected completion
time and costs :data:`INVALID_PENALTY` (agents should mask; the checkers sample unmasked actions).

Reward (``reward="latency"``, default): minus the task-seconds spent in the system between two
decisions, in task-minutes — summed over an episode it is minus the total latency of all tasks,
so maximising it minimises mean latency, and with a fixed arrival stream keeps throughput up (by
Little's law the backlog, and the makespan, stay small). ``reward="throughput"`` is the paper's:
the change in completed tasks between decisions.

``info["dt_s"]`` is the world's time from a decision to the next, for semi-MDP discounting
(:mod:`models.time_discount`).

Each episode is one :class:`~rlsched.world.World` opened by a :class:`WorldSource`: the simulated
variant (``envs.gym_env``) opens a simulator on a scenario and seed, the live one
(``runtime.cluster.gym_env``) a session on a live cluster. This class holds its world: the live
env is this class itself; the simulated env an RL library gets runs this class in a worker process
(``envs.env_worker``) and holds only a pipe to it, so the simulator is not reachable from it.
Observations are padded to the source's largest cluster: padded nodes are zeros with mask 0, so
the per-node network never picks them.
"""

from __future__ import annotations

from typing import Any, Protocol

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlsched.estimates import best_etc_node
from rlsched.features import (
    FEATURE_VERSION,
    check_feature_version,
    encode_observation,
    observation_space,
    terminal_observation,
)
from rlsched.metrics import RunMetrics
from rlsched.tasks import Task
from rlsched.view import ClusterView
from rlsched.world import World

#: Cost of an infeasible action.
INVALID_PENALTY = 1.0
REWARDS = ("latency", "throughput")


class WorldSource(Protocol):
    """Opens the world of each episode."""

    @property
    def n_nodes(self) -> int:
        """Nodes of the largest cluster it opens (the observation's width)."""
        ...

    def open(self, seed: int | None, rng: np.random.Generator, options: dict[str, Any] | None) -> World:
        """The world of a new episode.

        :param seed: the episode's seed, or ``None`` to draw one from ``rng``.
        :param rng: the environment's generator.
        :param options: ``reset``'s options.
        """
        ...

    def abandon(self, world: World) -> None:
        """An episode ended before its last task (a new ``reset`` or ``close``)."""
        ...


class SchedulingEnv(gym.Env):
    """Stage-1 scheduling of the task stream of each world a source opens.

    :param source: opens each episode's world.
    :param reward: ``"latency"`` or ``"throughput"``.
    :param feature_version: the observations' feature version (the network's being trained).
    """

    metadata = {"render_modes": []}  # noqa: RUF012

    def __init__(
        self, source: WorldSource, reward: str = "latency", feature_version: int = FEATURE_VERSION
    ) -> None:
        super().__init__()
        if reward not in REWARDS:
            raise ValueError(f"reward must be 'latency' or 'throughput', got {reward!r}")
        self.source = source
        self.reward_kind = reward
        #: The feature version of the observations (that of the network being trained).
        self.feature_version = check_feature_version(feature_version)
        self.n_max = source.n_nodes
        self.observation_space = observation_space(self.n_max)
        self.action_space = spaces.Discrete(self.n_max)
        # A simulated world holds the ground truth: this object then lives in the sealed env's
        # worker process, never in an RL library's hands (tests/test_sealed.py).
        self._world: World | None = None
        #: Metrics of the last episode that ran to its end.
        self.metrics: RunMetrics | None = None
        self._task: Task | None = None
        self._mask = np.zeros(0, dtype=bool)
        self._area = 0.0
        self._completed = 0

    # ---- gym API ---------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self._abandon()
        self._world = self.source.open(seed, self.np_random, options)
        self.metrics = None
        self._area, self._completed = 0.0, 0
        self._advance()
        return self._obs(), {"time_s": self._world.now}

    def step(self, action: int) -> tuple[dict, float, bool, bool, dict]:
        world, task = self._world, self._task
        if world is None or task is None:
            raise RuntimeError("step() called before reset() or after the episode ended")
        node = _node_index(action)
        invalid = not (0 <= node < len(self._mask) and self._mask[node])
        if invalid:
            with world.lock():
                node = best_etc_node(task, world.view, self._mask)
        t0 = world.now
        world.assign(task, node)
        done = self._advance()
        reward = self._reward() - (INVALID_PENALTY if invalid else 0.0)
        info: dict[str, Any] = {
            "time_s": world.now,
            "dt_s": world.now - t0,
            "node": node,
            "invalid_action": invalid,
        }
        if done:
            assert self.metrics is not None
            info["metrics"] = self.metrics.to_dict()
        return self._obs(), reward, done, False, info

    def close(self) -> None:
        self._abandon()

    @property
    def task(self) -> Task | None:
        """The task awaiting a node (``None`` once the episode is over)."""
        return self._task

    @property
    def view(self) -> ClusterView:
        """The observable cluster state behind the current observation."""
        if self._world is None:
            raise RuntimeError("no episode yet: call reset() first")
        return self._world.view

    def action_masks(self) -> np.ndarray:
        """Feasible actions (the sb3-contrib convention), padded to the largest cluster."""
        return self._pad_mask(self._mask)

    # ---- internals -------------------------------------------------------------------------
    def _abandon(self) -> None:
        if self._world is not None and self.metrics is None:
            self.source.abandon(self._world)
        self._world = None

    def _pad_mask(self, mask: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n_max, dtype=mask.dtype)
        out[: len(mask)] = mask
        return out

    def _advance(self) -> bool:
        """Run the world to the next decision; True when the episode is over. The last tasks then
        run to their end first, so the last reward counts their time in the system."""
        world = self._world
        assert world is not None
        self._task = world.next_decision()
        if self._task is None:
            self.metrics = world.finish()
            self._mask = np.zeros(len(world.view.alive), dtype=bool)
            return True
        self._mask = world.mask(self._task)
        return False

    def _reward(self) -> float:
        world = self._world
        assert world is not None
        if self.reward_kind == "latency":
            area = world.in_system_area()
            r = -(area - self._area) / 60.0
            self._area = area
            return float(r)
        done = world.completed
        r = float(done - self._completed)
        self._completed = done
        return r

    def _obs(self) -> dict[str, np.ndarray]:
        world, task = self._world, self._task
        assert world is not None
        if task is None:  # terminal: any valid-looking observation; it is never acted on
            return terminal_observation(self.n_max)
        with world.lock():
            obs = encode_observation(world.view, task, self._mask, self.feature_version)
        n = len(self._mask)
        if n < self.n_max:
            nodes = np.zeros((self.n_max, obs["nodes"].shape[1]), dtype=np.float32)
            nodes[:n] = obs["nodes"]
            obs["nodes"], obs["mask"] = nodes, self._pad_mask(obs["mask"])
        return obs


def _node_index(action: object) -> int:
    """The node an action names: an integer (a Python or numpy one, or an array holding one), as
    ``Discrete`` samples. ``int()`` took 2.7 for node 2 and "3" for node 3 in silence.

    :raises ValueError: for any other value.
    """
    a = np.asarray(action)
    if a.size != 1 or a.dtype.kind not in "iu":
        raise ValueError(
            f"action: expected an integer node index (the action space is Discrete), got {action!r}"
        )
    return int(a.reshape(()))

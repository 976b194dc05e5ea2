"""stable-baselines3 DQN with action masking, for the node-scoring Q-network.

SB3's DQN knows no masks. The mask travels in the observation (``obs["mask"]``); the Q-network
applies it (so the greedy action and the TD target's max are masked), and :class:`MaskedDQN`
overrides the two places where SB3 draws random actions — epsilon-greedy exploration and the
warm-up before learning starts — to draw only feasible ones. No infeasible action ever reaches
the replay buffer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import DQN
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.dqn.policies import DQNPolicy
from torch import nn

from models.qnet import NodeScorer


def sample_masked(mask: np.ndarray) -> np.ndarray:
    """One uniformly random feasible action per row of a (B, N) mask (or a single (N,) mask)."""
    m = np.asarray(mask) > 0
    rows = m.reshape(-1, m.shape[-1])
    if not rows.any(axis=1).all():
        raise ValueError("an observation has no feasible action (all-zero mask)")
    picks = np.array([np.random.choice(np.flatnonzero(r)) for r in rows])
    return picks if m.ndim > 1 else picks[0]


class MaskedQNetwork(BasePolicy):
    """SB3 wrapper around :class:`NodeScorer` for ``Dict{nodes, task, cluster, mask}`` observations.

    :param observation_space: the env's Dict space.
    :param action_space: ``Discrete(N)``.
    :param net_arch: hidden sizes.
    """

    action_space: spaces.Discrete

    def __init__(
        self,
        observation_space: spaces.Dict,
        action_space: spaces.Discrete,
        net_arch: list[int] | None = None,
        activation_fn: type[nn.Module] = nn.ReLU,
        normalize_images: bool = False,
    ) -> None:
        super().__init__(observation_space, action_space, normalize_images=False)
        self.net_arch = list(net_arch or [256, 128])
        nodes, task, cluster = (observation_space.spaces[k].shape for k in ("nodes", "task", "cluster"))
        assert nodes is not None and task is not None and cluster is not None
        self.scorer = NodeScorer(nodes[-1], task[0], cluster[0], self.net_arch)

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.scorer(obs["nodes"].float(), obs["task"].float(), obs["cluster"].float(), obs["mask"])

    def _predict(self, observation: dict[str, torch.Tensor], deterministic: bool = True) -> torch.Tensor:  # type: ignore[override]
        return self(observation).argmax(dim=1).reshape(-1)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(net_arch=self.net_arch)
        return data


class MaskedDQNPolicy(DQNPolicy):
    """DQN policy whose online and target networks are :class:`MaskedQNetwork`."""

    def make_q_net(self) -> MaskedQNetwork:  # type: ignore[override]
        return MaskedQNetwork(self.observation_space, self.action_space, self.net_arch).to(self.device)  # type: ignore[arg-type]


class MaskedDQN(DQN):
    """DQN whose exploration and warm-up draw only feasible actions (``obs["mask"]``).

    :param double_q: double DQN targets (van Hasselt et al. 2016): the online network picks the
        next action, the target network values it — less of the max operator's overestimation.
    Other arguments as SB3's :class:`~stable_baselines3.DQN`. A replay buffer that provides
    per-sample ``discounts`` (e.g. :class:`models.time_discount.TimeDiscountReplayBuffer`) sets
    each target's discount.
    """

    def __init__(self, *args: Any, double_q: bool = False, **kwargs: Any) -> None:
        self.double_q = double_q
        super().__init__(*args, **kwargs)

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        """SB3's DQN update with the double-Q target when ``double_q`` is set."""
        if not self.double_q:
            return super().train(gradient_steps, batch_size)
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        losses = []
        for _ in range(gradient_steps):
            data = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)  # type: ignore[union-attr]
            discounts = data.discounts if data.discounts is not None else self.gamma
            with torch.no_grad():
                # Masked Q-values: the online argmax is always a feasible next action.
                next_a = self.q_net(data.next_observations).argmax(dim=1, keepdim=True)
                next_q = torch.gather(self.q_net_target(data.next_observations), 1, next_a)
                target = data.rewards + (1 - data.dones) * discounts * next_q
            q = torch.gather(self.q_net(data.observations), 1, data.actions.long())
            loss = torch.nn.functional.smooth_l1_loss(q, target)
            losses.append(loss.item())
            self.policy.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
            self.policy.optimizer.step()
        self._n_updates += gradient_steps
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/loss", float(np.mean(losses)))

    def predict(
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        if not deterministic and np.random.rand() < self.exploration_rate:
            assert isinstance(observation, dict)
            return sample_masked(observation["mask"]), state
        return self.policy.predict(observation, state, episode_start, deterministic)

    def _sample_action(
        self, learning_starts: int, action_noise: Any = None, n_envs: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        if self.num_timesteps < learning_starts:
            assert isinstance(self._last_obs, dict), "masked DQN needs Dict observations with a mask"
            action = sample_masked(self._last_obs["mask"])
        else:
            action, _ = self.predict(self._last_obs, deterministic=False)  # type: ignore[arg-type]
        return action, action

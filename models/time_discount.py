"""Semi-MDP discounting: a replay buffer whose discount follows elapsed time, not decisions.

A scheduling decision's consequences unfold over the seconds its task runs, while decisions come
as fast as tasks arrive: with a per-decision ``gamma = 0.9`` at ~67 decisions per simulated second
the horizon is ~0.15 s against tasks of 5-35 s. Here each transition's discount is
``0.5 ** (dt / half_life_s)``, ``dt`` the simulated seconds until the next decision (the
environment reports it as ``info["dt_s"]``), so the horizon is the same in seconds whatever the
arrival rate. SB3's DQN uses a sample's ``discounts`` in place of ``gamma`` when the buffer
provides them.

With ``n_steps > 1`` a sample is an n-step return: the rewards of up to ``n`` consecutive
decisions, each discounted by the time elapsed since the first, then the bootstrap discounted by
the time to the n-th next state; it stops early at an episode's end and at the buffer's write
position (older and newer transitions there do not follow each other).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.buffers import DictReplayBuffer
from stable_baselines3.common.type_aliases import DictReplayBufferSamples
from stable_baselines3.common.vec_env import VecNormalize


class TimeDiscountReplayBuffer(DictReplayBuffer):
    """:class:`DictReplayBuffer` that stores ``0.5 ** (info["dt_s"] / half_life_s)`` per transition.

    :param half_life_s: simulated seconds after which a reward counts half.
    :param n_steps: decisions per return (1 = one-step targets).
    """

    def __init__(self, *args: Any, half_life_s: float = 30.0, n_steps: int = 1, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not half_life_s > 0:
            raise ValueError(f"half_life_s: expected a number > 0, got {half_life_s!r}")
        if not (isinstance(n_steps, int) and n_steps >= 1):
            raise ValueError(f"n_steps: expected an integer >= 1, got {n_steps!r}")
        self.half_life_s = float(half_life_s)
        self.n_steps = n_steps
        self.discounts = np.ones((self.buffer_size, self.n_envs), dtype=np.float32)

    def add(  # type: ignore[override]
        self,
        obs: dict[str, np.ndarray],
        next_obs: dict[str, np.ndarray],
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        dt = np.array([float(info.get("dt_s", 0.0)) for info in infos], dtype=np.float64)
        if not np.all(np.isfinite(dt)) or (dt < 0).any():
            raise ValueError(f"info['dt_s']: expected elapsed seconds >= 0, got {dt.tolist()}")
        self.discounts[self.pos] = 0.5 ** (dt / self.half_life_s)
        super().add(obs, next_obs, action, reward, done, infos)

    def _get_samples(  # type: ignore[override]
        self, batch_inds: np.ndarray, env: VecNormalize | None = None
    ) -> DictReplayBufferSamples:
        # The parent draws the env index itself; with one env (how LDWP trains) it is 0.
        if self.n_envs != 1:
            raise ValueError("TimeDiscountReplayBuffer supports one environment")
        s = super()._get_samples(batch_inds, env)
        if self.n_steps == 1:
            return s._replace(discounts=self.to_torch(self.discounts[batch_inds, 0].reshape(-1, 1)))
        ret, disc, last = self.n_step_returns(batch_inds)
        tail = super()._get_samples(last, env)  # next state and done of the n-th transition
        return s._replace(
            next_observations=tail.next_observations,
            dones=tail.dones,
            rewards=self.to_torch(ret.reshape(-1, 1).astype(np.float32)),
            discounts=self.to_torch(disc.reshape(-1, 1).astype(np.float32)),
        )

    def n_step_returns(self, batch_inds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(return, bootstrap discount, index of the last transition used) per start index."""
        ret = np.zeros(len(batch_inds))
        disc = np.ones(len(batch_inds))
        last = batch_inds.copy()
        going = np.ones(len(batch_inds), dtype=bool)
        for k in range(self.n_steps):
            j = (batch_inds + k) % self.buffer_size
            if k > 0:
                going &= j != self.pos  # the write head: the next transition is not this one's
            ret = np.where(going, ret + disc * self.rewards[j, 0], ret)
            disc = np.where(going, disc * self.discounts[j, 0], disc)
            last = np.where(going, j, last)
            going &= self.dones[j, 0] == 0  # an episode's end (or time limit): stop there
        return ret, disc, last

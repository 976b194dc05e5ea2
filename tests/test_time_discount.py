"""Semi-MDP discounting: the environment reports elapsed time, the buffer turns it into discounts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from envs.gym_env import ClusterSchedulingEnv
from experiments.train import TrainConfig, build_dqn
from models.time_discount import TimeDiscountReplayBuffer


def _env() -> ClusterSchedulingEnv:
    return ClusterSchedulingEnv("transfer-4", max_tasks=40)


def test_env_reports_time_between_decisions() -> None:
    env = _env()
    _, info = env.reset(seed=3)
    start, total, done = info["time_s"], 0.0, False
    while not done:
        _, _, done, _, info = env.step(int(np.flatnonzero(env.action_masks())[0]))
        assert info["dt_s"] >= 0.0
        total += info["dt_s"]
    assert total == pytest.approx(info["time_s"] - start)
    assert total > 0


def test_buffer_discount_halves_per_half_life() -> None:
    env = _env()
    buf = TimeDiscountReplayBuffer(8, env.observation_space, env.action_space, half_life_s=10.0)
    obs, _ = env.reset(seed=0)
    for dt in (0.0, 10.0, 20.0):
        a = np.array([int(np.flatnonzero(obs["mask"])[0])])
        buf.add(obs, obs, a, np.array([1.0]), np.array([False]), [{"dt_s": dt}])
    s = buf._get_samples(np.arange(3))
    assert s.discounts is not None
    assert s.discounts.flatten().tolist() == pytest.approx([1.0, 0.5, 0.25])
    with pytest.raises(ValueError, match="dt_s"):
        buf.add(obs, obs, a, np.array([1.0]), np.array([False]), [{"dt_s": -1.0}])
    with pytest.raises(ValueError, match="half_life_s"):
        TimeDiscountReplayBuffer(8, env.observation_space, env.action_space, half_life_s=0.0)


@pytest.mark.parametrize("double_q", [True, False])
def test_dqn_learns_with_time_discounts(double_q: bool) -> None:
    """The DQN update runs on time-discounted samples and moves the network."""
    env = _env()
    cfg = TrainConfig(
        learning_starts=50, batch_size=16, net_arch=(16,), double_q=double_q, learning_rate=1e-3
    )
    model = build_dqn(env, cfg)
    assert isinstance(model.replay_buffer, TimeDiscountReplayBuffer)
    before = [p.detach().clone() for p in model.q_net.parameters()]
    model.learn(total_timesteps=120)
    after = list(model.q_net.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True))
    assert (model.replay_buffer.discounts[: model.replay_buffer.pos] <= 1.0).all()
    assert (model.replay_buffer.discounts[: model.replay_buffer.pos] < 1.0).any()

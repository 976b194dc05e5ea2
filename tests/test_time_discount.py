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


def test_n_step_returns_discount_by_elapsed_time_and_stop_at_episode_ends() -> None:
    env = _env()
    buf = TimeDiscountReplayBuffer(8, env.observation_space, env.action_space, half_life_s=10.0, n_steps=3)
    obs, _ = env.reset(seed=0)
    a = np.array([int(np.flatnonzero(obs["mask"])[0])])
    # rewards 1, 2, 4, 8 (episode ends after the third), 16; dt 10 s each (discount 0.5)
    for r, done in ((1.0, False), (2.0, False), (4.0, True), (8.0, False), (16.0, False)):
        buf.add(obs, obs, a, np.array([r]), np.array([done]), [{"dt_s": 10.0}])
    ret, disc, last = buf.n_step_returns(np.arange(5))
    # 0: 1 + .5*2 + .25*4 (ends at 2); 1: 2 + .5*4 (ends); 2: 4 (ends); 3: 8 + .5*16, then the
    # write head; 4: 16 alone (the write head follows).
    assert ret.tolist() == pytest.approx([3.0, 4.0, 4.0, 16.0, 16.0])
    assert disc.tolist() == pytest.approx([0.125, 0.25, 0.5, 0.25, 0.5])
    assert last.tolist() == [2, 2, 2, 4, 4]
    s = buf._get_samples(np.arange(5))
    assert s.dones.flatten().tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]  # no bootstrap past an end
    assert s.rewards.flatten().tolist() == pytest.approx([3.0, 4.0, 4.0, 16.0, 16.0])
    with pytest.raises(ValueError, match="n_steps"):
        TimeDiscountReplayBuffer(8, env.observation_space, env.action_space, n_steps=0)


def test_dqn_learns_with_n_step_returns() -> None:
    env = _env()
    cfg = TrainConfig(learning_starts=50, batch_size=16, net_arch=(16,), learning_rate=1e-3, n_steps=3)
    model = build_dqn(env, cfg)
    assert model.replay_buffer.n_steps == 3  # type: ignore[attr-defined]
    before = [p.detach().clone() for p in model.q_net.parameters()]
    model.learn(total_timesteps=120)
    assert any(not torch.equal(a, b) for a, b in zip(model.q_net.parameters(), before, strict=True))
    with pytest.raises(ValueError, match="n_steps"):
        build_dqn(env, TrainConfig(half_life_s=None, n_steps=3))

"""The masked node-scoring DQN: masks in acting, exploration, warm-up and the TD target."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from gymnasium import spaces

from envs.gym_env import ClusterSchedulingEnv
from models.masked_dqn import MaskedDQN, MaskedDQNPolicy, MaskedQNetwork, sample_masked
from models.qnet import MASKED_Q, NodeScorer
from rlsched.scenarios.spec import Scenario
from tests.conftest import node


def small_env(small_scenario, n_nodes: int = 4, tasks: int = 40) -> ClusterSchedulingEnv:  # type: ignore[no-untyped-def]
    """Every third node has no GPU, so kmeans tasks (GPU-only stages) must mask it out."""
    nodes = [node(f"n{i}", gpus=() if i % 3 == 2 else ("T4",)) for i in range(n_nodes)]
    sc: Scenario = small_scenario(nodes=nodes, tasks=tasks, rate_per_min=120)
    return ClusterSchedulingEnv(sc, max_tasks=tasks)


def test_scorer_masks_with_a_finite_large_negative() -> None:
    net = NodeScorer(5, 3, 2, (16, 8))
    nodes, task, cluster = torch.randn(2, 4, 5), torch.randn(2, 3), torch.randn(2, 2)
    mask = torch.tensor([[1, 0, 1, 0], [0, 0, 0, 1]], dtype=torch.int8)
    q = net(nodes, task, cluster, mask)
    assert q.shape == (2, 4) and torch.isfinite(q).all()
    assert (q[mask == 0] == MASKED_Q).all() and (q[mask == 1] > MASKED_Q / 2).all()
    assert q.argmax(dim=1).tolist()[1] == 3  # the only feasible node
    # The same weights score any number of nodes.
    assert net(torch.randn(1, 9, 5), torch.randn(1, 3), torch.randn(1, 2), torch.ones(1, 9)).shape == (1, 9)


def test_sample_masked_draws_only_feasible_actions() -> None:
    np.random.seed(0)
    mask = np.array([[0, 1, 0, 1], [1, 0, 0, 0]], dtype=np.int8)
    draws = np.array([sample_masked(mask) for _ in range(200)])
    assert set(draws[:, 0]) == {1, 3} and set(draws[:, 1]) == {0}
    with pytest.raises(ValueError, match="no feasible action"):
        sample_masked(np.zeros((1, 3), dtype=np.int8))


def test_no_infeasible_action_ever_reaches_the_replay_buffer(small_scenario) -> None:  # type: ignore[no-untyped-def]
    env = small_env(small_scenario)
    model = MaskedDQN(
        MaskedDQNPolicy,
        env,
        learning_starts=150,
        buffer_size=2_000,
        batch_size=16,
        exploration_fraction=0.5,
        exploration_final_eps=0.3,
        policy_kwargs={"net_arch": [32, 16]},
        seed=0,
        verbose=0,
    )
    model.learn(total_timesteps=600)
    buf = model.replay_buffer
    n = buf.pos if not buf.full else buf.buffer_size
    actions = buf.actions[:n, 0, 0].astype(int)
    masks = buf.observations["mask"][:n, 0]
    assert n == 600
    assert masks[np.arange(n), actions].all(), "an infeasible action was stored"
    # Masks really restrict choices here, so the check above is not vacuous.
    assert (masks == 0).any()


def test_target_max_ignores_masked_nodes(small_scenario) -> None:  # type: ignore[no-untyped-def]
    env = small_env(small_scenario)
    model = MaskedDQN(MaskedDQNPolicy, env, policy_kwargs={"net_arch": [16]}, seed=1)
    obs, _ = env.reset(seed=0)
    batch = {k: torch.as_tensor(v)[None] for k, v in obs.items()}
    batch["mask"] = torch.tensor([[0, 1, 0, 0]], dtype=torch.int8)
    with torch.no_grad():
        q = model.q_net_target(batch)
    assert q.max(dim=1).values.item() == q[0, 1].item()


def test_weights_transfer_across_cluster_sizes(small_scenario) -> None:  # type: ignore[no-untyped-def]
    a = MaskedDQN(MaskedDQNPolicy, small_env(small_scenario, 3), policy_kwargs={"net_arch": [16]}, seed=0)
    b = MaskedDQN(MaskedDQNPolicy, small_env(small_scenario, 7), policy_kwargs={"net_arch": [16]}, seed=1)
    b.policy.load_state_dict(a.policy.state_dict())  # every key matches: no size-dependent layer
    env = small_env(small_scenario, 7)
    obs, _ = env.reset(seed=2)
    action, _ = b.predict(obs, deterministic=True)
    assert obs["mask"][int(action)]


def test_policy_class_is_used(small_scenario) -> None:  # type: ignore[no-untyped-def]
    model = MaskedDQN(MaskedDQNPolicy, small_env(small_scenario), seed=0)
    assert isinstance(model.q_net, MaskedQNetwork) and isinstance(model.observation_space, spaces.Dict)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.predict(model.env.reset(), deterministic=True)  # type: ignore[union-attr]

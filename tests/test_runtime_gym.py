"""The live Gymnasium environment: real checkers, same spaces as the simulator's, full episodes."""

from __future__ import annotations

import warnings

import numpy as np
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from envs.gym_env import ClusterSchedulingEnv
from rlsched.cluster import ClusterSpec
from rlsched.scenarios.spec import Scenario, WorkloadSpec
from runtime.cluster.config import default_live_cluster
from runtime.cluster.gym_env import LiveSchedulingEnv
from runtime.cluster.local import LocalCluster
from runtime.cluster.workload import LiveWorkload


def make_env(tasks: int = 10) -> LiveSchedulingEnv:
    spec = default_live_cluster()
    w = LiveWorkload(tasks=tasks, streams=3, rate_per_s=200.0)
    return LiveSchedulingEnv(spec, lambda: LocalCluster(spec, "numpy"), w, placer="mlsm")


def test_passes_the_gymnasium_and_sb3_checkers() -> None:
    env = make_env()
    with warnings.catch_warnings():  # the same by-design warnings the simulator's env test silences
        warnings.filterwarnings("ignore", message=r".*Box observation space (minimum|maximum) value is -?inf")
        warnings.filterwarnings("ignore", message=r"Your observation nodes has an unconventional shape")
        gym_check_env(env, skip_render_check=True)
        sb3_check_env(env, warn=True)
    env.close()


def test_spaces_match_the_simulators_for_the_same_cluster() -> None:
    live = make_env()
    spec: ClusterSpec = live.cluster_spec.to_cluster_spec()
    sim = ClusterSchedulingEnv(Scenario("twin", spec, WorkloadSpec(tasks=5, apps={"matmul": 1.0})))
    assert live.observation_space == sim.observation_space
    assert live.action_space == sim.action_space


def test_an_episode_runs_every_task_for_real() -> None:
    env = make_env(tasks=16)
    obs, info = env.reset(seed=5)
    done, steps, total = False, 0, 0.0
    while not done:
        assert obs["mask"].any()
        action = int(np.flatnonzero(obs["mask"])[steps % int(obs["mask"].sum())])
        obs, reward, done, truncated, info = env.step(action)
        assert np.isfinite(reward) and reward <= 0 and not truncated
        steps, total = steps + 1, total + reward
    assert steps == 16
    m = info["metrics"]
    assert m["tasks_completed"] == 16 and m["tasks_lost"] == 0
    assert env.result is not None and not env.result.errors

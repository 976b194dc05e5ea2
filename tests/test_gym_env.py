"""The stage-1 Gymnasium environment (``envs.gym_env``) and the feature encoder it serves."""

from __future__ import annotations

import pickle
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import envs
from envs.gym_env import INVALID_PENALTY, ClusterSchedulingEnv
from envs.simulator import Simulator
from rlsched.features import (
    CLUSTER_FEATURES,
    NODE_FEATURES,
    TASK_FEATURES,
    encode_cluster,
    encode_nodes,
    encode_task,
)
from rlsched.policies.registry import make_placer, make_selector, parse_scheduler
from rlsched.scenarios.spec import Scenario
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.scheduler import TwoStageScheduler, is_clairvoyant
from rlsched.tasks import Task
from rlsched.view import ClusterView

FEASIBLE = NODE_FEATURES.index("feasible")
ALIVE = NODE_FEATURES.index("alive")


@pytest.fixture(scope="module")
def mixed(small_scenario, node) -> Scenario:
    """Heterogeneous, with a GPU-less node (infeasible for GPU-only apps), a late and a leaving node."""
    return small_scenario(
        nodes=(
            node("a", cores=4, gpus=("T4", "P4"), streams=2),
            node("cpu", cores=8, mem_gib=16, gpus=()),
            node("v", cores=8, gpus=("V100M16",), streams=3, leave_s=40.0),
            node("late", cores=4, gpus=("A10",), join_s=20.0),
        ),
        apps={"face_recognition": 1.0, "matmul": 1.0, "kmeans": 1.0, "fft": 1.0},
        tasks=60,
        rate_per_min=90.0,
    )


def make(scenario: Scenario | str, **kw: object) -> gymnasium.Env:
    return gymnasium.make(envs.ENV_ID, scenario=scenario, max_tasks=50, **kw)


def episode(env: gymnasium.Env, seed: int, rng: np.random.Generator) -> Iterator[tuple]:
    """Step an episode with uniformly random valid actions; yield (obs, reward, info) per step."""
    obs, info = env.reset(seed=seed)
    yield obs, 0.0, info
    done = False
    while not done:
        action = int(rng.choice(np.flatnonzero(obs["mask"])))
        obs, reward, terminated, truncated, info = env.step(action)
        done = terminated or truncated
        yield obs, reward, info


# ---- the checkers ---------------------------------------------------------------------------------
def run_checkers(env: gymnasium.Env) -> None:
    # Two known, by-design warnings are silenced around the checkers only: features are unbounded
    # above (log-scaled counts and times), so the Box bounds are infinite, and the per-node
    # observation is an (N, F) matrix that the size-agnostic Q-network scores row by row.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*Box observation space (minimum|maximum) value is -?inf")
        warnings.filterwarnings("ignore", message=r"Your observation nodes has an unconventional shape")
        gym_check_env(env.unwrapped, skip_render_check=True)
        sb3_check_env(env.unwrapped, warn=True)


def test_env_passes_both_checkers_on_a_small_scenario(mixed: Scenario) -> None:
    env = make(mixed)
    assert isinstance(env.unwrapped, ClusterSchedulingEnv)
    run_checkers(env)


def test_env_passes_both_checkers_on_the_paper_scenario() -> None:
    run_checkers(make("paper"))


def test_spaces_match_the_feature_encoder(mixed: Scenario) -> None:
    env = make(mixed)
    n = len(mixed.cluster.nodes)
    sp = env.observation_space
    assert sp["nodes"].shape == (n, len(NODE_FEATURES))
    assert sp["task"].shape == (len(TASK_FEATURES),)
    assert sp["cluster"].shape == (len(CLUSTER_FEATURES),)
    assert sp["mask"].shape == (n,) and sp["mask"].dtype == np.int8
    assert env.action_space.n == n


# ---- episodes -----------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_valid_episode_never_sees_an_empty_mask_and_loses_nothing(mixed: Scenario, seed: int) -> None:
    env = make(mixed)
    rng = np.random.default_rng(seed)
    steps = 0
    info: dict = {}
    for obs, reward, info in episode(env, seed, rng):
        assert env.observation_space.contains(obs)
        assert obs["mask"].dtype == np.int8 and obs["mask"].any()
        assert np.isfinite(reward) and reward <= 0.0  # latency reward: minus task-time in system
        assert "invalid_action" not in info or not info["invalid_action"]
        steps += 1
    m = info["metrics"]
    assert m["tasks_lost"] == 0
    assert m["tasks_completed"] + m["tasks_unschedulable"] == m["tasks_total"] == 50
    # One step per placement, including placements of requeued tasks.
    assert steps - 1 == m["tasks_completed"] + m["tasks_requeued"]


def test_action_masks_matches_the_observation(mixed: Scenario) -> None:
    env = make(mixed)
    obs, _ = env.reset(seed=3)
    for _ in range(10):
        m = env.unwrapped.action_masks()
        assert m.dtype == bool and np.array_equal(m, obs["mask"].astype(bool))
        assert np.array_equal(obs["nodes"][:, FEASIBLE], m)
        obs, *_ = env.step(int(np.flatnonzero(m)[-1]))


def first_state_with_an_infeasible_node(env: gymnasium.Env, seed: int) -> tuple[dict, list[int]]:
    """Reset and take valid actions until some node is masked out; return the obs and the actions."""
    obs, _ = env.reset(seed=seed)
    actions: list[int] = []
    while obs["mask"].all():
        a = int(np.flatnonzero(obs["mask"])[0])
        obs, _, done, _, _ = env.step(a)
        assert not done, "no state with a masked-out node"
        actions.append(a)
    return obs, actions


def test_invalid_action_is_penalised_and_flagged(mixed: Scenario) -> None:
    a, b = make(mixed), make(mixed)
    obs, actions = first_state_with_an_infeasible_node(a, 5)
    b.reset(seed=5)
    for x in actions:
        b.step(x)
    bad = int(np.flatnonzero(obs["mask"] == 0)[0])
    obs_a, r_a, _, _, info_a = a.step(bad)
    assert info_a["invalid_action"] is True
    replacement = info_a["node"]
    assert replacement != bad and obs["mask"][replacement]
    # The same state with the replacement node chosen validly: same outcome, no penalty.
    obs_b, r_b, _, _, info_b = b.step(replacement)
    assert info_b["invalid_action"] is False
    assert r_a == pytest.approx(r_b - INVALID_PENALTY)
    for k in obs_a:
        np.testing.assert_array_equal(obs_a[k], obs_b[k])


@pytest.mark.parametrize("action", [-1, 4, 1000])
def test_out_of_range_action_is_penalised_and_flagged(mixed: Scenario, action: int) -> None:
    env = ClusterSchedulingEnv(mixed, max_tasks=50)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(action)
    assert info["invalid_action"] is True
    assert reward <= -INVALID_PENALTY
    assert 0 <= info["node"] < 4


def test_step_before_reset_raises(mixed: Scenario) -> None:
    with pytest.raises(RuntimeError, match="before reset"):
        ClusterSchedulingEnv(mixed).step(0)


def test_unknown_reward_or_placer_is_rejected(mixed: Scenario) -> None:
    with pytest.raises(ValueError, match="reward"):
        ClusterSchedulingEnv(mixed, reward="makespan")
    with pytest.raises(ValueError, match="placer"):
        ClusterSchedulingEnv(mixed, placer="nope")


def test_throughput_reward_sums_to_completed_tasks(mixed: Scenario) -> None:
    env = make(mixed, reward="throughput")
    steps = list(episode(env, 4, np.random.default_rng(4)))
    assert sum(reward for _, reward, _ in steps) == steps[-1][2]["metrics"]["tasks_completed"]


# ---- determinism --------------------------------------------------------------------------------
def observations(env: gymnasium.Env, seed: int, n: int = 15) -> list[tuple[dict, float]]:
    out = []
    for i, (obs, reward, _) in enumerate(episode(env, seed, np.random.default_rng(99))):
        out.append(({k: v.copy() for k, v in obs.items()}, reward))
        if i == n:
            break
    return out


def assert_same(x: list[tuple[dict, float]], y: list[tuple[dict, float]]) -> None:
    assert len(x) == len(y)
    for (oa, ra), (ob, rb) in zip(x, y, strict=True):
        assert ra == rb
        for k in oa:
            np.testing.assert_array_equal(oa[k], ob[k])


def test_reset_with_a_seed_is_deterministic(mixed: Scenario) -> None:
    env = make(mixed)
    first = observations(env, 7)
    assert_same(first, observations(env, 7))  # same env, reset again
    assert_same(first, observations(make(mixed), 7))  # a fresh env
    other = observations(env, 8)
    assert any(
        not np.array_equal(a[k], b[k]) for (a, _), (b, _) in zip(first, other, strict=False) for k in a
    )


# ---- features -----------------------------------------------------------------------------------
class EncodingSelector:
    """Wraps a selector and checks the encoder's output at every decision of a simulation."""

    def __init__(self, name: str) -> None:
        self.inner = make_selector(name)
        self.name = name
        self.clairvoyant = is_clairvoyant(self.inner)  # declares what it wraps (the oracle)
        self.calls = 0
        self.encoded: list[np.ndarray] = []

    def reset(self, view: ClusterView, seed: int) -> None:
        self.inner.reset(view, seed)

    def bind_simulator(self, sim: Simulator) -> None:
        self.inner.bind_simulator(sim)  # type: ignore[attr-defined]

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        self.calls += 1
        x = encode_nodes(view, task, mask)
        assert x.shape == (view.n_nodes, len(NODE_FEATURES)) and x.dtype == np.float32
        assert np.isfinite(x).all()
        assert np.array_equal(x, encode_nodes(view, task, mask))  # repeatable, cache and all
        assert np.array_equal(x[:, FEASIBLE], mask & view.alive)
        assert np.array_equal(x[:, ALIVE], view.alive)
        assert not x[~view.alive].any()
        t = encode_task(task, view)
        assert t.shape == (len(TASK_FEATURES),) and np.isfinite(t).all()
        c = encode_cluster(view)
        assert c.shape == (len(CLUSTER_FEATURES),) and np.isfinite(c).all()
        self.encoded.append(np.concatenate([x.ravel(), t, c]))
        return self.inner.select(task, view, mask)


@pytest.mark.parametrize("selector", ["random", "mct", "mlsm"])
def test_features_are_finite_and_shaped_at_every_decision(mixed: Scenario, selector: str) -> None:
    tasks = generate_tasks(mixed)
    enc = EncodingSelector(selector)
    sched = parse_scheduler(f"{selector}+speedup")
    sim = Simulator(mixed, tasks, sched.placer, seed=0)
    m = sim.run(TwoStageScheduler(enc, sched.placer))
    assert enc.calls == m.tasks_completed + m.tasks_requeued > 0


def test_identical_views_give_identical_features(mixed: Scenario) -> None:
    tasks = generate_tasks(mixed)
    runs = []
    for _ in range(2):
        enc = EncodingSelector("mct")
        placer = make_placer("mlsm")
        sim = Simulator(mixed, tasks, placer, seed=1)
        sim.run(TwoStageScheduler(enc, placer))
        runs.append(enc.encoded)
    assert len(runs[0]) == len(runs[1])
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)
    # And two fresh views of the same cluster encode a task identically.
    va, vb = ClusterView.from_spec(mixed.cluster), ClusterView.from_spec(mixed.cluster)
    mask = np.ones(len(mixed.cluster.nodes), dtype=bool) & va.alive
    np.testing.assert_array_equal(encode_nodes(va, tasks[0], mask), encode_nodes(vb, tasks[0], mask))


# ---- the worker process (the simulator sealed away: envs.env_worker) -------------------------------
def test_the_env_runs_inside_a_daemonic_vec_env_worker(mixed: Scenario) -> None:
    """SB3's SubprocVecEnv runs each env in a daemonic process, which multiprocessing forbids to have
    children; the sealed env's worker comes from its own launcher, so it works there too."""
    from stable_baselines3.common.vec_env import SubprocVecEnv

    venv = SubprocVecEnv([lambda: ClusterSchedulingEnv(mixed, max_tasks=10)], start_method="forkserver")
    try:
        venv.seed(0)
        obs = venv.reset()
        for _ in range(12):  # past the end of an episode: the vec env resets it
            obs, reward, _, _ = venv.step(np.array([int(np.flatnonzero(obs["mask"][0])[0])]))
            assert np.isfinite(reward).all()
    finally:
        venv.close()


def test_an_env_in_a_script_without_a_main_guard(mixed: Scenario, tmp_path: Path) -> None:
    """Nothing re-imports the user's script (as multiprocessing's spawn and forkserver would)."""
    script = tmp_path / "plain.py"
    script.write_text(
        "import pickle, sys\n"
        "from envs.gym_env import ClusterSchedulingEnv\n"
        f"env = ClusterSchedulingEnv(pickle.loads({pickle.dumps(mixed)!r}), max_tasks=5)\n"
        "obs, _ = env.reset(seed=0)\n"
        "obs, *_ = env.step(int(obs['mask'].argmax()))\n"
        "print('stepped')\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.count("stepped") == 1, out.stderr


def test_a_worker_error_arrives_with_its_traceback_and_the_env_goes_on(mixed: Scenario) -> None:
    env = ClusterSchedulingEnv(mixed, max_tasks=5)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="scenario") as err:
        env.reset(options={"scenario": 7})
    assert "in the simulated env's worker process" in "".join(getattr(err.value, "__notes__", []))
    obs, _ = env.reset(seed=0)  # the worker is still there
    assert obs["mask"].any()
    env.close()
    with pytest.raises(RuntimeError, match="before reset"):
        env.step(0)


# ---- several scenarios in one environment ---------------------------------------------------------
def test_several_scenarios_pad_to_the_largest_cluster(mixed: Scenario, small_scenario, node) -> None:
    two = small_scenario(nodes=(node("x", cores=4, gpus=("T4",)), node("y", cores=4, gpus=("P4",))))
    env = ClusterSchedulingEnv([mixed, two], max_tasks=20)
    assert env.observation_space["nodes"].shape[0] == 4 and env.action_space.n == 4
    obs, _ = env.reset(seed=1, options={"scenario": 1})
    assert env.scenario is two and obs["nodes"].shape[0] == 4
    assert not obs["mask"][2:].any() and not obs["nodes"][2:].any() and obs["mask"][:2].any()
    assert not env.action_masks()[2:].any()
    _, _, _, _, info = env.step(3)  # a padded node: replaced by a real one and penalised
    assert info["invalid_action"] is True and info["node"] < 2
    drawn = {(env.reset()[0], env.scenario.name)[1] for _ in range(20)}
    assert drawn == {mixed.name, two.name}
    with pytest.raises(ValueError, match="scenario"):
        env.reset(options={"scenario": 2})
    run_checkers(ClusterSchedulingEnv([mixed, two], max_tasks=20))

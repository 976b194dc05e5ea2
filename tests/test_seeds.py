"""The training, validation and test seed sets are disjoint and used as documented."""

from __future__ import annotations

import numpy as np
import pytest

from envs.gym_env import ClusterSchedulingEnv
from envs.simulated_worlds import SimulatedWorlds
from envs.simulator import Simulator
from experiments.suites import TEST_SEED_BASE
from experiments.train import TrainConfig, check_seed_sets, seed_sets
from rlsched.scenarios.loader import load_scenario
from rlsched.seeds import (
    DEFAULT_VALIDATION,
    TEST,
    TRAINING,
    VALIDATION,
    caption,
    describe,
    seed_set,
    training_seed,
)


def test_sets_are_disjoint_and_named() -> None:
    sets = [set(TRAINING), set(VALIDATION), set(TEST)]
    assert all(not (a & b) for i, a in enumerate(sets) for b in sets[i + 1 :])
    assert [seed_set(s) for s in (0, 9_999, 10_000, 19_999, 20_000, 29_999, 30_000)] == [
        "training",
        "training",
        "validation",
        "validation",
        "test",
        "test",
        "other",
    ]
    assert describe([20_000, 20_001]) == "test"
    assert describe([3, 20_000]) == "training + test"
    # a report's caption says the ranges, not the module that holds them
    assert caption([20_000, 20_001]) == "test set, seeds 20000-29999, disjoint from the others"
    assert caption([30_000]) == "other seeds"
    # A mix names each set's range, and no "disjoint from the others" (it read "test + other set,
    # seeds 20000-29999, disjoint from the others" for seeds 29999 and 30000).
    assert caption([29_999, 30_000]) == "test + other sets, seeds 20000-29999 and 30000 up"
    assert caption([19_999, 20_000]) == "validation + test sets, seeds 10000-19999 and 20000-29999"


@pytest.mark.parametrize("run_seed", [0, 1, 11, 10_000, 123_456])
def test_training_episodes_stay_in_the_training_set(run_seed: int) -> None:
    assert all(training_seed(run_seed, ep) in TRAINING for ep in range(50))


def test_defaults_use_validation_for_selection_and_test_for_reports() -> None:
    assert all(s in VALIDATION for s in DEFAULT_VALIDATION)
    assert TrainConfig().eval_seeds == DEFAULT_VALIDATION
    assert TEST.start == TEST_SEED_BASE
    labels = seed_sets(TrainConfig())
    assert "validation seeds 10001, 10002, 10003" in labels["evaluations"]


@pytest.mark.parametrize("seeds", [(20_000,), (0, 10_001), ()])
def test_selection_on_other_sets_is_refused(seeds: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="eval_seeds"):
        check_seed_sets(TrainConfig(eval_seeds=seeds))


def test_unseeded_episodes_are_training_episodes() -> None:
    # The env's worlds live in its worker process (sealed): check what opens them, as it runs there.
    worlds = SimulatedWorlds([load_scenario("paper")], "speedup", max_tasks=5)
    rng = np.random.default_rng(0)
    for _ in range(20):
        world = worlds.open(None, rng, None)
        assert isinstance(world, Simulator) and world.seed in TRAINING
    env = ClusterSchedulingEnv("paper", max_tasks=5)
    env.reset(seed=0)
    first = [env.reset()[0]["task"].tobytes() for _ in range(5)]
    assert len(set(first)) > 1  # unseeded episodes draw different seeds

"""``rlsched train`` refuses, before any work, a training whose replay buffer would not fit in
memory (every observation is padded to the widest cluster), and its estimate is the bytes the real
replay buffer allocates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from envs.gym_env import ClusterSchedulingEnv
from experiments.train import TrainConfig, build_dqn, train
from experiments.train_memory import available_bytes, check_replay_fits, replay_bytes
from rlsched.errors import InputError
from rlsched.scenarios.loader import load_scenario


def test_the_estimate_is_what_the_replay_buffer_allocates() -> None:
    scenarios = [load_scenario("paper"), load_scenario("transfer-32")]
    env = ClusterSchedulingEnv(scenarios, placer="speedup")
    cfg = TrainConfig(buffer_size=300, learning_starts=10)
    buf = build_dqn(env, cfg).replay_buffer
    arrays = [*buf.observations.values(), *buf.next_observations.values()]
    arrays += [buf.actions, buf.rewards, buf.dones, buf.timeouts, buf.discounts]
    assert sum(int(np.asarray(a).nbytes) for a in arrays) == replay_bytes(env.n_max, 300)
    env.close()


def test_a_buffer_over_the_memory_is_refused_naming_the_widest_entry() -> None:
    scenarios = [load_scenario("paper"), load_scenario("large")]
    entries = ["paper", "large"]
    need = replay_bytes(1024, 40_000)
    assert 8.5 < need / 2**30 < 9.5  # ~240 KB a transition at 1,024 nodes
    with pytest.raises(InputError) as e:
        check_replay_fits(scenarios, entries, 40_000, available=8 * 2**30)
    msg = str(e.value)
    assert msg.startswith("--scenario: large: expected") and "1,024 nodes" in msg and "GiB" in msg
    check_replay_fits(scenarios, entries, 40_000, available=64 * 2**30)  # fits
    check_replay_fits(scenarios, entries, 40_000, available=None)  # unknown: not checked
    check_replay_fits(scenarios[:1], entries[:1], 40_000, available=8 * 2**30)  # paper alone fits


def test_available_memory_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:    2048 kB\n")
    assert available_bytes(meminfo) == 2048 * 1024
    assert available_bytes(tmp_path / "missing") is None


def test_train_refuses_before_any_work(tmp_path: Path) -> None:
    # 10 million transitions at 1,024 nodes: ~2.4 TB, more than any machine this runs on
    cfg = TrainConfig(scenario="paper,large", steps=10_000_000, buffer_size=10_000_000)
    with pytest.raises(InputError, match=r"^--scenario: large: expected .* 1,024 nodes"):
        train(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "pretrained").exists()

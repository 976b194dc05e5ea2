"""A network is fed the feature version it was trained on.

Version 4 (the shipped LDWP network's since 2026-12-05) costs a task's subtasks side by side on a
node's GPUs (the heuristics' ETC), version 3 as if they ran on one device; versions 3 and 4 read
each node's CPU queue in seconds, version 2 (the network shipped before) read it ~25x short. All
are encoded by one build, chosen by the checkpoint, so a network trained on newer features leaves
users' older checkpoints working exactly as before.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from envs.gym_env import ClusterSchedulingEnv
from envs.simulator import Simulator
from models.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from rlsched.features import FEATURE_VERSION, READABLE_FEATURE_VERSIONS, encode_observation
from rlsched.policies.ldwp import PRETRAINED, LdwpSelector, encode_batch
from rlsched.policies.registry import make_placer
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.scheduler import TwoStageScheduler
from rlsched.scorer_io import scorer_from_checkpoint
from rlsched.tasks import Task
from rlsched.view import ClusterView
from tests.conftest import node, small_scenario
from tests.test_parallel_etc import CHAIN, FLEET, POD, pod_task

# CPU-only nodes with many cores beside GPU nodes, under a burst: CPU queues build up, which is
# where versions 2 and 3 differ.
CPU_QUEUES = small_scenario(
    nodes=(
        node("gpu", cores=8, gpus=("V100",), streams=4),
        node("cpu-a", cores=32, gpus=()),
        node("cpu-b", cores=16, gpus=()),
    ),
    apps={"kmeans": 1.0, "fft": 1.0},
    tasks=150,
    rate_per_min=3000.0,
)


def _relabelled(tmp_path: Path, version: int) -> Path:
    """The shipped network's weights in a checkpoint that says they were trained on ``version``."""
    state, meta = load_checkpoint(PRETRAINED, READABLE_FEATURE_VERSIONS)
    out = tmp_path / f"v{version}"
    save_checkpoint(
        out, state, {**{k: v for k, v in meta.items() if k != "files"}, "feature_version": version}
    )
    return out


class _Checked:
    """An LDWP selector whose every choice is compared with the network's argmax over the
    features of each readable version (the selector itself decides)."""

    name = "checked"

    def __init__(self, sel: LdwpSelector) -> None:
        self.sel, self.agree, self.versions_differ = sel, 0, 0

    def reset(self, view: ClusterView, seed: int) -> None:
        self.sel.reset(view, seed)

    @torch.no_grad()
    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        picks = {}
        for v in READABLE_FEATURE_VERSIONS:
            b = encode_batch(view, task, mask, v)
            picks[v] = int(self.sel.net(b["nodes"], b["task"], b["cluster"], b["mask"])[0].argmax())
        chosen = self.sel.select(task, view, mask)
        self.agree += chosen == picks[self.sel.feature_version]
        self.versions_differ += len(set(picks.values())) > 1
        return chosen


@pytest.mark.parametrize("version", READABLE_FEATURE_VERSIONS)
def test_the_selector_decides_on_the_features_its_checkpoint_names(tmp_path: Path, version: int) -> None:
    sel = LdwpSelector(_relabelled(tmp_path, version))
    assert sel.feature_version == version
    checked = _Checked(sel)
    placer = make_placer("speedup")
    sim = Simulator(CPU_QUEUES, generate_tasks(CPU_QUEUES, 0), placer, seed=0)
    m = sim.run(TwoStageScheduler(checked, placer))
    assert m.tasks_completed == 150
    assert checked.agree == 150
    assert checked.versions_differ > 0  # the versions lead to other nodes here: the check can fail


def test_the_shipped_network_reads_version_4() -> None:
    net, meta = scorer_from_checkpoint(PRETRAINED)
    assert meta["feature_version"] == 4 == net.feature_version
    assert FEATURE_VERSION == 4  # what rlsched train writes


def test_versions_differ_only_in_the_cpu_queues_wait() -> None:
    v = ClusterView.from_spec(CPU_QUEUES.cluster)
    task = generate_tasks(CPU_QUEUES, 0)[0]
    mask = np.ones(v.n_nodes, dtype=bool)
    same = {n: encode_observation(v, task, mask, n) for n in READABLE_FEATURE_VERSIONS}
    assert all(np.array_equal(same[2][k], same[3][k]) for k in same[2])  # empty queues: alike
    v.backlog_cpu_s[:] = [0.0, 320.0, 0.0]
    v.speed_cpu[:] = 1.0
    enc = {n: encode_observation(v, task, mask, n) for n in READABLE_FEATURE_VERSIONS}
    differ = np.argwhere(enc[2]["nodes"] != enc[3]["nodes"])
    assert differ.size and set(differ[:, 0]) == {1}  # the queued node only ...
    assert set(differ[:, 1]) <= {24, 25, 28}  # ... in etc_log, etc_rel_best, mem_wait_log
    assert all(np.array_equal(enc[2][k], enc[3][k]) for k in ("task", "cluster", "mask"))


def test_versions_3_and_4_differ_only_where_a_tasks_subtasks_run_side_by_side() -> None:
    v = ClusterView.from_spec(FLEET.cluster)  # an eight-GPU node and a two-GPU node
    mask = np.ones(v.n_nodes, dtype=bool)
    enc = {n: encode_observation(v, pod_task(CHAIN), mask, n) for n in (3, 4)}
    assert all(np.array_equal(enc[3][k], enc[4][k]) for k in enc[3])  # a chain: alike
    enc = {n: encode_observation(v, pod_task(POD), mask, n) for n in (3, 4)}
    differ = np.argwhere(enc[3]["nodes"] != enc[4]["nodes"])
    assert differ.size and set(differ[:, 1]) <= {22, 24, 25}  # exec_gpu_log, etc_log, etc_rel_best
    assert enc[4]["nodes"][0, 22] < enc[4]["nodes"][1, 22]  # eight GPUs run the pod sooner
    assert enc[3]["nodes"][0, 22] == enc[3]["nodes"][1, 22]  # one device: the same on both
    assert all(np.array_equal(enc[3][k], enc[4][k]) for k in ("task", "cluster", "mask"))


def test_another_version_is_refused_naming_the_readable_ones(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"feature_version: expected 2, 3 or 4, .* got 1"):
        scorer_from_checkpoint(_relabelled(tmp_path, 1))
    with pytest.raises(ValueError, match="feature_version"):
        ClusterSchedulingEnv(CPU_QUEUES, feature_version=5)
    with pytest.raises(ValueError, match="feature_version"):
        encode_observation(
            ClusterView.from_spec(CPU_QUEUES.cluster),
            generate_tasks(CPU_QUEUES, 0)[0],
            np.ones(3, dtype=bool),
            1,
        )


def test_the_training_env_encodes_the_version_it_is_given() -> None:
    obs = {}
    for n in READABLE_FEATURE_VERSIONS:
        env = ClusterSchedulingEnv(CPU_QUEUES, feature_version=n)
        try:
            o, _ = env.reset(seed=0)
            for _ in range(60):  # a burst onto node 1 builds its CPU queue
                o, _, done, _, _ = env.step(
                    1 if env.action_masks()[1] else int(np.argmax(env.action_masks()))
                )
                assert not done
            obs[n] = o["nodes"]
        finally:
            env.close()
    assert not np.array_equal(obs[2], obs[3])
    assert json.loads((PRETRAINED / "meta.json").read_text())["feature_version"] in READABLE_FEATURE_VERSIONS

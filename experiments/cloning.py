"""Behaviour cloning for ``rlsched train``: the teachers' decisions, stored at each cluster's own
size, and the network trained to rank nodes as they did.

A multi-scenario environment pads every observation to its largest cluster. Kept padded, the
decisions of 80 generated cases of 20-45 nodes beside ``large`` (1,024 nodes) took 30 GB and the
training was killed for memory; stored at their own width (each scenario's node count) they take
what their nodes take, and each minibatch is padded only to its own widest decision. Padding
does not change the network's output: padded nodes are masked out of its mean advantage and get
the masked Q-value, whose softmax weight is zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from envs.gym_env import ClusterSchedulingEnv
from experiments.configs import TrainConfig
from models.qnet import NodeScorer
from rlsched.policies.registry import make_selector
from rlsched.scenarios.spec import Scenario
from rlsched.seeds import training_seed


@dataclass
class TeacherData:
    """Decisions of the teachers, grouped by cluster width.

    :param nodes: per group, node features (n_g, width_g, F) of its decisions.
    :param mask: per group, feasible nodes (n_g, width_g).
    :param task: task features (N, T), every decision in collection order.
    :param cluster: cluster features (N, S).
    :param action: the node each teacher chose (N,).
    :param group: the group of each decision (N,).
    :param row: each decision's row in its group (N,).
    """

    nodes: list[np.ndarray]
    mask: list[np.ndarray]
    task: np.ndarray
    cluster: np.ndarray
    action: np.ndarray
    group: np.ndarray
    row: np.ndarray

    def __len__(self) -> int:
        return len(self.action)

    @property
    def widths(self) -> list[int]:
        """Each group's cluster width (node count)."""
        return [int(g.shape[1]) for g in self.nodes]

    def batch(self, idx: np.ndarray) -> tuple[torch.Tensor, ...]:
        """Decisions ``idx`` as tensors (nodes, task, cluster, mask, action), the nodes and mask
        padded to the widest of them (padded nodes infeasible)."""
        groups, rows = self.group[idx], self.row[idx]
        present, widths = np.unique(groups), self.widths
        width = max(widths[g] for g in present)
        nodes = np.zeros((len(idx), width, self.nodes[0].shape[2]), dtype=np.float32)
        mask = np.zeros((len(idx), width), dtype=self.mask[0].dtype)
        for g in present:
            at = groups == g
            w = widths[g]
            nodes[at, :w] = self.nodes[g][rows[at]]
            mask[at, :w] = self.mask[g][rows[at]]
        return (
            torch.from_numpy(nodes),
            torch.from_numpy(self.task[idx]),
            torch.from_numpy(self.cluster[idx]),
            torch.from_numpy(mask),
            torch.from_numpy(self.action[idx]),
        )


def collect_teacher(cfg: TrainConfig, scenarios: list[Scenario], teachers: list[str]) -> TeacherData:
    """Observations and the teachers' choices over ``pretrain_episodes`` training episodes of
    each scenario, each taught by its own teacher (each decision kept at its scenario's width).

    :param cfg: the training configuration (placer, seed, pretrain_episodes).
    :param scenarios: the training scenarios.
    :param teachers: one teacher selector per scenario.
    """
    env = ClusterSchedulingEnv(scenarios, placer=cfg.placer)
    n = cfg.pretrain_episodes
    nodes: list[list[np.ndarray]] = [[] for _ in scenarios]
    masks: list[list[np.ndarray]] = [[] for _ in scenarios]
    flat: dict[str, list[np.ndarray]] = {"task": [], "cluster": [], "action": [], "group": [], "row": []}
    shown = teachers[0] if len(set(teachers)) == 1 else "per scenario"
    try:
        for ep in tqdm(range(n * len(scenarios)), desc=f"teacher {shown}", unit="episode", disable=None):
            sc = ep // n
            width = len(scenarios[sc].cluster.nodes)
            teacher = make_selector(teachers[sc])
            obs, _ = env.reset(seed=training_seed(cfg.seed, ep), options={"scenario": sc})
            teacher.reset(env.view, training_seed(cfg.seed, ep))
            done = False
            while not done:
                task = env.task
                assert task is not None
                a = teacher.select(task, env.view, obs["mask"][: env.view.n_nodes].astype(bool))
                # copies: a slice would keep the whole padded observation alive
                flat["row"].append(np.asarray(len(nodes[sc]), dtype=np.int64))
                nodes[sc].append(obs["nodes"][:width].copy())
                masks[sc].append(obs["mask"][:width].copy())
                flat["task"].append(obs["task"])
                flat["cluster"].append(obs["cluster"])
                flat["action"].append(np.asarray(a, dtype=np.int64))
                flat["group"].append(np.asarray(sc, dtype=np.int64))
                obs, _, done, _, _ = env.step(a)
    finally:
        env.close()
    kept = [i for i, g in enumerate(nodes) if g]
    renumber = np.full(len(scenarios), -1, dtype=np.int64)
    renumber[kept] = np.arange(len(kept))
    out = {k: np.stack(v) for k, v in flat.items()}
    return TeacherData(
        nodes=[np.stack(nodes[i]) for i in kept],
        mask=[np.stack(masks[i]) for i in kept],
        task=out["task"],
        cluster=out["cluster"],
        action=out["action"],
        group=renumber[out["group"]],
        row=out["row"],
    )


def behaviour_clone(net: NodeScorer, data: TeacherData, cfg: TrainConfig) -> float:
    """Train ``net`` so its masked Q-values rank nodes as the teacher did; return final accuracy.

    :param net: the network, trained in place.
    :param data: the teachers' decisions.
    :param cfg: the training configuration (seed, bc_epochs).
    """
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    n = len(data)
    gen = torch.Generator().manual_seed(cfg.seed)
    acc = 0.0
    for _ in tqdm(range(cfg.bc_epochs), desc="behaviour cloning", unit="epoch", disable=None):
        perm = torch.randperm(n, generator=gen).numpy()
        hits = 0
        for i in range(0, n, 64):
            nodes, task, cluster, mask, action = data.batch(perm[i : i + 64])
            q = net(nodes, task, cluster, mask)
            loss = torch.nn.functional.cross_entropy(q, action)
            opt.zero_grad()
            loss.backward()
            opt.step()
            hits += int((q.argmax(dim=1) == action).sum())
        acc = hits / n
    return acc

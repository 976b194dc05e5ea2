"""The LDWP node-scoring Q-network: one shared MLP scores every node, so any cluster size works.

The paper's DQN has one output per node and must be rebuilt when the cluster changes. Here the
same weights score each node from ``[node features, task features, cluster summary]``; the
Q-value of action *i* is the score of node *i*. Infeasible nodes get :data:`MASKED_Q`, a finite
large negative (``-inf`` would turn into NaN in the TD target), inside the network — so greedy
acting and the DQN target's ``max`` both respect the mask.

Dueling form (Wang et al. 2016): ``Q(s, i) = V(s) + A(s, i) - mean over feasible j of A(s, j)``,
``V`` a second MLP on the task and cluster summary. Under a long horizon every action's value is
dominated by what the cluster already holds (hundreds of task-minutes on a saturated cluster),
while the choice of node changes it by little: ``V`` carries the common part, so TD learning need
not move the per-node scores (which behaviour cloning trained) to fit it. Acting greedily reads
only ``A``'s ranking, which cloning sets (its cross-entropy ignores ``V``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

#: Q-value given to infeasible nodes.
MASKED_Q = -1.0e9


class NodeScorer(nn.Module):
    """Shared per-node MLP.

    :param node_dim: features per node.
    :param task_dim: task features.
    :param cluster_dim: cluster-summary features.
    :param hidden: hidden layer sizes (the paper's MLP: 256, 128).
    """

    def __init__(
        self, node_dim: int, task_dim: int, cluster_dim: int, hidden: Sequence[int] = (256, 128)
    ) -> None:
        super().__init__()
        self.dims = (node_dim, task_dim, cluster_dim)
        #: The feature version it was trained on, once known (set by whoever loads or trains it;
        #: ``None``: the encoder's current one, ``rlsched.features.network_feature_version``).
        self.feature_version: int | None = None
        layers: list[nn.Module] = []
        width = node_dim + task_dim + cluster_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.mlp = nn.Sequential(*layers)
        v_layers: list[nn.Module] = []
        width = task_dim + cluster_dim
        for h in hidden[-1:]:
            v_layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        v_layers.append(nn.Linear(width, 1))
        self.value = nn.Sequential(*v_layers)

    def forward(
        self, nodes: torch.Tensor, task: torch.Tensor, cluster: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """Q-values (B, N) from nodes (B, N, F), task (B, T), cluster (B, S), mask (B, N)."""
        n = nodes.shape[1]
        x = torch.cat(
            (nodes, task.unsqueeze(1).expand(-1, n, -1), cluster.unsqueeze(1).expand(-1, n, -1)), dim=-1
        )
        adv = self.mlp(x).squeeze(-1)
        feasible = mask > 0.5
        count = feasible.sum(dim=1, keepdim=True).clamp(min=1)
        mean_adv = torch.where(feasible, adv, torch.zeros_like(adv)).sum(dim=1, keepdim=True) / count
        q = self.value(torch.cat((task, cluster), dim=-1)) + adv - mean_adv
        return torch.where(feasible, q, torch.full_like(q, MASKED_Q))

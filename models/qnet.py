"""The LDWP node-scoring Q-network: one shared MLP scores every node, so any cluster size works.

The paper's DQN has one output per node and must be rebuilt when the cluster changes. Here the
same weights score each node from ``[node features, task features, cluster summary]``; the
Q-value of action *i* is the score of node *i*. Infeasible nodes get :data:`MASKED_Q`, a finite
large negative (``-inf`` would turn into NaN in the TD target), inside the network — so greedy
acting and the DQN target's ``max`` both respect the mask.
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
        layers: list[nn.Module] = []
        width = node_dim + task_dim + cluster_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(
        self, nodes: torch.Tensor, task: torch.Tensor, cluster: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """Q-values (B, N) from nodes (B, N, F), task (B, T), cluster (B, S), mask (B, N)."""
        n = nodes.shape[1]
        x = torch.cat(
            (nodes, task.unsqueeze(1).expand(-1, n, -1), cluster.unsqueeze(1).expand(-1, n, -1)), dim=-1
        )
        q = self.mlp(x).squeeze(-1)
        return torch.where(mask > 0.5, q, torch.full_like(q, MASKED_Q))

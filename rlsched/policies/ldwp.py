"""LDWP as a stage-1 selector: the trained node-scoring Q-network, greedy over feasible nodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

import models
from models.checkpoint import CheckpointError, load_checkpoint, load_weights
from models.qnet import NodeScorer
from rlsched.features import (
    CLUSTER_FEATURES,
    FEATURE_VERSION,
    NODE_FEATURES,
    TASK_FEATURES,
    encode_observation,
)
from rlsched.tasks import Task
from rlsched.view import ClusterView

#: Where the shipped pretrained model lives (see models/pretrained/README.md).
PRETRAINED = models.PRETRAINED_LDWP


def scorer_from_checkpoint(directory: str | Path) -> tuple[NodeScorer, dict]:
    """Build the network a checkpoint describes and load its verified weights."""
    state, meta = load_checkpoint(directory, FEATURE_VERSION)
    dims = (len(NODE_FEATURES), len(TASK_FEATURES), len(CLUSTER_FEATURES))
    if (meta.get("node_dim"), meta.get("task_dim"), meta.get("cluster_dim")) != dims:
        got = (meta.get("node_dim"), meta.get("task_dim"), meta.get("cluster_dim"))
        raise CheckpointError(
            Path(directory) / "meta.json", "node_dim/task_dim/cluster_dim", f"this build's {dims}", got
        )
    arch = meta.get("net_arch")
    if not (isinstance(arch, list) and arch and all(isinstance(h, int) and 0 < h <= 4096 for h in arch)):
        raise CheckpointError(Path(directory) / "meta.json", "net_arch", "a list of layer widths", arch)
    net = NodeScorer(*dims, hidden=arch)
    load_weights(net, state, directory)
    net.eval()
    return net, meta


def encode_batch(view: ClusterView, task: Task, mask: np.ndarray) -> dict[str, torch.Tensor]:
    """The observation of one decision as a batch of one (what the Q-network reads)."""
    return {k: torch.from_numpy(v)[None] for k, v in encode_observation(view, task, mask).items()}


class LdwpSelector:
    """Pick the feasible node with the highest Q-value.

    :param model_dir: a checkpoint directory; ``None`` = the shipped pretrained model.
    """

    name = "ldwp"

    def __init__(self, model_dir: str | Path | None = None) -> None:
        self.model_dir = Path(model_dir) if model_dir is not None else PRETRAINED
        self.net, self.meta = scorer_from_checkpoint(self.model_dir)

    def reset(self, view: ClusterView, seed: int) -> None:
        """Stateless: the network is fixed during a run."""

    @torch.no_grad()
    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        b = encode_batch(view, task, mask)
        q = self.net(b["nodes"], b["task"], b["cluster"], b["mask"])
        return int(q[0].argmax())

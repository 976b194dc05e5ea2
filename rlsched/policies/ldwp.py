"""LDWP as a stage-1 selector: the trained node-scoring Q-network, greedy over feasible nodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

import models
from models.interference.threads import one_thread
from models.qnet import NodeScorer
from rlsched.features import FEATURE_VERSION, encode_observation, network_feature_version
from rlsched.scorer_io import scorer_from_checkpoint
from rlsched.tasks import Task
from rlsched.view import ClusterView

#: Where the shipped pretrained model lives (see models/pretrained/README.md).
PRETRAINED = models.PRETRAINED_LDWP


def encode_batch(
    view: ClusterView, task: Task, mask: np.ndarray, version: int = FEATURE_VERSION
) -> dict[str, torch.Tensor]:
    """The observation of one decision as a batch of one (what the Q-network reads).

    :param version: the feature version of the network that reads it.
    """
    obs = encode_observation(view, task, mask, version)
    return {k: torch.from_numpy(v)[None] for k, v in obs.items()}


class LdwpSelector:
    """Pick the feasible node with the highest Q-value.

    :param model_dir: a checkpoint directory; ``None`` = the shipped pretrained model.
    """

    name = "ldwp"

    def __init__(self, model_dir: str | Path | None = None) -> None:
        self.model_dir = Path(model_dir) if model_dir is not None else PRETRAINED
        self.net, self.meta = scorer_from_checkpoint(self.model_dir)
        #: The feature version the network was trained on (what it is fed).
        self.feature_version = network_feature_version(self.net)

    @classmethod
    def from_network(cls, net: NodeScorer, meta: dict, model_dir: str | Path) -> LdwpSelector:
        """A selector over ``net`` (already loaded or learnt), described by ``meta``.

        :param model_dir: where it comes from (shown to users; not read).
        """
        sel = cls.__new__(cls)  # no checkpoint to read
        sel.model_dir, sel.net, sel.meta = Path(model_dir), net.eval(), meta
        sel.feature_version = int(meta.get("feature_version", network_feature_version(net)))
        return sel

    def reset(self, view: ClusterView, seed: int) -> None:
        """Stateless: the network is fixed during a run."""

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        return int(self.q_values(task, view, mask).argmax())

    @torch.no_grad()
    def q_values(self, task: Task, view: ClusterView, mask: np.ndarray) -> np.ndarray:
        """The network's value of sending ``task`` to each node (:data:`models.qnet.MASKED_Q`
        where ``mask`` is off)."""
        b = encode_batch(view, task, mask, self.feature_version)
        with one_thread():
            return self.net(b["nodes"], b["task"], b["cluster"], b["mask"])[0].numpy()

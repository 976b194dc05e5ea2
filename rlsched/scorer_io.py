"""Reading an LDWP node-scorer checkpoint: the network it describes, with its verified weights.

Outside the policies (``rlsched.policies.ldwp`` selects with it) because whatever holds a scorer
reads it: fine-tuning, the service's learned state.
"""

from __future__ import annotations

from pathlib import Path

from models.checkpoint import CheckpointError, load_checkpoint, load_weights
from models.qnet import NodeScorer
from rlsched.features import CLUSTER_FEATURES, NODE_FEATURES, READABLE_FEATURE_VERSIONS, TASK_FEATURES


def scorer_from_checkpoint(directory: str | Path) -> tuple[NodeScorer, dict]:
    """Build the network a checkpoint describes and load its verified weights; the network's
    ``feature_version`` is the one it was trained on (what it must be fed)."""
    state, meta = load_checkpoint(directory, READABLE_FEATURE_VERSIONS, kind="ldwp")
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
    net.feature_version = int(meta["feature_version"])
    net.eval()
    return net, meta

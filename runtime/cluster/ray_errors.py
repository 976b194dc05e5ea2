"""What a failed Ray call means for :class:`~runtime.cluster.ray_cluster.RayCluster`: the call died
with its actor or node (the task is placed again, :func:`is_lost`), and whether the node itself is
gone for good (taken out of the view, :func:`node_gone`) or only unreachable for a moment.

Each function takes the ``ray`` module, so that this module imports without Ray.
"""

from __future__ import annotations

from typing import Any


def is_lost(ray: Any, err: BaseException) -> bool:
    """Whether ``err`` means the call died with its actor or node (not a failure of the task)."""
    ex = ray.exceptions
    return isinstance(
        err,
        ex.RayActorError
        | ex.NodeDiedError
        | ex.ObjectLostError
        | ex.LocalRayletDiedError
        | ex.WorkerCrashedError,
    )


def actor_gone(ray: Any, err: BaseException) -> bool:
    """Whether ``err`` says the actor itself is dead for good (``max_restarts=0``)."""
    ex = ray.exceptions
    if isinstance(err, ex.ActorUnavailableError):
        return False  # Ray's word for "may come back": the node is checked instead
    return isinstance(
        err, ex.RayActorError | ex.NodeDiedError | ex.LocalRayletDiedError | ex.WorkerCrashedError
    )


def ray_node_alive(ray: Any, node_id: str) -> bool:
    """Whether the GCS lists Ray node ``node_id`` as alive (False when it cannot be asked)."""
    try:
        return any(str(x["NodeID"]) == node_id and x.get("Alive") for x in ray.nodes())
    except Exception:  # cannot ask the GCS: assume the worst, the task is retried either way
        return False


def node_gone(ray: Any, err: BaseException, node_id: str) -> bool:
    """Whether a lost call (:func:`is_lost`) means its node is gone: its actor is dead for good,
    or its Ray node is no longer alive (else: a lost object or an unreachable moment)."""
    return actor_gone(ray, err) or not ray_node_alive(ray, node_id)

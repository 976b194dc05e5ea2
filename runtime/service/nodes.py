"""Cluster membership at run time: drain, resume, add and remove nodes; Ray nodes that join.

- **drain**: the node takes no new tasks; what runs on it finishes (its not-yet-started tasks
  may still move off it when it is overloaded). **resume** undoes a drain.
- **remove**: the node's agent stops now; the tasks it held go back to the queue and run again
  elsewhere (each completes once: the store records only the attempt that holds the task).
- **add**: a node joins with the devices it is described with (local backend: emulated GPUs, or
  this machine's GPUs on CuPy; Ray: an agent on a Ray node without one).
- **discover** (Ray): every alive Ray node without an agent joins, described by its Ray
  resources: ``CPU`` cores, ``GPU`` GPUs of the model its ``accelerator_type:MODEL`` resource
  names (if the catalog knows it), else the service's ``ray_gpu_model``.

A removed node keeps its row in the view (dead), so node indices never shift under a running
scheduler; a node added later under the same name gets a new row. On Ray, the Ray node a removed
node ran on is free again: an admin may add a node there (``ray_node_id``), and discovery leaves
it alone until then (it would undo the removal two seconds later), until the service restarts.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from rlsched.hardware import gpu_model
from runtime.cluster.backend import ClusterBackend
from runtime.cluster.config import LiveGpu, LiveNode
from runtime.service.dispatcher import Dispatcher

log = logging.getLogger(__name__)


class NodeError(ValueError):
    """A membership operation that cannot be done now (a name taken, no free Ray node)."""


class UnknownNode(NodeError):
    """No live node of that name."""


def ray_node_spec(entry: dict[str, Any], default_model: str) -> LiveNode | None:
    """The live node a Ray node's ``ray.nodes()`` entry describes (``None``: no CPU, no GPU).

    :param entry: the entry (``NodeID``, ``Resources``).
    :param default_model: GPU model when no ``accelerator_type:`` resource names a catalog model.
    """
    res = entry.get("Resources", {})
    model = default_model
    for key in res:
        if key.startswith("accelerator_type:"):
            with contextlib.suppress(KeyError):  # a model the catalog does not know
                model = gpu_model(key.partition(":")[2]).name
    cores, gpus = int(res.get("CPU", 0)), int(res.get("GPU", 0))
    if cores == 0 and gpus == 0:
        return None
    return LiveNode(
        f"ray-{str(entry['NodeID'])[:12]}",
        cpu_cores=cores,
        gpus=tuple(LiveGpu(model, i) for i in range(gpus)),
    )


class NodeAdmin:
    """Membership operations of one service.

    :param cluster: the started cluster backend.
    :param dispatcher: the service's dispatcher (it keeps the set of drained nodes).
    """

    def __init__(self, cluster: ClusterBackend, dispatcher: Dispatcher) -> None:
        self.cluster, self.dispatcher = cluster, dispatcher
        self._lock = threading.Lock()  # one membership change at a time
        #: Told ``(name, row)`` of each node that joins, before the dispatcher is woken for it.
        self.on_join: Callable[[str, int], None] | None = None
        #: Ray nodes whose agent an admin removed: discovery does not give them one again.
        self.removed_hosts: set[str] = set()

    def index(self, name: str) -> int:
        """The row of the live node called ``name`` (else of its latest, dead, row).

        :raises UnknownNode: no node was ever called so.
        """
        c = self.cluster
        with c.lock:
            rows = [i for i, n in enumerate(c.spec.nodes) if n.name == name]
            alive = [i for i in rows if c.view.alive[i]]
        if not rows:
            raise UnknownNode(f"node {name!r}: no such node")
        return (alive or rows)[-1]

    def live_index(self, name: str) -> int:
        """The row of the live node called ``name``.

        :raises UnknownNode: no such node, or it has left the cluster.
        """
        i = self.index(name)
        if not self.cluster.view.alive[i]:
            raise UnknownNode(f"node {name!r} has left the cluster")
        return i

    def drain(self, name: str, on: bool = True) -> int:
        """Stop (``on``) or restart giving ``name`` new tasks; its row."""
        i = self.live_index(name)
        if on:
            self.dispatcher.closed.add(i)
        else:
            self.dispatcher.closed.discard(i)
            self.dispatcher.wake()
        return i

    def remove(self, name: str) -> int:
        """Stop ``name``'s agent now; how many tasks it held (they run again elsewhere)."""
        with self._lock:
            i = self.live_index(name)
            held = self.cluster.remove_node(i)
            self.dispatcher.closed.discard(i)
            host = self.cluster.location(i)
            if host is not None:
                self.removed_hosts.add(host)
            return held

    def add(self, node: LiveNode, where: str | None = None) -> int:
        """Start an agent for ``node`` (on Ray node ``where``, if given); its row.

        :raises NodeError: a live node has this name, or (Ray) no free Ray node.
        """
        with self._lock:
            try:
                i = self.cluster.add_node(node, where)
            except ValueError as e:
                raise NodeError(str(e)) from e
            host = self.cluster.location(i)
            self.removed_hosts.discard(host or "")
        if self.on_join is not None:  # outside the lock: it takes the admin's, held around remove
            self.on_join(node.name, i)
        self.dispatcher.wake()
        return i

    def discover(self, default_model: str) -> list[int]:
        """Ray: give every alive Ray node without an agent one (but those an admin removed an
        agent from); the rows added."""
        added = []
        for entry in self.cluster.free_hosts():
            if str(entry["NodeID"]) in self.removed_hosts:
                continue
            node = ray_node_spec(entry, default_model)
            if node is None:
                continue
            try:
                added.append(self.add(node, str(entry["NodeID"])))
                gpus = ", ".join(g.model for g in node.gpus) or "no GPU"
                log.info("rlsched serve: Ray node %s joined as %s (%s)", entry["NodeID"], node.name, gpus)
            except (NodeError, TimeoutError) as e:  # retried at the next discovery
                log.warning("rlsched serve: Ray node %s did not join: %s", entry["NodeID"], e)
        return added

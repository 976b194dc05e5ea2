"""Stage-1 baselines: which node takes a task. All vectorised over nodes.

The completion-time estimates they share with the observation encoding live in the core
(:mod:`rlsched.estimates`).
"""

from __future__ import annotations

import numpy as np

from rlsched.estimates import (
    capacity_estimates,
    drain_estimates,
    memory_aware_estimates,
    node_estimates,
    stream_aware_estimates,
    task_work_vector,
)
from rlsched.tasks import Task
from rlsched.view import ClusterView


def masked_argmin(score: np.ndarray, mask: np.ndarray) -> int:
    """Index of the smallest score among masked-in nodes (first on ties)."""
    return int(np.argmin(np.where(mask, score, np.inf)))


def node_gpu_power(view: ClusterView) -> np.ndarray:
    """Per node: measured effective TFLOP/s summed over GPUs."""
    return (view.gpu_tflops * view.speed_gpu * view.gpu_valid).sum(axis=1)


def node_utilisation(view: ClusterView) -> np.ndarray:
    """The paper's per-node load: mean of CPU, host-memory, GPU and GPU-memory utilisation."""
    cpu = view.cpu_busy / np.maximum(view.cores, 1)
    hmem = view.host_mem_used_mb / view.host_mem_mb
    gpu = view.node_gpus_active / np.maximum(view.n_gpus, 1)
    gmem = view.node_gpu_mem_used_mb / np.maximum(view.node_gpu_mem_mb, 1.0)
    return (cpu + hmem + gpu + gmem) / 4.0


class _Selector:
    name = "base"

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)

    def reset(self, view: ClusterView, seed: int) -> None:
        """Reseed; subclasses clear their own state."""
        self.rng = np.random.default_rng(seed)


class RandomSelector(_Selector):
    """Uniformly random among feasible nodes."""

    name = "random"

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        return int(self.rng.choice(np.flatnonzero(mask)))


class RoundRobinSelector(_Selector):
    """Cycles through nodes, skipping infeasible ones."""

    name = "round-robin"

    def reset(self, view: ClusterView, seed: int) -> None:
        super().reset(view, seed)
        self.next = 0

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        n = len(mask)
        order = (np.arange(n) + self.next) % n
        node = int(order[np.argmax(mask[order])])
        self.next = (node + 1) % n
        return node


class LeastLoadedSelector(_Selector):
    """Fewest outstanding tasks per computing unit; ties broken by the paper's utilisation load."""

    name = "least-loaded"

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        units = view.n_gpus * 2 + view.cores / 8.0  # a GPU is worth several cores for this work
        score = view.tasks_on_node / np.maximum(units, 1e-9) + 1e-3 * node_utilisation(view)
        return masked_argmin(score, mask)


class EtcSelector(_Selector):
    """A selector that minimises an expected completion time (ETC).

    :param parallel: the ETC counts a task's subtasks running side by side on the node's GPUs
        (:func:`rlsched.estimates.node_estimates`; the default). ``False`` is the form before
        2026-12-05, the whole task on one device, which ``auto`` runs where its recogniser was
        fitted on that form (its labels measured those pairs).
    """

    def __init__(self, parallel: bool = True) -> None:
        super().__init__()
        self.parallel = parallel


class MctSelector(EtcSelector):
    """Minimum expected completion time (the paper's ETC).

    ETC = time until the input is on the node + queued work ahead of the task on the node's GPUs
    (or cores) + the task's own run time, all from datasheets corrected by measured speeds.
    """

    name = "mct"

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        return masked_argmin(self.etc(task, view), mask)

    def etc(self, task: Task, view: ClusterView) -> np.ndarray:
        """Estimated completion time (relative to now) of ``task`` on every node."""
        return node_estimates(task, view, parallel=self.parallel)[2]


class MctMemSelector(EtcSelector):
    """``mct`` that also counts the host-memory admission queue (a memory-aware ETC).

    The paper's ETC ignores host memory: a node whose memory is taken admits a task only after
    others finish, however idle its cores. Here the task's input transfer and run start after
    the estimated memory wait (:func:`host_memory_wait`) when that is later than the compute wait.
    """

    name = "mct-mem"

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        return masked_argmin(self.etc(task, view), mask)

    def etc(self, task: Task, view: ClusterView) -> np.ndarray:
        """Memory-aware estimated completion time (relative to now) on every node."""
        return memory_aware_estimates(task, view, parallel=self.parallel)[2]


class MctStreamSelector(EtcSelector):
    """``mct-mem`` whose GPU wait counts streams: a GPU with several streams serves tasks side by
    side, so a task waits only for the tasks queued beyond the node's streams
    (:func:`rlsched.estimates.stream_queue_wait`), not for the node's whole backlog.
    """

    name = "mct-stream"

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        return masked_argmin(stream_aware_estimates(task, view, self.parallel), mask)


class MctDrainSelector(EtcSelector):
    """``mct-mem`` whose GPU wait is measured: the node's GPU backlog over the aggregate rate its
    GPUs were seen to deliver (per-run speed times co-runners, :func:`rlsched.estimates.drain_wait`).

    ``mct`` treats a GPU as one server, ``mct-stream`` as as many servers as it has streams; how
    much side-by-side streams really add depends on how the kernels interfere, which this
    selector reads from the speeds it observes instead of assuming.
    """

    name = "mct-drain"

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        return masked_argmin(drain_estimates(task, view, self.parallel), mask)


class MctCapSelector(EtcSelector):
    """``mct-mem`` whose GPU wait is the node's GPU backlog over what its GPUs would deliver with
    every stream busy: measured per-run speed times streams (:func:`rlsched.estimates.capacity_wait`).

    ``mct-drain`` divides by what the streams were seen to deliver, which reads a lightly used
    node as slow and so keeps it lightly used; this one reads it at its streams' capacity.
    """

    name = "mct-cap"

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        return masked_argmin(capacity_estimates(task, view, self.parallel), mask)


class PatsSelector(_Selector):
    """PATS: relative CPU/GPU performance and load.

    Each node's computing power is weighted by how the task's work splits between GPU-capable and
    CPU-only subtasks, then discounted by the node's current utilisation.
    """

    name = "pats"

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        gf, _, cf, _ = task_work_vector(task)
        frac_gpu = gf / max(gf + cf, 1e-12)
        tflops = node_gpu_power(view)
        cpu_tflops = view.cores * view.cpu_gflops * view.speed_cpu / 1e3
        perf = frac_gpu * tflops + (1 - frac_gpu) * cpu_tflops
        score = perf * (1.0 - node_utilisation(view)) / (1.0 + view.ready_waiting)
        return masked_argmin(-score, mask)


class MlsmSelector(_Selector):
    """MLSM: idle streams are spare computing power; send work where the most of it is.

    A stream is spare only if no task already committed to the node will claim it: tasks whose
    input is still on the wire or that wait for host memory have not started a subtask yet, so
    raw idle streams would over-count (a task's chain holds about one stream at a time). Spare
    streams are weighted by the measured power of one stream of the node. When no node has a
    spare stream, the node least over-committed for its power wins.
    """

    name = "mlsm"

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        spare = (view.node_streams - np.maximum(view.tasks_on_node, view.node_gpu_running)).astype(np.float64)
        per_stream = (
            view.node_tflops_mean
            * view.node_speed_gpu
            / np.maximum(view.node_streams / np.maximum(view.n_gpus, 1), 1)
        )
        if (spare[mask] > 0).any():
            return masked_argmin(-(spare * per_stream), mask)
        return masked_argmin((1.0 - spare) / np.maximum(per_stream, 1e-9), mask)


__all__ = [
    "LeastLoadedSelector",
    "MctDrainSelector",
    "MctMemSelector",
    "MctSelector",
    "MctStreamSelector",
    "MlsmSelector",
    "PatsSelector",
    "RandomSelector",
    "RoundRobinSelector",
    "masked_argmin",
]

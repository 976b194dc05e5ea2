"""Tasks of streaming applications and the subtask DAGs they decompose into.

Everything here is what a submitter declares or a profiler could measure: kinds carry a
*nominal* cost model (work and memory traffic per MB of input). How fast a kind truly runs on a
device, and how kinds interfere, is ground truth (``envs.ground_truth``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Device(StrEnum):
    """Where a subtask kind may run."""

    GPU = "gpu"
    CPU = "cpu"
    BOTH = "both"


@dataclass(frozen=True)
class KindSpec:
    """A subtask kind (a kernel or pipeline stage) and its nominal cost per MB of task input.

    :param name: unique kind name, e.g. ``"gmm"``.
    :param device: where it may run.
    :param gflop_per_mb: floating-point work per MB of input, GFLOP.
    :param gbytes_per_mb: device-memory traffic per MB of input, GB (gives arithmetic intensity).
    :param mem_mb_per_mb: device (or host) working memory per MB of input, MB.
    :param fixed_mem_mb: working memory independent of input size, MB (models, buffers).
    """

    name: str
    device: Device
    gflop_per_mb: float
    gbytes_per_mb: float
    mem_mb_per_mb: float = 2.0
    fixed_mem_mb: float = 64.0

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per byte of memory traffic."""
        return self.gflop_per_mb / max(self.gbytes_per_mb, 1e-12)


# Not frozen: a frozen dataclass costs 5x as much to build, and the simulator's benchmarks build
# ~9,000 subtasks per episode. Treat instances as read-only all the same.
@dataclass(slots=True)
class Subtask:
    """One node of a task's DAG.

    :param index: position in the graph (0-based; parents always have smaller indices).
    :param kind: the kind, with its nominal cost model.
    :param gflop: work in GFLOP.
    :param gbytes: device-memory traffic in GB.
    :param mem_mb: working memory needed while it runs, MB.
    :param parents: indices of subtasks that must finish first.
    :param share: fraction of one GPU requested (1.0 = a full stream slot; trace pods ask less).
    """

    index: int
    kind: KindSpec
    gflop: float
    gbytes: float
    mem_mb: float
    parents: tuple[int, ...] = ()
    share: float = 1.0

    @property
    def device(self) -> Device:
        return self.kind.device


@dataclass(frozen=True)
class SubtaskGraph:
    """A task's subtask DAG in topological order (parents before children)."""

    subtasks: tuple[Subtask, ...]

    def __post_init__(self) -> None:
        out: list[list[int]] = [[] for _ in self.subtasks]
        for i, s in enumerate(self.subtasks):
            if s.index != i:
                raise ValueError(f"subtask at position {i} has index {s.index}")
            if any(p >= s.index or p < 0 for p in s.parents):
                raise ValueError(f"subtask {s.index} has a parent that does not precede it: {s.parents}")
            for p in s.parents:
                out[p].append(i)
        # Cached: the simulator looks children up on every subtask completion.
        object.__setattr__(self, "_children", tuple(tuple(c) for c in out))

    def __len__(self) -> int:
        return len(self.subtasks)

    @property
    def children(self) -> tuple[tuple[int, ...], ...]:
        """For each subtask, the indices of subtasks that depend on it."""
        return self._children  # type: ignore[attr-defined]

    @property
    def total_gflop(self) -> float:
        return sum(s.gflop for s in self.subtasks)


@dataclass(slots=True)
class Task:
    """An independent unit of a streaming application (e.g. a chunk of frames of one stream).

    :param id: unique, dense from 0 in arrival order.
    :param app: application name.
    :param input_mb: size of the input shipped to the chosen node, MB.
    :param arrival_s: submission time.
    :param graph: the subtask DAG it decomposes into.
    :param priority: larger runs first within a node queue.
    :param tenant: submitting tenant.
    :param deadline_s: absolute deadline, or ``None``.
    :param gpu_models: GPU models it may use (empty = any), from trace type constraints.
    :param host_mem_mb: host memory held while the task is on a node.
    """

    id: int
    app: str
    input_mb: float
    arrival_s: float
    graph: SubtaskGraph
    priority: int = 0
    tenant: str = "default"
    deadline_s: float | None = None
    gpu_models: frozenset[str] = field(default_factory=frozenset)
    host_mem_mb: float = 0.0

    @property
    def output_mb(self) -> float:
        """Results shipped back; streaming analytics return far less than they read."""
        return 0.05 * self.input_mb

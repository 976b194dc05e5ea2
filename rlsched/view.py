"""``ClusterView``: everything a scheduler may observe, identical from simulator and live runtime.

The view is a set of numpy arrays (one row per node, one column per GPU slot, padded to the
largest GPU count) that the executor keeps up to date in place. Policies read it; only executors
write it. It holds public specifications and *measured* state — never ground-truth parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlsched.cluster import ClusterSpec
from rlsched.view_mirrors import FastState

#: Per-node dynamic arrays, in the order of the columns of :attr:`ClusterView.dyn`.
DYN_COLUMNS: tuple[str, ...] = (
    "cpu_busy",
    "host_mem_used_mb",
    "node_gpus_active",
    "node_gpu_mem_used_mb",
    "node_gpu_running",
    "net_in_util",
    "net_out_util",
    "node_idle_streams",
    "net_in_busy_s",
    "net_out_busy_s",
    "tasks_on_node",
    "ready_waiting",
    "backlog_gpu_s",
    "backlog_cpu_s",
    "node_speed_gpu",
    "speed_cpu",
)


#: Per-node arrays that are dataclass fields (the static and dynamic ones ``from_spec`` fills).
_NODE_ARRAYS: tuple[str, ...] = (
    "cores",
    "host_mem_mb",
    "net_mbps",
    "cpu_gflops",
    "alive",
    "cpu_busy",
    "host_mem_used_mb",
    "net_in_busy_s",
    "net_out_busy_s",
    "net_in_util",
    "net_out_util",
    "tasks_on_node",
    "ready_waiting",
    "backlog_gpu_s",
    "backlog_cpu_s",
    "speed_cpu",
)


#: Weight of a new sample in a measured-speed moving average (the simulator's EMA of nominal over
#: measured run time; the live runtime's EMA of each unit's log speed per kind).
SPEED_EMA = 0.2


def _renumber(model: np.ndarray, old: list[str], new: list[str]) -> np.ndarray:
    """GPU model indices into ``old`` names as indices into ``new`` (padding stays -1)."""
    table = np.array([new.index(m) for m in old] + [-1], dtype=np.int64)
    return table[model]  # index -1 reads the trailing -1


#: Memory (MB) below which a running total is zero: floating-point residue of adding and
#: subtracting the same amounts must not keep a subtask that asks for a whole GPU, or a task for
#: all of a node's host memory, out of an idle device forever.
_MEM_EPS_MB = 1e-6


def _snap(total_mb: float) -> float:
    return 0.0 if abs(total_mb) < _MEM_EPS_MB else total_mb


@dataclass
class ClusterView:
    """Observable cluster state.

    Static (datasheet) arrays: ``cores``, ``host_mem_mb``, ``net_mbps`` (MB/s), ``cpu_gflops``
    (per core), ``gpu_valid``, ``gpu_tflops``, ``gpu_bw_gbs``, ``gpu_mem_mb``, ``gpu_streams``,
    ``gpu_model`` (index into ``model_names``, -1 for padding).

    Derived per-node arrays (``n_gpus``, ``node_streams``, ``node_gpu_mem_mb``, ``node_tflops``,
    ``node_tflops_mean``, ``node_bw_mean`` static; ``node_gpu_running``, ``node_gpus_active``,
    ``node_gpu_mem_used_mb``, ``node_speed_gpu`` dynamic) are kept by the update methods.

    Dynamic arrays: ``alive``; ``cpu_busy`` (cores running a subtask); ``host_mem_used_mb``;
    ``gpu_running`` (subtasks on each GPU); ``gpu_mem_used_mb``; ``net_in_busy_s`` and
    ``net_out_busy_s`` (seconds of input downloads / result uploads still queued on the NIC: the
    down- and uplink traffic a node reads from its socket queues); ``net_in_util`` and
    ``net_out_util`` (recent busy fraction of each NIC direction — measured traffic over link
    bandwidth, averaged over ~10 s); ``tasks_on_node`` (assigned, not finished);
    ``ready_waiting`` (ready subtasks waiting for a unit); ``backlog_gpu_s`` / ``backlog_cpu_s``
    (nominal seconds of GPU-capable / CPU-only work assigned and not finished); ``speed_gpu`` /
    ``speed_cpu`` (measured speed: in the simulator an EMA of nominal over measured run time,
    1 = as datasheet predicts; live, relative to the cluster's other units, 1 = as they run,
    ``runtime/cluster/speed_reference.py``); ``gpu_kinds`` (names of subtask kinds running on
    each GPU); ``time_s``.
    """

    node_names: list[str]
    model_names: list[str]
    cores: np.ndarray
    host_mem_mb: np.ndarray
    net_mbps: np.ndarray
    cpu_gflops: np.ndarray
    gpu_valid: np.ndarray
    gpu_tflops: np.ndarray
    gpu_bw_gbs: np.ndarray
    gpu_mem_mb: np.ndarray
    gpu_streams: np.ndarray
    gpu_model: np.ndarray
    alive: np.ndarray
    cpu_busy: np.ndarray
    host_mem_used_mb: np.ndarray
    gpu_running: np.ndarray
    gpu_mem_used_mb: np.ndarray
    net_in_busy_s: np.ndarray
    net_out_busy_s: np.ndarray
    net_in_util: np.ndarray
    net_out_util: np.ndarray
    tasks_on_node: np.ndarray
    ready_waiting: np.ndarray
    backlog_gpu_s: np.ndarray
    backlog_cpu_s: np.ndarray
    speed_gpu: np.ndarray
    speed_cpu: np.ndarray
    gpu_kinds: list[list[list[str]]]
    time_s: float = 0.0
    extra: dict = field(default_factory=dict)
    # Per-node aggregates, kept in step with the per-GPU arrays by the methods below so that
    # encoders and selectors need no (N, G) reductions on the decision path.
    node_gpu_running: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    node_gpus_active: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    node_gpu_mem_used_mb: np.ndarray = field(default_factory=lambda: np.zeros(0))
    node_speed_gpu: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: Host memory asked by tasks assigned to each node and waiting for it (admission is FIFO: a
    #: task's input transfer starts once its host memory fits), MB. A node agent knows its queue.
    host_mem_queued_mb: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: Measured aggregate rate of each GPU, in nominal seconds of work done per second: an EMA of
    #: the per-run speed times the subtasks running on the GPU when one finishes (what side-by-side
    #: streams really deliver, interference included), started at the GPU's stream count; and its
    #: sum per node. Both worlds observe it the same way, through :meth:`gpu_finished`.
    gpu_rate: np.ndarray = field(default_factory=lambda: np.zeros(0))
    node_gpu_rate: np.ndarray = field(default_factory=lambda: np.zeros(0))
    gpu_rate_samples: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __post_init__(self) -> None:
        n = len(self.node_names)
        valid = self.gpu_valid
        ng = valid.sum(axis=1)
        ngc = np.maximum(ng, 1)
        # Static per-node sums and means of the datasheet arrays.
        self.n_gpus = ng
        self.node_streams = (self.gpu_streams * valid).sum(axis=1)
        self.node_gpu_mem_mb = (self.gpu_mem_mb * valid).sum(axis=1)
        self.node_tflops = (self.gpu_tflops * valid).sum(axis=1)
        self.node_tflops_mean = np.where(ng > 0, self.node_tflops / ngc, 0.0)
        self.node_bw_mean = np.where(ng > 0, (self.gpu_bw_gbs * valid).sum(axis=1) / ngc, 0.0)
        if self.host_mem_queued_mb.shape != (n,):
            self.host_mem_queued_mb = np.zeros(n)
        if self.gpu_rate.shape != self.gpu_streams.shape:
            self.gpu_rate = (self.gpu_streams * valid).astype(np.float64)
        if self.gpu_rate_samples.shape != self.gpu_streams.shape:
            self.gpu_rate_samples = np.zeros(self.gpu_streams.shape, dtype=np.int64)
        self.resync(aggregates=self.node_gpu_running.shape != (n,) or self.node_gpu_rate.shape != (n,))

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Copies and unpickled views rebind their per-node arrays as columns of :attr:`dyn`.

        ``copy.deepcopy`` and ``pickle`` copy each array on its own: without this, a copy's
        per-node arrays would stop being views of its ``dyn``, updates would reach them but not
        ``dyn``, and encoders (which read ``dyn``) would see the state as it was at the copy.
        """
        self.__dict__.update(state)
        if "dyn" in state:
            for j, name in enumerate(DYN_COLUMNS):
                setattr(self, name, self.dyn[:, j])

    def resync(self, aggregates: bool = True) -> None:
        """Recompute per-node aggregates and the Python mirrors from the per-GPU arrays, and
        rebind the per-node arrays as columns of the dense matrix :attr:`dyn`.

        For code that writes the per-GPU arrays directly (tests, a runtime taking an NVML
        snapshot). Per-node arrays are float64 columns of ``dyn``: encoders transform the whole
        per-node state in a few numpy calls instead of one per array.
        """
        if aggregates:
            self._aggregate()
        self.node_idle_streams = self.node_streams - self.node_gpu_running
        dyn = np.empty((len(self.node_names), len(DYN_COLUMNS)))
        for j, name in enumerate(DYN_COLUMNS):
            dyn[:, j] = getattr(self, name)
        self.dyn = dyn
        for j, name in enumerate(DYN_COLUMNS):
            setattr(self, name, dyn[:, j])
        self.fast = FastState.of(self)

    def _aggregate(self) -> None:
        valid = self.gpu_valid
        ng = self.n_gpus
        self.node_gpu_running = (self.gpu_running * valid).sum(axis=1)
        self.node_gpus_active = ((self.gpu_running > 0) & valid).sum(axis=1)
        self.node_gpu_mem_used_mb = (self.gpu_mem_used_mb * valid).sum(axis=1)
        self.node_speed_gpu = np.where(ng > 0, (self.speed_gpu * valid).sum(axis=1) / np.maximum(ng, 1), 1.0)
        self.node_gpu_rate = (self.gpu_rate * valid).sum(axis=1)

    # ---- updates (executors only) ------------------------------------------------------------
    # Each update writes the numpy arrays (what selectors and encoders read) and the Python
    # mirrors in ``fast`` (what stage-2 placers and the event loop read: numpy scalar access costs
    # ~100 ns a read, and the event loop reads state on every subtask start and finish).
    def cpu_started(self, node: int) -> None:
        """Account a subtask that started on a CPU core."""
        f = self.fast
        f.cpu_busy[node] += 1
        self.cpu_busy[node] = f.cpu_busy[node]

    def cpu_finished(self, node: int, speed_sample: float, ema: float) -> None:
        """Account a subtask that left a CPU core, with its measured speed (nominal / measured)."""
        f = self.fast
        f.cpu_busy[node] -= 1
        self.cpu_busy[node] = f.cpu_busy[node]
        if speed_sample > 0:
            f.speed_cpu[node] += ema * (speed_sample - f.speed_cpu[node])
            self.speed_cpu[node] = f.speed_cpu[node]

    def host_mem_changed(self, node: int, delta_mb: float) -> None:
        """Account host memory taken (positive) or released (negative) on a node."""
        f = self.fast
        f.host_mem_used[node] = _snap(f.host_mem_used[node] + delta_mb)
        self.host_mem_used_mb[node] = f.host_mem_used[node]

    def host_mem_queue_changed(self, node: int, delta_mb: float) -> None:
        """Account host memory of tasks joining (positive) or leaving (negative) a node's
        admission queue."""
        self.host_mem_queued_mb[node] = _snap(self.host_mem_queued_mb[node] + delta_mb)

    def gpu_started(self, node: int, gpu: int, mem_mb: float, kind: str) -> None:
        """Account a subtask that started on a GPU."""
        f = self.fast
        run = f.gpu_running[node]
        run[gpu] += 1
        if run[gpu] == 1:
            f.node_gpus_active[node] += 1
            self.node_gpus_active[node] = f.node_gpus_active[node]
        self.gpu_running[node, gpu] = run[gpu]
        f.node_gpu_running[node] += 1
        self.node_gpu_running[node] = f.node_gpu_running[node]
        self.node_idle_streams[node] -= 1
        f.gpu_mem_used[node][gpu] += mem_mb
        self.gpu_mem_used_mb[node, gpu] = f.gpu_mem_used[node][gpu]
        f.node_gpu_mem_used[node] += mem_mb
        self.node_gpu_mem_used_mb[node] = f.node_gpu_mem_used[node]
        self.gpu_kinds[node][gpu].append(kind)

    def gpu_finished(
        self, node: int, gpu: int, mem_mb: float, kind: str, speed_sample: float, ema: float
    ) -> None:
        """Account a subtask that left a GPU, with its measured speed (nominal / measured time)."""
        f = self.fast
        run = f.gpu_running[node]
        if speed_sample > 0:
            # run[gpu] still counts the finishing subtask: the co-runners it was measured among.
            # The first samples weigh as a running mean (the start value is a guess, not a
            # measurement), then as the speed EMA — SPEED_EMA, not ``ema``: the live runtime hands
            # over speeds it smoothed itself (weight 1), but the co-runner count is this instant's.
            n = f.gpu_rate_samples[node][gpu] = f.gpu_rate_samples[node][gpu] + 1
            self.gpu_rate_samples[node, gpu] = n
            rates = f.gpu_rate[node]
            old_rate = rates[gpu]
            w = 1.0 / n if n * SPEED_EMA < 1.0 else SPEED_EMA
            rates[gpu] = old_rate + w * (speed_sample * run[gpu] - old_rate)
            self.gpu_rate[node, gpu] = rates[gpu]
            f.node_gpu_rate[node] += rates[gpu] - old_rate
            self.node_gpu_rate[node] = f.node_gpu_rate[node]
        run[gpu] -= 1
        if run[gpu] == 0:
            f.node_gpus_active[node] -= 1
            self.node_gpus_active[node] = f.node_gpus_active[node]
        self.gpu_running[node, gpu] = run[gpu]
        f.node_gpu_running[node] -= 1
        self.node_gpu_running[node] = f.node_gpu_running[node]
        self.node_idle_streams[node] += 1
        f.gpu_mem_used[node][gpu] = _snap(f.gpu_mem_used[node][gpu] - mem_mb)
        self.gpu_mem_used_mb[node, gpu] = f.gpu_mem_used[node][gpu]
        f.node_gpu_mem_used[node] = _snap(f.node_gpu_mem_used[node] - mem_mb)
        self.node_gpu_mem_used_mb[node] = f.node_gpu_mem_used[node]
        self.gpu_kinds[node][gpu].remove(kind)
        if speed_sample > 0:
            sp = f.speed_gpu[node]
            old = sp[gpu]
            sp[gpu] = old + ema * (speed_sample - old)
            self.speed_gpu[node, gpu] = sp[gpu]
            f.node_speed_gpu[node] += (sp[gpu] - old) / max(f.n_gpus[node], 1)
            self.node_speed_gpu[node] = f.node_speed_gpu[node]

    def set_streams(self, node: int, gpu: int, streams: int) -> None:
        """Change a GPU's usable stream count (the live runtime's stream feedback)."""
        f = self.fast
        delta = streams - f.gpu_streams[node][gpu]
        f.gpu_streams[node][gpu] = streams
        self.gpu_streams[node, gpu] = streams
        f.node_streams[node] += delta
        self.node_streams[node] = f.node_streams[node]
        self.node_idle_streams[node] += delta

    def set_gpu_mem_used(self, node: int, gpu: int, mem_mb: float) -> None:
        """Set a GPU's used memory from a measurement (live memory manager or NVML)."""
        f = self.fast
        delta = mem_mb - f.gpu_mem_used[node][gpu]
        f.gpu_mem_used[node][gpu] = mem_mb
        self.gpu_mem_used_mb[node, gpu] = mem_mb
        f.node_gpu_mem_used[node] += delta
        self.node_gpu_mem_used_mb[node] = f.node_gpu_mem_used[node]

    def set_alive(self, node: int, alive: bool) -> None:
        """Mark a node as joined or left."""
        self.alive[node] = alive
        self.fast.alive[node] = alive

    def clear_node(self, node: int) -> None:
        """Zero a node's dynamic state (it left the cluster); measured speeds are kept."""
        for arr in (self.cpu_busy, self.host_mem_used_mb, self.tasks_on_node, self.ready_waiting):
            arr[node] = 0
        for arr in (self.backlog_gpu_s, self.backlog_cpu_s, self.node_gpu_mem_used_mb):
            arr[node] = 0.0
        self.host_mem_queued_mb[node] = 0.0
        self.node_gpu_running[node] = 0
        self.node_gpus_active[node] = 0
        self.node_idle_streams[node] = self.node_streams[node]
        self.gpu_running[node] = 0
        self.gpu_mem_used_mb[node] = 0.0
        for kinds in self.gpu_kinds[node]:
            kinds.clear()
        f = self.fast
        g = len(f.gpu_running[node])
        f.cpu_busy[node] = f.node_gpu_running[node] = f.node_gpus_active[node] = 0
        f.host_mem_used[node] = f.node_gpu_mem_used[node] = 0.0
        f.gpu_running[node] = [0] * g
        f.gpu_mem_used[node] = [0.0] * g

    def append_nodes(self, joining: ClusterView) -> None:
        """Grow this view in place by the nodes of ``joining`` (an all-idle view of them).

        For nodes that join a running cluster: policies and agents keep their reference to this
        object, so it grows rather than being replaced. GPU columns are padded to the wider of
        the two views and model indices are renumbered over the union of model names.

        :param joining: a view of the new nodes only (e.g. ``from_spec`` of a one-node spec).
        """
        models = sorted(set(self.model_names) | set(joining.model_names))
        g = max(self.max_gpus, joining.max_gpus)
        grids = {"gpu_valid": False, "gpu_model": -1, "speed_gpu": 1.0}
        for name in (
            "gpu_valid",
            "gpu_tflops",
            "gpu_bw_gbs",
            "gpu_mem_mb",
            "gpu_streams",
            "gpu_model",
            "gpu_running",
            "gpu_mem_used_mb",
            "speed_gpu",
            "gpu_rate",
            "gpu_rate_samples",
        ):
            a, b = getattr(self, name), getattr(joining, name)
            if name == "gpu_model":
                a = _renumber(a, self.model_names, models)
                b = _renumber(b, joining.model_names, models)
            pad = grids.get(name, 0)
            a = np.pad(a, ((0, 0), (0, g - a.shape[1])), constant_values=pad)
            b = np.pad(b, ((0, 0), (0, g - b.shape[1])), constant_values=pad)
            setattr(self, name, np.concatenate([a, b]))
        for name in (*_NODE_ARRAYS, "host_mem_queued_mb"):
            setattr(self, name, np.concatenate([getattr(self, name), getattr(joining, name)]))
        self._grow_extra(joining.n_nodes, g)
        self.gpu_kinds = [row + [[] for _ in range(g - len(row))] for row in self.gpu_kinds]
        self.gpu_kinds += [row + [[] for _ in range(g - len(row))] for row in joining.gpu_kinds]
        self.node_names = self.node_names + joining.node_names
        self.model_names = models
        self.node_gpu_running = np.zeros(0, dtype=np.int64)  # recomputed from the GPU arrays
        self.__post_init__()

    def _grow_extra(self, rows: int, g: int) -> None:
        """Caches in ``extra`` (keys starting with ``_``) are dropped, to be rebuilt at their next
        use; per-node measurements (arrays with a row per node) get zero rows for the new nodes."""
        n = self.n_nodes
        for key in list(self.extra):
            v = self.extra[key]
            if key.startswith("_"):
                del self.extra[key]
            elif isinstance(v, np.ndarray) and v.ndim in (1, 2) and v.shape[0] == n:
                width = ((0, rows),) if v.ndim == 1 else ((0, rows), (0, g - v.shape[1]))
                self.extra[key] = np.pad(v, width)

    @property
    def n_nodes(self) -> int:
        return len(self.node_names)

    @property
    def max_gpus(self) -> int:
        return self.gpu_valid.shape[1]

    @property
    def gpu_idle_streams(self) -> np.ndarray:
        """Free stream slots per GPU (0 on padding)."""
        return np.where(self.gpu_valid, np.maximum(self.gpu_streams - self.gpu_running, 0), 0)

    @classmethod
    def from_spec(cls, spec: ClusterSpec) -> ClusterView:
        """An all-idle view of ``spec``; every node starts alive unless it joins later."""
        n, g = len(spec.nodes), max(spec.max_gpus, 1)
        models = sorted({m.name for node in spec.nodes for m in node.gpus})
        midx = {m: i for i, m in enumerate(models)}
        valid = np.zeros((n, g), dtype=bool)
        tflops, bw, mem = np.zeros((n, g)), np.zeros((n, g)), np.zeros((n, g))
        streams = np.zeros((n, g), dtype=np.int64)
        model = np.full((n, g), -1, dtype=np.int64)
        for i, node in enumerate(spec.nodes):
            for j, m in enumerate(node.gpus):
                valid[i, j] = True
                tflops[i, j], bw[i, j], mem[i, j] = m.fp32_tflops, m.mem_bw_gbs, m.mem_gib * 1024
                streams[i, j] = node.streams_per_gpu
                model[i, j] = midx[m.name]
        return cls(
            node_names=[node.name for node in spec.nodes],
            model_names=models,
            cores=np.array([node.cpu_cores for node in spec.nodes], dtype=np.int64),
            host_mem_mb=np.array([node.host_mem_gib * 1024 for node in spec.nodes], dtype=np.float64),
            net_mbps=np.array([node.net_gbps * 125.0 for node in spec.nodes], dtype=np.float64),
            cpu_gflops=np.array([node.cpu_core_gflops for node in spec.nodes], dtype=np.float64),
            gpu_valid=valid,
            gpu_tflops=tflops,
            gpu_bw_gbs=bw,
            gpu_mem_mb=mem,
            gpu_streams=streams,
            gpu_model=model,
            alive=np.array([node.join_s <= 0 for node in spec.nodes], dtype=bool),
            cpu_busy=np.zeros(n, dtype=np.int64),
            host_mem_used_mb=np.zeros(n),
            gpu_running=np.zeros((n, g), dtype=np.int64),
            gpu_mem_used_mb=np.zeros((n, g)),
            net_in_busy_s=np.zeros(n),
            net_out_busy_s=np.zeros(n),
            net_in_util=np.zeros(n),
            net_out_util=np.zeros(n),
            tasks_on_node=np.zeros(n, dtype=np.int64),
            ready_waiting=np.zeros(n, dtype=np.int64),
            backlog_gpu_s=np.zeros(n),
            backlog_cpu_s=np.zeros(n),
            speed_gpu=np.ones((n, g)),
            speed_cpu=np.ones(n),
            gpu_kinds=[[[] for _ in range(g)] for _ in range(n)],
        )

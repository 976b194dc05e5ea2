"""Reader of the Alibaba GPU cluster trace v2023 (``cluster-trace-gpu-v2023``).

The trace was published with Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
Workloads with Fragmentation Gradient Descent", USENIX ATC 2023 — cite it when reporting results
on it. Two kinds of files are read:

* ``openb_node_list_*.csv``: ``sn,cpu_milli,memory_mib,gpu,model`` — one row per node;
* ``openb_pod_list_*.csv``: ``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
  creation_time,deletion_time,scheduled_time`` — one row per pod (task), times in seconds.

How pods become tasks (:func:`alibaba_tasks`):

* pods are replayed in ``creation_time`` order; ``Pending`` pods and pods that were never
  scheduled are skipped, since they never ran and have no duration;
* a run replays a window of ``tasks`` consecutive pods whose start the run's seed draws (the
  whole list when ``tasks`` covers it), so different seeds are different runs;
* arrival = (creation_time - the window's first creation_time) x ``time_scale`` /
  ``arrival_speedup`` (pods arrive faster than in the trace but run as long: a denser load);
* duration = (deletion_time - scheduled_time) x ``time_scale``. For ``Running`` pods the
  deletion time is the snapshot's end, not a real completion; they are kept (most of the trace
  is such pods) and every duration is capped at the 99th percentile of the file's durations so a
  few months-long services do not dominate a run. Durations below one second (the trace's
  resolution) are raised to one second;
* a GPU pod becomes ``max(1, num_gpu)`` independent subtasks of kind :data:`TRACE_GPU`, each
  asking ``share = gpu_milli / 1000`` of one GPU (1.0 for multi-GPU pods) and ``share x 16 GiB``
  of device memory. Its work is ``duration x 8.1e3 GFLOP/s x 0.5``: the pod's duration is taken
  as its *nominal* time on the reference T4 (8.1 TFLOP/s) at a nominal efficiency of 0.5. How
  fast the work truly runs on each model (and so how long the pod takes there) is the simulator's
  ground truth, not this reader's;
* a CPU-only pod becomes one subtask of kind :data:`TRACE_CPU` with ``duration x 25`` GFLOP, the
  nominal work of one reference core (``hardware.CPU_CORE_GFLOPS``);
* tenant = the pod's ``qos``; priority 1 for ``LS`` and ``Guaranteed`` pods, else 0;
  ``gpu_models`` = the models listed in ``gpu_spec`` (``|``-separated, empty = any);
  ``host_mem_mb`` = ``memory_mib``; ``input_mb`` = 10.

Nodes (:func:`alibaba_cluster`): a stratified sample, drawn by the run's seed, that keeps each GPU
model's share of the node list; ``G2``/``G3`` are undisclosed codes that the hardware catalog
maps to assumed models.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path
from typing import TextIO

import numpy as np

from rlsched.cluster import ClusterSpec, NodeSpec
from rlsched.errors import NOTHING, InputError, csv_field
from rlsched.hardware import CPU_CORE_GFLOPS, gpu_model
from rlsched.scenarios.spec import AlibabaSpec
from rlsched.tasks import Device, KindSpec, Subtask, SubtaskGraph, Task
from rlsched.textfile import open_text

NODE_COLUMNS: tuple[str, ...] = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
#: Columns every pod list has (``openb_pod_list_multigpu20.csv`` has only these: no times).
POD_COLUMNS: tuple[str, ...] = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
#: Columns needed to replay pods as tasks.
POD_TIME_COLUMNS: tuple[str, ...] = ("creation_time", "deletion_time", "scheduled_time")

#: Trace nodes' NIC bandwidth (not in the trace; a datacentre-typical figure), Gbit/s.
NODE_NET_GBPS = 10.0
NODE_STREAMS_PER_GPU = 4

REFERENCE_GPU = "T4"
#: Fraction of the reference GPU's peak FP32 rate a trace pod is assumed to reach (nominal only).
NOMINAL_EFFICIENCY = 0.5
#: Device memory of the reference GPU a whole-GPU pod is assumed to hold, MB.
GPU_MEM_MB = 16384.0
TRACE_INPUT_MB = 10.0
DURATION_CAP_PERCENTILE = 99.0
MIN_DURATION_S = 1.0
HIGH_PRIORITY_QOS = frozenset({"LS", "Guaranteed"})

#: A trace GPU pod's work: compute-bound (intensity 40 FLOP/B, above the T4's ridge of ~25) as
#: deep-learning training and inference mostly are. Per-MB figures are nominal; trace subtasks
#: get their sizes from the pod's duration, not from ``input_mb``.
TRACE_GPU = KindSpec(name="trace_gpu", device=Device.GPU, gflop_per_mb=40.0, gbytes_per_mb=1.0)
#: A trace CPU-only pod's work (intensity 10 FLOP/B).
TRACE_CPU = KindSpec(name="trace_cpu", device=Device.CPU, gflop_per_mb=10.0, gbytes_per_mb=1.0)


class TraceError(InputError):
    """A trace file that breaks a rule: ``PATH: line N (COLUMN): expected WHAT, got VALUE``.

    Raised where the file is read, also when that is during a run (pods are read when tasks are
    generated), so it is a refusal of bad input wherever it surfaces.

    :param path: the file.
    :param line: its line (1 = the header; 0 = the file as a whole).
    :param column: the column at fault, or ``""``.
    :param expected: what a valid value looks like.
    :param got: the offending value, if any.
    """

    def __init__(
        self, path: str | Path, line: int, column: str, expected: str, got: object = NOTHING
    ) -> None:
        super().__init__(str(path), csv_field(line, column), expected, got)


def read_header(path: str | Path) -> list[str]:
    """Column names of a CSV file.

    :param path: the file.
    :raises FileNotFoundError: naming ``path`` when it does not exist.
    :raises TraceError: when the file is empty.
    """
    with _open(path) as f:
        header = next(csv.reader(f), None)
    if not header:
        raise TraceError(path, 1, "", "a CSV header", "")
    return [h.strip() for h in header]


def check_node_csv(path: str | Path) -> None:
    """Check that ``path`` is a node list (has :data:`NODE_COLUMNS`).

    :raises FileNotFoundError: naming ``path`` when it does not exist.
    :raises TraceError: naming the missing columns.
    """
    _require_columns(path, read_header(path), NODE_COLUMNS)


def check_pod_csv(path: str | Path) -> None:
    """Check that ``path`` is a pod list that can be replayed (has pod and time columns).

    :raises FileNotFoundError: naming ``path`` when it does not exist.
    :raises TraceError: naming the missing columns.
    """
    _require_columns(path, read_header(path), POD_COLUMNS + POD_TIME_COLUMNS)


def alibaba_cluster(spec: AlibabaSpec, seed: int) -> ClusterSpec:
    """Nodes sampled from the trace's node list.

    The sample is stratified by GPU model (largest-remainder apportionment), so each model keeps
    its share of the list; which nodes of a model are taken depends on ``seed`` only. Nodes keep
    the list's order and serial numbers as names.

    :param spec: files and ``nodes`` (how many to sample; ``0`` = all).
    :param seed: sampling seed.
    :raises FileNotFoundError: naming the node list when it does not exist.
    :raises TraceError: on a malformed file or when more nodes are asked than it holds.
    """
    rows = _read_rows(spec.node_csv, NODE_COLUMNS)
    if spec.nodes < 0 or spec.nodes > len(rows):
        raise TraceError(
            spec.node_csv,
            0,
            "",
            f"at least the {spec.nodes} nodes asked for (workload.alibaba.nodes)",
            len(rows),
        )
    chosen = _stratified_sample([r["model"] for _, r in rows], spec.nodes or len(rows), seed)
    nodes = tuple(_node(spec.node_csv, *rows[i]) for i in chosen)
    return ClusterSpec(nodes=nodes, name="alibaba", extra={"source": "alibaba", "node_csv": spec.node_csv})


def alibaba_tasks(spec: AlibabaSpec, max_tasks: int, seed: int) -> list[Task]:
    """Replay a window of the trace's pods as tasks (see the module docstring for the mapping).

    :param spec: files and ``time_scale``.
    :param max_tasks: replay this many consecutive pods (``0`` = all of them).
    :param seed: draws where the window starts (uniformly over the windows the file holds), so
        seeds are different runs; arrivals count from the window's first pod. Replaying every
        pod leaves nothing to draw.
    :returns: tasks with dense ids ``0..n-1`` in arrival order.
    :raises FileNotFoundError: naming the pod list when it does not exist.
    :raises ValueError: on a malformed file (naming the file and line).
    """
    rows = _read_rows(spec.pod_csv, POD_COLUMNS + POD_TIME_COLUMNS)
    pods = [(line, r) for line, r in rows if _ran(r)]
    # Stable sort: pods created in the same second keep the file's order.
    pods.sort(key=lambda lr: _int(spec.pod_csv, lr[0], lr[1], "creation_time"))
    if not pods:
        return []
    durations = [_raw_duration(spec.pod_csv, line, r) for line, r in pods]
    cap = float(np.percentile(durations, DURATION_CAP_PERCENTILE))
    start = trace_window_start(len(pods), max_tasks, seed)
    stop = len(pods) if max_tasks <= 0 else start + max_tasks
    keep, durations = pods[start:stop], durations[start:stop]
    t0 = _int(spec.pod_csv, *keep[0], "creation_time")
    tasks = []
    for i, ((line, r), raw) in enumerate(zip(keep, durations, strict=True)):
        gap = _int(spec.pod_csv, line, r, "creation_time") - t0
        arrival = gap * spec.time_scale / spec.arrival_speedup
        duration = max(MIN_DURATION_S, min(raw, cap)) * spec.time_scale
        tasks.append(_task(spec.pod_csv, line, r, i, arrival, duration))
    return tasks


def trace_window_start(n_pods: int, max_tasks: int, seed: int) -> int:
    """Index of the first pod of the window ``seed`` replays (0 when the window is the file).

    :param n_pods: pods that ran, in creation order.
    :param max_tasks: window length (``0`` = all).
    :param seed: the run's seed.
    """
    if max_tasks <= 0 or max_tasks >= n_pods:
        return 0
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x7ACE]))
    return int(rng.integers(0, n_pods - max_tasks + 1))


# --- nodes -------------------------------------------------------------------------------------


def _stratified_sample(models: list[str], n: int, seed: int) -> list[int]:
    """Indices of ``n`` rows, each model's count proportional to its share (largest remainder)."""
    by_model: dict[str, list[int]] = defaultdict(list)
    for i, m in enumerate(models):
        by_model[m].append(i)
    total = len(models)
    quota = {m: n * len(ix) / total for m, ix in by_model.items()}
    counts = {m: math.floor(q) for m, q in quota.items()}
    # Hand the leftover nodes to the largest fractional remainders; ties broken by name so the
    # apportionment itself never depends on dict order.
    order = sorted(by_model, key=lambda m: (-(quota[m] - counts[m]), m))
    for m in order[: n - sum(counts.values())]:
        counts[m] += 1
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    for m in sorted(by_model):
        ix = by_model[m]
        chosen.extend(int(i) for i in rng.choice(ix, size=counts[m], replace=False))
    return sorted(chosen)


def _node(path: str, line: int, r: dict[str, str]) -> NodeSpec:
    count = _int(path, line, r, "gpu")
    model = r["model"].strip()
    if count < 0 or (count > 0 and not model):
        raise TraceError(path, line, "gpu", "a GPU count >= 0 and a model", f"{count} x {model!r}")
    try:
        gpus = (gpu_model(model),) * count if count else ()
    except KeyError:
        raise TraceError(path, line, "model", "a GPU model name from the catalog", model) from None
    return NodeSpec(
        name=r["sn"].strip(),
        cpu_cores=max(1, _int(path, line, r, "cpu_milli") // 1000),
        host_mem_gib=_int(path, line, r, "memory_mib") / 1024,
        gpus=gpus,
        streams_per_gpu=NODE_STREAMS_PER_GPU,
        net_gbps=NODE_NET_GBPS,
    )


# --- pods --------------------------------------------------------------------------------------


def _ran(r: dict[str, str]) -> bool:
    """Whether a pod ever ran: not Pending, and scheduled with a deletion (or snapshot-end) time."""
    phase = (r.get("pod_phase") or "").strip()
    return phase != "Pending" and bool(r["scheduled_time"].strip()) and bool(r["deletion_time"].strip())


def _raw_duration(path: str, line: int, r: dict[str, str]) -> float:
    return float(_int(path, line, r, "deletion_time") - _int(path, line, r, "scheduled_time"))


def _task(path: str, line: int, r: dict[str, str], tid: int, arrival: float, duration: float) -> Task:
    qos = (r.get("qos") or "").strip()
    return Task(
        id=tid,
        app="alibaba",
        input_mb=TRACE_INPUT_MB,
        arrival_s=arrival,
        graph=_graph(path, line, r, duration),
        priority=1 if qos in HIGH_PRIORITY_QOS else 0,
        tenant=qos or "default",
        gpu_models=_gpu_models(path, line, r.get("gpu_spec") or ""),
        host_mem_mb=float(_int(path, line, r, "memory_mib")),
    )


def _graph(path: str, line: int, r: dict[str, str], duration: float) -> SubtaskGraph:
    num_gpu = _int(path, line, r, "num_gpu")
    if num_gpu < 0:
        raise TraceError(path, line, "num_gpu", "an integer >= 0", num_gpu)
    if num_gpu == 0:
        gflop = duration * CPU_CORE_GFLOPS
        cpu = Subtask(0, TRACE_CPU, gflop, gflop / TRACE_CPU.intensity, TRACE_CPU.fixed_mem_mb)
        return SubtaskGraph((cpu,))
    share = 1.0
    if num_gpu == 1:
        milli = _int(path, line, r, "gpu_milli")
        # A missing share on a one-GPU pod means the whole GPU.
        share = milli / 1000 if 0 < milli <= 1000 else 1.0
    gflop = duration * gpu_model(REFERENCE_GPU).fp32_tflops * 1e3 * NOMINAL_EFFICIENCY
    gbytes = gflop / TRACE_GPU.intensity
    return SubtaskGraph(
        tuple(Subtask(i, TRACE_GPU, gflop, gbytes, share * GPU_MEM_MB, share=share) for i in range(num_gpu))
    )


def _gpu_models(path: str, line: int, spec: str) -> frozenset[str]:
    names = [s.strip() for s in spec.split("|") if s.strip()]
    out = set()
    for n in names:
        try:
            out.add(gpu_model(n).name)
        except KeyError:
            raise TraceError(
                path, line, "gpu_spec", "GPU model names from the catalog, joined by |", n
            ) from None
    return frozenset(out)


# --- CSV helpers -------------------------------------------------------------------------------


def _open(path: str | Path) -> TextIO:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"Alibaba trace file not found: {p}")
    return open_text(p)  # UTF-8 with or without a byte-order mark; else a TextFileError naming it


def _require_columns(path: str | Path, header: list[str], needed: tuple[str, ...]) -> None:
    missing = [c for c in needed if c not in header]
    if missing:
        raise TraceError(
            path, 1, "", "a header with every column this reader needs", ",".join(header)
        ).with_hint(f"missing column(s) {', '.join(missing)}")


def _read_rows(path: str | Path, needed: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """Rows as (line number, column -> text), checking the header first."""
    with _open(path) as f:
        reader = csv.DictReader(f)
        _require_columns(path, [h.strip() for h in reader.fieldnames or []], needed)
        rows = []
        for r in reader:
            if None in r or any(v is None for v in r.values()):
                raise TraceError(path, reader.line_num, "", "as many fields as the header has")
            rows.append((reader.line_num, {k.strip(): v for k, v in r.items()}))
    return rows


def _int(path: str | Path, line: int, r: dict[str, str], col: str) -> int:
    text = r[col].strip()
    try:
        return int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not value.is_integer():
            raise TraceError(path, line, col, "an integer", text) from None
        return int(value)

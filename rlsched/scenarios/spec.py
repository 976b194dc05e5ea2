"""What a scenario is: a cluster, a workload, dynamics and an interference source.

Loading and validating scenario files is in ``rlsched.scenarios.loader``; generating the tasks of a
workload is in ``rlsched.scenarios.taskgen``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlsched.cluster import ClusterSpec


@dataclass(frozen=True)
class ArrivalSpec:
    """How tasks arrive.

    :param process: ``"poisson"``, ``"bursty"`` (two-rate Markov-modulated Poisson) or ``"trace"``.
    :param rate_per_min: mean rate of a Poisson process; for ``bursty`` the long-run mean is
        derived from the two rates and mean sojourns.
    :param high_rate_per_min: bursty: rate in the high state.
    :param low_rate_per_min: bursty: rate in the low state.
    :param mean_high_s: bursty: mean time in the high state.
    :param mean_low_s: bursty: mean time in the low state.
    :param trace_path: trace replay: CSV with a column ``arrival_s`` (or an Alibaba pod list,
        whose ``creation_time`` is used).
    :param time_scale: trace replay: multiply trace times by this (compress long traces).
    """

    process: str = "poisson"
    rate_per_min: float = 50.0
    high_rate_per_min: float = 90.0
    low_rate_per_min: float = 20.0
    mean_high_s: float = 120.0
    mean_low_s: float = 240.0
    trace_path: str | None = None
    time_scale: float = 1.0


@dataclass(frozen=True)
class AlibabaSpec:
    """Workload and cluster from the Alibaba GPU trace v2023.

    :param node_csv: path of ``openb_node_list_gpu_node.csv``.
    :param pod_csv: path of an ``openb_pod_list_*.csv``.
    :param nodes: how many nodes to sample from the node list (``0`` = all).
    :param time_scale: multiply trace times (arrivals and durations) by this.
    :param arrival_speedup: divide the gaps between arrivals (after ``time_scale``) by this, so
        pods arrive that many times faster than in the trace while running as long: the knob that
        raises a trace's load (``1`` = the trace's own pace).
    """

    node_csv: str
    pod_csv: str
    nodes: int = 64
    time_scale: float = 1.0
    arrival_speedup: float = 1.0


@dataclass(frozen=True)
class TaskClass:
    """A class of tasks within a workload (e.g. interactive vs batch).

    :param name: the class's name.
    :param share: relative share of the tasks drawn into this class.
    :param priority: larger runs first within a node's queue.
    :param deadline_s: relative deadline after arrival, or ``None``.
    """

    name: str
    share: float
    priority: int = 0
    deadline_s: float | None = None


@dataclass(frozen=True)
class WorkloadSpec:
    """The tasks a scenario submits.

    :param tasks: how many tasks.
    :param apps: application name -> relative share.
    :param arrival: the arrival process.
    :param input_mb: (low, high) of the uniform input size per task, MB; ``None`` = each app's default.
    :param deadline_s: relative deadline after arrival, or ``None``.
    :param tenants: tenant names, assigned round-robin.
    :param alibaba: take tasks (and nodes) from the Alibaba trace instead of apps.
    :param classes: task classes, each task drawn into one by share (empty = one class with
        priority 0 and ``deadline_s``).
    """

    tasks: int = 1500
    apps: dict[str, float] = field(default_factory=dict)
    arrival: ArrivalSpec = field(default_factory=ArrivalSpec)
    input_mb: tuple[float, float] | None = None
    deadline_s: float | None = None
    tenants: tuple[str, ...] = ("default",)
    alibaba: AlibabaSpec | None = None
    classes: tuple[TaskClass, ...] = ()


@dataclass(frozen=True)
class DriftSpec:
    """GPU speed drift (throttling, foreign tenants): a bounded multiplicative random walk.

    :param sigma: std of the log-speed change per interval (0 = no drift).
    :param interval_s: how often speeds change.
    :param min_factor: lowest speed factor.
    :param max_factor: highest speed factor.
    """

    sigma: float = 0.0
    interval_s: float = 30.0
    min_factor: float = 0.5
    max_factor: float = 1.1


@dataclass(frozen=True)
class InterferenceSpec:
    """Where co-location interference and solo speeds come from.

    :param model: ``"contention"`` (shared-resource model) or ``"csv"`` (measured pairs).
    :param colocation_csv: ``device,kind,partner,norm_throughput`` file (model ``csv``).
    :param solo_csv: ``device,kind,solo_throughput`` file (optional with model ``csv``).
    """

    model: str = "contention"
    colocation_csv: str | None = None
    solo_csv: str | None = None


@dataclass(frozen=True)
class Scenario:
    """A complete, validated scenario."""

    name: str
    cluster: ClusterSpec
    workload: WorkloadSpec
    drift: DriftSpec = field(default_factory=DriftSpec)
    interference: InterferenceSpec = field(default_factory=InterferenceSpec)
    seed: int = 0
    description: str = ""
    #: Where it was loaded from: not part of what it is (a written copy compares equal).
    path: str | None = field(default=None, compare=False)

"""Scenario files (TOML): loading, validation, and the built-in scenarios.

A scenario names a cluster, a workload, dynamics and where interference comes from. Every key is
checked: an unknown key, a wrong type or an out-of-range value raises :class:`ScenarioError`, whose
one-line message names the file, the line and the dotted field, e.g.
``x.toml:14: cluster.nodes[2].gpu_model: expected a GPU model name from the catalog (P4, K80, ...),
got 'X100'``. ``docs/scenarios.md`` documents every field; in short::

    name = "paper"                 # default: the file's stem
    description = "..."
    seed = 0                       # integer >= 0

    [cluster]
    name = "paper"                 # optional; default: the scenario's name
    [[cluster.nodes]]              # a group of identical nodes, named NAME-0, NAME-1, ...
    name = "k80x2"
    count = 2                      # default 1
    cpu_cores = 16
    host_mem_gib = 32
    gpu_model = "K80"              # with gpu_count (default 1); or gpus = ["K80", "P4"]; or neither
    gpu_count = 2
    streams_per_gpu = 4            # default 4
    net_gbps = 1.0                 # default 1
    cpu_core_gflops = 25.0         # default hardware.CPU_CORE_GFLOPS
    join_s = 0                     # default 0
    leave_s = 900                  # default: never

    [workload]
    tasks = 1500                   # default 1500
    apps = { intrusion_detection = 1, video_synopsis = 1 }  # shares; or "colocation" (model csv)
    input_mb = [50, 150]           # optional: uniform input size per task
    deadline_s = 120               # optional: relative deadline
    tenants = ["a", "b"]           # optional: round-robin tenants
    [[workload.classes]]           # optional, instead of deadline_s: task classes drawn by share
    name = "interactive"
    share = 0.3
    priority = 1                   # default 0; larger runs first within a node's queue
    deadline_s = 20                # optional: relative deadline of this class
    [workload.arrival]
    process = "poisson"            # poisson: rate_per_min
                                   # bursty: high_rate_per_min, low_rate_per_min, mean_high_s, mean_low_s
                                   # trace: trace_path, time_scale
    rate_per_min = 50
    [workload.alibaba]             # optional: nodes and tasks from the Alibaba trace instead
    node_csv = "${RLSCHED_DATA}/traces/alibaba-gpu-v2023/openb_node_list_gpu_node.csv"
    pod_csv = "${RLSCHED_DATA}/traces/alibaba-gpu-v2023/openb_pod_list_default.csv"
    nodes = 64                     # 0 = all
    time_scale = 0.001

    [dynamics.drift]
    sigma = 0.05
    interval_s = 30
    min_factor = 0.5
    max_factor = 1.1
    [[dynamics.events]]            # churn, turned into NodeSpec.join_s / leave_s
    at_s = 600
    join = ["p4x4-0"]              # these nodes start absent and join at at_s
    leave = []                     # these nodes leave at at_s

    [interference]
    model = "contention"           # or "csv"
    colocation_csv = "..."         # csv: device,kind,partner,norm_throughput
    solo_csv = "..."               # csv, optional: device,kind,solo_throughput

Paths inside a file resolve relative to the file's folder; ``${RLSCHED_DATA}`` is the data folder
(:mod:`rlsched.scenarios.data_paths`). Each section has its reader: ``[cluster]`` and
``[dynamics]`` in :mod:`~rlsched.scenarios.cluster_section`, ``[workload]`` in
:mod:`~rlsched.scenarios.workload_section`, ``[interference]`` in
:mod:`~rlsched.scenarios.interference_section`; the bounds are in :mod:`~rlsched.scenarios.limits`.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import re
from pathlib import Path
from typing import Any

from rlsched.config_reader import ConfigError, ConfigReader
from rlsched.defaults import default as _d
from rlsched.scenarios.cluster_section import apply_events, read_cluster, read_drift
from rlsched.scenarios.horizon import check_horizon
from rlsched.scenarios.interference_section import read_interference
from rlsched.scenarios.spec import Scenario
from rlsched.scenarios.workload_section import check_rate, read_alibaba, read_workload, workload_table
from rlsched.seeds import MAX_SEED

_TOP_KEYS = ("name", "description", "seed", "cluster", "workload", "dynamics", "interference")
_DYNAMICS_KEYS = ("drift", "events")


class ScenarioError(ConfigError):
    """An invalid scenario file or override: a :class:`~rlsched.config_reader.ConfigError` whose
    source is the scenario (``PATH[:LINE]: FIELD: expected WHAT[, got VALUE]``).

    :param source: the scenario file (as given, or the built-in's path).
    :param field: dotted field, e.g. ``cluster.nodes[2].gpus``; ``<syntax>`` for TOML syntax
        errors, ``<file>``/``<scenario>`` when the file cannot be found, ``--rate``/``trace_dir``
        for bad overrides.
    :param expected: what a valid value looks like.
    :param got: the offending value, if any.
    :param hint: more about it, e.g. the error of a data file the field names.
    :param line: the line of the field in the scenario file, where known.
    """


def builtin_dir() -> Path:
    """Folder of the built-in scenario files (package data of ``rlsched.scenarios``)."""
    return Path(__file__).resolve().parent / "builtin"


def list_scenarios() -> list[str]:
    """Names of the built-in scenarios, sorted."""
    folder = builtin_dir()
    return sorted(p.stem for p in folder.glob("*.toml")) if folder.is_dir() else []


def load_scenario(
    name_or_path: str | os.PathLike[str],
    *,
    rate_per_min: float | None = None,
    trace_dir: str | None = None,
    max_tasks: int | None = None,
) -> Scenario:
    """Load and validate a scenario.

    :param name_or_path: a built-in name (no ``/``, no ``.toml``: see :func:`list_scenarios`) or a
        path to a ``.toml`` file.
    :param rate_per_min: override the arrival rate (the CLI's ``--rate``), within
        :data:`~rlsched.scenarios.limits.RATE_RANGE` on ``paper``, up to
        :data:`~rlsched.scenarios.limits.RATE_FACTOR` times the scenario's own rate (at most
        :data:`~rlsched.scenarios.limits.MAX_RATE_PER_MIN`) elsewhere. Poisson: the
        rate; bursty: both state rates are scaled so the long-run mean is this. Trace-driven
        arrivals cannot be overridden.
    :param trace_dir: folder holding the Alibaba trace files; replaces the folder of
        ``workload.alibaba.node_csv`` and ``pod_csv`` (the API's; no command has the flag).
    :param max_tasks: run at most this many of the workload's tasks (an entry's ``#TASKS``).
    :raises ScenarioError: naming the file, line and field of the first problem found.
    """
    if max_tasks is not None and (
        isinstance(max_tasks, bool) or not isinstance(max_tasks, numbers.Integral) or max_tasks < 1
    ):
        raise ScenarioError(str(name_or_path), "max_tasks", "an integer >= 1 (or None)", max_tasks)
    path, shown = _locate(os.fspath(name_or_path))
    r = ConfigReader.open(path, "scenario file", shown, ScenarioError)
    return _build(r, path, rate_per_min, trace_dir, max_tasks)


def _locate(name_or_path: str) -> tuple[Path, str]:
    """The scenario file and how to show it in messages."""
    bare = "/" not in name_or_path and "\\" not in name_or_path and not name_or_path.endswith(".toml")
    if not bare:
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise ScenarioError(name_or_path, "<file>", "an existing scenario file", str(path))
        return path, name_or_path
    path = builtin_dir() / f"{name_or_path}.toml"
    if not path.is_file():
        names = ", ".join(list_scenarios()) or "none installed"
        stem = re.split(r"[@~#]", name_or_path, maxsplit=1)[0]
        hint = (
            "the @RATE, ~LOAD and #TASKS suffixes are the command line's; here: "
            f"load_scenario({stem!r}, rate_per_min=..., max_tasks=...)"
            if stem != name_or_path
            else None
        )
        raise ScenarioError(
            name_or_path,
            "<scenario>",
            f"a built-in scenario ({names}) or a path to a .toml file",
            name_or_path,
            hint=hint,
        )
    try:
        shown = str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        shown = str(path)
    return path, shown


def _build(
    r: ConfigReader, path: Path, rate: float | None, trace_dir: str | None, max_tasks: int | None
) -> Scenario:
    """The scenario of the file ``r`` read, section by section (the order decides which of two
    problems is reported)."""
    doc: dict[str, Any] = r.doc
    folder = path.parent.resolve()  # relative data paths start here
    r.keys(doc, "", _TOP_KEYS)
    name = r.string(doc, "", "name", path.stem)
    if not name.strip():
        raise r.error("name", "a non-empty string", name)
    check_rate(r, name, rate)
    description = r.string(doc, "", "description", "")
    seed = r.integer(doc, "", "seed", _d(Scenario, "seed"), ge=0, le=MAX_SEED)
    wl = workload_table(r, doc.get("workload"))
    ali = read_alibaba(r, wl, trace_dir, folder)
    cluster = read_cluster(r, doc.get("cluster"), ali, seed, name)
    dyn = r.table(doc.get("dynamics"), "dynamics")
    r.keys(dyn, "dynamics", _DYNAMICS_KEYS)
    drift = read_drift(r, dyn.get("drift"))
    cluster = apply_events(r, dyn.get("events"), cluster)
    interference, colo_kinds = read_interference(r, doc.get("interference"), cluster, folder)
    workload = read_workload(
        r, wl, ali, interference, colo_kinds, None if rate is None else float(rate), folder
    )
    if max_tasks is not None and max_tasks < workload.tasks:
        workload = dataclasses.replace(workload, tasks=max_tasks)
    check_horizon(r, workload, drift, rate is not None)
    return Scenario(
        name=name,
        cluster=cluster,
        workload=workload,
        drift=drift,
        interference=interference,
        seed=seed,
        description=description,
        path=str(path.resolve()),
    )

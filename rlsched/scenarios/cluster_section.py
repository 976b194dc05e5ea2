"""The ``[cluster]`` and ``[dynamics]`` sections of a scenario file: node groups, speed drift, and
join/leave events (churn, turned into ``NodeSpec.join_s`` / ``leave_s``)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from rlsched.cluster import ClusterSpec, NodeSpec
from rlsched.config_reader import ConfigReader
from rlsched.defaults import default as _d
from rlsched.errors import InputError, few
from rlsched.hardware import GpuModel, gpu_model, model_names
from rlsched.scenarios import traces
from rlsched.scenarios.limits import (
    MAX_CPU_CORES,
    MAX_DRIFT_SIGMA,
    MAX_GPUS_PER_NODE,
    MAX_NODES,
    MAX_STREAMS_PER_GPU,
)
from rlsched.scenarios.spec import AlibabaSpec, DriftSpec

_CLUSTER_KEYS = ("name", "nodes")
_GROUP_KEYS = (
    "name", "count", "cpu_cores", "host_mem_gib", "gpu_model", "gpu_count", "gpus",
    "streams_per_gpu", "net_gbps", "cpu_core_gflops", "join_s", "leave_s",
)  # fmt: skip
_DRIFT_KEYS = ("sigma", "interval_s", "min_factor", "max_factor")
_EVENT_KEYS = ("at_s", "join", "leave")
_NODE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_GROUPS_EXPECTED = "one or more [[cluster.nodes]] groups (or a [workload.alibaba] section)"


def read_cluster(
    r: ConfigReader, raw: object, ali: AlibabaSpec | None, seed: int, default_name: str
) -> ClusterSpec:
    """The ``[cluster]`` section: its node groups, or the nodes an Alibaba trace supplies (plus any
    groups beside them).

    :param r: the scenario's reader.
    :param raw: the ``cluster`` value (``None`` when absent).
    :param ali: the ``[workload.alibaba]`` section, if any.
    :param seed: the scenario's seed (which trace nodes are sampled).
    :param default_name: the cluster's name when ``cluster.name`` is not given.
    """
    tbl = r.table(raw, "cluster")
    r.keys(tbl, "cluster", _CLUSTER_KEYS)
    name = r.string(tbl, "cluster", "name", default_name)
    if ali is not None:
        # Node groups beside a trace add nodes the trace lacks (e.g. CPU-only nodes) after the
        # sampled ones.
        trace = _alibaba_cluster(r, ali, seed, name)
        if "nodes" not in tbl:
            return trace
        extra = _groups(r, tbl["nodes"], {n.name for n in trace.nodes})
        return replace(trace, nodes=trace.nodes + tuple(extra))
    if "nodes" not in tbl:
        raise r.error("cluster.nodes", _GROUPS_EXPECTED)
    return ClusterSpec(nodes=tuple(_groups(r, tbl["nodes"], set())), name=name)


def _groups(r: ConfigReader, groups: object, taken: set[str]) -> list[NodeSpec]:
    """The nodes of the ``[[cluster.nodes]]`` groups, names unique among themselves and ``taken``."""
    if not isinstance(groups, list) or not groups or not all(isinstance(g, dict) for g in groups):
        raise r.error("cluster.nodes", _GROUPS_EXPECTED, groups)
    nodes: list[NodeSpec] = []
    seen = set(taken)
    for i, g in enumerate(groups):
        where = f"cluster.nodes[{i}]"
        if len(nodes) + len(taken) + r.integer(g, where, "count", 1, ge=1, le=MAX_NODES) > MAX_NODES:
            raise r.error(f"{where}.count", f"at most {MAX_NODES:,} nodes in all", g.get("count", 1))
        for node in _group(r, g, where):
            if node.name in seen:
                raise r.error(f"{where}.name", "node names unique across groups", node.name)
            seen.add(node.name)
            nodes.append(node)
    return nodes


def _alibaba_cluster(r: ConfigReader, ali: AlibabaSpec, seed: int, name: str) -> ClusterSpec:
    try:
        cluster = traces.alibaba_cluster(ali, seed)
    except InputError as e:
        raise r.error(
            "workload.alibaba.nodes", "a node count the node list can supply", hint=str(e)
        ) from None
    return replace(cluster, name=name)


def _group(r: ConfigReader, g: dict[str, Any], where: str) -> list[NodeSpec]:
    """The nodes of one ``[[cluster.nodes]]`` group."""
    r.keys(g, where, _GROUP_KEYS)
    name = r.string(g, where, "name")
    if not _NODE_NAME.fullmatch(name):
        raise r.error(f"{where}.name", "a name of letters, digits, '_', '.' or '-'", name)
    count = r.integer(g, where, "count", 1, ge=1, le=MAX_NODES)
    join = r.number(g, where, "join_s", _d(NodeSpec, "join_s"), ge=0)
    leave = r.number(g, where, "leave_s", None, gt=0)
    if leave is not None and leave <= join:
        raise r.error(f"{where}.leave_s", f"a time after join_s ({join:g} s)", leave)
    template = NodeSpec(
        name=name,
        cpu_cores=r.integer(g, where, "cpu_cores", ge=1, le=MAX_CPU_CORES),
        host_mem_gib=r.number(g, where, "host_mem_gib", gt=0),
        gpus=_gpus(r, g, where),
        streams_per_gpu=r.integer(
            g, where, "streams_per_gpu", _d(NodeSpec, "streams_per_gpu"), ge=1, le=MAX_STREAMS_PER_GPU
        ),
        net_gbps=r.number(g, where, "net_gbps", _d(NodeSpec, "net_gbps"), gt=0),
        cpu_core_gflops=r.number(g, where, "cpu_core_gflops", _d(NodeSpec, "cpu_core_gflops"), gt=0),
        join_s=join,
        leave_s=leave,
    )
    return [replace(template, name=f"{name}-{i}") for i in range(count)]


def _gpus(r: ConfigReader, g: dict[str, Any], where: str) -> tuple[GpuModel, ...]:
    if "gpus" in g:
        if "gpu_model" in g or "gpu_count" in g:
            raise r.error(f"{where}.gpus", "either gpus or gpu_model/gpu_count, not both", g["gpus"])
        names = r.strings(g, where, "gpus")
        if len(names) > MAX_GPUS_PER_NODE:
            raise r.error(f"{where}.gpus", f"at most {MAX_GPUS_PER_NODE} GPUs per node", len(names))
        return tuple(_model(r, f"{where}.gpus[{j}]", m) for j, m in enumerate(names))
    if "gpu_model" in g:
        model = _model(r, f"{where}.gpu_model", r.string(g, where, "gpu_model"))
        return (model,) * r.integer(g, where, "gpu_count", 1, ge=1, le=MAX_GPUS_PER_NODE)
    if "gpu_count" in g:
        raise r.error(f"{where}.gpu_model", "a GPU model alongside gpu_count")
    return ()


def _model(r: ConfigReader, field: str, name: str) -> GpuModel:
    try:
        return gpu_model(name)
    except KeyError:
        raise r.error(field, f"a GPU model name from the catalog ({model_names()})", name) from None


def read_drift(r: ConfigReader, raw: object) -> DriftSpec:
    """The ``[dynamics.drift]`` section (absent: no drift).

    :param r: the scenario's reader.
    :param raw: the ``dynamics.drift`` value (``None`` when absent).
    """
    where = "dynamics.drift"
    tbl = r.table(raw, where)
    r.keys(tbl, where, _DRIFT_KEYS)
    d = DriftSpec()
    # Speeds start at factor 1, so the band must contain 1.
    return DriftSpec(
        sigma=r.number(tbl, where, "sigma", d.sigma, ge=0, le=MAX_DRIFT_SIGMA),
        interval_s=r.number(tbl, where, "interval_s", d.interval_s, gt=0),
        min_factor=r.number(tbl, where, "min_factor", d.min_factor, gt=0, le=1),
        max_factor=r.number(tbl, where, "max_factor", d.max_factor, ge=1),
    )


def apply_events(r: ConfigReader, raw: object, cluster: ClusterSpec) -> ClusterSpec:
    """The cluster with ``[[dynamics.events]]`` applied as node join/leave times; some node must be
    present from time 0.

    :param r: the scenario's reader.
    :param raw: the ``dynamics.events`` value (``None`` when absent).
    :param cluster: the cluster of the ``[cluster]`` section.
    """
    if raw is None:
        return _check_initial(r, cluster, "cluster.nodes")
    if not isinstance(raw, list) or not all(isinstance(e, dict) for e in raw):
        raise r.error("dynamics.events", "an array of tables ([[dynamics.events]])", raw)
    names = [n.name for n in cluster.nodes]
    times: dict[str, dict[str, tuple[float, str]]] = {"join": {}, "leave": {}}
    for i, ev in enumerate(raw):
        where = f"dynamics.events[{i}]"
        r.keys(ev, where, _EVENT_KEYS)
        at = r.number(ev, where, "at_s", ge=0)
        for what in ("join", "leave"):
            for j, node in enumerate(r.strings(ev, where, what, [])):
                field = f"{where}.{what}[{j}]"
                if node not in names:
                    raise r.error(field, f"a node name of the cluster ({few(names)})", node)
                if node in times[what]:
                    raise r.error(field, f"each node to {what} at most once", node)
                times[what][node] = (at, field)
    nodes = tuple(_churn(r, n, times) for n in cluster.nodes)
    return _check_initial(r, replace(cluster, nodes=nodes), "dynamics.events")


def _churn(r: ConfigReader, node: NodeSpec, times: dict[str, dict[str, tuple[float, str]]]) -> NodeSpec:
    join, join_field = times["join"].get(node.name, (node.join_s, ""))
    leave, leave_field = times["leave"].get(node.name, (node.leave_s, ""))
    if leave is not None and leave <= join:
        field = leave_field or join_field
        raise r.error(field, f"node {node.name!r} to leave after it joins (joins at {join:g} s)", leave)
    return replace(node, join_s=join, leave_s=leave)


def _check_initial(r: ConfigReader, cluster: ClusterSpec, field: str) -> ClusterSpec:
    if not any(n.join_s == 0 for n in cluster.nodes):
        raise r.error(field, "at least one node present from time 0")
    return cluster

"""Writing a :class:`~rlsched.scenarios.spec.Scenario` as a scenario file (TOML).

The inverse of :func:`rlsched.scenarios.loader.load_scenario`: the file it writes loads back equal
(every built-in scenario is checked by a test), so a scenario changed in code — a rate override, a
task cap, another seed — can be saved, shared and run by name. Nodes are written as
``[[cluster.nodes]]`` groups: runs of nodes named ``NAME-0, NAME-1, ...`` that are otherwise
identical become one group with a ``count``; join and leave times become ``[[dynamics.events]]``.
Paths are written as loaded (absolute). With an Alibaba trace workload the sampled nodes come from
the trace again; only the groups beside them are written.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from rlsched.cluster import NodeSpec
from rlsched.scenarios import traces
from rlsched.scenarios.spec import ArrivalSpec, Scenario, WorkloadSpec

_INDEXED = re.compile(r"^(?P<base>.+)-(?P<i>\d+)$")


def _v(x: object) -> str:
    """A TOML value: booleans, numbers (shortest round-trip decimals), strings, lists."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int | float):
        return repr(x)
    if isinstance(x, list | tuple):
        return "[" + ", ".join(_v(e) for e in x) + "]"
    return json.dumps(str(x), ensure_ascii=False)  # JSON string escapes are valid TOML


def _static(n: NodeSpec) -> NodeSpec:
    """The node without its churn (written as ``[[dynamics.events]]``)."""
    return dataclasses.replace(n, join_s=0.0, leave_s=None)


def _groups(nodes: tuple[NodeSpec, ...]) -> list[tuple[str, int, NodeSpec]]:
    """(group name, count, first node) of consecutive nodes NAME-0..NAME-(count-1) alike."""
    out: list[tuple[str, int, NodeSpec]] = []
    for n in map(_static, nodes):
        m = _INDEXED.match(n.name)
        if m is None:
            raise ValueError(f"node {n.name!r}: a scenario file names nodes GROUP-INDEX")
        base, i = m["base"], int(m["i"])
        if out:
            name, count, first = out[-1]
            if name == base and i == count and dataclasses.replace(n, name=first.name) == first:
                out[-1] = (name, count + 1, first)
                continue
        if i != 0:
            raise ValueError(f"node {n.name!r}: a group's nodes are numbered from 0")
        out.append((base, 1, n))
    return out


def _cluster_lines(sc: Scenario) -> list[str]:
    nodes = sc.cluster.nodes
    if sc.workload.alibaba is not None:
        sampled = traces.alibaba_cluster(sc.workload.alibaba, sc.seed).nodes
        if tuple(map(_static, nodes[: len(sampled)])) != tuple(map(_static, sampled)):
            raise ValueError("nodes sampled from the trace were changed; a file can only sample them again")
        nodes = nodes[len(sampled) :]
    lines = ["[cluster]", f"name = {_v(sc.cluster.name)}"]
    for base, count, n in _groups(nodes):
        lines += ["", "[[cluster.nodes]]", f"name = {_v(base)}", f"count = {count}"]
        lines += [f"cpu_cores = {n.cpu_cores}", f"host_mem_gib = {_v(float(n.host_mem_gib))}"]
        if n.gpus:
            lines.append(f"gpus = {_v([g.name for g in n.gpus])}")
        lines += [
            f"streams_per_gpu = {n.streams_per_gpu}",
            f"net_gbps = {_v(float(n.net_gbps))}",
            f"cpu_core_gflops = {_v(float(n.cpu_core_gflops))}",
        ]
    return lines


def _event_lines(sc: Scenario) -> list[str]:
    """Every node's join and leave time as ``[[dynamics.events]]`` (trace nodes included)."""
    at: dict[float, tuple[list[str], list[str]]] = {}
    for n in sc.cluster.nodes:
        if n.join_s != 0.0:
            at.setdefault(float(n.join_s), ([], []))[0].append(n.name)
        if n.leave_s is not None:
            at.setdefault(float(n.leave_s), ([], []))[1].append(n.name)
    lines: list[str] = []
    for t in sorted(at):
        join, leave = at[t]
        lines += ["", "[[dynamics.events]]", f"at_s = {_v(t)}", f"join = {_v(join)}", f"leave = {_v(leave)}"]
    return lines


_ARRIVAL_FIELDS = {
    "poisson": ("rate_per_min",),
    "bursty": ("high_rate_per_min", "low_rate_per_min", "mean_high_s", "mean_low_s"),
    "trace": ("trace_path", "time_scale"),
}


def _arrival_lines(a: ArrivalSpec) -> list[str]:
    lines = ["[workload.arrival]", f"process = {_v(a.process)}"]
    return lines + [f"{k} = {_v(getattr(a, k))}" for k in _ARRIVAL_FIELDS[a.process]]


def _workload_lines(w: WorkloadSpec) -> list[str]:
    lines = ["[workload]", f"tasks = {w.tasks}"]
    if w.alibaba is not None:
        ali = w.alibaba
        return [
            *lines,
            "",
            "[workload.alibaba]",
            *(f"{f.name} = {_v(getattr(ali, f.name))}" for f in dataclasses.fields(ali)),
        ]
    apps = ", ".join(f"{_v(k)} = {_v(float(v))}" for k, v in w.apps.items())
    lines.append(f"apps = {{ {apps} }}")
    if w.input_mb is not None:
        lines.append(f"input_mb = {_v([float(x) for x in w.input_mb])}")
    if w.deadline_s is not None:
        lines.append(f"deadline_s = {_v(float(w.deadline_s))}")
    lines.append(f"tenants = {_v(list(w.tenants))}")
    lines += ["", *_arrival_lines(w.arrival)]
    for c in w.classes:
        lines += ["", "[[workload.classes]]", f"name = {_v(c.name)}", f"share = {_v(float(c.share))}"]
        lines.append(f"priority = {c.priority}")
        if c.deadline_s is not None:
            lines.append(f"deadline_s = {_v(float(c.deadline_s))}")
    return lines


def dump_scenario(sc: Scenario) -> str:
    """``sc`` as scenario-file text that loads back equal (but for :attr:`Scenario.path`).

    :raises ValueError: for a scenario no file can express (nodes not named ``GROUP-INDEX``, or
        nodes sampled from a trace changed other than by joining or leaving).
    """
    d, ix = sc.drift, sc.interference
    lines = [f"name = {_v(sc.name)}", f"description = {_v(sc.description)}", f"seed = {sc.seed}", ""]
    lines += _cluster_lines(sc)
    lines += ["", *_workload_lines(sc.workload)]
    lines += ["", "[dynamics.drift]"]
    lines += [f"{f.name} = {_v(float(getattr(d, f.name)))}" for f in dataclasses.fields(d)]
    lines += _event_lines(sc)
    lines += ["", "[interference]", f"model = {_v(ix.model)}"]
    lines += [
        f"{k} = {_v(v)}" for k, v in (("colocation_csv", ix.colocation_csv), ("solo_csv", ix.solo_csv)) if v
    ]
    return "\n".join(lines) + "\n"


def write_scenario(sc: Scenario, path: str | Path) -> None:
    """Write ``sc`` as a scenario file (see :func:`dump_scenario`)."""
    Path(path).write_text(dump_scenario(sc), encoding="utf-8")

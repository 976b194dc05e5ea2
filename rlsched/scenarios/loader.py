"""Scenario files (TOML): loading, validation, and the built-in scenarios.

A scenario names a cluster, a workload, dynamics and where interference comes from. Every key is
checked: an unknown key, a wrong type or an out-of-range value raises :class:`ScenarioError`, whose
one-line message names the file and the dotted field, e.g.
``x.toml: cluster.nodes[2].gpu_model: expected a GPU model name from the catalog (P4, K80, ...),
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

Paths inside a file resolve relative to the file's folder. ``${RLSCHED_DATA}`` expands to the
environment variable ``RLSCHED_DATA`` or, when it is unset, to the data that ship with the package
(``rlsched/data``: the Alibaba GPU v2023 trace files and Gavel's co-location table, each with its
licence; :func:`find_data_dir`).

CSV devices (``v100``, ``p100``) match catalog models case-insensitively by name or by a prefix that
is not followed by a digit: ``v100`` covers ``V100M16`` and ``V100M32``; ``a10`` covers ``A10`` only.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from rlsched.cluster import ClusterSpec, NodeSpec
from rlsched.defaults import default as _d
from rlsched.errors import NOTHING, InputError
from rlsched.hardware import ALIASES, CATALOG, GpuModel, device_models, gpu_model
from rlsched.interference.measurements import MeasurementError, read_colocation_csv, read_solo_csv
from rlsched.scenarios import traces
from rlsched.scenarios.arrivals import trace_time_column
from rlsched.scenarios.spec import (
    AlibabaSpec,
    ArrivalSpec,
    DriftSpec,
    InterferenceSpec,
    Scenario,
    TaskClass,
    WorkloadSpec,
)
from rlsched.textfile import TextFileError, read_text

#: Environment variable naming a data folder that overrides the packaged one (``rlsched/data``).
DATA_ENV = "RLSCHED_DATA"
#: Arrival rates the paper evaluates, tasks/min; ``--rate`` on the ``paper`` scenario must lie in it.
RATE_RANGE: tuple[float, float] = (10.0, 60.0)
#: Largest arrival rate (tasks/min) any scenario or ``--rate`` may ask for: 10^6/min is ~16,700
#: arrivals per simulated second, far beyond any built-in (the largest asks 9,000/min).
MAX_RATE_PER_MIN = 1_000_000.0
#: ``--rate`` on a scenario other than ``paper`` may ask up to this many times its own rate.
RATE_FACTOR = 100.0
# Upper bounds of every count in a scenario file, checked at load so a typo cannot hang a run
# or exhaust memory (the largest built-in, alibaba-full, has 1,213 nodes and 7,255 pods).
#: Nodes in a cluster, all groups together (and ``workload.alibaba.nodes``).
MAX_NODES = 10_000
#: GPUs on one node.
MAX_GPUS_PER_NODE = 16
#: Streams on one GPU.
MAX_STREAMS_PER_GPU = 64
#: CPU cores on one node.
MAX_CPU_CORES = 1_024
#: Tasks in one workload (a run holds ~2 KB per task: rlsched.footprint).
MAX_TASKS = 1_000_000
#: Largest seed (numpy's 32-bit seed range).
MAX_SEED = 2**32 - 1
#: Apps named ``colo:<kind>`` run one kind of a co-location CSV.
COLO_PREFIX = "colo:"

_TRACE_DIR = "${RLSCHED_DATA}/traces/alibaba-gpu-v2023"
DEFAULT_NODE_CSV = f"{_TRACE_DIR}/openb_node_list_gpu_node.csv"
DEFAULT_POD_CSV = f"{_TRACE_DIR}/openb_pod_list_default.csv"

_TOP_KEYS = ("name", "description", "seed", "cluster", "workload", "dynamics", "interference")
_CLUSTER_KEYS = ("name", "nodes")
_GROUP_KEYS = (
    "name", "count", "cpu_cores", "host_mem_gib", "gpu_model", "gpu_count", "gpus",
    "streams_per_gpu", "net_gbps", "cpu_core_gflops", "join_s", "leave_s",
)  # fmt: skip
_WORKLOAD_KEYS = ("tasks", "apps", "input_mb", "deadline_s", "tenants", "arrival", "alibaba", "classes")
_CLASS_KEYS = ("name", "share", "priority", "deadline_s")
#: Most task classes in one workload.
MAX_CLASSES = 16
_ALIBABA_KEYS = ("node_csv", "pod_csv", "nodes", "time_scale", "arrival_speedup")
_ARRIVAL_KEYS = {
    "poisson": ("process", "rate_per_min"),
    "bursty": ("process", "high_rate_per_min", "low_rate_per_min", "mean_high_s", "mean_low_s"),
    "trace": ("process", "trace_path", "time_scale"),
}
_DYNAMICS_KEYS = ("drift", "events")
_DRIFT_KEYS = ("sigma", "interval_s", "min_factor", "max_factor")
_EVENT_KEYS = ("at_s", "join", "leave")
_INTERFERENCE_KEYS = ("model", "colocation_csv", "solo_csv")

_REQUIRED: Any = object()
_VAR = re.compile(r"\$\{([^}]*)\}")
_NODE_NAME = re.compile(r"[A-Za-z0-9_.-]+")


_M = TypeVar("_M")


class ScenarioError(InputError):
    """An invalid scenario file or override: an :class:`~rlsched.errors.InputError` whose source
    is the scenario (``PATH: FIELD: expected WHAT[, got VALUE]``).

    :param path: the scenario file (as given, or the built-in's path).
    :param field: dotted field, e.g. ``cluster.nodes[2].gpus``; ``<syntax>`` for TOML syntax
        errors, ``<file>``/``<scenario>`` when the file cannot be found, ``--rate``/``--trace-dir``
        for bad overrides.
    :param expected: what a valid value looks like.
    :param got: the offending value, if any.
    :param line: line in the scenario file, for syntax errors.
    :param hint: more about it, e.g. the error of a data file the field names.
    """

    def __init__(
        self,
        path: str,
        field: str,
        expected: str,
        got: object = NOTHING,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(path, field, expected, got, hint=hint, line=line)

    @property
    def path(self) -> str:
        """The scenario file (the error's source)."""
        return self.source


# --- public API --------------------------------------------------------------------------------


def read_toml_file(path: str | Path, what: str) -> dict[str, Any]:
    """A TOML file's table, for the readers of every rlsched TOML format.

    :param path: the file.
    :param what: what the file is, for the message (e.g. ``"live cluster file"``).
    :raises ScenarioError: field ``<file>`` when it cannot be read, ``<syntax>`` when it is not
        UTF-8 TOML.
    """
    shown = str(path)
    try:
        return tomllib.loads(read_text(path))
    except OSError as e:
        raise ScenarioError(shown, "<file>", f"a readable {what}", str(e)) from None
    except TextFileError as e:
        raise ScenarioError(shown, "<syntax>", "UTF-8 text (save the file as UTF-8)", e.where) from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(shown, "<syntax>", f"valid TOML: {e}") from None


def builtin_dir() -> Path:
    """Folder of the built-in scenario files (package data of ``rlsched.scenarios``)."""
    return Path(__file__).resolve().parent / "builtin"


def list_scenarios() -> list[str]:
    """Names of the built-in scenarios, sorted."""
    folder = builtin_dir()
    return sorted(p.stem for p in folder.glob("*.toml")) if folder.is_dir() else []


def packaged_data_dir() -> Path:
    """The data shipped with the package (``rlsched/data``; ``PROVENANCE.md`` there says where each
    file comes from and under which licence)."""
    return Path(__file__).resolve().parent.parent / "data"


def find_data_dir() -> Path:
    """The data folder that ``${RLSCHED_DATA}`` stands for: ``$RLSCHED_DATA`` when set (an
    override, e.g. a newer copy of the trace), else :func:`packaged_data_dir`."""
    env = os.environ.get(DATA_ENV)
    return Path(env).expanduser() if env else packaged_data_dir()


def load_scenario(
    name_or_path: str, *, rate_per_min: float | None = None, trace_dir: str | None = None
) -> Scenario:
    """Load and validate a scenario.

    :param name_or_path: a built-in name (no ``/``, no ``.toml``: see :func:`list_scenarios`) or a
        path to a ``.toml`` file.
    :param rate_per_min: override the arrival rate (the CLI's ``--rate``), within
        :data:`RATE_RANGE` on ``paper``, up to :data:`RATE_FACTOR` times the scenario's own rate
        (at most :data:`MAX_RATE_PER_MIN`) elsewhere. Poisson: the
        rate; bursty: both state rates are scaled so the long-run mean is this. Trace-driven
        arrivals cannot be overridden.
    :param trace_dir: folder holding the Alibaba trace files; replaces the folder of
        ``workload.alibaba.node_csv`` and ``pod_csv`` (the CLI's ``--trace-dir``).
    :raises ScenarioError: naming the file and field of the first problem found.
    """
    path, shown = _locate(name_or_path)
    ctx = _Ctx(shown, path.parent.resolve())
    return _build(ctx, path, _read_toml(ctx, path), rate_per_min, trace_dir)


# --- reading helpers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Ctx:
    """The file being read: how to name it in errors, and where its relative paths start."""

    shown: str
    folder: Path

    def error(
        self, field: str, expected: str, got: object = NOTHING, hint: str | None = None
    ) -> ScenarioError:
        return ScenarioError(self.shown, field, expected, got, hint=hint)


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
        raise ScenarioError(
            name_or_path,
            "<scenario>",
            f"a built-in scenario ({names}) or a path to a .toml file",
            name_or_path,
        )
    try:
        shown = str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        shown = str(path)
    return path, shown


def _read_toml(ctx: _Ctx, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(read_text(path))
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"at line (\d+)", str(e))
        raise ScenarioError(
            ctx.shown, "<syntax>", f"valid TOML: {e}", line=int(m.group(1)) if m else None
        ) from None
    except TextFileError as e:
        raise ScenarioError(ctx.shown, "<syntax>", "UTF-8 text (save the file as UTF-8)", e.where) from None
    except OSError as e:
        raise ctx.error("<file>", "a readable scenario file", str(e)) from None


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _few(names: Iterable[str], k: int = 8) -> str:
    names = list(names)
    return ", ".join(names[:k]) + (", ..." if len(names) > k else "")


def _check_keys(ctx: _Ctx, table: dict[str, Any], where: str, allowed: Sequence[str], what: str = "") -> None:
    for key in table:
        if key not in allowed:
            raise ctx.error(_join(where, key), f"one of the keys{what} ({', '.join(allowed)})", key)


def _table(ctx: _Ctx, value: object, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ctx.error(where, "a table", value)
    return value


def _get(ctx: _Ctx, table: dict[str, Any], where: str, key: str, default: Any, expected: str) -> Any:
    if key in table:
        return table[key]
    if default is _REQUIRED:
        raise ctx.error(_join(where, key), f"{expected} (this key is required)")
    return default


def _is_num(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _num(
    ctx: _Ctx,
    table: dict[str, Any],
    where: str,
    key: str,
    default: Any = _REQUIRED,
    *,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
) -> Any:
    """A finite number within bounds (an int is accepted where a float is meant)."""
    bounds = [f"{op} {b:g}" for op, b in ((">", gt), (">=", ge), ("<=", le)) if b is not None]
    expected = " ".join(["a number", " and ".join(bounds)]).strip()
    v = _get(ctx, table, where, key, default, expected)
    if v is default and key not in table:
        return v
    ok = _is_num(v) and (gt is None or v > gt) and (ge is None or v >= ge) and (le is None or v <= le)
    if not ok:
        raise ctx.error(_join(where, key), expected, v)
    return float(v)


def _int(
    ctx: _Ctx, table: dict[str, Any], where: str, key: str, default: Any = _REQUIRED, *, ge: int, le: int
) -> Any:
    expected = f"an integer from {ge:,} to {le:,}"
    v = _get(ctx, table, where, key, default, expected)
    if v is default and key not in table:
        return v
    if not isinstance(v, int) or isinstance(v, bool) or not ge <= v <= le:
        raise ctx.error(_join(where, key), expected, v)
    return v


def _str(ctx: _Ctx, table: dict[str, Any], where: str, key: str, default: Any = _REQUIRED) -> Any:
    v = _get(ctx, table, where, key, default, "a string")
    if not isinstance(v, str) and not (v is default and key not in table):
        raise ctx.error(_join(where, key), "a string", v)
    return v


def _str_list(ctx: _Ctx, table: dict[str, Any], where: str, key: str, default: Any = _REQUIRED) -> Any:
    v = _get(ctx, table, where, key, default, "a list of strings")
    if v is default and key not in table:
        return v
    if not isinstance(v, list) or not all(isinstance(s, str) and s for s in v):
        raise ctx.error(_join(where, key), "a list of non-empty strings", v)
    return v


# --- data files --------------------------------------------------------------------------------


def _expand(ctx: _Ctx, field: str, raw: str) -> str:
    """Replace ``${RLSCHED_DATA}`` (the only variable) by the data folder."""

    def sub(m: re.Match[str]) -> str:
        if m.group(1) != DATA_ENV:
            raise ctx.error(field, f"a path whose only variable is ${{{DATA_ENV}}}", raw)
        return str(find_data_dir())

    return _VAR.sub(sub, raw)


def _data_file(ctx: _Ctx, field: str, raw: str) -> str:
    """An existing file named in the scenario; relative paths start at the scenario's folder."""
    path = Path(_expand(ctx, field, raw)).expanduser()
    if not path.is_absolute():
        path = ctx.folder / path
    path = Path(os.path.normpath(path))
    if not path.is_file():
        raise ctx.error(field, "an existing file", str(path))
    return str(path)


def _measurements(ctx: _Ctx, field: str, read: Callable[[str], _M], path: str) -> _M:
    """A measurement CSV read by its one owner (:mod:`rlsched.interference.measurements`), a
    rejection reported against the scenario field that names the file."""
    try:
        return read(path)
    except MeasurementError as e:
        where = f"{e.path} line {e.line}" if e.line else e.path
        column = f" ({e.column})" if e.column else ""
        got = NOTHING if e.got is None else e.got
        raise ctx.error(field, f"{e.expected} at {where}{column}", got) from None


def _read_colocation(ctx: _Ctx, field: str, path: str) -> tuple[set[str], list[str]]:
    """Devices (lower case) and kinds (in first-seen order) of a co-location CSV."""
    data = _measurements(ctx, field, read_colocation_csv, path)
    return {d.lower() for d in data.device}, list(dict.fromkeys(data.kind))


def _read_solo(ctx: _Ctx, field: str, path: str) -> dict[str, set[str]]:
    """Device (lower case) -> kinds measured alone."""
    data = _measurements(ctx, field, read_solo_csv, path)
    out: dict[str, set[str]] = {}
    for d, k in zip(data.device, data.kind, strict=True):
        out.setdefault(d.lower(), set()).add(k)
    return out


def _check_coverage(ctx: _Ctx, field: str, path: str, devices: Iterable[str], cluster: ClusterSpec) -> None:
    """Every GPU model of the cluster must be measured on some device of the CSV."""
    devices = sorted(devices)
    covered = set().union(*(device_models(d) for d in devices))
    for model in sorted({g.name for n in cluster.nodes for g in n.gpus}):
        if model not in covered:
            raise ctx.error(
                field,
                f"measurements for every GPU model of the cluster (devices in {path}: {_few(devices)})",
                model,
            )


# --- sections ----------------------------------------------------------------------------------


def _check_rate(ctx: _Ctx, name: str, rate: float | None) -> None:
    """``--rate`` on ``paper``: the paper's range (other scenarios: :func:`_check_override`)."""
    if rate is None:
        return
    lo, hi = RATE_RANGE
    if name == "paper" and not (_is_num(rate) and lo <= rate <= hi):
        raise ctx.error(
            "--rate", f"an arrival rate from {lo:g} to {hi:g} tasks/min (the paper's range)", rate
        )
    if not (_is_num(rate) and rate > 0):
        raise ctx.error("--rate", "an arrival rate > 0 tasks/min", rate)


def _check_override(ctx: _Ctx, rate: float | None, own: float) -> None:
    """``--rate`` elsewhere: above 0, up to :data:`RATE_FACTOR` times the scenario's own long-run
    rate (and :data:`MAX_RATE_PER_MIN`) — a load the scenario's cluster and task count were sized for."""
    hi = min(RATE_FACTOR * own, MAX_RATE_PER_MIN)
    if rate is not None and not rate <= hi:
        raise ctx.error(
            "--rate",
            f"an arrival rate up to {hi:g} tasks/min ({RATE_FACTOR:g}x the scenario's own {own:g})",
            rate,
        )


def _build(ctx: _Ctx, path: Path, doc: dict[str, Any], rate: float | None, trace_dir: str | None) -> Scenario:
    _check_keys(ctx, doc, "", _TOP_KEYS)
    name = _str(ctx, doc, "", "name", path.stem)
    if not name.strip():
        raise ctx.error("name", "a non-empty string", name)
    _check_rate(ctx, name, rate)
    description = _str(ctx, doc, "", "description", "")
    seed = _int(ctx, doc, "", "seed", _d(Scenario, "seed"), ge=0, le=MAX_SEED)
    wl = _table(ctx, doc.get("workload"), "workload")
    _check_keys(ctx, wl, "workload", _WORKLOAD_KEYS)
    ali = _alibaba(ctx, wl, trace_dir)
    cluster = _cluster(ctx, doc.get("cluster"), ali, seed, name)
    dyn = _table(ctx, doc.get("dynamics"), "dynamics")
    _check_keys(ctx, dyn, "dynamics", _DYNAMICS_KEYS)
    drift = _drift(ctx, dyn.get("drift"))
    cluster = _events(ctx, dyn.get("events"), cluster)
    interference, colo_kinds = _interference(ctx, doc.get("interference"), cluster)
    workload = _workload(ctx, wl, ali, interference, colo_kinds, None if rate is None else float(rate))
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


def _alibaba(ctx: _Ctx, wl: dict[str, Any], trace_dir: str | None) -> AlibabaSpec | None:
    if "alibaba" not in wl:
        if trace_dir is not None:
            raise ctx.error("--trace-dir", "a scenario with [workload.alibaba]", trace_dir)
        return None
    where = "workload.alibaba"
    tbl = _table(ctx, wl["alibaba"], where)
    _check_keys(ctx, tbl, where, _ALIBABA_KEYS)
    files = {}
    for key, fallback in (("node_csv", DEFAULT_NODE_CSV), ("pod_csv", DEFAULT_POD_CSV)):
        raw = _str(ctx, tbl, where, key, fallback)
        if trace_dir is not None:
            # --trace-dir is a command-line path: relative to the current directory, not the file.
            raw = str(Path(trace_dir).expanduser().resolve() / Path(raw).name)
        files[key] = _data_file(ctx, f"{where}.{key}", raw)
    for key, check in (("node_csv", traces.check_node_csv), ("pod_csv", traces.check_pod_csv)):
        try:
            check(files[key])
        except InputError as e:  # the trace reader's own refusal, naming its file and line
            raise ctx.error(
                f"{where}.{key}", "an Alibaba trace file with the documented columns", hint=str(e)
            ) from None
    return AlibabaSpec(
        node_csv=files["node_csv"],
        pod_csv=files["pod_csv"],
        nodes=_int(ctx, tbl, where, "nodes", _d(AlibabaSpec, "nodes"), ge=0, le=MAX_NODES),
        time_scale=_num(ctx, tbl, where, "time_scale", _d(AlibabaSpec, "time_scale"), gt=0),
        arrival_speedup=_num(ctx, tbl, where, "arrival_speedup", _d(AlibabaSpec, "arrival_speedup"), ge=1),
    )


_GROUPS_EXPECTED = "one or more [[cluster.nodes]] groups (or a [workload.alibaba] section)"


def _cluster(ctx: _Ctx, raw: object, ali: AlibabaSpec | None, seed: int, default_name: str) -> ClusterSpec:
    tbl = _table(ctx, raw, "cluster")
    _check_keys(ctx, tbl, "cluster", _CLUSTER_KEYS)
    name = _str(ctx, tbl, "cluster", "name", default_name)
    if ali is not None:
        # Node groups beside a trace add nodes the trace lacks (e.g. CPU-only nodes) after the
        # sampled ones.
        trace = _alibaba_cluster(ctx, ali, seed, name)
        if "nodes" not in tbl:
            return trace
        extra = _groups(ctx, tbl["nodes"], {n.name for n in trace.nodes})
        return replace(trace, nodes=trace.nodes + tuple(extra))
    if "nodes" not in tbl:
        raise ctx.error("cluster.nodes", _GROUPS_EXPECTED)
    return ClusterSpec(nodes=tuple(_groups(ctx, tbl["nodes"], set())), name=name)


def _groups(ctx: _Ctx, groups: object, taken: set[str]) -> list[NodeSpec]:
    """The nodes of the ``[[cluster.nodes]]`` groups, names unique among themselves and ``taken``."""
    if not isinstance(groups, list) or not groups or not all(isinstance(g, dict) for g in groups):
        raise ctx.error("cluster.nodes", _GROUPS_EXPECTED, groups)
    nodes: list[NodeSpec] = []
    seen = set(taken)
    for i, g in enumerate(groups):
        if (
            len(nodes) + len(taken) + _int(ctx, g, f"cluster.nodes[{i}]", "count", 1, ge=1, le=MAX_NODES)
            > MAX_NODES
        ):
            raise ctx.error(
                f"cluster.nodes[{i}].count", f"at most {MAX_NODES:,} nodes in all", g.get("count", 1)
            )
        for node in _group(ctx, g, f"cluster.nodes[{i}]"):
            if node.name in seen:
                raise ctx.error(f"cluster.nodes[{i}].name", "node names unique across groups", node.name)
            seen.add(node.name)
            nodes.append(node)
    return nodes


def _alibaba_cluster(ctx: _Ctx, ali: AlibabaSpec, seed: int, name: str) -> ClusterSpec:
    try:
        cluster = traces.alibaba_cluster(ali, seed)
    except InputError as e:
        raise ctx.error(
            "workload.alibaba.nodes", "a node count the node list can supply", hint=str(e)
        ) from None
    return replace(cluster, name=name)


def _group(ctx: _Ctx, g: dict[str, Any], where: str) -> list[NodeSpec]:
    """The nodes of one ``[[cluster.nodes]]`` group."""
    _check_keys(ctx, g, where, _GROUP_KEYS)
    name = _str(ctx, g, where, "name")
    if not _NODE_NAME.fullmatch(name):
        raise ctx.error(f"{where}.name", "a name of letters, digits, '_', '.' or '-'", name)
    count = _int(ctx, g, where, "count", 1, ge=1, le=MAX_NODES)
    join = _num(ctx, g, where, "join_s", _d(NodeSpec, "join_s"), ge=0)
    leave = _num(ctx, g, where, "leave_s", None, gt=0)
    if leave is not None and leave <= join:
        raise ctx.error(f"{where}.leave_s", f"a time after join_s ({join:g} s)", leave)
    template = NodeSpec(
        name=name,
        cpu_cores=_int(ctx, g, where, "cpu_cores", ge=1, le=MAX_CPU_CORES),
        host_mem_gib=_num(ctx, g, where, "host_mem_gib", gt=0),
        gpus=_gpus(ctx, g, where),
        streams_per_gpu=_int(
            ctx,
            g,
            where,
            "streams_per_gpu",
            _d(NodeSpec, "streams_per_gpu"),
            ge=1,
            le=MAX_STREAMS_PER_GPU,
        ),
        net_gbps=_num(ctx, g, where, "net_gbps", _d(NodeSpec, "net_gbps"), gt=0),
        cpu_core_gflops=_num(ctx, g, where, "cpu_core_gflops", _d(NodeSpec, "cpu_core_gflops"), gt=0),
        join_s=join,
        leave_s=leave,
    )
    return [replace(template, name=f"{name}-{i}") for i in range(count)]


def _gpus(ctx: _Ctx, g: dict[str, Any], where: str) -> tuple[GpuModel, ...]:
    if "gpus" in g:
        if "gpu_model" in g or "gpu_count" in g:
            raise ctx.error(f"{where}.gpus", "either gpus or gpu_model/gpu_count, not both", g["gpus"])
        names = _str_list(ctx, g, where, "gpus")
        if len(names) > MAX_GPUS_PER_NODE:
            raise ctx.error(f"{where}.gpus", f"at most {MAX_GPUS_PER_NODE} GPUs per node", len(names))
        return tuple(_model(ctx, f"{where}.gpus[{j}]", m) for j, m in enumerate(names))
    if "gpu_model" in g:
        model = _model(ctx, f"{where}.gpu_model", _str(ctx, g, where, "gpu_model"))
        return (model,) * _int(ctx, g, where, "gpu_count", 1, ge=1, le=MAX_GPUS_PER_NODE)
    if "gpu_count" in g:
        raise ctx.error(f"{where}.gpu_model", "a GPU model alongside gpu_count")
    return ()


def _model(ctx: _Ctx, field: str, name: str) -> GpuModel:
    try:
        return gpu_model(name)
    except KeyError:
        known = ", ".join([*CATALOG, *ALIASES])
        raise ctx.error(field, f"a GPU model name from the catalog ({known})", name) from None


def _drift(ctx: _Ctx, raw: object) -> DriftSpec:
    where = "dynamics.drift"
    tbl = _table(ctx, raw, where)
    _check_keys(ctx, tbl, where, _DRIFT_KEYS)
    d = DriftSpec()
    # Speeds start at factor 1, so the band must contain 1.
    return DriftSpec(
        sigma=_num(ctx, tbl, where, "sigma", d.sigma, ge=0),
        interval_s=_num(ctx, tbl, where, "interval_s", d.interval_s, gt=0),
        min_factor=_num(ctx, tbl, where, "min_factor", d.min_factor, gt=0, le=1),
        max_factor=_num(ctx, tbl, where, "max_factor", d.max_factor, ge=1),
    )


def _events(ctx: _Ctx, raw: object, cluster: ClusterSpec) -> ClusterSpec:
    """Apply ``[[dynamics.events]]`` as node join/leave times."""
    if raw is None:
        return _check_initial(ctx, cluster, "cluster.nodes")
    if not isinstance(raw, list) or not all(isinstance(e, dict) for e in raw):
        raise ctx.error("dynamics.events", "an array of tables ([[dynamics.events]])", raw)
    names = [n.name for n in cluster.nodes]
    times: dict[str, dict[str, tuple[float, str]]] = {"join": {}, "leave": {}}
    for i, ev in enumerate(raw):
        where = f"dynamics.events[{i}]"
        _check_keys(ctx, ev, where, _EVENT_KEYS)
        at = _num(ctx, ev, where, "at_s", ge=0)
        for what in ("join", "leave"):
            for j, node in enumerate(_str_list(ctx, ev, where, what, [])):
                field = f"{where}.{what}[{j}]"
                if node not in names:
                    raise ctx.error(field, f"a node name of the cluster ({_few(names)})", node)
                if node in times[what]:
                    raise ctx.error(field, f"each node to {what} at most once", node)
                times[what][node] = (at, field)
    nodes = tuple(_churn(ctx, n, times) for n in cluster.nodes)
    return _check_initial(ctx, replace(cluster, nodes=nodes), "dynamics.events")


def _churn(ctx: _Ctx, node: NodeSpec, times: dict[str, dict[str, tuple[float, str]]]) -> NodeSpec:
    join, join_field = times["join"].get(node.name, (node.join_s, ""))
    leave, leave_field = times["leave"].get(node.name, (node.leave_s, ""))
    if leave is not None and leave <= join:
        field = leave_field or join_field
        raise ctx.error(field, f"node {node.name!r} to leave after it joins (joins at {join:g} s)", leave)
    return replace(node, join_s=join, leave_s=leave)


def _check_initial(ctx: _Ctx, cluster: ClusterSpec, field: str) -> ClusterSpec:
    if not any(n.join_s == 0 for n in cluster.nodes):
        raise ctx.error(field, "at least one node present from time 0")
    return cluster


def _interference(ctx: _Ctx, raw: object, cluster: ClusterSpec) -> tuple[InterferenceSpec, list[str]]:
    """The interference source and, with model csv, the kinds the co-location CSV measures."""
    where = "interference"
    tbl = _table(ctx, raw, where)
    _check_keys(ctx, tbl, where, _INTERFERENCE_KEYS)
    model = _str(ctx, tbl, where, "model", "contention")
    if model not in ("contention", "csv"):
        raise ctx.error(f"{where}.model", '"contention" or "csv"', model)
    if model == "contention":
        for key in ("colocation_csv", "solo_csv"):
            if key in tbl:
                raise ctx.error(
                    f"{where}.{key}", 'no CSV with model = "contention" (set model = "csv")', tbl[key]
                )
        return InterferenceSpec(model="contention"), []
    field = f"{where}.colocation_csv"
    colo = _data_file(ctx, field, _str(ctx, tbl, where, "colocation_csv"))
    devices, kinds = _read_colocation(ctx, field, colo)
    _check_coverage(ctx, field, colo, devices, cluster)
    solo = None
    if "solo_csv" in tbl:
        field = f"{where}.solo_csv"
        solo = _data_file(ctx, field, _str(ctx, tbl, where, "solo_csv"))
        measured = _read_solo(ctx, field, solo)
        _check_coverage(ctx, field, solo, measured, cluster)
        for device in sorted(devices):
            missing = [k for k in kinds if k not in measured.get(device, set())]
            if missing:
                raise ctx.error(
                    field, f"a solo speed for every co-located kind on {device} in {solo}", missing[0]
                )
    return InterferenceSpec(model="csv", colocation_csv=colo, solo_csv=solo), kinds


def _workload(
    ctx: _Ctx,
    wl: dict[str, Any],
    ali: AlibabaSpec | None,
    interference: InterferenceSpec,
    colo_kinds: list[str],
    rate: float | None,
) -> WorkloadSpec:
    tasks = _int(ctx, wl, "workload", "tasks", _d(WorkloadSpec, "tasks"), ge=1, le=MAX_TASKS)
    if ali is not None:
        for key in ("apps", "input_mb", "deadline_s", "tenants", "arrival", "classes"):
            if key in wl:
                expected = (
                    "nothing here with [workload.alibaba]: the trace gives apps, sizes, tenants and arrivals"
                )
                raise ctx.error(f"workload.{key}", expected, wl[key])
        if rate is not None:
            raise ctx.error(
                "--rate", "a scenario with generated arrivals ([workload.alibaba] replays the trace)", rate
            )
        arrival = ArrivalSpec(process="trace", trace_path=ali.pod_csv, time_scale=ali.time_scale)
        return WorkloadSpec(tasks=tasks, apps={}, arrival=arrival, alibaba=ali)
    deadline = _num(ctx, wl, "workload", "deadline_s", None, gt=0)
    classes = _classes(ctx, wl)
    if classes and deadline is not None:
        raise ctx.error(
            "workload.deadline_s",
            "no workload deadline with [[workload.classes]] (give each class its own)",
            deadline,
        )
    return WorkloadSpec(
        tasks=tasks,
        apps=_apps(ctx, wl, interference, colo_kinds),
        arrival=_arrival(ctx, wl.get("arrival"), rate),
        input_mb=_input_mb(ctx, wl),
        deadline_s=deadline,
        tenants=_tenants(ctx, wl),
        classes=classes,
    )


def _classes(ctx: _Ctx, wl: dict[str, Any]) -> tuple[TaskClass, ...]:
    raw = wl.get("classes")
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw or len(raw) > MAX_CLASSES:
        raise ctx.error("workload.classes", f"1 to {MAX_CLASSES} [[workload.classes]] tables", raw)
    out: list[TaskClass] = []
    for i, item in enumerate(raw):
        where = f"workload.classes[{i}]"
        tbl = _table(ctx, item, where)
        _check_keys(ctx, tbl, where, _CLASS_KEYS)
        name = _str(ctx, tbl, where, "name")
        if not name or name in {c.name for c in out}:
            raise ctx.error(f"{where}.name", "a non-empty name no other class has", name)
        out.append(
            TaskClass(
                name=name,
                share=_num(ctx, tbl, where, "share", gt=0, le=1e6),
                priority=_int(ctx, tbl, where, "priority", _d(TaskClass, "priority"), ge=-1000, le=1000),
                deadline_s=_num(ctx, tbl, where, "deadline_s", None, gt=0),
            )
        )
    return tuple(out)


def _known_apps() -> set[str]:
    # Imported here: workloads builds on much of rlsched, and scenario files are read before any
    # workload is generated.
    from rlsched.workloads import APPS

    return set(APPS)


def _apps(
    ctx: _Ctx, wl: dict[str, Any], interference: InterferenceSpec, kinds: list[str]
) -> dict[str, float]:
    expected = 'a table of app = share, or "colocation"'
    raw = _get(ctx, wl, "workload", "apps", _REQUIRED, expected)
    if isinstance(raw, str):
        if raw != "colocation":
            raise ctx.error("workload.apps", expected, raw)
        if interference.model != "csv":
            raise ctx.error("workload.apps", 'interference.model = "csv" with apps = "colocation"', raw)
        colo = {f"{COLO_PREFIX}{k}": 1.0 for k in kinds}
        for app in colo:
            _check_colo_app(ctx, "workload.apps", app, interference, kinds)
        return colo
    if not isinstance(raw, dict) or not raw:
        raise ctx.error("workload.apps", expected, raw)
    known: set[str] | None = None
    apps: dict[str, float] = {}
    for app in raw:
        field = f"workload.apps.{app}"
        if app.startswith(COLO_PREFIX):
            _check_colo_app(ctx, field, app, interference, kinds)
        else:
            known = _known_apps() if known is None else known
            if app not in known:
                raise ctx.error(field, f"a known app ({', '.join(sorted(known))}, or colo:<kind>)", app)
        apps[app] = _num(ctx, raw, "workload.apps", app, ge=0)
    if sum(apps.values()) <= 0:
        raise ctx.error("workload.apps", "shares >= 0 with a positive sum", raw)
    return apps


def _check_colo_app(
    ctx: _Ctx, field: str, app: str, interference: InterferenceSpec, kinds: list[str]
) -> None:
    if interference.model != "csv":
        raise ctx.error(field, f'interference.model = "csv" for {COLO_PREFIX}<kind> apps', app)
    if app[len(COLO_PREFIX) :] not in kinds:
        expected = f"{COLO_PREFIX}<kind> with a kind of {interference.colocation_csv} ({_few(kinds)})"
        raise ctx.error(field, expected, app)
    from rlsched.workloads import is_known_app  # lazy, as in _known_apps

    if not is_known_app(app):
        # A measured kind may not reuse the name of a built-in kind (workloads.colo_kind).
        raise ctx.error(field, "a co-location kind whose name is not a built-in subtask kind", app)


def _input_mb(ctx: _Ctx, wl: dict[str, Any]) -> tuple[float, float] | None:
    v = wl.get("input_mb")
    if v is None:
        return None
    ok = isinstance(v, list) and len(v) == 2 and all(_is_num(x) for x in v) and 0 < v[0] <= v[1]
    if not ok:
        raise ctx.error("workload.input_mb", "[low, high] with 0 < low <= high (MB)", v)
    return float(v[0]), float(v[1])


def _tenants(ctx: _Ctx, wl: dict[str, Any]) -> tuple[str, ...]:
    tenants = _str_list(ctx, wl, "workload", "tenants", ["default"])
    if not tenants or len(set(tenants)) != len(tenants):
        raise ctx.error("workload.tenants", "a non-empty list of distinct names", tenants)
    return tuple(tenants)


def _arrival(ctx: _Ctx, raw: object, rate: float | None) -> ArrivalSpec:
    where = "workload.arrival"
    tbl = _table(ctx, raw, where)
    process = _str(ctx, tbl, where, "process", "poisson")
    if process not in _ARRIVAL_KEYS:
        raise ctx.error(f"{where}.process", ", ".join(f'"{p}"' for p in _ARRIVAL_KEYS), process)
    _check_keys(ctx, tbl, where, _ARRIVAL_KEYS[process], f" of process {process!r}")
    d = ArrivalSpec()
    if process == "poisson":
        r = _num(ctx, tbl, where, "rate_per_min", d.rate_per_min, gt=0, le=MAX_RATE_PER_MIN)
        _check_override(ctx, rate, r)
        return ArrivalSpec(process="poisson", rate_per_min=rate if rate is not None else r)
    if process == "bursty":
        return _bursty(ctx, tbl, where, rate)
    if rate is not None:
        raise ctx.error("--rate", "a scenario with generated arrivals (process trace replays its file)", rate)
    field = f"{where}.trace_path"
    trace = _data_file(ctx, field, _str(ctx, tbl, where, "trace_path"))
    try:
        trace_time_column(trace)
    except InputError as e:  # not UTF-8, or no arrival column: the reader names its file
        raise ctx.error(field, "a UTF-8 CSV with a column arrival_s or creation_time", hint=str(e)) from None
    ts = _num(ctx, tbl, where, "time_scale", _d(ArrivalSpec, "time_scale"), gt=0)
    return ArrivalSpec(process="trace", trace_path=trace, time_scale=ts)


def _bursty(ctx: _Ctx, tbl: dict[str, Any], where: str, rate: float | None) -> ArrivalSpec:
    """Two-rate MMPP; ``rate_per_min`` is set to its long-run mean."""
    d = ArrivalSpec()
    high = _num(ctx, tbl, where, "high_rate_per_min", d.high_rate_per_min, ge=0, le=MAX_RATE_PER_MIN)
    low = _num(ctx, tbl, where, "low_rate_per_min", d.low_rate_per_min, ge=0, le=MAX_RATE_PER_MIN)
    mean_high = _num(ctx, tbl, where, "mean_high_s", d.mean_high_s, gt=0)
    mean_low = _num(ctx, tbl, where, "mean_low_s", d.mean_low_s, gt=0)
    if high < low or high <= 0:
        raise ctx.error(f"{where}.high_rate_per_min", f"a rate > 0 and >= low_rate_per_min ({low:g})", high)
    mean = (high * mean_high + low * mean_low) / (mean_high + mean_low)
    _check_override(ctx, rate, mean)
    if rate is not None:
        # Keep the burst shape, move the long-run mean.
        high, low, mean = high * rate / mean, low * rate / mean, rate
    return ArrivalSpec(
        process="bursty",
        rate_per_min=mean,
        high_rate_per_min=high,
        low_rate_per_min=low,
        mean_high_s=mean_high,
        mean_low_s=mean_low,
    )

"""The ``[workload]`` section of a scenario file: task count, apps, sizes, deadlines, tenants, task
classes, the arrival process — or an Alibaba trace (``[workload.alibaba]``) that supplies them —
and the checks of ``--rate`` / ``trace_dir`` overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlsched.config_reader import REQUIRED, ConfigReader, is_number
from rlsched.defaults import default as _d
from rlsched.errors import InputError, few
from rlsched.scenarios import traces
from rlsched.scenarios.arrivals import trace_time_column
from rlsched.scenarios.data_paths import DEFAULT_NODE_CSV, DEFAULT_POD_CSV, data_file
from rlsched.scenarios.limits import (
    MAX_CLASSES,
    MAX_NODES,
    MAX_RATE_PER_MIN,
    MAX_TASKS,
    RATE_FACTOR,
    RATE_RANGE,
)
from rlsched.scenarios.spec import AlibabaSpec, ArrivalSpec, InterferenceSpec, TaskClass, WorkloadSpec

#: Apps named ``colo:<kind>`` run one kind of a co-location CSV.
COLO_PREFIX = "colo:"
_WORKLOAD_KEYS = ("tasks", "apps", "input_mb", "deadline_s", "tenants", "arrival", "alibaba", "classes")
_CLASS_KEYS = ("name", "share", "priority", "deadline_s")
_ALIBABA_KEYS = ("node_csv", "pod_csv", "nodes", "time_scale", "arrival_speedup")
_ARRIVAL_KEYS = {
    "poisson": ("process", "rate_per_min"),
    "bursty": ("process", "high_rate_per_min", "low_rate_per_min", "mean_high_s", "mean_low_s"),
    "trace": ("process", "trace_path", "time_scale"),
}


def workload_table(r: ConfigReader, raw: object) -> dict[str, Any]:
    """The ``[workload]`` table, its keys checked (read before the cluster: a trace supplies nodes).

    :param r: the scenario's reader.
    :param raw: the ``workload`` value (``None`` when absent).
    """
    wl = r.table(raw, "workload")
    r.keys(wl, "workload", _WORKLOAD_KEYS)
    return wl


def check_rate(r: ConfigReader, name: str, rate: float | None) -> None:
    """``--rate`` on ``paper``: the paper's range; elsewhere: above 0 (the bound of the scenario's
    own rate is checked with its arrivals).

    :param r: the scenario's reader.
    :param name: the scenario's name.
    :param rate: the override, or ``None``.
    """
    if rate is None:
        return
    lo, hi = RATE_RANGE
    if name == "paper" and not (is_number(rate) and lo <= rate <= hi):
        raise r.error(
            "--rate/@RATE", f"an arrival rate from {lo:g} to {hi:g} tasks/min (the paper's range)", rate
        )
    if not (is_number(rate) and rate > 0):
        raise r.error("--rate/@RATE", "an arrival rate > 0 tasks/min", rate)


def _check_override(r: ConfigReader, rate: float | None, own: float) -> None:
    """``--rate`` elsewhere: up to :data:`RATE_FACTOR` times the scenario's own long-run rate (and
    :data:`MAX_RATE_PER_MIN`) — a load the scenario's cluster and task count were sized for."""
    hi = min(RATE_FACTOR * own, MAX_RATE_PER_MIN)
    if rate is not None and not rate <= hi:
        raise r.error(
            "--rate/@RATE",
            f"an arrival rate up to {hi:g} tasks/min ({RATE_FACTOR:g}x the scenario's own {own:g})",
            rate,
        )


def read_alibaba(
    r: ConfigReader, wl: dict[str, Any], trace_dir: str | None, folder: Path
) -> AlibabaSpec | None:
    """The ``[workload.alibaba]`` section, its trace files checked; ``None`` when absent.

    :param r: the scenario's reader.
    :param wl: the ``[workload]`` table.
    :param trace_dir: ``trace_dir`` (of :func:`~rlsched.scenarios.loader.load_scenario`): replaces the
        folder of both trace files.
    :param folder: where relative paths start (the scenario file's folder).
    """
    if "alibaba" not in wl:
        if trace_dir is not None:
            raise r.error("trace_dir", "a scenario with [workload.alibaba]", trace_dir)
        return None
    where = "workload.alibaba"
    tbl = r.table(wl["alibaba"], where)
    r.keys(tbl, where, _ALIBABA_KEYS)
    files = {}
    for key, fallback in (("node_csv", DEFAULT_NODE_CSV), ("pod_csv", DEFAULT_POD_CSV)):
        raw = r.string(tbl, where, key, fallback)
        if trace_dir is not None:
            # trace_dir is the caller's path: relative to the current directory, not the file.
            raw = str(Path(trace_dir).expanduser().resolve() / Path(raw).name)
        files[key] = data_file(r, f"{where}.{key}", raw, folder)
    for key, check in (("node_csv", traces.check_node_csv), ("pod_csv", traces.check_pod_csv)):
        try:
            check(files[key])
        except InputError as e:  # the trace reader's own refusal, naming its file and line
            raise r.error(
                f"{where}.{key}", "an Alibaba trace file with the documented columns", hint=str(e)
            ) from None
    return AlibabaSpec(
        node_csv=files["node_csv"],
        pod_csv=files["pod_csv"],
        nodes=r.integer(tbl, where, "nodes", _d(AlibabaSpec, "nodes"), ge=0, le=MAX_NODES),
        time_scale=r.number(tbl, where, "time_scale", _d(AlibabaSpec, "time_scale"), gt=0),
        arrival_speedup=r.number(tbl, where, "arrival_speedup", _d(AlibabaSpec, "arrival_speedup"), ge=1),
    )


def read_workload(
    r: ConfigReader,
    wl: dict[str, Any],
    ali: AlibabaSpec | None,
    interference: InterferenceSpec,
    colo_kinds: list[str],
    rate: float | None,
    folder: Path,
) -> WorkloadSpec:
    """The ``[workload]`` section.

    :param r: the scenario's reader.
    :param wl: the ``[workload]`` table (its keys checked).
    :param ali: its ``[workload.alibaba]`` section (:func:`read_alibaba`), if any.
    :param interference: the scenario's interference source (``colo:`` apps need model csv).
    :param colo_kinds: the kinds its co-location CSV measures.
    :param rate: ``--rate``, or ``None``.
    :param folder: where relative paths start (the scenario file's folder).
    """
    tasks = r.integer(wl, "workload", "tasks", _d(WorkloadSpec, "tasks"), ge=1, le=MAX_TASKS)
    if ali is not None:
        for key in ("apps", "input_mb", "deadline_s", "tenants", "arrival", "classes"):
            if key in wl:
                expected = (
                    "nothing here with [workload.alibaba]: the trace gives apps, sizes, tenants and arrivals"
                )
                raise r.error(f"workload.{key}", expected, wl[key])
        if rate is not None:
            raise r.error(
                "--rate/@RATE",
                "a scenario with generated arrivals ([workload.alibaba] replays the trace)",
                rate,
            )
        arrival = ArrivalSpec(process="trace", trace_path=ali.pod_csv, time_scale=ali.time_scale)
        return WorkloadSpec(tasks=tasks, apps={}, arrival=arrival, alibaba=ali)
    deadline = r.number(wl, "workload", "deadline_s", None, gt=0)
    classes = _classes(r, wl)
    if classes and deadline is not None:
        raise r.error(
            "workload.deadline_s",
            "no workload deadline with [[workload.classes]] (give each class its own)",
            deadline,
        )
    return WorkloadSpec(
        tasks=tasks,
        apps=_apps(r, wl, interference, colo_kinds),
        arrival=_arrival(r, wl.get("arrival"), rate, folder),
        input_mb=_input_mb(r, wl),
        deadline_s=deadline,
        tenants=_tenants(r, wl),
        classes=classes,
    )


def _classes(r: ConfigReader, wl: dict[str, Any]) -> tuple[TaskClass, ...]:
    raw = wl.get("classes")
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw or len(raw) > MAX_CLASSES:
        raise r.error("workload.classes", f"1 to {MAX_CLASSES} [[workload.classes]] tables", raw)
    out: list[TaskClass] = []
    for i, item in enumerate(raw):
        where = f"workload.classes[{i}]"
        tbl = r.table(item, where)
        r.keys(tbl, where, _CLASS_KEYS)
        name = r.string(tbl, where, "name")
        if not name or name in {c.name for c in out}:
            raise r.error(f"{where}.name", "a non-empty name no other class has", name)
        out.append(
            TaskClass(
                name=name,
                share=r.number(tbl, where, "share", gt=0, le=1e6),
                priority=r.integer(tbl, where, "priority", _d(TaskClass, "priority"), ge=-1000, le=1000),
                deadline_s=r.number(tbl, where, "deadline_s", None, gt=0),
            )
        )
    return tuple(out)


def _known_apps() -> set[str]:
    # Imported here: workloads builds on much of rlsched, and scenario files are read before any
    # workload is generated.
    from rlsched.workloads import APPS

    return set(APPS)


def _apps(
    r: ConfigReader, wl: dict[str, Any], interference: InterferenceSpec, kinds: list[str]
) -> dict[str, float]:
    expected = 'a table of app = share, or "colocation"'
    raw = r.get(wl, "workload", "apps", REQUIRED, expected)
    if isinstance(raw, str):
        if raw != "colocation":
            raise r.error("workload.apps", expected, raw)
        if interference.model != "csv":
            raise r.error("workload.apps", 'interference.model = "csv" with apps = "colocation"', raw)
        colo = {f"{COLO_PREFIX}{k}": 1.0 for k in kinds}
        for app in colo:
            _check_colo_app(r, "workload.apps", app, interference, kinds)
        return colo
    if not isinstance(raw, dict) or not raw:
        raise r.error("workload.apps", expected, raw)
    known: set[str] | None = None
    apps: dict[str, float] = {}
    for app in raw:
        field = f"workload.apps.{app}"
        if app.startswith(COLO_PREFIX):
            _check_colo_app(r, field, app, interference, kinds)
        else:
            known = _known_apps() if known is None else known
            if app not in known:
                raise r.error(field, f"a known app ({', '.join(sorted(known))}, or colo:<kind>)", app)
        apps[app] = r.number(raw, "workload.apps", app, ge=0)
    if sum(apps.values()) <= 0:
        raise r.error("workload.apps", "shares >= 0 with a positive sum", raw)
    return apps


def _check_colo_app(
    r: ConfigReader, field: str, app: str, interference: InterferenceSpec, kinds: list[str]
) -> None:
    if interference.model != "csv":
        raise r.error(field, f'interference.model = "csv" for {COLO_PREFIX}<kind> apps', app)
    if app[len(COLO_PREFIX) :] not in kinds:
        expected = f"{COLO_PREFIX}<kind> with a kind of {interference.colocation_csv} ({few(kinds)})"
        raise r.error(field, expected, app)
    from rlsched.workloads import is_known_app  # lazy, as in _known_apps

    if not is_known_app(app):
        # A measured kind may not reuse the name of a built-in kind (workloads.colo_kind).
        raise r.error(field, "a co-location kind whose name is not a built-in subtask kind", app)


def _input_mb(r: ConfigReader, wl: dict[str, Any]) -> tuple[float, float] | None:
    v = wl.get("input_mb")
    if v is None:
        return None
    ok = isinstance(v, list) and len(v) == 2 and all(is_number(x) for x in v) and 0 < v[0] <= v[1]
    if not ok:
        raise r.error("workload.input_mb", "[low, high] with 0 < low <= high (MB)", v)
    return float(v[0]), float(v[1])


def _tenants(r: ConfigReader, wl: dict[str, Any]) -> tuple[str, ...]:
    tenants = r.strings(wl, "workload", "tenants", ["default"])
    if not tenants or len(set(tenants)) != len(tenants):
        raise r.error("workload.tenants", "a non-empty list of distinct names", tenants)
    return tuple(tenants)


def _arrival(r: ConfigReader, raw: object, rate: float | None, folder: Path) -> ArrivalSpec:
    where = "workload.arrival"
    tbl = r.table(raw, where)
    process = r.string(tbl, where, "process", "poisson")
    if process not in _ARRIVAL_KEYS:
        raise r.error(f"{where}.process", ", ".join(f'"{p}"' for p in _ARRIVAL_KEYS), process)
    r.keys(tbl, where, _ARRIVAL_KEYS[process], f" of process {process!r}")
    d = ArrivalSpec()
    if process == "poisson":
        own = r.number(tbl, where, "rate_per_min", d.rate_per_min, gt=0, le=MAX_RATE_PER_MIN)
        _check_override(r, rate, own)
        return ArrivalSpec(process="poisson", rate_per_min=rate if rate is not None else own)
    if process == "bursty":
        return _bursty(r, tbl, where, rate)
    if rate is not None:
        raise r.error(
            "--rate/@RATE", "a scenario with generated arrivals (process trace replays its file)", rate
        )
    field = f"{where}.trace_path"
    trace = data_file(r, field, r.string(tbl, where, "trace_path"), folder)
    try:
        trace_time_column(trace)
    except InputError as e:  # not UTF-8, or no arrival column: the reader names its file
        raise r.error(field, "a UTF-8 CSV with a column arrival_s or creation_time", hint=str(e)) from None
    ts = r.number(tbl, where, "time_scale", _d(ArrivalSpec, "time_scale"), gt=0)
    return ArrivalSpec(process="trace", trace_path=trace, time_scale=ts)


def _bursty(r: ConfigReader, tbl: dict[str, Any], where: str, rate: float | None) -> ArrivalSpec:
    """Two-rate MMPP; ``rate_per_min`` is set to its long-run mean."""
    d = ArrivalSpec()
    high = r.number(tbl, where, "high_rate_per_min", d.high_rate_per_min, ge=0, le=MAX_RATE_PER_MIN)
    low = r.number(tbl, where, "low_rate_per_min", d.low_rate_per_min, ge=0, le=MAX_RATE_PER_MIN)
    mean_high = r.number(tbl, where, "mean_high_s", d.mean_high_s, gt=0)
    mean_low = r.number(tbl, where, "mean_low_s", d.mean_low_s, gt=0)
    if high < low or high <= 0:
        raise r.error(f"{where}.high_rate_per_min", f"a rate > 0 and >= low_rate_per_min ({low:g})", high)
    mean = (high * mean_high + low * mean_low) / (mean_high + mean_low)
    _check_override(r, rate, mean)
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

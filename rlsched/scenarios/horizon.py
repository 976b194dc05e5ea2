"""The time a scenario's arrivals span, bounded when the scenario is read: each value may be
valid on its own (a rate > 0, an interval > 0) and together ask for a run that never ends (10^12
drift steps) or times beyond float64's resolution. Checked after the whole file is read, so the
message names the field that sets the span — or ``--rate/@RATE`` where an override set it — and
says what value would do."""

from __future__ import annotations

from rlsched.config_reader import ConfigReader
from rlsched.errors import InputError
from rlsched.scenarios.arrivals import mean_rate_per_min, read_trace_times
from rlsched.scenarios.limits import MAX_HORIZON_S, MAX_TIME_STEPS
from rlsched.scenarios.spec import DriftSpec, WorkloadSpec


def arrival_span_s(wl: WorkloadSpec) -> float:
    """Seconds the workload's tasks take to arrive: expected for Poisson and bursty arrivals, the
    trace's own for trace replay (the first ``tasks`` rows)."""
    a = wl.arrival
    if a.process == "trace" and a.trace_path:
        t = read_trace_times(a.trace_path, a.time_scale)
        return float(t[min(wl.tasks, t.size) - 1])
    return 60.0 * wl.tasks / mean_rate_per_min(a)


def _check_trace(r: ConfigReader, wl: WorkloadSpec) -> None:
    """A replayed trace's rows, read now: a problem in one is reported against the scenario field
    that names the file (as a co-location CSV's are), and a trace shorter than ``tasks``."""
    a = wl.arrival
    if a.process != "trace" or not a.trace_path:
        return
    field = "workload.alibaba.pod_csv" if wl.alibaba else "workload.arrival.trace_path"
    try:
        t = read_trace_times(a.trace_path, a.time_scale)
    except InputError as e:
        where = e.source if e.field == "<file>" else f"{e.source} {e.field}"
        raise r.error(field, f"{e.expected} at {where}", e.got) from None
    if wl.alibaba is None and t.size < wl.tasks:  # a pod list replays a window of at most its own
        raise r.error(field, f"a trace of at least the {wl.tasks} arrivals of workload.tasks", t.size)


def _limits(wl: WorkloadSpec, drift: DriftSpec) -> list[tuple[str, float, float, str, str]]:
    """``(field, its value, the longest span it allows, the bound, its setting)`` of each limit."""
    a = wl.arrival
    out = [("", 0.0, MAX_HORIZON_S, f"{MAX_HORIZON_S:,.0f} s", "")]
    if drift.sigma > 0:
        steps = f"{MAX_TIME_STEPS:,} drift steps"
        longest = MAX_TIME_STEPS * drift.interval_s
        out.append(
            (
                "dynamics.drift.interval_s",
                drift.interval_s,
                longest,
                steps,
                f"interval_s = {drift.interval_s:g}",
            )
        )
    if a.process == "bursty":
        key, shortest = min(
            (("mean_high_s", a.mean_high_s), ("mean_low_s", a.mean_low_s)), key=lambda kv: kv[1]
        )
        bursts = f"{MAX_TIME_STEPS:,} bursts and lulls"
        out.append(
            (f"workload.arrival.{key}", shortest, MAX_TIME_STEPS * shortest, bursts, f"{key} = {shortest:g}")
        )
    return out


def check_horizon(r: ConfigReader, wl: WorkloadSpec, drift: DriftSpec, rate_overridden: bool) -> None:
    """Refuse arrivals that span more than :data:`MAX_HORIZON_S`, and drift steps or burst
    sojourns so short that the span holds more than :data:`MAX_TIME_STEPS` of them.

    :param r: the scenario's reader (the error names its file and the field's line).
    :param wl: the workload as it will run (``#TASKS`` applied).
    :param drift: the drift as read.
    :param rate_overridden: ``--rate``/``@RATE`` set the rate: the error names it, not the file.
    :raises ConfigError: naming the field at fault.
    """
    _check_trace(r, wl)
    span = arrival_span_s(wl)
    a = wl.arrival
    for field, value, longest, bound, setting in _limits(wl, drift):
        if span <= longest:
            continue
        if a.process == "trace" and not field:
            field = "workload.alibaba.time_scale" if wl.alibaba else "workload.arrival.time_scale"
            most = a.time_scale * longest / span
            expected = f"a time scale at which the {wl.tasks} tasks arrive within {bound}: <= {most:.3g}"
            raise r.error(field, expected, a.time_scale)
        if rate_overridden or not field:
            least = 60.0 * wl.tasks / longest
            name = "--rate/@RATE" if rate_overridden else _rate_field(a.process)
            within = f"the {wl.tasks} tasks arrive within {bound}" + (f" ({setting})" if setting else "")
            raise r.error(name, f"a rate at which {within}: >= {least:.3g} tasks/min", a.rate_per_min)
        what = "an interval" if field.endswith("interval_s") else "a mean sojourn"
        over = f"at most {bound} over the ~{span:.3g} s the tasks arrive in"
        raise r.error(field, f"{what} >= {span / MAX_TIME_STEPS:.3g} s ({over})", value)


def _rate_field(process: str) -> str:
    return "workload.arrival.rate_per_min" if process == "poisson" else "workload.arrival.low_rate_per_min"

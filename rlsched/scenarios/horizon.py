"""The time a scenario's arrivals span, bounded when the scenario is read: each value may be
valid on its own (a rate > 0, an interval > 0) and together ask for a run that never ends (10^12
drift steps) or times beyond float64's resolution. Checked after the whole file is read, so the
message names the field that sets the span and says what value would do."""

from __future__ import annotations

from rlsched.config_reader import ConfigReader
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


def check_horizon(r: ConfigReader, wl: WorkloadSpec, drift: DriftSpec, rate_overridden: bool) -> None:
    """Refuse arrivals that span more than :data:`MAX_HORIZON_S`, and drift steps or burst
    sojourns so short that the span holds more than :data:`MAX_TIME_STEPS` of them.

    :param r: the scenario's reader (the error names its file and the field's line).
    :param wl: the workload as read.
    :param drift: the drift as read.
    :param rate_overridden: ``--rate``/``@RATE`` set the rate (the error names it, not the file).
    :raises ConfigError: naming the field at fault.
    """
    span = arrival_span_s(wl)
    a = wl.arrival
    if span > MAX_HORIZON_S:
        n = wl.tasks
        if a.process == "trace":
            field = "workload.alibaba.time_scale" if wl.alibaba else "workload.arrival.time_scale"
            most = a.time_scale * MAX_HORIZON_S / span
            expected = (
                f"a time scale at which the {n} arrivals span at most {MAX_HORIZON_S:,.0f} s (<= {most:.3g})"
            )
            raise r.error(field, expected, a.time_scale)
        least = 60.0 * n / MAX_HORIZON_S
        field = "--rate/@RATE" if rate_overridden else _rate_field(a.process)
        expected = (
            f"a rate at which the {n} tasks arrive within {MAX_HORIZON_S:,.0f} s (>= {least:.3g} tasks/min)"
        )
        raise r.error(field, expected, a.rate_per_min)
    if drift.sigma > 0 and span / drift.interval_s > MAX_TIME_STEPS:
        least = span / MAX_TIME_STEPS
        expected = (
            f"an interval >= {least:.3g} s (at most {MAX_TIME_STEPS:,} drift steps over the ~{span:.3g} s "
            "the tasks arrive in)"
        )
        raise r.error("dynamics.drift.interval_s", expected, drift.interval_s)
    if a.process == "bursty":
        key, shortest = min(
            (("mean_high_s", a.mean_high_s), ("mean_low_s", a.mean_low_s)), key=lambda kv: kv[1]
        )
        if span / shortest > MAX_TIME_STEPS:
            least = span / MAX_TIME_STEPS
            expected = (
                f"a mean sojourn >= {least:.3g} s (at most {MAX_TIME_STEPS:,} bursts and lulls over the "
                f"~{span:.3g} s the tasks arrive in)"
            )
            raise r.error(f"workload.arrival.{key}", expected, shortest)


def _rate_field(process: str) -> str:
    return "workload.arrival.rate_per_min" if process == "poisson" else "workload.arrival.low_rate_per_min"

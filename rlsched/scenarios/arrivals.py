"""Arrival processes: Poisson, bursty (two-state Markov-modulated Poisson) and trace replay.

All functions are deterministic for a given :class:`numpy.random.Generator` state and return
sorted ``float64`` arrival times in seconds, starting near 0.
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path

import numpy as np

from rlsched.errors import InputError, csv_field
from rlsched.scenarios.spec import ArrivalSpec
from rlsched.textfile import open_text

#: Columns a trace CSV may carry its arrival times in, by preference.
TRACE_COLUMNS: tuple[str, ...] = ("arrival_s", "creation_time")
# Sojourns drawn per vectorised block of the bursty process.
_BLOCK = 256


def arrival_times(spec: ArrivalSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    """Arrival times of ``n`` tasks.

    :param spec: the arrival process.
    :param n: how many arrivals (>= 0).
    :param rng: random source (unused by trace replay).
    :return: sorted float64 seconds, shape ``(n,)``.
    :raises ValueError: for an unknown process, invalid rates, or a trace with fewer than ``n`` rows.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if spec.process == "poisson":
        return _poisson(spec.rate_per_min, n, rng)
    if spec.process == "bursty":
        return _bursty(spec, n, rng)
    if spec.process == "trace":
        return _trace(spec, n)
    raise ValueError(f"unknown arrival process {spec.process!r}; known: poisson, bursty, trace")


def mean_rate_per_min(spec: ArrivalSpec) -> float:
    """Long-run mean arrival rate of ``spec``, tasks per minute.

    For a trace it is the rate over the whole (time-scaled) file.

    :param spec: the arrival process.
    """
    if spec.process == "poisson":
        _check_rate("rate_per_min", spec.rate_per_min, positive=True)
        return float(spec.rate_per_min)
    if spec.process == "bursty":
        _check_bursty(spec)
        p_high = spec.mean_high_s / (spec.mean_high_s + spec.mean_low_s)
        return p_high * spec.high_rate_per_min + (1.0 - p_high) * spec.low_rate_per_min
    if spec.process == "trace":
        t = read_trace_times(_trace_path(spec), spec.time_scale)
        span = float(t[-1] - t[0]) if len(t) > 1 else 0.0
        if span <= 0.0:
            raise ValueError(f"trace {spec.trace_path}: needs two distinct arrival times for a rate")
        return 60.0 * (len(t) - 1) / span
    raise ValueError(f"unknown arrival process {spec.process!r}; known: poisson, bursty, trace")


def _check_rate(name: str, value: float, positive: bool) -> None:
    ok = value > 0 if positive else value >= 0
    if not (ok and np.isfinite(value)):
        raise ValueError(f"{name} must be {'> 0' if positive else '>= 0'} and finite, got {value}")


def _poisson(rate_per_min: float, n: int, rng: np.random.Generator) -> np.ndarray:
    _check_rate("rate_per_min", rate_per_min, positive=True)
    return np.cumsum(rng.exponential(60.0 / rate_per_min, size=n))


def _check_bursty(spec: ArrivalSpec) -> None:
    _check_rate("high_rate_per_min", spec.high_rate_per_min, positive=False)
    _check_rate("low_rate_per_min", spec.low_rate_per_min, positive=False)
    _check_rate("mean_high_s", spec.mean_high_s, positive=True)
    _check_rate("mean_low_s", spec.mean_low_s, positive=True)
    if spec.high_rate_per_min + spec.low_rate_per_min <= 0:
        raise ValueError("bursty arrivals need high_rate_per_min or low_rate_per_min > 0")


def _bursty(spec: ArrivalSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    """Markov-modulated Poisson process with two states, simulated a block of sojourns at a time.

    Given a sojourn's length d and rate r, its arrival count is Poisson(r d) and the arrivals are
    uniform within it, which is exact and needs no loop over tasks.
    """
    _check_bursty(spec)
    if n == 0:
        return np.empty(0)
    p_high = spec.mean_high_s / (spec.mean_high_s + spec.mean_low_s)
    high = bool(rng.random() < p_high)  # the stationary start makes the process stationary
    means = np.array([spec.mean_low_s, spec.mean_high_s])
    rates = np.array([spec.low_rate_per_min, spec.high_rate_per_min]) / 60.0
    chunks: list[np.ndarray] = []
    got, t0 = 0, 0.0
    while got < n:
        state = (np.arange(_BLOCK) + int(high)) % 2  # alternates, starting in the current state
        dur = rng.exponential(means[state])
        start = t0 + np.concatenate(([0.0], np.cumsum(dur[:-1])))
        counts = rng.poisson(rates[state] * dur)
        idx = np.repeat(np.arange(_BLOCK), counts)
        chunks.append(np.sort(start[idx] + rng.random(idx.size) * dur[idx]))
        got += idx.size
        t0 = start[-1] + dur[-1]
        # _BLOCK is even, so the next block starts in the same state as this one did
    return np.concatenate(chunks)[:n]


def _trace_path(spec: ArrivalSpec) -> Path:
    if not spec.trace_path:
        raise ValueError("trace arrivals need trace_path")
    return Path(spec.trace_path)


def trace_time_column(path: str | Path) -> str:
    """The arrival column of a trace CSV: ``arrival_s``, or ``creation_time`` of an Alibaba pod list.

    :raises InputError: naming the file when it is not UTF-8 text or has neither column.
    """
    with open_text(path) as f:
        header = [h.strip() for h in next(csv.reader(f), [])]
    col = next((c for c in TRACE_COLUMNS if c in header), None)
    if col is None:
        raise InputError(
            str(path),
            csv_field(1),
            f"a header with an arrival column ({' or '.join(TRACE_COLUMNS)})",
            ",".join(header),
        )
    return col


def read_trace_times(path: str | Path, time_scale: float = 1.0) -> np.ndarray:
    """All arrival times of a trace CSV, sorted, shifted to start at 0 and scaled.

    The times are read from column ``arrival_s`` or, for an Alibaba pod list, ``creation_time``.

    :param path: the CSV file.
    :param time_scale: multiply the (shifted) times by this (> 0).
    :raises InputError: naming the file when it has no such column, an unparsable time, or no rows.
    """
    _check_rate("time_scale", time_scale, positive=True)
    path = Path(path)
    try:
        st = path.stat()
    except OSError:  # the reader below says so, naming the file
        return _trace_times(path) * time_scale
    return _cached_trace_times(str(path), st.st_mtime_ns, st.st_size) * time_scale  # a new array


@functools.lru_cache(maxsize=8)
def _cached_trace_times(path: str, mtime_ns: int, size: int) -> np.ndarray:
    """:func:`_trace_times` of a file as it is now (its time and size are the key): a scenario is
    read when loaded (its span is checked) and again for each run's tasks."""
    t = _trace_times(Path(path))
    t.flags.writeable = False
    return t


def _trace_times(path: Path) -> np.ndarray:
    col = trace_time_column(path)
    with open_text(path) as f:
        reader = csv.DictReader(f)
        reader.fieldnames = [h.strip() for h in reader.fieldnames or []]
        raw = [row[col] for row in reader]
    try:
        t = np.array(raw, dtype=np.float64)
    except ValueError:
        bad = next(i for i, v in enumerate(raw) if not _is_float(v))
        raise InputError(str(path), csv_field(bad + 2, col), "a number", raw[bad]) from None
    if t.size == 0:
        raise InputError(str(path), "<file>", "at least one data row")
    if not np.isfinite(t).all():
        bad = int(np.flatnonzero(~np.isfinite(t))[0])
        raise InputError(str(path), csv_field(bad + 2, col), "a finite time", raw[bad])
    t.sort()
    return t - t[0]


def _is_float(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


def _trace(spec: ArrivalSpec, n: int) -> np.ndarray:
    path = _trace_path(spec)
    t = read_trace_times(path, spec.time_scale)
    if t.size < n:
        raise InputError(str(path), "<file>", f"at least the {n} arrivals of workload.tasks", t.size)
    return t[:n]

"""Aggregates for evaluation reports: means, sample spreads and 95 % intervals over seeds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Offered load under which a scenario is labelled arrival-bound.
ARRIVAL_BOUND = 0.8


#: Fewer seeds than this get the range over seeds ([min, max]) as their interval, not a
#: t-interval: with two seeds a t-interval is 12.7 standard deviations wide, and reached -200 s for
#: a p95 latency and 1.13 for a GPU utilisation in a report of two seeds.
FEW_SEEDS = 5


@dataclass(frozen=True)
class Summary:
    """Mean, sample standard deviation (ddof = 1) and an interval over seeds.

    The interval is the 95 % t-interval (half-width ``ci95``) cut to the metric's range, or, for
    fewer than :data:`FEW_SEEDS` seeds, the range of the seeds (``how = "range"``).
    """

    mean: float
    std: float
    ci95: float
    n: int
    low: float = math.nan
    high: float = math.nan
    how: str = "t"

    def cell(self, scale: float = 1.0, prec: int = 3) -> str:
        """``mean ± ci95`` as a table cell, or ``mean [low, high]`` where the interval is a range
        over seeds or was cut to the metric's range (``–`` when there is no value)."""
        if self.n == 0 or math.isnan(self.mean):
            return "–"
        if self.n == 1:
            return f"{self.mean * scale:.{prec}f}"
        if self.symmetric():
            return f"{self.mean * scale:.{prec}f} ± {self.ci95 * scale:.{prec}f}"
        return f"{self.mean * scale:.{prec}f} [{self.low * scale:.{prec}f}, {self.high * scale:.{prec}f}]"

    def symmetric(self) -> bool:
        """Whether the interval is ``mean ± ci95`` (a t-interval inside the metric's range)."""
        return self.how == "t" and (
            math.isnan(self.low) or math.isclose(self.mean - self.low, self.high - self.mean, abs_tol=1e-12)
        )

    def errors(self) -> tuple[float, float]:
        """(below, above) the mean: the interval as error-bar lengths (0 where there is none)."""
        if self.n < 2 or math.isnan(self.low):
            return 0.0, 0.0
        return self.mean - self.low, self.high - self.mean

    def scaled(self, k: float) -> Summary:
        """The summary of the values times ``k > 0``."""
        return Summary(
            self.mean * k, self.std * k, self.ci95 * k, self.n, self.low * k, self.high * k, self.how
        )


def summarise(values: Sequence[float | None], lo: float | None = 0.0, hi: float | None = None) -> Summary:
    """Summary of the finite values (``None`` and NaN are left out).

    :param lo: least value the metric can take (``None``: unbounded); the interval stops there.
    :param hi: largest value the metric can take (``None``: unbounded), e.g. 1 for a fraction.
    """
    xs = np.array([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = len(xs)
    if n == 0:
        return Summary(math.nan, math.nan, math.nan, 0)
    if n == 1:
        return Summary(float(xs[0]), 0.0, math.nan, 1, float(xs[0]), float(xs[0]))
    mean, sd = float(xs.mean()), float(xs.std(ddof=1))
    from scipy import stats  # 0.5 s to import: not for a command that refuses its input

    half = float(stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n))
    if n < FEW_SEEDS:
        return Summary(mean, sd, half, n, float(xs.min()), float(xs.max()), "range")
    low = mean - half if lo is None else max(mean - half, lo)
    high = mean + half if hi is None else min(mean + half, hi)
    return Summary(mean, sd, half, n, low, high)


#: Values a metric can take, where it is not [0, inf): fractions, and shares that go negative.
METRIC_RANGE: dict[str, tuple[float | None, float | None]] = {
    "gpu_util": (0.0, 1.0),
    "load_balance": (0.0, 1.0),
    "frac_of_bound": (0.0, 1.0),
    "deadline_miss_rate": (0.0, 1.0),
    "gap_share": (None, 1.0),
}


def summarise_key(values: Sequence[float | None], key: str) -> Summary:
    """:func:`summarise` with the range of the metric ``key`` (:data:`METRIC_RANGE`; default
    [0, inf))."""
    return summarise(values, *METRIC_RANGE.get(key, (0.0, None)))


#: The interval used, in words, for a report's reader.
INTERVALS = (
    "Intervals are over seeds: `m ± h` is the mean with its 95 % t-interval; `m [a, b]` is the "
    f"mean with the range of the seeds (fewer than {FEW_SEEDS} seeds) or a t-interval cut to the "
    "values the metric can take (0 for latencies and counts, 1 for fractions)."
)


def sample_std(values: Sequence[float] | np.ndarray) -> float:
    """Sample standard deviation over seeds (ddof = 1); 0 for fewer than two values."""
    xs = np.asarray(values, dtype=float)
    return float(xs.std(ddof=1)) if len(xs) > 1 else 0.0


def mean_pm(values: Sequence[float] | np.ndarray, fmt: str = ".3f") -> str:
    """``mean ± sample std`` over seeds; the value alone for one."""
    xs = np.asarray(values, dtype=float)
    if len(xs) < 2:
        return f"{xs.mean():{fmt}}" if len(xs) else "–"
    return f"{xs.mean():{fmt}} ± {sample_std(xs):{fmt}}"


def not_completed(metrics: dict[str, float | int | None]) -> int:
    """Tasks that did not complete: lost + unschedulable (failed runs count every task)."""
    total = int(metrics.get("tasks_total") or 0)
    return total - int(metrics.get("tasks_completed") or 0)


def precision(scale_mean: float) -> int:
    """Decimals for a value of this size (3 under 10, 1 above)."""
    return 3 if abs(scale_mean) < 10 else 1

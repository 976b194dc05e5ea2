"""Aggregates for evaluation reports: means, sample spreads and 95 % intervals over seeds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

#: Offered load under which a scenario is labelled arrival-bound.
ARRIVAL_BOUND = 0.8


@dataclass(frozen=True)
class Summary:
    """Mean, sample standard deviation (ddof = 1) and 95 % t-interval half-width over seeds."""

    mean: float
    std: float
    ci95: float
    n: int

    def cell(self, scale: float = 1.0, prec: int = 3) -> str:
        """``mean ± ci95`` as a table cell (``–`` when there is no value)."""
        if self.n == 0 or math.isnan(self.mean):
            return "–"
        if self.n == 1:
            return f"{self.mean * scale:.{prec}f}"
        return f"{self.mean * scale:.{prec}f} ± {self.ci95 * scale:.{prec}f}"


def summarise(values: Sequence[float | None]) -> Summary:
    """Summary of the finite values (``None`` and NaN are left out)."""
    xs = np.array([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = len(xs)
    if n == 0:
        return Summary(math.nan, math.nan, math.nan, 0)
    if n == 1:
        return Summary(float(xs[0]), 0.0, math.nan, 1)
    sd = float(xs.std(ddof=1))
    half = float(stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n))
    return Summary(float(xs.mean()), sd, half, n)


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

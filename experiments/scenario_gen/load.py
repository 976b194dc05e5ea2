"""Setting a generated scenario's offered load: its arrival rate over the LP capacity bound
(:func:`experiments.bound_cache.own_bound`, on the scenario's own seed).

The bound does not depend on when tasks arrive, only on which tasks and where they may run, so the
load is set by compressing time: arrivals come ``k`` times faster (the rate of a Poisson process,
both rates of a bursty one, ``time_scale`` of a trace, ``arrival_speedup`` of Alibaba pods), and
every other time of the run (bursts' sojourns, churn, drift steps) comes ``k`` times sooner, so the
run keeps its shape. With the same seed the arrivals are then exactly the old ones over ``k``, and
the load moves by ``k``: one rescale reaches the target, and a second bound checks it. Where a
limit stops it (a rate above :data:`~rlsched.scenarios.limits.MAX_RATE_PER_MIN`, a trace's pods
arriving slower than they ran), the load reached is what is reported.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from experiments.bound_cache import own_bound
from rlsched.scenarios.limits import MAX_RATE_PER_MIN
from rlsched.scenarios.spec import ArrivalSpec, Scenario

#: Offered loads a target is drawn from (times the LP capacity bound).
LOAD_RANGE = (0.3, 2.0)
#: Relative distance to the target under which no further rescale is tried.
TOLERANCE = 0.02
#: Most rescales of one case (compression is exact, so one is usual).
MAX_ROUNDS = 4


@dataclass(frozen=True)
class LoadResult:
    """A scenario at its target load.

    :param scenario: the scenario (as the family drew it, time compressed).
    :param loaded: the same as written and loaded back.
    :param offered_load: its offered load on its own seed.
    :param arrival_bound: whether that load is under the arrival-bound threshold.
    :param knob: the field that was scaled.
    """

    scenario: Scenario
    loaded: Scenario
    offered_load: float
    arrival_bound: bool
    knob: str


def knob(sc: Scenario) -> str:
    """The field whose scaling sets the load of ``sc``.

    :param sc: the scenario.
    """
    if sc.workload.alibaba is not None:
        return "workload.alibaba.arrival_speedup"
    return {
        "poisson": "workload.arrival.rate_per_min",
        "bursty": "workload.arrival.high_rate_per_min,low_rate_per_min",
        "trace": "workload.arrival.time_scale",
    }[sc.workload.arrival.process]


def factor_range(sc: Scenario) -> tuple[float, float]:
    """The compression factors ``sc``'s limits allow: rates up to ``MAX_RATE_PER_MIN``, Alibaba
    pods no slower than the trace (``arrival_speedup >= 1``).

    :param sc: the scenario.
    """
    ali, a = sc.workload.alibaba, sc.workload.arrival
    if ali is not None:
        return 1.0 / ali.arrival_speedup, math.inf
    if a.process == "poisson":
        return 0.0, MAX_RATE_PER_MIN / a.rate_per_min
    if a.process == "bursty":
        return 0.0, MAX_RATE_PER_MIN / a.high_rate_per_min
    return 0.0, math.inf


def compress(sc: Scenario, k: float) -> Scenario:
    """``sc`` with its time compressed ``k`` times: arrivals ``k`` times faster, churn, bursts and
    drift steps ``k`` times sooner.

    :param sc: the scenario.
    :param k: the factor (> 0).
    """
    wl = sc.workload
    if wl.alibaba is not None:
        ali = dataclasses.replace(wl.alibaba, arrival_speedup=wl.alibaba.arrival_speedup * k)
        wl = dataclasses.replace(wl, alibaba=ali)
    else:
        wl = dataclasses.replace(wl, arrival=_faster(wl.arrival, k))
    nodes = tuple(
        dataclasses.replace(n, join_s=n.join_s / k, leave_s=None if n.leave_s is None else n.leave_s / k)
        for n in sc.cluster.nodes
    )
    drift = sc.drift
    if drift.sigma > 0:
        drift = dataclasses.replace(drift, interval_s=drift.interval_s / k)
    return dataclasses.replace(
        sc, workload=wl, cluster=dataclasses.replace(sc.cluster, nodes=nodes), drift=drift
    )


def _faster(a: ArrivalSpec, k: float) -> ArrivalSpec:
    if a.process == "trace":
        return dataclasses.replace(a, time_scale=a.time_scale / k)
    return dataclasses.replace(
        a,
        rate_per_min=a.rate_per_min * k,
        high_rate_per_min=a.high_rate_per_min * k,
        low_rate_per_min=a.low_rate_per_min * k,
        mean_high_s=a.mean_high_s / k,
        mean_low_s=a.mean_low_s / k,
    )


def set_load(sc: Scenario, target: float, write: Callable[[Scenario], Scenario]) -> LoadResult:
    """``sc`` compressed until its offered load is ``target`` (within :data:`TOLERANCE`, unless a
    limit stops it).

    :param sc: the scenario as its family drew it.
    :param target: the offered load aimed at.
    :param write: writes a scenario file and returns it loaded back (the bound is taken on what
        the file holds).
    """
    loaded = write(sc)
    b = own_bound(loaded)
    for _ in range(MAX_ROUNDS):
        load = float(b["offered_load"])
        lo, hi = factor_range(sc)
        k = min(max(target / load, lo), hi)
        if abs(load / target - 1.0) <= TOLERANCE or math.isclose(k, 1.0, rel_tol=1e-9):
            break
        sc = compress(sc, k)
        loaded = write(sc)
        b = own_bound(loaded)
    return LoadResult(sc, loaded, float(b["offered_load"]), bool(b["arrival_bound"]), knob(sc))

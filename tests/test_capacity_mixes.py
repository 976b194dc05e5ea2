"""The capacity LP's mix columns, built vectorised over the mixes, are those a loop over every mix
gives, entry for entry and bit for bit: the bound of every scenario and every report is unchanged
by the speed-up (``rlsched scenarios generate`` and the bound of each evaluated case)."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import numpy as np
import pytest

from envs.capacity import _add_mixes, _GpuGroup, _Lp, _Model
from envs.ground_truth import CO_RUN_OVERHEAD, GroundTruth
from rlsched.hardware import GpuModel
from rlsched.scenarios.loader import load_scenario
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.tasks import KindSpec

#: A contention-model case and a measured co-location case (the two ways factors are computed),
#: with several streams per GPU, so mixes repeat classes.
CASES = ("interference-saturated", "interference-gavel")


def _model(name: str) -> _Model:
    sc = load_scenario(name)
    return _Model(sc, generate_tasks(sc, 10001)[:300])


#: Co-runners listed by the tests (every mix up to this many; the bound lists up to 20,000 mixes).
K = 3


def _loop_factors(
    truth: GroundTruth, kinds: list[KindSpec], shares: list[float], model: GpuModel
) -> list[float]:
    """The interference formula one mix at a time, in plain Python: the reference that
    :meth:`GroundTruth.mix_factors` (the simulator's and the bound's one copy) must equal."""
    k = len(kinds)
    if truth.pairs is not None:
        dev = truth.csv_device(model)
        out = []
        for i, ki in enumerate(kinds):
            slow = 0.0
            for j, kj in enumerate(kinds):
                if i != j:
                    norm = truth.pairs.get((dev, ki.name, kj.name), 1.0 / 1.2)
                    norm = norm if norm > 0 else 1.0 / (1.2 * 2)
                    slow += 1.0 / norm - 1.0
            out.append(1.0 / (1.0 + slow))
        return out
    dem = [tuple(d * s for d in truth._truth(kd).demand) for kd, s in zip(kinds, shares, strict=True)]
    tot = [sum(col) for col in zip(*dem, strict=True)]
    over = 1.0 + CO_RUN_OVERHEAD * (k - 1)
    out = []
    for d in dem:
        sd = sum(d)
        load = sum(di * ti for di, ti in zip(d, tot, strict=True)) / sd if sd > 0 else 1.0
        out.append(1.0 / (max(1.0, load) * over))
    return out


def _loop_columns(lp: _Lp, m: _Model, grp: _GpuGroup, cls_rows: list[int], scale: np.ndarray) -> None:
    """The listed-mix columns as the bound built them before: one mix at a time."""
    times = {c: m.gpu_time(c, grp) for c in range(len(m.classes))}
    allowed = [c for c, t in times.items() if math.isfinite(t)]
    cap = lp.row(float(grp.count))
    for k in range(1, min(grp.streams, K) + 1):
        for mix in itertools.combinations_with_replacement(allowed, k):
            if sum(m.classes[c].min_mem_mb for c in mix) > grp.mem_mb:
                continue
            kinds = [m.classes[c].kind for c in mix]
            shares = [m.classes[c].share for c in mix]
            f = _loop_factors(m.truth, kinds, shares, grp.model) if k > 1 else [1.0]
            j = lp.col()
            lp.put(cap, j, 1.0)
            rate: dict[int, float] = defaultdict(float)
            for c, fi in zip(mix, f, strict=True):
                rate[c] += fi / times[c]
            for c, r in rate.items():
                lp.put(cls_rows[c], j, -r / scale[c])


@pytest.mark.parametrize("name", CASES)
def test_mix_factors_are_the_factors_of_each_mix(name: str) -> None:
    m = _model(name)
    kinds = [c.kind for c in m.classes]
    shares = [c.share for c in m.classes]
    for grp in m.gpu_groups:
        for k in range(2, K + 1):
            mixes = np.array(list(itertools.combinations_with_replacement(range(len(kinds)), k)))
            got = m.truth.mix_factors(kinds, shares, mixes, grp.model)
            one = [[kinds[i] for i in mix] for mix in mixes], [[shares[i] for i in mix] for mix in mixes]
            want = [_loop_factors(m.truth, kd, sh, grp.model) for kd, sh in zip(*one, strict=True)]
            assert np.array_equal(got, np.array(want)), (name, grp.model.name, k)
            # The simulator's factors (cached, one mix at a time) are the same numbers.
            sim = [m.truth.factors(kd, sh, grp.model) for kd, sh in zip(*one, strict=True)]
            assert sim == want, (name, grp.model.name, k)


@pytest.mark.parametrize("name", CASES)
def test_the_lp_columns_are_those_of_a_loop_over_every_mix(name: str) -> None:
    m = _model(name)
    n = len(m.classes)
    scale = np.linspace(1.0, 3.0, n)
    repeated = 0
    for grp in m.gpu_groups:
        assert grp.streams >= 2  # mixes with a class twice are where runs of equal classes add up
        fast, slow = _Lp(n), _Lp(n)
        rows = [fast.row(0.0) for _ in range(n)]
        assert [slow.row(0.0) for _ in range(n)] == rows
        times = {c: m.gpu_time(c, grp) for c in range(n)}
        allowed = [c for c, t in times.items() if math.isfinite(t)]
        cap = fast.row(float(grp.count))
        for k in range(1, min(grp.streams, K) + 1):
            _add_mixes(fast, m, grp, allowed, times, k, cap, rows, scale)
        _loop_columns(slow, m, grp, rows, scale)
        assert (fast.cols, fast.rows, fast.b) == (slow.cols, slow.rows, slow.b)
        assert (fast.ri, fast.ci) == (slow.ri, slow.ci)
        assert fast.data == slow.data  # the same floats, not merely close ones
        repeated += len(fast.data) - len(set(zip(fast.ri, fast.ci, strict=True)))
    assert repeated == 0  # one entry per (row, column): equal classes were summed, not repeated

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
from rlsched.scenarios.loader import load_scenario
from rlsched.scenarios.taskgen import generate_tasks

#: A contention-model case and a measured co-location case (the two ways factors are computed),
#: with several streams per GPU, so mixes repeat classes.
CASES = ("interference-saturated", "interference-gavel")


def _model(name: str) -> _Model:
    sc = load_scenario(name)
    return _Model(sc, generate_tasks(sc, 10001)[:300])


#: Co-runners listed by the tests (every mix up to this many; the bound lists up to 20,000 mixes).
K = 3


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
            f = m.truth.factors(kinds, shares, grp.model) if k > 1 else [1.0]
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
            want = [
                m.truth.factors([kinds[i] for i in mix], [shares[i] for i in mix], grp.model) for mix in mixes
            ]
            assert np.array_equal(got, np.array(want)), (name, grp.model.name, k)


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

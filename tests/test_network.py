"""The NIC model: FIFO transfers and the measured traffic average."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.network import TAU_S, Link


def test_transfers_queue_back_to_back() -> None:
    link = Link(2)
    assert link.reserve(0, 0.0, 5.0) == 5.0
    assert link.reserve(0, 1.0, 2.0) == 7.0  # waits for the first
    assert link.reserve(0, 10.0, 1.0) == 11.0  # link idle again: starts now
    assert link.reserve(1, 0.0, 3.0) == 3.0  # nodes are independent
    out = np.zeros(2)
    link.busy_s(10.5, out)
    np.testing.assert_allclose(out, [0.5, 0.0])


def utilisation(link: Link, now: float) -> np.ndarray:
    out = np.zeros(len(link.free_at))
    link.utilisation(now, out)
    return out


def test_busy_link_tends_to_one_and_idle_link_decays() -> None:
    link = Link(1)
    link.reserve(0, 0.0, 1000.0)
    assert math.isclose(utilisation(link, 10 * TAU_S)[0], 1 - math.exp(-10))
    link = Link(1)
    link.reserve(0, 0.0, TAU_S)
    u_end = utilisation(link, TAU_S)[0]
    assert math.isclose(u_end, 1 - math.exp(-1))
    assert math.isclose(utilisation(link, 2 * TAU_S)[0], u_end * math.exp(-1))
    assert utilisation(Link(1), 50.0)[0] == 0.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0.0, 30.0), st.floats(0.01, 20.0)), min_size=1, max_size=12),
    st.floats(0.0, 60.0),
)
def test_average_matches_numerical_integration(transfers: list[tuple[float, float]], extra: float) -> None:
    """Settling at every reservation and reading at any time equals integrating the busy signal."""
    link = Link(1)
    now, intervals = 0.0, []
    for gap, seconds in transfers:
        now += gap
        start = max(now, float(link.free_at[0]))
        end = link.reserve(0, now, seconds)
        assert math.isclose(end, start + seconds)
        intervals.append((start, end))
    t_end = now + extra
    grid = np.linspace(0.0, t_end, 200_001)
    busy = np.zeros_like(grid)
    for a, b in intervals:
        busy[(grid >= a) & (grid < b)] = 1.0
    weights = np.exp((grid - t_end) / TAU_S) / TAU_S
    expected = np.trapezoid(busy * weights, grid)
    assert math.isclose(utilisation(link, t_end)[0], expected, abs_tol=2e-3)


def test_cut_drops_the_queue() -> None:
    link = Link(1)
    link.reserve(0, 0.0, 100.0)
    link.cut(0, 5.0)
    assert link.reserve(0, 6.0, 1.0) == 7.0

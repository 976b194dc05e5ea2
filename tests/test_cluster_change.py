"""Settling-time analysis of the cluster-change experiment, on synthetic completion streams."""

from __future__ import annotations

import numpy as np

from experiments.cluster_change import settling, windowed_throughput


def test_windowed_throughput_counts_completions_per_minute() -> None:
    done = np.arange(0.0, 600.0, 1.0)  # one a second
    thr = windowed_throughput(done, np.array([120.0, 300.0]), 60.0)
    np.testing.assert_allclose(thr, [60.0, 60.0])


def test_a_slow_ramp_settles_when_it_reaches_the_new_level() -> None:
    # 30/min until 600 s, then a linear ramp to 60/min over 300 s, then 60/min until 1,800 s.
    times, t = [], 0.0
    while t < 1800.0:
        rate = 0.5 if t < 600 else (0.5 + 0.5 * min((t - 600) / 300, 1.0))
        t += 1.0 / rate
        times.append(t)
    done = np.array(times)
    (r,) = settling(done, done, [600.0], window_s=60.0, band=0.1)
    assert abs(r["level_per_min"] - 60.0) < 2.0
    # Within 10% of 60/min means above 54/min: reached ~240 s into the ramp, plus the window.
    assert 150.0 <= r["settle_s"] <= 320.0
    assert r["tasks"] > 0


def test_a_stream_that_never_settles_is_reported_as_nan() -> None:
    # Alternating bursts: every 60 s window flips between 20 and 100 per minute.
    times = np.concatenate([np.linspace(k * 120, k * 120 + 60, 100 if k % 2 else 20) for k in range(15)])
    (r,) = settling(np.sort(times), np.sort(times), [300.0], window_s=60.0, band=0.1)
    assert np.isnan(r["settle_s"]) and r["tasks"] == 0

"""Stream pools and the MLSM feedback rule (runtime.mlsm.streams)."""

from __future__ import annotations

import time

from runtime.backends.base import DeviceConfig
from runtime.backends.numpy_backend import NumpyBackend
from runtime.mlsm.streams import StreamFeedback, StreamPool, StreamStats


def stats(active: int, busy: float, rate: float, interval: float = 1.0) -> StreamStats:
    return StreamStats(active, busy * interval, rate * busy * interval, interval)


def test_idle_streams_move_to_a_saturated_gpu() -> None:
    fb = StreamFeedback(min_streams=1, max_streams=8)
    assert fb.adjust([stats(4, 1.0, 1.0), stats(4, 4.0, 1.0)]) == [3, 5]


def test_spare_streams_do_not_move_to_a_slower_gpu() -> None:
    """A slow GPU keeps its streams busy longest; spare streams of a fast one stay put."""
    fb = StreamFeedback(min_streams=1, max_streams=8, hysteresis=0.25)
    assert fb.adjust([stats(4, 2.0, 3.0), stats(4, 4.0, 1.0)]) == [4, 4]


def test_streams_move_to_the_gpu_that_does_more_per_stream() -> None:
    fb = StreamFeedback(min_streams=1, max_streams=8, hysteresis=0.25)
    assert fb.adjust([stats(4, 4.0, 0.5), stats(4, 4.0, 1.5)]) == [3, 5]
    # Within the hysteresis nothing moves.
    assert fb.adjust([stats(4, 4.0, 1.0), stats(4, 4.0, 1.2)]) == [4, 4]


def test_bounds_and_total_are_kept() -> None:
    fb = StreamFeedback(min_streams=2, max_streams=5)
    assert fb.adjust([stats(2, 0.0, 0.0), stats(6, 6.0, 1.0)]) == [2, 6]
    assert fb.adjust([stats(5, 5.0, 3.0), stats(3, 0.0, 0.0)]) == [5, 3]
    for a, b in ([3, 5], [1, 7], [4, 4]):
        new = fb.adjust([stats(a, a * 0.2, 1.0), stats(b, b, 2.0)])
        assert sum(new) == a + b


def test_single_gpu_nodes_never_change() -> None:
    assert StreamFeedback().adjust([stats(4, 4.0, 1.0)]) == [4]


def test_pool_accounts_busy_time_and_work() -> None:
    dev = NumpyBackend().open(DeviceConfig(0, "T4", 1 << 20))
    pool = StreamPool(dev, 2, "t")
    try:
        a, b = pool.acquire(), pool.acquire()
        assert a is not None and b is not None and pool.acquire() is None
        time.sleep(0.05)
        pool.release(a, 0.3)
        pool.release(b, 0.2)
        st = pool.take_stats()
        assert st.active == 2 and 0.08 <= st.busy_stream_s <= 0.5
        assert abs(st.work_s - 0.5) < 1e-9 and st.rate > 0
        pool.resize(3)
        assert pool.active == 3 and len(pool.lanes) == 3
        pool.resize(1)
        assert pool.acquire() is not None and pool.acquire() is None
    finally:
        pool.close()

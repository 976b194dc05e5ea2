"""MLSM device memory manager, and the NVML monitor's CPU-side behaviour."""

from __future__ import annotations

import dataclasses
import importlib.util
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from rlsched.cluster import ClusterSpec, NodeSpec
from rlsched.view import ClusterView
from runtime.backends.base import DeviceFull
from runtime.cluster.monitor import GpuSample, NvmlMonitor, fill_view_from_samples
from runtime.mlsm.memory import DeviceMemory, MemoryStats


def load_value(value: Any = "v") -> Callable[[], Any]:
    """A loader that "uploads" ``value``."""
    return lambda: value


def fill(mem: DeviceMemory, *ids: str, nbytes: int = 10) -> None:
    """Cache ``ids`` in order and unpin them: resident, evictable, oldest first."""
    for data_id in ids:
        mem.cached(data_id, nbytes, load_value(data_id))
        mem.unpin(data_id)


# ---- cache and LRU -------------------------------------------------------------------------------
def test_hit_does_not_load_and_counts_saved_bytes() -> None:
    mem = DeviceMemory(100, name="g0")
    calls = []

    def upload() -> str:
        calls.append(1)
        return "dev-x"

    for _ in range(3):
        assert mem.cached("x", 40, upload) == "dev-x"
        mem.unpin("x")
    s = mem.stats()
    assert calls == [1]
    assert (s.hits, s.misses, s.evictions) == (2, 1, 0)
    assert (s.h2d_bytes_loaded, s.h2d_bytes_saved) == (40, 80)
    assert (s.used_bytes, s.cached_bytes, s.peak_bytes, s.capacity_bytes) == (40, 40, 40, 100)


def test_least_recently_used_input_is_evicted_first() -> None:
    mem = DeviceMemory(30)
    fill(mem, "a", "b", "c")
    fill(mem, "a")  # touch: b is now the oldest
    fill(mem, "d")
    assert [mem.contains(k) for k in "abcd"] == [True, False, True, True]
    mem.reserve(15)  # evicts c, then a
    assert [mem.contains(k) for k in "abcd"] == [False, False, False, True]
    assert mem.stats().evictions == 3


def test_pinned_inputs_are_never_evicted() -> None:
    mem = DeviceMemory(30)
    mem.cached("pinned", 10, load_value())
    fill(mem, "b", "c")
    mem.reserve(20)
    assert mem.contains("pinned") and not mem.contains("b") and not mem.contains("c")
    with pytest.raises(DeviceFull):
        mem.reserve(1)
    mem.unpin("pinned")
    mem.reserve(1)
    assert not mem.contains("pinned")


def test_reserve_that_cannot_fit_changes_nothing() -> None:
    mem = DeviceMemory(100, name="n0/gpu1")
    fill(mem, "a", "b")
    mem.cached("p", 30, load_value())
    mem.reserve(20)
    before = mem.stats()
    with pytest.raises(DeviceFull, match=r"n0/gpu1: 51 B do not fit"):
        mem.reserve(51)  # 10 free + 20 evictable = 30 obtainable
    # Nothing changes but the count of refusals (reported per GPU).
    assert mem.stats() == dataclasses.replace(before, refusals=1)
    assert mem.contains("a") and mem.contains("b")
    with pytest.raises(DeviceFull):
        mem.cached("big", 101, load_value())
    assert mem.stats() == dataclasses.replace(before, refusals=2) and not mem.contains("big")


def test_release_returns_working_memory() -> None:
    mem = DeviceMemory(100)
    mem.reserve(60)
    with pytest.raises(DeviceFull):
        mem.reserve(50)
    mem.release(60)
    mem.reserve(100)
    assert mem.free_bytes == 0 and mem.stats().peak_bytes == 100
    with pytest.raises(ValueError, match="exceeds"):
        mem.release(101)
    with pytest.raises(ValueError):
        mem.reserve(-1)


def test_drop_removes_now_or_on_last_unpin() -> None:
    mem = DeviceMemory(100)
    fill(mem, "idle")
    mem.drop("idle")
    assert not mem.contains("idle") and mem.stats().cached_bytes == 0
    mem.drop("never-seen")  # ignored
    mem.cached("busy", 10, load_value())
    mem.cached("busy", 10, load_value())  # two users
    mem.drop("busy")
    mem.unpin("busy")
    assert mem.contains("busy")
    mem.unpin("busy")
    assert not mem.contains("busy")
    assert mem.stats().evictions == 0
    with pytest.raises(KeyError):
        mem.unpin("busy")


def test_failed_load_leaves_no_entry() -> None:
    mem = DeviceMemory(100)

    def broken() -> None:
        raise DeviceFull("upload ran out of device memory")

    with pytest.raises(DeviceFull):
        mem.cached("x", 50, broken)
    assert not mem.contains("x") and mem.stats().used_bytes == 0
    assert mem.cached("x", 50, load_value("ok")) == "ok"


def test_workload_larger_than_capacity_completes_with_evictions() -> None:
    mem = DeviceMemory(1000)
    rng = np.random.default_rng(0)
    loads = 0
    for step in range(400):
        data_id = f"frame{rng.integers(0, 40)}"
        value = mem.cached(data_id, 100, load_value(data_id))
        assert value == data_id
        mem.reserve(200)  # the subtask's working memory
        mem.release(200)
        mem.unpin(data_id)
        if step % 50 == 0:
            mem.drop(f"frame{rng.integers(0, 40)}")
        loads += 1
    s = mem.stats()
    assert s.hits + s.misses == loads
    assert s.evictions > 0 and s.hits > 0
    assert s.peak_bytes <= 1000 and s.used_bytes == s.cached_bytes <= 1000
    assert s.h2d_bytes_loaded == 100 * s.misses and s.h2d_bytes_saved == 100 * s.hits


# ---- concurrency -----------------------------------------------------------------------------
def test_concurrent_misses_of_one_input_load_once() -> None:
    mem = DeviceMemory(1000)
    loads = []
    barrier = threading.Barrier(8)
    results: list[Any] = [None] * 8

    def slow_upload() -> str:
        loads.append(1)
        time.sleep(0.05)
        return "dev"

    def user(i: int) -> None:
        barrier.wait()
        results[i] = mem.cached("shared", 100, slow_upload)

    threads = [threading.Thread(target=user, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert loads == [1] and results == ["dev"] * 8
    s = mem.stats()
    assert (s.misses, s.hits, s.h2d_bytes_saved, s.cached_bytes) == (1, 7, 700, 100)
    for _ in range(8):
        mem.unpin("shared")
    mem.reserve(1000)  # all pins gone: evictable


def test_waiters_retry_when_the_first_load_fails() -> None:
    mem = DeviceMemory(1000)
    started = threading.Event()
    attempts = []

    def first() -> str:
        attempts.append("first")
        started.set()
        time.sleep(0.05)
        raise OSError("transfer failed")

    def second() -> str:
        attempts.append("second")
        return "dev"

    errors: list[BaseException] = []

    def loader() -> None:
        try:
            mem.cached("x", 10, first)
        except OSError as exc:
            errors.append(exc)

    t = threading.Thread(target=loader)
    t.start()
    started.wait()
    assert mem.cached("x", 10, second) == "dev"
    t.join()
    assert attempts == ["first", "second"] and len(errors) == 1
    assert mem.stats().misses == 2 and mem.stats().cached_bytes == 10


def test_many_threads_keep_the_books_balanced() -> None:
    mem = DeviceMemory(500)
    full = []

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(200):
            data_id = f"in{rng.integers(0, 12)}"
            try:
                mem.cached(data_id, 50, load_value(data_id))
            except DeviceFull:
                full.append(1)
                continue
            try:
                mem.reserve(100)
                mem.release(100)
            except DeviceFull:
                full.append(1)
            finally:
                mem.unpin(data_id)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s = mem.stats()
    assert isinstance(s, MemoryStats)
    assert s.used_bytes == s.cached_bytes == 50 * sum(mem.contains(f"in{i}") for i in range(12))
    assert s.peak_bytes <= 500


# ---- NVML monitor (no driver here) -------------------------------------------------------------------
def test_nvml_unavailable_is_silent(capsys: pytest.CaptureFixture[str]) -> None:
    available = NvmlMonitor.available()
    if importlib.util.find_spec("pynvml") is None:
        assert available is False
        with pytest.raises(RuntimeError, match="NVML unavailable"):
            NvmlMonitor()
    assert capsys.readouterr() == ("", "")


class FakeNvml:
    """Stands in for ``pynvml``: two GPUs, the second MIG-enabled (no utilisation)."""

    NVML_TEMPERATURE_GPU = 0
    NVML_DEVICE_MIG_ENABLE = 1

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        self.inits = 0

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.inits -= 1

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> str | bytes:
        return b"Tesla T4" if h == 0 else "NVIDIA A100"

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(used=(h + 1) * 512 * 1024 * 1024, total=16 * 1024**3)

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        if h == 1:
            raise self.NVMLError("Not Supported")
        return SimpleNamespace(gpu=75, memory=10)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return 70_000

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return 55

    def nvmlDeviceGetMigMode(self, h: int) -> tuple[int, int]:
        if h == 0:
            raise self.NVMLError("Not Supported")
        return (1, 1)


def test_monitor_samples_and_fills_a_view(node: Callable[..., NodeSpec]) -> None:
    fake = FakeNvml()
    with NvmlMonitor(nvml=fake) as mon:  # type: ignore[arg-type]
        samples = mon.sample()
    assert fake.inits == 0
    assert samples[0] == GpuSample(0, "Tesla T4", 75.0, 512 * 2**20, 16 * 2**30, 70.0, 55.0, None)
    assert samples[1].util_percent is None and samples[1].mig_mode is True
    view = ClusterView.from_spec(ClusterSpec((node("n0", gpus=("T4",)), node("n1", gpus=("T4", "T4")))))
    fill_view_from_samples(view, 1, samples, {0: 1, 1: 0, 7: 0})
    assert view.gpu_mem_used_mb[1].tolist() == [1024.0, 512.0]
    assert view.node_gpu_mem_used_mb[1] == 1536.0 and view.fast.gpu_mem_used[1] == [1024.0, 512.0]
    assert view.extra["gpu_util"][1].tolist() == [0.0, 0.75]
    with pytest.raises(RuntimeError, match="closed"):
        mon.sample()


def test_evictable_bytes_track_the_entries_through_any_sequence() -> None:
    """The incremental count of unpinned inputs equals a recount after every operation."""
    import random

    from runtime.backends.base import DeviceFull
    from runtime.mlsm.memory import DeviceMemory

    rng = random.Random(7)
    mem = DeviceMemory(1000, "t")
    pins: dict[str, int] = {}
    reserved: list[int] = []
    for _ in range(3000):
        op = rng.choice(("cached", "cached", "unpin", "drop", "reserve", "release"))
        key = f"k{rng.randrange(12)}"
        try:
            if op == "cached":
                mem.cached(key, rng.randrange(1, 200), lambda: object())
                pins[key] = pins.get(key, 0) + 1
            elif op == "unpin" and pins.get(key):
                mem.unpin(key)
                pins[key] -= 1
            elif op == "drop":
                mem.drop(key)
            elif op == "reserve":
                n = rng.randrange(1, 300)
                mem.reserve(n)
                reserved.append(n)
            elif op == "release" and reserved:
                mem.release(reserved.pop())
        except DeviceFull:
            pass
        entries = mem._entries  # a recount from the manager's own table
        recount = sum(e.nbytes for e in entries.values() if e.pins == 0 and e.ready.is_set())
        st = mem.stats()
        assert st.evictable_bytes == recount
        assert mem.held_bytes() == st.used_bytes - recount

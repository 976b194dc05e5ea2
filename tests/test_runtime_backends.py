"""Device backends: the emulated NumPy backend, backend choice, and (on a GPU) the CuPy backend."""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import ModuleType

import numpy as np
import pytest

from runtime.backends.base import BACKEND_ENV, Backend, Device, DeviceConfig, DeviceFull, Stream
from runtime.backends.numpy_backend import NumpyBackend
from runtime.backends.select import available_backends, choose_backend, cupy_unavailable_reason

MB = 1024 * 1024


def config(index: int = 0, speed: float = 1.0, mem_bytes: int = 64 * MB) -> DeviceConfig:
    return DeviceConfig(index=index, model="T4", mem_bytes=mem_bytes, speed=speed)


def matmul_loop(xp: ModuleType, a: np.ndarray, n: int) -> float:
    """A kernel of a few milliseconds per iteration that any array namespace runs."""
    acc = a
    for _ in range(n):
        acc = (acc @ a) / a.shape[0]
    return float(acc.sum())


def elementwise_loop(xp: ModuleType, a: np.ndarray, n: int) -> float:
    """A single-threaded kernel (no BLAS threads to fight over cores on a loaded machine)."""
    acc = 0.0
    for _ in range(n):
        acc += float(xp.sqrt(a * a + 1.0).sum())
    return acc


# ---- NumPy backend -------------------------------------------------------------------------------
def test_numpy_backend_satisfies_the_protocols() -> None:
    backend = NumpyBackend()
    device = backend.open(config())
    stream = device.new_stream()
    assert isinstance(backend, Backend)
    assert isinstance(device, Device)
    assert isinstance(stream, Stream)
    assert backend.name == "numpy" and backend.xp is np and device.xp is np
    assert backend.device_count() == 0
    assert [device.new_stream().index for _ in range(2)] == [1, 2]


def test_stream_runs_a_function_with_the_namespace_first() -> None:
    stream = NumpyBackend().open(config()).new_stream()
    result, seconds = stream.run(lambda xp, a, b: xp.add(a, b), np.arange(3), 1)
    assert result.tolist() == [1, 2, 3]
    assert seconds >= 0.0


def test_stream_propagates_kernel_errors() -> None:
    stream = NumpyBackend().open(config()).new_stream()

    def boom(xp: ModuleType) -> None:
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        stream.run(boom)


def test_slower_emulated_device_reports_proportionally_longer_times() -> None:
    backend = NumpyBackend()
    fast = backend.open(config(0, speed=3.0)).new_stream()
    slow = backend.open(config(1, speed=1.0)).new_stream()
    a = np.random.default_rng(0).random(200_000)
    n = _iterations_for(elementwise_loop, a, 0.02)
    ratios = []
    for _ in range(5):
        # Paired runs share the machine's load of the moment; the median drops a disturbed pair.
        fast_s = fast.run(elementwise_loop, a, n)[1]
        slow_s = slow.run(elementwise_loop, a, n)[1]
        ratios.append(slow_s / fast_s)
    assert 2.2 <= statistics.median(ratios) <= 4.0, ratios


def test_matmul_kernel_runs_on_a_lane() -> None:
    a = np.eye(400)
    total, seconds = NumpyBackend().open(config()).new_stream().run(matmul_loop, a, 3)
    assert total == pytest.approx(400 / 400**3) and seconds > 0


def test_reported_time_is_native_time_times_the_speed_factor() -> None:
    """Exact even under load: the kernel measures its own native time."""
    stream = NumpyBackend(max_speed=3.0).open(config(speed=1.0)).new_stream()

    def timed(xp: ModuleType) -> float:
        t0 = time.perf_counter()
        sum(range(50_000))
        return time.perf_counter() - t0

    native, reported = stream.run(timed)
    assert 3.0 * native <= reported <= 3.0 * native + 0.05


def test_lanes_of_a_slow_device_overlap_while_sleeping() -> None:
    """The emulated slowdown is a sleep, so another lane runs meanwhile."""
    backend = NumpyBackend(max_speed=20.0)
    device = backend.open(config(speed=1.0))
    lanes = [device.new_stream() for _ in range(4)]
    busy = [0.0] * 4

    def work(i: int) -> None:
        busy[i] = lanes[i].run(lambda xp: sum(range(100_000)))[1]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    assert min(busy) > 0
    assert wall < 0.6 * sum(busy)


def test_constructor_max_speed_sets_the_native_speed() -> None:
    backend = NumpyBackend(max_speed=4.0)
    assert backend.open(config(speed=2.0)).slowdown() == pytest.approx(1.0)
    backend.open(config(speed=8.0))  # faster than declared: raises the reference
    assert backend.max_speed == 8.0
    with pytest.raises(ValueError, match="speed"):
        backend.open(config(speed=0.0))


def test_upload_download_copy_and_count_bytes() -> None:
    device = NumpyBackend().open(config())
    stream = device.new_stream()
    host = np.arange(1000, dtype=np.float32)
    dev = stream.upload(host)
    host[0] = -1.0
    assert dev[0] == 0.0  # a transfer is a copy
    back = stream.download(dev)
    assert back is not dev and np.array_equal(back[1:], host[1:])
    stream.upload(np.zeros(10, dtype=np.int64))
    assert device.h2d_bytes == 4000 + 80
    assert device.d2h_bytes == 4000


def test_counters_are_thread_safe() -> None:
    device = NumpyBackend().open(config())
    streams = [device.new_stream() for _ in range(4)]
    host = np.zeros(8, dtype=np.uint8)

    def hammer(s: Stream) -> None:
        for _ in range(500):
            s.download(s.upload(host))

    threads = [threading.Thread(target=hammer, args=(s,)) for s in streams]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert device.h2d_bytes == device.d2h_bytes == 4 * 500 * 8


def test_closed_device_refuses_new_streams() -> None:
    device = NumpyBackend().open(config())
    device.close()
    with pytest.raises(RuntimeError, match="closed"):
        device.new_stream()


_BLAS_CHECK = """
from threadpoolctl import threadpool_info, threadpool_limits
from runtime.backends.base import DeviceConfig
from runtime.backends.numpy_backend import NumpyBackend

def blas():
    return sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})

threadpool_limits(limits=2, user_api="blas")
cfg = DeviceConfig(index=0, model="T4", mem_bytes=1 << 20, speed=1.0)
a, b = NumpyBackend().open(cfg), NumpyBackend().open(cfg)
print(blas())
a.close(); a.close()
print(blas())
b.close()
print(blas())
"""


def test_blas_is_single_threaded_while_emulated_devices_are_open() -> None:
    """One lane is one stream: BLAS threads inside lanes would oversubscribe the host's cores.
    The limit holds until the last device closes (closing twice counts once), then is undone."""
    r = subprocess.run([sys.executable, "-c", _BLAS_CHECK], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["[1]", "[1]", "[2]"]


# ---- backend choice ------------------------------------------------------------------------------
def test_choose_numpy_explicitly_and_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert choose_backend("numpy").name == "numpy"
    assert choose_backend(" NumPy ").name == "numpy"
    monkeypatch.setenv(BACKEND_ENV, "numpy")
    assert choose_backend().name == "numpy"


def test_bogus_env_names_the_accepted_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BACKEND_ENV, "bogus")
    with pytest.raises(ValueError, match=BACKEND_ENV) as err:
        choose_backend()
    assert "'numpy'" in str(err.value) and "'cupy'" in str(err.value)
    with pytest.raises(ValueError, match="accepted values"):
        choose_backend("tpu")


def test_automatic_choice_matches_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    expected = "cupy" if cupy_unavailable_reason() is None else "numpy"
    assert choose_backend().name == expected
    assert available_backends()[-1] == "numpy"
    assert ("cupy" in available_backends()) == (expected == "cupy")


def test_cupy_where_absent_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    reason = cupy_unavailable_reason()
    if reason is None:
        pytest.skip("CuPy is usable here")
    with pytest.raises(RuntimeError, match="cupy backend cannot run here"):
        choose_backend("cupy")
    assert capsys.readouterr() == ("", "")


# ---- CuPy backend (GPU machines only) -----------------------------------------------------------
@pytest.mark.gpu
def test_cupy_backend_on_a_gpu() -> None:
    if cupy_unavailable_reason() is not None:
        pytest.skip(f"no CuPy backend here: {cupy_unavailable_reason()}")
    backend = choose_backend("cupy")
    assert backend.name == "cupy" and backend.device_count() >= 1
    device = backend.open(config(mem_bytes=64 * MB))
    assert isinstance(device, Device)
    stream = device.new_stream()
    host = np.random.default_rng(1).random((256, 256)).astype(np.float32)
    dev = stream.upload(host)
    (total, seconds) = stream.run(lambda xp, a: float((a @ a).sum()), dev)
    assert seconds > 0
    assert total == pytest.approx(float((host @ host).sum()), rel=1e-3)
    assert np.array_equal(stream.download(dev), host)
    assert getattr(device, "h2d_bytes", 0) == host.nbytes
    assert getattr(device, "d2h_bytes", 0) == host.nbytes
    with pytest.raises(DeviceFull):
        stream.run(lambda xp: xp.empty(128 * MB, dtype=xp.uint8))
    device.close()


class _PoolOfCupy:
    """The two calls of CuPy's default memory pool that CupyDevice makes, recorded (a stand-in
    for the third-party library, so the pool-limit wiring is checked on machines without CUDA)."""

    def __init__(self) -> None:
        self.limits: list[int] = []

    def set_limit(self, size: int) -> None:
        self.limits.append(size)

    def free_all_blocks(self) -> None:
        """Nothing held."""


def _cupy_stand_in(pool: _PoolOfCupy) -> ModuleType:
    cp = ModuleType("cupy")
    cuda = ModuleType("cupy.cuda")
    cuda.Device = lambda index: contextlib.nullcontext()  # type: ignore[attr-defined]
    cp.cuda = cuda  # type: ignore[attr-defined]
    cp.get_default_memory_pool = lambda: pool  # type: ignore[attr-defined]
    return cp


def test_logical_gpus_folded_onto_one_device_share_its_pool_limit() -> None:
    """A spec may fold several logical GPUs onto one real device; CuPy's pool per device is one,
    so its limit is the sum of their caps (not the last one opened), and one closing gives back
    only its own share."""
    from runtime.backends.cupy_backend import CupyDevice

    pool = _PoolOfCupy()
    cp = _cupy_stand_in(pool)
    a = CupyDevice(cp, ModuleType("cupyx"), config(index=7, mem_bytes=256 * MB))
    b = CupyDevice(cp, ModuleType("cupyx"), config(index=7, mem_bytes=128 * MB))
    other = CupyDevice(cp, ModuleType("cupyx"), config(index=8, mem_bytes=64 * MB))
    assert pool.limits == [256 * MB, 384 * MB, 64 * MB]
    b.close()
    assert pool.limits[-1] == 256 * MB
    a.close()
    other.close()
    assert len(pool.limits) == 4  # the last one closing leaves the limit as it was


@pytest.mark.gpu
def test_folded_gpus_can_use_their_summed_memory_on_a_gpu() -> None:
    if cupy_unavailable_reason() is not None:
        pytest.skip(f"no CuPy backend here: {cupy_unavailable_reason()}")
    backend = choose_backend("cupy")
    a, b = backend.open(config(mem_bytes=64 * MB)), backend.open(config(mem_bytes=64 * MB))
    stream = a.new_stream()
    stream.run(lambda xp: int(xp.ones(100 * MB, dtype=xp.uint8).sum()))  # 100 MB < 64 + 64
    b.close()
    with pytest.raises(DeviceFull):
        stream.run(lambda xp: xp.ones(100 * MB, dtype=xp.uint8))
    a.close()


def _iterations_for(kernel: Callable[..., float], a: np.ndarray, target_s: float) -> int:
    """How many iterations of ``kernel`` take about ``target_s`` on this machine (unloaded)."""
    per = []
    for _ in range(3):
        t0 = time.perf_counter()
        kernel(np, a, 2)
        per.append((time.perf_counter() - t0) / 2)
    return max(1, round(target_s / max(min(per), 1e-5)))


def test_engines_are_handed_out_in_arrival_order() -> None:
    """A lane that runs kernels back to back on a one-engine device must not starve another."""
    import threading
    import time

    from runtime.backends.numpy_backend import FairEngines

    engines = FairEngines(1)
    stop = threading.Event()

    def hog() -> None:
        while not stop.is_set():
            with engines:
                time.sleep(0.002)

    t = threading.Thread(target=hog, daemon=True)
    t.start()
    time.sleep(0.01)
    t0 = time.perf_counter()
    with engines:
        waited = time.perf_counter() - t0
    stop.set()
    t.join(timeout=2)
    assert waited < 0.1

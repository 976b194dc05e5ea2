"""NumPy backend: emulated GPUs on the host, for machines without CUDA and for tests.

Each stream is a *lane*: the agent's thread for that stream calls :meth:`NumpyStream.run`, which
runs the kernel in that thread. Emulated devices carry a relative speed; a kernel on a device of
speed ``s`` keeps its lane busy ``max_speed / s`` times its native run time, the extra time spent
sleeping (sleep releases the GIL, so other lanes run meanwhile). That makes a heterogeneous
cluster observable on one CPU: schedulers see slower devices finish later, exactly as on real GPUs.

While any emulated device is open, BLAS runs one thread per call: a lane is one stream (or core),
and multi-threaded BLAS inside each lane would oversubscribe the host's cores, so that a second
stream bought almost nothing (measured in BENCHMARKS.md, "Streams per GPU").
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

import numpy as np
from threadpoolctl import threadpool_limits

from runtime.backends.base import DeviceConfig, TransferCounters

T = TypeVar("T")


class _SingleThreadBlas:
    """Hold BLAS at one thread while any emulated device is open; restore it after the last."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._limits: threadpool_limits | None = None

    def acquire(self) -> None:
        with self._lock:
            if self._users == 0:
                self._limits = threadpool_limits(limits=1, user_api="blas")
            self._users += 1

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._limits is not None:
                self._limits.restore_original_limits()
                self._limits = None


_BLAS = _SingleThreadBlas()


class FairEngines:
    """``n`` engines handed out in arrival order.

    A plain semaphore lets the thread that releases an engine take it straight back, so one lane
    running kernels back to back would starve the others; a GPU's hardware scheduler interleaves
    streams, so waiting kernels go first here.

    :param n: engines.
    """

    def __init__(self, n: int) -> None:
        self._free = n
        self._queue: collections.deque[object] = collections.deque()
        self._cond = threading.Condition()

    def __enter__(self) -> FairEngines:
        me = object()
        with self._cond:
            self._queue.append(me)
            while self._queue[0] is not me or self._free == 0:
                self._cond.wait()
            self._queue.popleft()
            self._free -= 1
            self._cond.notify_all()  # the next in line may take another free engine
        return self

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._free += 1
            self._cond.notify_all()


class NumpyStream:
    """One lane of an emulated device.

    :param device: the device the lane belongs to.
    :param index: the lane's number on its device.
    """

    def __init__(self, device: NumpyDevice, index: int) -> None:
        self.device = device
        self.index = index

    def run(self, fn: Callable[..., T], *args: Any) -> tuple[T, float]:
        """Run ``fn(numpy, *args)`` in the calling thread, stretched to the device's speed.

        :param fn: the kernel; receives the array namespace first.
        :param args: the kernel's arguments.
        :return: ``(result, seconds the lane was busy)``.
        """
        t0 = time.perf_counter()
        # The kernel holds one of the device's engines while it runs and while it is stretched to
        # the device's speed: more streams than engines wait, as kernels queue on a real GPU, and
        # the wait counts in the measured time as it would between CUDA events.
        with self.device.engine():
            k0 = time.perf_counter()
            result = fn(np, *args)
            extra = (time.perf_counter() - k0) * self.device.slowdown()
            if extra > 0:
                time.sleep(extra)
        return result, time.perf_counter() - t0

    def upload(self, host: np.ndarray) -> np.ndarray:
        """Copy a host array "to the device" (a private copy, as a real transfer makes).

        :param host: the host array.
        :return: the device-side copy.
        """
        out = np.array(host, copy=True)
        self.device.count_h2d(out.nbytes)
        return out

    def download(self, arr: Any) -> np.ndarray:
        """Copy a device array back to the host.

        :param arr: the device-side array.
        :return: a host copy.
        """
        out = np.array(arr, copy=True)
        self.device.count_d2h(out.nbytes)
        return out


class NumpyDevice(TransferCounters):
    """An emulated GPU.

    :param backend: the backend that opened it (it knows the fastest device's speed).
    :param config: how the device was opened.
    """

    xp: ModuleType = np

    def __init__(self, backend: NumpyBackend, config: DeviceConfig) -> None:
        super().__init__()
        self.config = config
        self._backend = backend
        self._lock = threading.Lock()
        self._streams: list[NumpyStream] = []
        self._closed = False
        self._engines = FairEngines(config.concurrency) if config.concurrency > 0 else None
        _BLAS.acquire()

    @property
    def streams(self) -> list[NumpyStream]:
        """The streams created so far (a copy of the list)."""
        with self._lock:
            return list(self._streams)

    def engine(self) -> contextlib.AbstractContextManager[object]:
        """Hold one of the device's ``concurrency`` engines (no limit when it is 0)."""
        return self._engines if self._engines is not None else contextlib.nullcontext()

    def slowdown(self) -> float:
        """Extra lane time per second of native run time: ``max_speed / speed - 1`` (>= 0)."""
        return max(self._backend.max_speed / self.config.speed - 1.0, 0.0)

    def new_stream(self) -> NumpyStream:
        """Create one more lane on the device."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"device {self.config.index} is closed")
            stream = NumpyStream(self, len(self._streams))
            self._streams.append(stream)
            return stream

    def close(self) -> None:
        """Forget the streams; later :meth:`new_stream` calls fail. Idempotent."""
        with self._lock:
            was_open, self._closed = not self._closed, True
            self._streams.clear()
        if was_open:
            _BLAS.release()


class NumpyBackend:
    """Emulated devices on the host CPU.

    :param max_speed: the speed that runs kernels at native speed. ``None``: the largest speed
        of any device opened so far. A device opened with a larger speed raises it either way,
        so no device is ever asked to run faster than native.
    """

    name = "numpy"
    xp: ModuleType = np

    def __init__(self, max_speed: float | None = None) -> None:
        if max_speed is not None and max_speed <= 0:
            raise ValueError(f"max_speed must be positive, got {max_speed}")
        self._lock = threading.Lock()
        self._max_speed = max_speed or 0.0

    @property
    def max_speed(self) -> float:
        """The speed that runs at native speed (1.0 before any device is opened)."""
        with self._lock:
            return self._max_speed or 1.0

    def device_count(self) -> int:
        """Emulated devices are unlimited: reported as 0."""
        return 0

    def open(self, config: DeviceConfig) -> NumpyDevice:
        """Open an emulated device.

        :param config: index, model, memory and relative speed of the device.
        :return: the device.
        """
        if config.speed <= 0:
            raise ValueError(f"device speed must be positive, got {config.speed}")
        with self._lock:
            self._max_speed = max(self._max_speed, config.speed)
        return NumpyDevice(self, config)

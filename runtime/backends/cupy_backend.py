"""CuPy backend: real CUDA devices.

Every stream is a non-blocking ``cupy.cuda.Stream``; the agent drives each from its own host
thread (a lane), so kernels on different streams of one GPU overlap on the device while each lane
waits only for its own work. Kernel time is taken from CUDA events, not the host clock, so it is
the time the GPU spent and not the time the lane waited for the GIL.

``cupy`` is imported in :class:`CupyBackend`'s constructor only: this module is safe to import on
machines without CuPy (the CPU path never constructs the backend).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, TypeVar

import numpy as np

from runtime.backends.base import DeviceConfig, DeviceFull, TransferCounters

T = TypeVar("T")

# CuPy's default pool is one per process and device: logical GPUs that a spec folds onto one real
# device (runtime.cluster.config.fold_ordinals) share it, so its limit must be the sum of their
# caps. A last-writer-wins limit capped four folded GPUs of 896 MiB in all at the last one's 256.
_POOL_SHARES: dict[int, dict[int, int]] = {}
_POOL_LOCK = threading.Lock()


def pool_limit_after(index: int, key: int, mem_bytes: int | None) -> int:
    """Record (or, with ``mem_bytes=None``, drop) one logical GPU's cap on real device ``index``.

    :param index: the CUDA ordinal.
    :param key: the logical device's identity (``id()`` of its :class:`CupyDevice`).
    :param mem_bytes: its cap, or None when it closes.
    :return: the sum of the caps still open on that device (0 when none is).
    """
    with _POOL_LOCK:
        shares = _POOL_SHARES.setdefault(index, {})
        if mem_bytes is None:
            shares.pop(key, None)
        else:
            shares[key] = mem_bytes
        return sum(shares.values())


class CupyStream:
    """One CUDA stream of a device.

    :param device: the device the stream belongs to.
    :param index: the stream's number on its device.
    """

    def __init__(self, device: CupyDevice, index: int) -> None:
        cp = device.xp
        self.device = device
        self.index = index
        with device.cuda_device:
            self.cuda_stream = cp.cuda.Stream(non_blocking=True)
        # Pinned staging buffers of uploads that may still be in flight: freeing one early would
        # let the pinned pool hand its pages to another copy while the DMA still reads them.
        self._in_flight: list[tuple[Any, Any]] = []
        # The agent may share one stream between lanes (e.g. a per-device copy stream).
        self._lock = threading.Lock()

    def run(self, fn: Callable[..., T], *args: Any) -> tuple[T, float]:
        """Launch ``fn(cupy, *args)`` on this stream, wait for it, time it with CUDA events.

        :param fn: the kernel; receives the array namespace first.
        :param args: the kernel's arguments (device arrays).
        :return: ``(result, device seconds between the events)``.
        :raises DeviceFull: the kernel ran out of device memory (pool limit or physical).
        """
        cp = self.device.xp
        stream = self.cuda_stream
        with self.device.cuda_device, stream, self.device.out_of_memory_as_full():
            # Events belong to the device that is current when they are created.
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record(stream)
            result = fn(cp, *args)
            end.record(stream)
            end.synchronize()
        self._forget_finished()
        return result, cp.cuda.get_elapsed_time(start, end) / 1000.0

    def upload(self, host: np.ndarray) -> Any:
        """Copy a host array to the device on this stream, asynchronously (from pinned memory).

        :param host: the host array.
        :return: the device array; work later queued on this stream sees it complete.
        :raises DeviceFull: no device memory for it.
        """
        cp = self.device.xp
        src = np.ascontiguousarray(host)
        pinned = self.device.cupyx.empty_pinned(src.shape, dtype=src.dtype)
        pinned[...] = src
        with self.device.cuda_device, self.cuda_stream, self.device.out_of_memory_as_full():
            arr = cp.empty(src.shape, dtype=src.dtype)
            arr.set(pinned, stream=self.cuda_stream)
            done = self.cuda_stream.record()
        with self._lock:
            self._in_flight.append((done, pinned))
        self._forget_finished()
        self.device.count_h2d(src.nbytes)
        return arr

    def download(self, arr: Any) -> np.ndarray:
        """Copy a device array back to the host and wait for it.

        :param arr: the device array.
        :return: the host copy.
        """
        with self.device.cuda_device:
            out = arr.get(stream=self.cuda_stream)
            self.cuda_stream.synchronize()
        self._forget_finished()
        self.device.count_d2h(out.nbytes)
        return np.asarray(out)

    def _forget_finished(self) -> None:
        # Only entries whose copy is done: another thread may have queued one after our sync.
        with self._lock:
            self._in_flight = [(ev, buf) for ev, buf in self._in_flight if not ev.done]


class CupyDevice(TransferCounters):
    """One CUDA GPU whose CuPy memory pool is capped at ``config.mem_bytes``.

    :param cp: the ``cupy`` module.
    :param cupyx: the ``cupyx`` module (pinned host arrays).
    :param config: which device and how much memory the runtime may take on it.
    """

    def __init__(self, cp: ModuleType, cupyx: ModuleType, config: DeviceConfig) -> None:
        super().__init__()
        self.xp = cp
        self.cupyx = cupyx
        self.config = config
        self.cuda_device = cp.cuda.Device(config.index)
        self._lock = threading.Lock()
        self._streams: list[CupyStream] = []
        limit = pool_limit_after(config.index, id(self), config.mem_bytes)
        with self.cuda_device:
            # The default pool keeps one arena per device; set_limit acts on the current one.
            cp.get_default_memory_pool().set_limit(size=limit)

    @contextlib.contextmanager
    def out_of_memory_as_full(self) -> Iterator[None]:
        """Turn CuPy's out-of-memory error inside the block into :class:`DeviceFull`."""
        try:
            yield
        except self.xp.cuda.memory.OutOfMemoryError as exc:
            raise DeviceFull(f"GPU {self.config.index}: {exc}") from exc

    def new_stream(self) -> CupyStream:
        """Create one more CUDA stream on the device."""
        stream = CupyStream(self, 0)
        with self._lock:
            stream.index = len(self._streams)
            self._streams.append(stream)
        return stream

    def close(self) -> None:
        """Wait for the streams, drop them and return the pool's free blocks to the driver."""
        with self._lock:
            streams, self._streams = self._streams, []
        limit = pool_limit_after(self.config.index, id(self), None)
        with self.cuda_device:
            for s in streams:
                s.cuda_stream.synchronize()
            pool = self.xp.get_default_memory_pool()
            if limit:  # the logical GPUs still open on this device keep their share
                pool.set_limit(size=limit)
            pool.free_all_blocks()


class CupyBackend:
    """Real CUDA GPUs through CuPy.

    :raises ImportError: CuPy is not installed.
    """

    name = "cupy"

    def __init__(self) -> None:
        import cupy
        import cupyx

        self.xp: ModuleType = cupy
        self._cupyx: ModuleType = cupyx

    def device_count(self) -> int:
        """CUDA devices visible to this process (0 where the driver finds none)."""
        try:
            return int(self.xp.cuda.runtime.getDeviceCount())
        except self.xp.cuda.runtime.CUDARuntimeError:
            return 0

    def open(self, config: DeviceConfig) -> CupyDevice:
        """Open a CUDA device and cap its memory pool.

        :param config: ``index`` is the CUDA ordinal; ``mem_bytes`` the pool limit; ``speed`` is
            ignored (a real GPU runs at its own speed).
        :return: the device.
        """
        count = self.device_count()
        if not 0 <= config.index < count:
            raise ValueError(f"no CUDA device {config.index}: {count} visible")
        return CupyDevice(self.xp, self._cupyx, config)

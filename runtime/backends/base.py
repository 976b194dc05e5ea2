"""Device backend protocols: what the node agent needs from a GPU (real or emulated).

A backend owns devices; a device owns streams and a memory manager. The agent runs every stream
as one host *lane* (a thread that launches work on that stream and waits for it), so the CuPy and
NumPy backends look the same to it: ``stream.run(fn, *args)`` blocks until the kernel finished and
returns its result with the time the device spent on it.

Kernels are written once against the array namespace ``xp`` (``numpy`` or ``cupy``) and receive
it as their first argument.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

T = TypeVar("T")

#: Environment variable that overrides automatic backend choice: ``numpy`` or ``cupy``.
BACKEND_ENV = "RLSCHED_BACKEND"


class DeviceFull(RuntimeError):
    """A device cannot hold an allocation even after evicting every cached input it may drop.

    The agent hands the subtask back for another device (or a CPU core); it never crashes a run.
    """


@dataclass(frozen=True)
class DeviceConfig:
    """How to open one device.

    :param index: physical device ordinal (CuPy) or emulated device number (NumPy).
    :param model: GPU catalog model the device presents to schedulers (``rlsched.hardware``).
    :param mem_bytes: memory capacity the runtime may use on it (a pool limit on a real GPU).
    :param speed: emulation only: relative speed; kernels on a device of speed ``s`` take
        ``max_speed / s`` times their native time, where ``max_speed`` is the fastest emulated
        device of the backend. Ignored by real GPUs.
    :param concurrency: emulation only: kernels the device runs at once (its engines); more
        streams queue behind them, as on a real GPU. 0 = unlimited.
    """

    index: int
    model: str
    mem_bytes: int
    speed: float = 1.0
    concurrency: int = 0


class TransferCounters:
    """Host-to-device and device-to-host bytes of one device, safe to count from any lane."""

    def __init__(self) -> None:
        self._count_lock = threading.Lock()
        self._h2d = 0
        self._d2h = 0

    @property
    def h2d_bytes(self) -> int:
        """Bytes uploaded to this device so far."""
        with self._count_lock:
            return self._h2d

    @property
    def d2h_bytes(self) -> int:
        """Bytes downloaded from this device so far."""
        with self._count_lock:
            return self._d2h

    def count_h2d(self, nbytes: int) -> None:
        """Account an upload of ``nbytes``."""
        with self._count_lock:
            self._h2d += nbytes

    def count_d2h(self, nbytes: int) -> None:
        """Account a download of ``nbytes``."""
        with self._count_lock:
            self._d2h += nbytes


@runtime_checkable
class Stream(Protocol):
    """One asynchronous work queue on a device."""

    index: int

    def run(self, fn: Callable[..., T], *args: Any) -> tuple[T, float]:
        """Run ``fn(xp, *args)`` on this stream, wait for it, return ``(result, device_seconds)``."""
        ...

    def upload(self, host: np.ndarray) -> Any:
        """Copy a host array to the device on this stream (asynchronous where the backend allows)."""
        ...

    def download(self, arr: Any) -> np.ndarray:
        """Copy a device array back to the host and wait for it."""
        ...


@runtime_checkable
class Device(Protocol):
    """One GPU, real or emulated."""

    config: DeviceConfig
    xp: ModuleType

    def new_stream(self) -> Stream:
        """Create one more stream on the device."""
        ...

    def close(self) -> None:
        """Release streams and pooled memory."""
        ...


@runtime_checkable
class Backend(Protocol):
    """A family of devices: ``numpy`` (emulated) or ``cupy`` (CUDA)."""

    name: str
    xp: ModuleType

    def device_count(self) -> int:
        """Devices this backend can open (emulated backends: unlimited, reported as 0)."""
        ...

    def open(self, config: DeviceConfig) -> Device:
        """Open a device."""
        ...

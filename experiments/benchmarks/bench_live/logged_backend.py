"""A backend wrapper that logs what its streams do (kernel intervals, copies), for the sections
that measure the runtime from the streams' side without touching the agent."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

import numpy as np

from runtime.backends.base import Backend, Device, DeviceConfig, Stream

T = TypeVar("T")


@dataclass
class StreamLog:
    """What the wrapped streams did, appended from lane threads (``list.append`` is atomic).

    ``kernels``: ``(wall start, wall end, kernel seconds the stream reported)`` of each ``run``;
    ``copies``: ``(wall seconds, bytes)`` of each upload, ``uploads`` only the bytes of uploads.
    """

    kernels: list[tuple[float, float, float]] = field(default_factory=list)
    copies: list[tuple[float, int]] = field(default_factory=list)
    upload_bytes: list[int] = field(default_factory=list)


class LoggedStream:
    """A stream that forwards to ``inner`` and logs kernel and copy times.

    The runtime does not expose per-subtask kernel seconds; the stream is where the agent takes
    them, so logging here measures exactly what the agent measures, without touching it.
    """

    def __init__(self, inner: Stream, log: StreamLog) -> None:
        self.inner = inner
        self.index = inner.index
        self.log = log

    def run(self, fn: Callable[..., T], *args: Any) -> tuple[T, float]:
        """Forward ``run`` and log its wall interval and reported seconds."""
        t0 = time.perf_counter()
        result, secs = self.inner.run(fn, *args)
        self.log.kernels.append((t0, time.perf_counter(), secs))
        return result, secs

    def upload(self, host: np.ndarray) -> Any:
        """Forward ``upload`` and log its wall time and bytes."""
        t0 = time.perf_counter()
        out = self.inner.upload(host)
        self.log.copies.append((time.perf_counter() - t0, int(host.nbytes)))
        self.log.upload_bytes.append(int(host.nbytes))
        return out

    def download(self, arr: Any) -> np.ndarray:
        """Forward ``download`` and log its wall time and bytes."""
        t0 = time.perf_counter()
        out = self.inner.download(arr)
        self.log.copies.append((time.perf_counter() - t0, int(out.nbytes)))
        return out


class LoggedDevice:
    """A device whose streams are :class:`LoggedStream`."""

    def __init__(self, inner: Device, log: StreamLog) -> None:
        self.inner = inner
        self.config: DeviceConfig = inner.config
        self.xp: ModuleType = inner.xp
        self.log = log

    def new_stream(self) -> Stream:
        """A logged stream on the inner device."""
        return LoggedStream(self.inner.new_stream(), self.log)

    def close(self) -> None:
        """Close the inner device."""
        self.inner.close()


class LoggedBackend:
    """Wraps a backend so every device it opens logs into one :class:`StreamLog`."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.xp: ModuleType = inner.xp
        self.log = StreamLog()

    def device_count(self) -> int:
        """The inner backend's device count."""
        return self.inner.device_count()

    def open(self, config: DeviceConfig) -> Device:
        """Open a logged device."""
        return LoggedDevice(self.inner.open(config), self.log)

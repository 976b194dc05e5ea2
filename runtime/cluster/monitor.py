"""GPU monitoring through NVML (``nvidia-ml-py``, import name ``pynvml``), where a driver exists.

Where NVML is missing (no package, no driver) the runtime falls back to its own accounting;
:meth:`NvmlMonitor.available` says which, cheaply and silently. Queries a GPU does not support
(utilisation on MIG-enabled GPUs, power on some boards) come back as ``None`` instead of failing
the whole sample.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

import numpy as np

from rlsched.view import ClusterView

T = TypeVar("T")

_MIB = 1024 * 1024


@dataclass(frozen=True)
class GpuSample:
    """One GPU as NVML reports it at one moment.

    :param index: NVML device index.
    :param name: product name.
    :param util_percent: GPU busy percentage over the driver's last window; ``None`` where
        unsupported (MIG).
    :param mem_used_bytes: device memory in use (all processes).
    :param mem_total_bytes: device memory in total.
    :param power_w: board power draw; ``None`` where unsupported.
    :param temperature_c: core temperature; ``None`` where unsupported.
    :param mig_mode: whether MIG is enabled; ``None`` where the GPU has no MIG.
    """

    index: int
    name: str
    util_percent: float | None
    mem_used_bytes: int
    mem_total_bytes: int
    power_w: float | None
    temperature_c: float | None
    mig_mode: bool | None


def _import_pynvml() -> ModuleType | None:
    try:
        with warnings.catch_warnings():
            # The deprecated ``pynvml`` distribution warns on import; never let that escape.
            warnings.simplefilter("ignore")
            return importlib.import_module("pynvml")
    except Exception:
        return None


class NvmlMonitor:
    """Samples every GPU NVML sees.

    :param nvml: the ``pynvml`` module (default: imported here); tests pass a stand-in.
    :raises RuntimeError: NVML cannot be initialised (no package or no driver).
    """

    def __init__(self, nvml: ModuleType | None = None) -> None:
        nvml = nvml or _import_pynvml()
        if nvml is None:
            raise RuntimeError("NVML unavailable: the nvidia-ml-py package is not installed")
        try:
            nvml.nvmlInit()
        except Exception as exc:
            raise RuntimeError(f"NVML unavailable: {exc}") from exc
        self._nvml: ModuleType | None = nvml

    @staticmethod
    @functools.cache
    def available() -> bool:
        """Whether NVML works here (package and driver); cached, silent, never raises."""
        nvml = _import_pynvml()
        if nvml is None:
            return False
        try:
            nvml.nvmlInit()
            nvml.nvmlShutdown()
        except Exception:
            return False
        return True

    def sample(self) -> list[GpuSample]:
        """One sample of every GPU.

        :return: samples in NVML index order.
        :raises RuntimeError: the monitor was closed.
        """
        nvml = self._nvml
        if nvml is None:
            raise RuntimeError("NvmlMonitor is closed")
        return [self._sample_one(nvml, i) for i in range(nvml.nvmlDeviceGetCount())]

    def close(self) -> None:
        """Shut NVML down (idempotent)."""
        nvml, self._nvml = self._nvml, None
        if nvml is not None:
            nvml.nvmlShutdown()

    def __enter__(self) -> NvmlMonitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _sample_one(nvml: ModuleType, index: int) -> GpuSample:
        h = nvml.nvmlDeviceGetHandleByIndex(index)
        name = nvml.nvmlDeviceGetName(h)
        mem = nvml.nvmlDeviceGetMemoryInfo(h)
        util = _optional(nvml, lambda: float(nvml.nvmlDeviceGetUtilizationRates(h).gpu))
        power_mw = _optional(nvml, lambda: float(nvml.nvmlDeviceGetPowerUsage(h)))
        temp = _optional(nvml, lambda: float(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)))
        mig = _optional(nvml, lambda: nvml.nvmlDeviceGetMigMode(h)[0] == nvml.NVML_DEVICE_MIG_ENABLE)
        return GpuSample(
            index=index,
            # Older nvidia-ml-py releases return bytes.
            name=name.decode() if isinstance(name, bytes) else str(name),
            util_percent=util,
            mem_used_bytes=int(mem.used),
            mem_total_bytes=int(mem.total),
            power_w=None if power_mw is None else power_mw / 1000.0,
            temperature_c=temp,
            mig_mode=mig,
        )


def _optional(nvml: Any, query: Callable[[], T]) -> T | None:
    """``query()``, or ``None`` where the GPU does not support it."""
    try:
        return query()
    except nvml.NVMLError:
        return None


def fill_view_from_samples(
    view: ClusterView, node: int, samples: Sequence[GpuSample], gpu_map: dict[int, int]
) -> None:
    """Write measured GPU memory and utilisation of one node into a view.

    Memory goes to ``view.gpu_mem_used_mb[node, g]``; utilisation (no view array holds it) to
    ``view.extra["gpu_util"][node, g]`` as a fraction in [0, 1], created on first use. Samples of
    GPUs not in ``gpu_map`` are skipped; unsupported utilisation leaves the old value.

    :param view: the cluster view to update.
    :param node: the node's row in the view.
    :param samples: NVML samples of the node's GPUs.
    :param gpu_map: NVML device index -> GPU slot of the node in the view.
    """
    util = view.extra.get("gpu_util")
    if util is None or util.shape != view.gpu_mem_used_mb.shape:
        util = np.zeros(view.gpu_mem_used_mb.shape)
        view.extra["gpu_util"] = util
    for s in samples:
        g = gpu_map.get(s.index)
        if g is None:
            continue
        view.gpu_mem_used_mb[node, g] = s.mem_used_bytes / _MIB
        if s.util_percent is not None:
            util[node, g] = s.util_percent / 100.0
    view.resync()

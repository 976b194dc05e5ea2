"""The live world: real kernels on CuPy streams (or emulated GPUs on NumPy) with MLSM memory
management and stream feedback, run by node agents in-process or on Ray.

``runtime.cluster`` is the cluster side (agents, backends, the live session), ``runtime.mlsm``
the MLSM side (memory manager, residency, stream pools), ``runtime.backends`` the devices and
``runtime.kernels`` the apps' kernels. Public names are imported on first use (PEP 562).
"""

from __future__ import annotations

from rlsched.lazy import lazy_dir, lazy_exports

_EXPORTS = {
    "LocalCluster": "runtime.cluster.local",
    "RayCluster": "runtime.cluster.ray_cluster",
    "LiveSession": "runtime.cluster.live",
    "LiveOptions": "runtime.cluster.live",
    "LiveResult": "runtime.cluster.live",
    "run_live": "runtime.cluster.live",
    "LiveClusterSpec": "runtime.cluster.config",
    "default_live_cluster": "runtime.cluster.config",
    "load_live_cluster": "runtime.cluster.config_io",
    "write_live_cluster": "runtime.cluster.config_io",
    "LiveWorkload": "runtime.cluster.workload",
    "LiveSchedulingEnv": "runtime.cluster.gym_env",
    "LiveProfiler": "runtime.profiler",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
__dir__ = lazy_dir(__name__, _EXPORTS)

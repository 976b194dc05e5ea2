"""The cluster side of the live runtime: node agents, the in-process and Ray cluster backends,
the live session (a :class:`rlsched.world.World` in wall-clock time), cluster files, live
workloads, the live Gym environment and NVML monitoring.

Names are imported on first use (PEP 562): the Ray backend brings in ray, which the in-process
cluster does without.
"""

from __future__ import annotations

from rlsched.lazy import lazy_dir, lazy_exports

_EXPORTS = {
    "ClusterBackend": "runtime.cluster.backend",
    "ClusterStats": "runtime.cluster.backend",
    "DeviceReport": "runtime.cluster.backend",
    "LocalCluster": "runtime.cluster.local",
    "RayCluster": "runtime.cluster.ray_cluster",
    "NodeAgent": "runtime.cluster.agent",
    "TaskOutcome": "runtime.cluster.backend",
    "LiveOptions": "runtime.cluster.live",
    "LiveResult": "runtime.cluster.live",
    "LiveSession": "runtime.cluster.live",
    "run_live": "runtime.cluster.live",
    "LiveClusterSpec": "runtime.cluster.config",
    "default_live_cluster": "runtime.cluster.config",
    "load_live_cluster": "runtime.cluster.config_io",
    "LiveWorkload": "runtime.cluster.workload_spec",
    "build_work": "runtime.cluster.workload",
    "LiveSchedulingEnv": "runtime.cluster.gym_env",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
__dir__ = lazy_dir(__name__, _EXPORTS)

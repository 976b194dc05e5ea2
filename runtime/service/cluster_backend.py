"""The cluster backend a service config names: agents in this process, or on Ray (joining
``ray_address``, ``$RAY_ADDRESS`` when the key is left out, or a local Ray started here)."""

from __future__ import annotations

from rlsched.errors import Unavailable
from runtime.cluster.backend import ClusterBackend
from runtime.cluster.config import LiveClusterSpec
from runtime.cluster.local import LocalCluster
from runtime.service.config import ServiceConfig


def make_cluster(config: ServiceConfig, spec: LiveClusterSpec) -> ClusterBackend:
    """The cluster backend ``config`` names (Ray: joins ``ray_address``, or starts a local Ray)."""
    if config.backend == "local":
        return LocalCluster(spec)
    import ray

    from runtime.cluster.ray_address import ray_address, ray_init
    from runtime.cluster.ray_cluster import RayCluster
    from runtime.service.log_format import adopt

    adopt("ray")  # Ray's own lines in the service's format (text or json)

    # Without the key, Ray follows $RAY_ADDRESS when it is set, and starts a local Ray when not.
    what = "ray_address" if config.ray_address is not None else "RAY_ADDRESS"
    started_here = not ray.is_initialized() and ray_address(config.ray_address) is None
    if not ray.is_initialized():
        ray_init(config.ray_address, what, include_dashboard=False, log_to_driver=False)
    # A Ray started here has one node: the spec's agents share it. A joined cluster gets one
    # agent per Ray node.
    alive = sum(1 for x in ray.nodes() if x.get("Alive"))
    if not started_here and alive < len(spec.nodes):
        raise Unavailable(
            f"{what} {ray_address(config.ray_address) or 'auto'}",
            f"the live cluster has {len(spec.nodes)} nodes but Ray has {alive} alive: start more Ray "
            "nodes, or give the cluster file (the `cluster` key; without it, the embedded cluster "
            "of 2 nodes) no more nodes than Ray has",
        )
    # The service returns the outputs' digest only: nodes send that, not the arrays.
    return RayCluster(spec, share_nodes=started_here, outputs="digest")

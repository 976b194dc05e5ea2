"""Both cluster backends implement :class:`~runtime.cluster.backend.ClusterBackend` in full, so
``run_live`` and the service never probe a backend for optional attributes.

``RayCluster`` cannot be built without a running Ray: its methods are checked on the class, and
its instance attributes in its ``__init__`` (``tests/test_runtime_ray.py`` checks a live one with
``isinstance``).
"""

from __future__ import annotations

import ast
import inspect
import math
import textwrap

import pytest

from runtime.cluster.backend import ClusterBackend, ClusterStats
from runtime.cluster.config import LiveClusterSpec, LiveGpu, LiveNode
from runtime.cluster.local import LocalCluster
from runtime.cluster.ray_cluster import RayCluster

BACKENDS = [LocalCluster, RayCluster]


def protocol_methods(proto: type) -> dict[str, inspect.Signature]:
    """The protocol's methods (public, defined on it) with their signatures."""
    return {
        name: inspect.signature(fn)
        for name, fn in vars(proto).items()
        if inspect.isfunction(fn) and not name.startswith("_")
    }


def protocol_attributes(proto: type) -> set[str]:
    """The protocol's data members (its annotations)."""
    return set(proto.__annotations__)


def init_attributes(cls: type) -> set[str]:
    """Attributes ``cls.__init__`` assigns on ``self`` (``self.x = ...``, ``self.x, self.y = ...``)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls.__init__)))  # type: ignore[misc]
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }


def missing_members(cls: type, proto: type = ClusterBackend) -> list[str]:
    """Protocol members ``cls`` lacks or whose parameters differ from the protocol's."""
    bad = []
    for name, sig in protocol_methods(proto).items():
        impl = getattr(cls, name, None)
        if not callable(impl):
            bad.append(f"{name}: missing")
        elif list(inspect.signature(impl).parameters) != list(sig.parameters):
            bad.append(f"{name}: parameters {inspect.signature(impl)} differ from {sig}")
    bad += [f"{a}: not set in __init__" for a in sorted(protocol_attributes(proto) - init_attributes(cls))]
    return bad


def test_the_protocol_covers_what_run_live_and_the_service_use() -> None:
    assert {"stats", "location", "free_hosts", "device_reports", "withdraw"} <= set(
        protocol_methods(ClusterBackend)
    )
    assert protocol_attributes(ClusterBackend) == {"spec", "view", "lock", "backend_name"}


@pytest.mark.parametrize("cls", BACKENDS, ids=lambda c: c.__name__)
def test_backend_implements_every_protocol_member(cls: type) -> None:
    assert missing_members(cls) == []


def test_the_check_sees_a_missing_member() -> None:
    class Partial(LocalCluster):
        stats = None  # type: ignore[assignment]

        def location(self, node: int, extra: int = 0) -> str | None:
            return None

    assert missing_members(Partial) == [
        "stats: missing",
        "location: parameters (self, node: 'int', extra: 'int' = 0) -> 'str | None' differ from "
        "(self, node: 'int') -> 'str | None'",
    ]


def test_local_cluster_is_a_cluster_backend() -> None:
    spec = LiveClusterSpec(nodes=(LiveNode("a", cpu_cores=1, gpus=(LiveGpu("T4", 0, 64),)),))
    cluster = LocalCluster(spec, "numpy")
    assert isinstance(cluster, ClusterBackend)
    assert cluster.location(0) is None and cluster.free_hosts() == []
    assert cluster.stats() == ClusterStats()  # no agents before start()
    assert math.isnan(cluster.stats().dispatch_us_per_subtask)


def test_cluster_stats_add_up() -> None:
    parts = [ClusterStats(1, 4, 0.002), ClusterStats(0, 6, 0.003)]
    total = ClusterStats.total(parts)
    assert (total.stream_moves, total.subtasks_done) == (1, 10)
    assert total.dispatch_us_per_subtask == pytest.approx(500.0)
    assert ClusterStats.total([]) == ClusterStats()

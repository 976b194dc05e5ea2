"""Measured speeds relative to the cluster (runtime/cluster/speed_reference.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlsched.view import ClusterView
from runtime.cluster.config import LiveClusterSpec, LiveGpu, LiveNode
from runtime.cluster.ray_actor import apply_node_snapshot, node_snapshot
from runtime.cluster.speed_reference import CPU_UNIT, SpeedReference

#: (node, gpu) -> how much slower than its datasheet; kind -> its raw level on this backend.
SLOWDOWN = {(0, 0): 3.0, (0, 1): 1.0, (1, 0): 1.0, (1, 1): 1.0}
KIND_LEVEL = {"gmm": 8e-4, "frame_diff": 3e-4, "extrema_detection": 2e-5}


def feed(ref: SpeedReference, host: float = 1.0, rounds: int = 30, seed: int = 0) -> None:
    """Samples as an emulated cluster gives them: a level per kind, noise, a host factor."""
    rng = np.random.default_rng(seed)
    for _ in range(rounds):
        for (node, gpu), slow in SLOWDOWN.items():
            for kind, level in KIND_LEVEL.items():
                ref.record(node, gpu, kind, level * host / slow * rng.lognormal(0.0, 0.3))


def test_a_gpu_slower_than_its_datasheet_reads_slower_by_that_factor() -> None:
    ref = SpeedReference()
    feed(ref)
    s = ref.speeds()
    others = [s[k] for k in SLOWDOWN if k != (0, 0)]
    assert all(0.7 < x < 1.4 for x in others), s
    assert s[(0, 0)] / float(np.median(others)) == pytest.approx(1 / 3, rel=0.35), s


def test_host_load_that_slows_every_unit_alike_cancels_out() -> None:
    calm, loaded = SpeedReference(), SpeedReference()
    feed(calm, host=1.0, seed=1)
    feed(loaded, host=0.05, seed=1)  # same noise, everything 20x slower
    a, b = calm.speeds(), loaded.speeds()
    assert a.keys() == b.keys()
    for k in a:
        assert b[k] == pytest.approx(a[k], rel=1e-9)


def test_kinds_are_compared_only_with_the_same_kind() -> None:
    """A GPU that ran only a kind whose kernels are 100x off the roofline is not slow for it."""
    ref = SpeedReference()
    for _ in range(10):
        ref.record(0, 0, "slow_kernel", 1e-5)
        ref.record(0, 1, "fast_kernel", 1e-3)
        ref.record(1, 0, "slow_kernel", 1e-5)
        ref.record(1, 0, "fast_kernel", 1e-3)
    assert ref.speeds() == pytest.approx({(0, 0): 1.0, (0, 1): 1.0, (1, 0): 1.0})


def test_cpu_cores_and_gpus_have_their_own_references() -> None:
    ref = SpeedReference()
    for _ in range(10):
        ref.record(0, 0, "gmm", 1e-4)
        ref.record(0, CPU_UNIT, "gmm", 1e-2)
        ref.record(1, CPU_UNIT, "gmm", 0.5e-2)
    s = ref.speeds()
    assert s[(0, 0)] == pytest.approx(1.0)
    assert s[(0, CPU_UNIT)] / s[(1, CPU_UNIT)] == pytest.approx(2.0)
    assert ref.relative(5, 0) == 1.0  # never ran anything


def test_a_node_that_left_no_longer_sets_the_reference() -> None:
    ref = SpeedReference()
    for _ in range(10):
        ref.record(0, 0, "gmm", 1.0)
        ref.record(1, 0, "gmm", 3.0)
        ref.record(2, 0, "gmm", 3.0)
    assert ref.relative(0, 0) == pytest.approx(1 / 3)
    ref.forget(1)
    ref.forget(2)
    assert ref.relative(0, 0) == pytest.approx(1.0)
    assert set(ref.speeds()) == {(0, 0)}


def test_the_ray_driver_sees_speeds_relative_to_every_node() -> None:
    """Each actor keeps a reference of its own node only; the driver merges their tables."""
    spec = LiveClusterSpec(
        nodes=(
            LiveNode("a", cpu_cores=1, gpus=(LiveGpu("T4"),)),
            LiveNode("b", cpu_cores=1, gpus=(LiveGpu("T4"),)),
        )
    ).to_cluster_spec()
    actors = [SpeedReference(), SpeedReference()]
    feed_one = {0: actors[0], 1: actors[1]}
    rng = np.random.default_rng(0)
    for _ in range(20):
        for (node, gpu), slow in SLOWDOWN.items():
            for kind, level in KIND_LEVEL.items():
                feed_one[node].record(node, gpu, kind, level / slow * rng.lognormal(0.0, 0.3))
    driver, driver_speeds = ClusterView.from_spec(spec), SpeedReference()
    # A node's row follows the others' tables on its next snapshot (every task's answer has one).
    for seq in (1, 2):
        for node in (0, 1):
            remote = ClusterView.from_spec(spec)
            remote.speed_gpu[node, 0] = actors[node].relative(node, 0)  # what the actor's view holds
            snap = node_snapshot(remote, node, seq, actors[node])
            apply_node_snapshot(driver, node, snap, driver_speeds)
    merged = driver_speeds.speeds()
    assert driver.speed_gpu[0, 0] == pytest.approx(merged[(0, 0)])
    assert driver.speed_gpu[1, 0] == pytest.approx(merged[(1, 0)])
    # The slow GPU is slow against the other node too, not only against its own node's GPU.
    assert merged[(0, 0)] < 0.5 and 0.7 < merged[(1, 0)] < 1.4, merged
    assert math.isclose(driver.node_speed_gpu[0], driver.speed_gpu[0, 0])

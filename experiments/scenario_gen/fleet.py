"""Fleets for generated scenarios: groups of identical nodes drawn from the hardware catalog, CPU-only
nodes, and churn (nodes that join late or leave).

Nodes are named ``GROUP-INDEX`` in runs of identical nodes, so that the scenario writer
(:mod:`rlsched.scenarios.writer`) writes each run as one ``[[cluster.nodes]]`` group and each join
or leave as a ``[[dynamics.events]]`` entry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from rlsched.cluster import NodeSpec
from rlsched.hardware import gpu_model

#: Old generations with few co-location profiles (the held-out cases' weak spot).
OLD_MODELS: tuple[str, ...] = ("K80", "P4", "P100")
#: Middle generations.
MID_MODELS: tuple[str, ...] = ("T4", "V100M16", "V100M32")
#: Recent generations.
NEW_MODELS: tuple[str, ...] = ("A10", "A100", "A100-80", "L4", "H100", "H200")
#: Every catalog model a generated fleet may hold (the Alibaba codes G2/G3 come with trace nodes).
ALL_MODELS: tuple[str, ...] = OLD_MODELS + MID_MODELS + NEW_MODELS
#: GPUs per node a group may have.
GPUS_PER_NODE: tuple[int, ...] = (1, 2, 4, 8)
#: Most GPU streams (subtasks at once) a fleet of up to 40 nodes gets, so that a run of the
#: tasks a case affords still holds many times what the fleet runs at once.
MAX_SLOTS = 128


def pick_models(rng: np.random.Generator, k: int, old_weight: float = 2.0) -> list[str]:
    """``k`` distinct GPU models of :data:`ALL_MODELS`, old generations ``old_weight`` times as
    likely as the others.

    :param rng: the case's random source.
    :param k: how many (1 to ``len(ALL_MODELS)``).
    :param old_weight: relative weight of each of :data:`OLD_MODELS`.
    """
    w = np.array([old_weight if m in OLD_MODELS else 1.0 for m in ALL_MODELS])
    idx = rng.choice(len(ALL_MODELS), size=k, replace=False, p=w / w.sum())
    return [ALL_MODELS[i] for i in sorted(idx)]


def split(rng: np.random.Generator, total: int, k: int) -> list[int]:
    """``total`` split into ``k`` counts of at least 1 each, uneven (Dirichlet shares).

    :param rng: the case's random source.
    :param total: what to split (``>= k``).
    :param k: how many parts.
    """
    extra = rng.multinomial(total - k, rng.dirichlet(np.ones(k)))
    return [1 + int(e) for e in extra]


def gpu_group(
    rng: np.random.Generator, name: str, count: int, model: str, gpus: int, streams: int
) -> list[NodeSpec]:
    """``count`` identical nodes ``NAME-0..`` with ``gpus`` GPUs of ``model`` each.

    Host figures follow the GPUs (8 to 16 cores and 32 to 64 GiB per GPU); recent models get a
    25 Gbit/s NIC, older ones 10.

    :param rng: the case's random source.
    :param name: the group's name.
    :param count: nodes in the group.
    :param model: catalog GPU model.
    :param gpus: GPUs per node.
    :param streams: streams per GPU.
    """
    node = NodeSpec(
        name=f"{name}-0",
        cpu_cores=int(min(128, gpus * rng.choice((8, 12, 16)))),
        host_mem_gib=float(min(1024, gpus * rng.choice((32, 48, 64)))),
        gpus=(gpu_model(model),) * gpus,
        streams_per_gpu=streams,
        net_gbps=25.0 if model in NEW_MODELS else 10.0,
    )
    return [dataclasses.replace(node, name=f"{name}-{i}") for i in range(count)]


def cpu_group(rng: np.random.Generator, name: str, count: int) -> list[NodeSpec]:
    """``count`` identical CPU-only nodes (16 to 64 cores, 4 GiB per core, 10 Gbit/s).

    :param rng: the case's random source.
    :param name: the group's name.
    :param count: nodes in the group.
    """
    cores = int(rng.choice((16, 32, 64)))
    node = NodeSpec(name=f"{name}-0", cpu_cores=cores, host_mem_gib=4.0 * cores, gpus=(), net_gbps=10.0)
    return [dataclasses.replace(node, name=f"{name}-{i}") for i in range(count)]


def mixed_fleet(
    rng: np.random.Generator,
    nodes: int,
    models: Sequence[str],
    streams: int,
    cpu_only: int = 0,
    gpus_per_node: Sequence[int] = GPUS_PER_NODE,
) -> list[NodeSpec]:
    """``nodes`` nodes: one group per GPU model (uneven counts, GPUs per node drawn per group from
    ``gpus_per_node``) and ``cpu_only`` of them CPU-only.

    :param rng: the case's random source.
    :param nodes: nodes in all (at least ``len(models) + cpu_only``).
    :param models: the GPU models, one group each.
    :param streams: streams per GPU, on every GPU.
    :param cpu_only: CPU-only nodes among them.
    :param gpus_per_node: the GPU counts a group may have.
    """
    out: list[NodeSpec] = []
    for model, count in zip(models, split(rng, nodes - cpu_only, len(models)), strict=True):
        gpus = int(rng.choice(gpus_per_node))
        out += gpu_group(rng, f"{model.lower()}x{gpus}", count, model, gpus, streams)
    if cpu_only:
        out += cpu_group(rng, "cpu", cpu_only)
    return out


def shape(
    rng: np.random.Generator, nodes: int, streams: tuple[int, int], gpus: Sequence[int] = GPUS_PER_NODE
) -> tuple[int, tuple[int, ...]]:
    """Streams per GPU (drawn from ``streams``) and the GPUs per node a group may have, kept within
    :data:`MAX_SLOTS` streams in all for ``nodes`` nodes (fewer streams and GPUs on big fleets).

    :param rng: the case's random source.
    :param nodes: nodes in the fleet.
    :param streams: range of streams per GPU.
    :param gpus: GPU counts a group may have.
    """
    s = int(rng.integers(streams[0], streams[1] + 1))
    s = max(1, min(s, MAX_SLOTS // nodes))
    fits = tuple(g for g in gpus if nodes * g * s <= MAX_SLOTS)
    return s, fits or (1,)


def with_churn(
    rng: np.random.Generator, nodes: Sequence[NodeSpec], share: float, span_s: float
) -> list[NodeSpec]:
    """``nodes`` with about ``share`` of them (at least one, where there are two nodes) joining late
    or leaving early, within ``span_s`` (the expected span of arrivals). The first node never
    changes, so a node is always up.

    :param rng: the case's random source.
    :param nodes: the fleet.
    :param share: the share of nodes that churn (0 to 1).
    :param span_s: the run's expected arrival span, seconds.
    """
    out = list(nodes)
    moving = [i for i in range(1, len(out)) if rng.random() < share]
    if not moving and len(out) > 1:
        moving = [int(rng.integers(1, len(out)))]
    for i in moving:
        if rng.random() < 0.5:
            out[i] = dataclasses.replace(out[i], join_s=round(float(rng.uniform(0.1, 0.6)) * span_s, 3))
        else:
            out[i] = dataclasses.replace(out[i], leave_s=round(float(rng.uniform(0.3, 0.9)) * span_s, 3))
    return out

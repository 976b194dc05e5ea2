"""Live cluster files (TOML): the machines a live run uses, for ``--cluster PATH``.

```toml
device_concurrency = 2        # emulated GPUs: kernels at once (optional, default 2)
emulate_core_speed = false    # emulated: GPU-capable kernels on cores at the cost model's speed
min_streams_per_gpu = 1       # stream feedback bounds (optional)
max_streams_per_gpu = 8

[[nodes]]
name = "box"                  # unique; with count > 1, "box-0", "box-1", ...
count = 1                     # optional
cpu_cores = 2                 # CPU lanes (optional, default 2)
host_mem_gib = 16             # optional
streams_per_gpu = 4           # initial streams per GPU (optional)

[[nodes.gpus]]
model = "V100M16"             # catalog name (rlsched.hardware)
index = 0                     # CUDA ordinal on the cupy backend (optional, default: position)
mem_mib = 4096                # memory the runtime may use (optional: the datasheet's)
speed = 15.7                  # emulated relative speed (optional: the datasheet FP32 TFLOP/s)
```

A bad file raises :class:`rlsched.config_reader.ConfigError` naming the file, the line and the
field, so the command line prints one line and exits 2, as for scenario files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlsched.config_reader import ConfigReader
from rlsched.defaults import default
from rlsched.hardware import gpu_model, model_names
from rlsched.scenarios.limits import MAX_CPU_CORES, MAX_GPUS_PER_NODE, MAX_STREAMS_PER_GPU
from runtime.cluster.config import LiveClusterSpec, LiveGpu, LiveNode

#: Nodes a live cluster file may declare: each is an agent with its own worker threads on this
#: machine (or a Ray actor), so hundreds already mean thousands of threads.
MAX_LIVE_NODES = 256
#: Host memory of one node, GiB.
MAX_HOST_MEM_GIB = 65_536.0
#: CUDA ordinals a node may name.
MAX_GPU_INDEX = 63
#: Device memory the runtime may use on one GPU, MiB (1 TiB).
MAX_GPU_MEM_MIB = 1_048_576.0
#: Emulated relative speed of a GPU (FP32 TFLOP/s scale; the fastest catalog model is ~67).
MAX_SPEED = 10_000.0


def _dc(name: str) -> Any:
    return default(LiveClusterSpec, name)


def _dn(name: str) -> Any:
    return default(LiveNode, name)


_TOP = ("device_concurrency", "emulate_core_speed", "min_streams_per_gpu", "max_streams_per_gpu", "nodes")
_NODE = ("name", "count", "cpu_cores", "host_mem_gib", "streams_per_gpu", "gpus")
_GPU = ("model", "index", "mem_mib", "speed")


def load_live_cluster(path: str | Path) -> LiveClusterSpec:
    """Read a live cluster file.

    :param path: the TOML file.
    :raises ConfigError: naming the file, the line and the field that is wrong.
    """
    r = ConfigReader.open(path, "live cluster file")
    doc = r.doc
    r.keys(doc, "", _TOP)
    groups = r.tables(doc, "", "nodes")
    if not groups:
        raise r.error("nodes", "at least one [[nodes]] table")
    nodes = [n for i, g in enumerate(groups) for n in _nodes(r, g, f"nodes[{i}]")]
    names = [n.name for n in nodes]
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        raise r.error("nodes", "unique node names", dup)
    if len(nodes) > MAX_LIVE_NODES:
        raise r.error("nodes", f"at most {MAX_LIVE_NODES} nodes in all", len(nodes))
    lo = r.integer(doc, "", "min_streams_per_gpu", _dc("min_streams_per_gpu"), ge=1, le=MAX_STREAMS_PER_GPU)
    key = "max_streams_per_gpu"
    hi = r.integer(doc, "", key, _dc(key), ge=lo, le=MAX_STREAMS_PER_GPU)
    if hi < lo:  # the default, below a min_streams_per_gpu that is given
        raise r.error(key, f"an integer from {lo:,} to {MAX_STREAMS_PER_GPU:,}", hi)
    return LiveClusterSpec(
        nodes=tuple(nodes),
        max_streams_per_gpu=hi,
        min_streams_per_gpu=lo,
        device_concurrency=r.integer(
            doc, "", "device_concurrency", _dc("device_concurrency"), ge=0, le=MAX_STREAMS_PER_GPU
        ),
        emulate_core_speed=r.boolean(doc, "", "emulate_core_speed", _dc("emulate_core_speed")),
    )


def _nodes(r: ConfigReader, g: dict[str, Any], where: str) -> list[LiveNode]:
    r.keys(g, where, _NODE)
    name = r.string(g, where, "name", non_empty=True)
    count = r.integer(g, where, "count", 1, ge=1, le=MAX_LIVE_NODES)
    cores = r.integer(g, where, "cpu_cores", _dn("cpu_cores"), ge=0, le=MAX_CPU_CORES)
    streams = r.integer(g, where, "streams_per_gpu", _dn("streams_per_gpu"), ge=1, le=MAX_STREAMS_PER_GPU)
    mem = r.number(g, where, "host_mem_gib", None, gt=0, le=MAX_HOST_MEM_GIB) or _dn("host_mem_gib")
    tables = r.tables(g, where, "gpus")
    if len(tables) > MAX_GPUS_PER_NODE:
        raise r.error(f"{where}.gpus", f"at most {MAX_GPUS_PER_NODE} GPUs per node")
    gpus = tuple(_gpu(r, t, f"{where}.gpus[{j}]", j) for j, t in enumerate(tables))
    if cores == 0 and not gpus:
        raise r.error(f"{where}.cpu_cores", "at least one core on a node without GPUs", 0)
    names = [name] if count == 1 else [f"{name}-{k}" for k in range(count)]
    return [LiveNode(n, cores, gpus, streams, mem) for n in names]


def _gpu(r: ConfigReader, t: dict[str, Any], where: str, position: int) -> LiveGpu:
    r.keys(t, where, _GPU)
    model = r.string(t, where, "model", non_empty=True)
    try:
        gpu_model(model)
    except KeyError:
        raise r.error(f"{where}.model", f"a GPU model of the catalog ({model_names()})", model) from None
    return LiveGpu(
        model,
        index=r.integer(t, where, "index", position, ge=0, le=MAX_GPU_INDEX),
        mem_mib=r.number(t, where, "mem_mib", None, gt=0, le=MAX_GPU_MEM_MIB),
        speed=r.number(t, where, "speed", None, gt=0, le=MAX_SPEED),
    )


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    # A TOML basic string: JSON's escaping is a subset of TOML's.
    return json.dumps(str(v), ensure_ascii=False)


def dump_live_cluster(spec: LiveClusterSpec) -> str:
    """``spec`` as a live cluster file that :func:`load_live_cluster` reads back equal (one
    ``[[nodes]]`` table per node; every value written, defaults included)."""
    lines = [
        f"device_concurrency = {_toml_value(spec.device_concurrency)}",
        f"emulate_core_speed = {_toml_value(spec.emulate_core_speed)}",
        f"min_streams_per_gpu = {_toml_value(spec.min_streams_per_gpu)}",
        f"max_streams_per_gpu = {_toml_value(spec.max_streams_per_gpu)}",
    ]
    for n in spec.nodes:
        lines += [
            "",
            "[[nodes]]",
            f"name = {_toml_value(n.name)}",
            f"cpu_cores = {_toml_value(n.cpu_cores)}",
            f"host_mem_gib = {_toml_value(float(n.host_mem_gib))}",
            f"streams_per_gpu = {_toml_value(n.streams_per_gpu)}",
        ]
        for g in n.gpus:
            lines += [
                "",
                "[[nodes.gpus]]",
                f"model = {_toml_value(g.model)}",
                f"index = {_toml_value(g.index)}",
            ]
            lines += [
                f"{k} = {_toml_value(float(v))}" for k, v in (("mem_mib", g.mem_mib), ("speed", g.speed)) if v
            ]
    return "\n".join(lines) + "\n"


def write_live_cluster(spec: LiveClusterSpec, path: str | Path) -> None:
    """Write ``spec`` as a live cluster file (see :func:`dump_live_cluster`)."""
    Path(path).write_text(dump_live_cluster(spec), encoding="utf-8")

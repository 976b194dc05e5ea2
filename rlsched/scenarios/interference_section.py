"""The ``[interference]`` section of a scenario file: the contention model, or measured co-location
(and solo) CSVs that must cover every GPU model of the cluster.

CSV devices (``v100``, ``p100``) match catalog models case-insensitively by name or by a prefix that
is not followed by a digit: ``v100`` covers ``V100M16`` and ``V100M32``; ``a10`` covers ``A10`` only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from rlsched.cluster import ClusterSpec
from rlsched.config_reader import ConfigReader
from rlsched.errors import NOTHING, few
from rlsched.hardware import device_models
from rlsched.interference.measurements import MeasurementError, read_colocation_csv, read_solo_csv
from rlsched.scenarios.data_paths import data_file
from rlsched.scenarios.spec import InterferenceSpec

_INTERFERENCE_KEYS = ("model", "colocation_csv", "solo_csv")
_M = TypeVar("_M")


def read_interference(
    r: ConfigReader, raw: object, cluster: ClusterSpec, folder: Path
) -> tuple[InterferenceSpec, list[str]]:
    """The interference source and, with model csv, the kinds the co-location CSV measures.

    :param r: the scenario's reader.
    :param raw: the ``interference`` value (``None`` when absent: contention).
    :param cluster: the scenario's cluster (every GPU model must be measured).
    :param folder: where the CSV paths start (the scenario file's folder).
    """
    where = "interference"
    tbl = r.table(raw, where)
    r.keys(tbl, where, _INTERFERENCE_KEYS)
    model = r.string(tbl, where, "model", "contention")
    if model not in ("contention", "csv"):
        raise r.error(f"{where}.model", '"contention" or "csv"', model)
    if model == "contention":
        for key in ("colocation_csv", "solo_csv"):
            if key in tbl:
                raise r.error(
                    f"{where}.{key}", 'no CSV with model = "contention" (set model = "csv")', tbl[key]
                )
        return InterferenceSpec(model="contention"), []
    field = f"{where}.colocation_csv"
    colo = data_file(r, field, r.string(tbl, where, "colocation_csv"), folder)
    devices, kinds = _read_colocation(r, field, colo)
    _check_coverage(r, field, colo, devices, cluster)
    solo = None
    if "solo_csv" in tbl:
        field = f"{where}.solo_csv"
        solo = data_file(r, field, r.string(tbl, where, "solo_csv"), folder)
        measured = _read_solo(r, field, solo)
        _check_coverage(r, field, solo, measured, cluster)
        for device in sorted(devices):
            missing = [k for k in kinds if k not in measured.get(device, set())]
            if missing:
                raise r.error(
                    field, f"a solo speed for every co-located kind on {device} in {solo}", missing[0]
                )
    return InterferenceSpec(model="csv", colocation_csv=colo, solo_csv=solo), kinds


def _measurements(r: ConfigReader, field: str, read: Callable[[str], _M], path: str) -> _M:
    """A measurement CSV read by its one owner (:mod:`rlsched.interference.measurements`), a
    rejection reported against the scenario field that names the file."""
    try:
        return read(path)
    except MeasurementError as e:
        where = f"{e.path} line {e.line}" if e.line else e.path
        column = f" ({e.column})" if e.column else ""
        got = NOTHING if e.got is None else e.got
        raise r.error(field, f"{e.expected} at {where}{column}", got) from None


def _read_colocation(r: ConfigReader, field: str, path: str) -> tuple[set[str], list[str]]:
    """Devices (lower case) and kinds (in first-seen order) of a co-location CSV."""
    data = _measurements(r, field, read_colocation_csv, path)
    return {d.lower() for d in data.device}, list(dict.fromkeys(data.kind))


def _read_solo(r: ConfigReader, field: str, path: str) -> dict[str, set[str]]:
    """Device (lower case) -> kinds measured alone."""
    data = _measurements(r, field, read_solo_csv, path)
    out: dict[str, set[str]] = {}
    for d, k in zip(data.device, data.kind, strict=True):
        out.setdefault(d.lower(), set()).add(k)
    return out


def _check_coverage(
    r: ConfigReader, field: str, path: str, devices: Iterable[str], cluster: ClusterSpec
) -> None:
    """Every GPU model of the cluster must be measured on some device of the CSV."""
    devices = sorted(devices)
    covered = set().union(*(device_models(d) for d in devices))
    for model in sorted({g.name for n in cluster.nodes for g in n.gpus}):
        if model not in covered:
            raise r.error(
                field,
                f"measurements for every GPU model of the cluster (devices in {path}: {few(devices)})",
                model,
            )

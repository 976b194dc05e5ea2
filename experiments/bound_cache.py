"""A cache of the capacity bounds ``rlsched scenarios`` prints, so that listing the built-ins
takes well under a second after the first time (computing the twelve bounds takes ~8 s).

An entry is keyed by everything the bound depends on: the scenario as loaded (its repr covers the
cluster, workload, seed and interference source), the bytes of every data file it names, and the
source of the modules that compute tasks, truth and the bound. Editing any of them misses the
cache, so a stale figure is never shown. The cache lives in ``$RLSCHED_CACHE_DIR`` or
``$XDG_CACHE_HOME/rlsched`` (default ``~/.cache/rlsched``); a cache that cannot be read or
written is ignored (the bound is computed, as without one).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

from rlsched.scenarios.spec import Scenario

#: Modules whose code decides a bound.
_SOURCES = (
    "envs.capacity",
    "envs.ground_truth",
    "rlsched.scenarios.taskgen",
    "rlsched.workloads",
    "rlsched.scenarios.arrivals",
    "rlsched.scenarios.traces",
    "rlsched.hardware",
    "rlsched.estimates",
)
_FILE = "bounds.json"


def cache_dir() -> Path:
    """Where the cache is kept (see the module docstring)."""
    if os.environ.get("RLSCHED_CACHE_DIR"):
        return Path(os.environ["RLSCHED_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rlsched"


def _files(sc: Scenario) -> list[str]:
    wl, ix = sc.workload, sc.interference
    out = [wl.arrival.trace_path, ix.colocation_csv, ix.solo_csv]
    if wl.alibaba is not None:
        out += [wl.alibaba.node_csv, wl.alibaba.pod_csv]
    return [f for f in out if f]


def bound_key(sc: Scenario) -> str:
    """The cache key of a scenario's bound (hex sha256)."""
    h = hashlib.sha256(repr(sc).encode())
    for f in _files(sc):
        h.update(Path(f).read_bytes())
    for mod in _SOURCES:
        spec = importlib.util.find_spec(mod)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"cannot locate {mod} to key the bound cache")
        h.update(Path(spec.origin).read_bytes())
    return h.hexdigest()


def _load() -> dict[str, dict[str, float | bool]]:
    try:
        data = json.loads((cache_dir() / _FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def cached_bound(key: str) -> dict[str, float | bool] | None:
    """The cached ``arrival_rate_per_min``, ``capacity_per_min``, ``offered_load`` and
    ``arrival_bound`` under ``key`` (:func:`bound_key`), or ``None``."""
    hit = _load().get(key)
    return hit if isinstance(hit, dict) else None


def store_bound(key: str, figures: dict[str, float | bool]) -> None:
    """Remember ``figures`` under ``key`` (atomically; skipped if the cache is not writable)."""
    try:
        d = cache_dir()
        d.mkdir(parents=True, exist_ok=True)
        data = _load()
        data[key] = figures
        tmp = d / f"{_FILE}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, d / _FILE)
    except OSError:
        pass


def own_bound(sc: Scenario) -> dict[str, float | bool]:
    """Arrival rate, capacity (tasks/min), offered load and regime of ``sc`` on its own seed,
    from the cache or computed (and cached)."""
    key = bound_key(sc)
    b = cached_bound(key)
    if b is None:
        from envs.capacity import capacity_bound  # scipy: only when a bound is computed
        from rlsched.scenarios.taskgen import generate_tasks

        bound = capacity_bound(sc, generate_tasks(sc), latency=False)
        b = {
            "arrival_rate_per_min": bound.arrival_rate_per_min,
            "capacity_per_min": bound.capacity_per_min,
            "offered_load": bound.offered_load,
            "arrival_bound": bound.arrival_bound,
        }
        store_bound(key, b)
    return b

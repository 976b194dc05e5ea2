"""The service's configuration file (TOML): where it listens, what it schedules with, its tenants.

```toml
host = "127.0.0.1"          # default; binding elsewhere is the operator's explicit choice
port = 8470
db = "rlsched-service.db"   # the durable queue (SQLite, WAL), relative to this file
scheduler = "ldwp+iawp"     # SELECTOR+PLACER
queue_bound = 100000        # queued tasks in all; beyond it submissions get 429
cluster = "live.toml"       # optional live cluster file; default: the embedded cluster
backend = "local"           # "local" (agents in this process) or "ray" (one agent per Ray node)
ray_address = "auto"        # Ray: the cluster to join; omit to start a local Ray
ray_gpu_model = "T4"        # Ray: model of the GPUs of joining Ray nodes without an accelerator label
request_timeout_s = 30      # a request (its body included) must complete within this
rebalance = true            # move not-yet-started tasks off nodes that stay overloaded
selector_model = "runs/a/best"        # LDWP checkpoint (train/finetune); default: shipped
placer_model = "runs/p/best"          # iawp-rl checkpoint (train --stage 2); default: shipped
interference_model = "interf"         # interference fit folder, or profile's colocation.csv
state_dir = "rlsched-state"           # what is learnt online, checkpointed here
checkpoint_interval_s = 60            # at most this much learning is lost to a crash
calibration_budget_s = 120            # one survey of the cluster's GPU models may take this
calibration_apps = ["intrusion_detection", "video_synopsis"]  # whose kinds are surveyed
active_profiling = false              # choose the surveyed pairs by value (same budget)
online_batch = 256                    # observed co-run samples per online update of the model
selector_learning = false             # fine-tune the LDWP selector from live decisions (background)
selector_candidate_updates = 2000     # its gradient steps between two candidates for the canary
canary_share = 0.2                    # share of tasks a candidate policy places
canary_min_tasks = 30                 # finished tasks per arm before a rollback
canary_promote_tasks = 200            # finished tasks per arm before a promotion
canary_margin = 0.05                  # "not worse": within 5 % latency, 5 points of failures
canary_alpha = 0.05                   # level of the tests

[[tenants]]
name = "video"
token_sha256 = "9f86d0..."  # sha256 hex of the bearer token (tokens are never stored)
weight = 2                  # share under contention
max_queued = 10000
max_running = 64
gpu_share = 0.5             # at most half of the cluster's GPU dispatch slots (default 1)
admin = false
```

A bad file raises :class:`rlsched.scenarios.loader.ScenarioError` naming the file and the field.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlsched.defaults import default
from rlsched.hardware import gpu_model
from rlsched.scenarios.loader import ScenarioError, read_toml_file
from runtime.service.canary import CanaryRule

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_TOP = (
    "host",
    "port",
    "db",
    "scheduler",
    "queue_bound",
    "cluster",
    "backend",
    "ray_address",
    "ray_gpu_model",
    "request_timeout_s",
    "rebalance",
    "selector_model",
    "placer_model",
    "interference_model",
    "state_dir",
    "checkpoint_interval_s",
    "calibration_budget_s",
    "calibration_apps",
    "active_profiling",
    "log_level",
    "online_batch",
    "selector_learning",
    "selector_candidate_updates",
    "canary_share",
    "canary_min_tasks",
    "canary_promote_tasks",
    "canary_margin",
    "canary_alpha",
    "tenants",
)
#: Apps whose kinds the service surveys by default (``rlsched profile``'s default too).
CALIBRATION_APPS = ("intrusion_detection", "video_synopsis")
BACKENDS = ("local", "ray")
#: Levels of the service log (``log_level``, ``--log-level``).
LOG_LEVELS = ("debug", "info", "warning", "error")
#: Keys that only the Ray backend reads.
RAY_KEYS = ("ray_address", "ray_gpu_model")
_TENANT = ("name", "token_sha256", "weight", "max_queued", "max_running", "gpu_share", "admin")


def hash_token(token: str) -> str:
    """The sha256 hex digest a config file stores for a bearer token."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Tenant:
    """A client of the service.

    :param name: unique name.
    :param token_sha256: sha256 hex of its bearer token.
    :param weight: its share of the cluster under contention, relative to the others'.
    :param max_queued: queued tasks it may have; beyond, submissions get 429.
    :param max_running: tasks it may have running at once.
    :param gpu_share: share of the cluster's GPU dispatch slots its running tasks may hold
        (``runtime.service.dispatcher``), in (0, 1].
    :param admin: may run cluster operations.
    """

    name: str
    token_sha256: str
    weight: float = 1.0
    max_queued: int = 10_000
    max_running: int = 64
    gpu_share: float = 1.0
    admin: bool = False


@dataclass(frozen=True)
class ServiceConfig:
    """A service.

    :param tenants: its clients.
    :param host: address to bind (loopback by default).
    :param port: TCP port.
    :param db: the queue's SQLite file.
    :param scheduler: ``SELECTOR+PLACER``.
    :param queue_bound: queued tasks in all before 429.
    :param cluster: live cluster file, or ``None`` for the embedded cluster.
    :param backend: ``local`` (node agents in this process) or ``ray`` (one per Ray node).
    :param ray_address: Ray cluster to join (``auto``: the one this machine belongs to);
        ``None`` starts a local Ray whose one node may hold several agents.
    :param ray_gpu_model: catalog model of the GPUs of a Ray node that joins without an
        ``accelerator_type:MODEL`` resource naming a catalog model.
    :param request_timeout_s: seconds within which a request must have been read and answered
        (408 for a body that is not sent in time, 503 for an answer that is not ready).
    :param rebalance: move not-yet-started tasks off nodes that stay overloaded.
    :param selector_model: LDWP checkpoint folder (``None``: the shipped one).
    :param placer_model: ``iawp-rl`` checkpoint folder (``None``: the shipped one).
    :param interference_model: interference model folder or co-location CSV (``None``: fitted
        from the service's own survey of its cluster).
    :param state_dir: folder of the online-learned state's checkpoints.
    :param checkpoint_interval_s: seconds between checkpoints of the learned state.
    :param calibration_budget_s: seconds one survey of the cluster's GPU models may take.
    :param calibration_apps: apps whose GPU kinds the survey measures.
    :param log_level: the service log's level (``debug``, ``info``, ``warning``, ``error``): at
        ``info``, one line per request, the queue's recovery at start and the shutdown.
    :param active_profiling: the survey picks its co-runs by the value of their answer
        (:mod:`rlsched.interference.active`) instead of at random, within the same budget.
    :param online_batch: observed co-run samples per online update of the interference model.
    :param selector_learning: fine-tune an LDWP incumbent from the service's own decisions in a
        background learner (:mod:`runtime.service.selector_learning`); off by default.
    :param selector_candidate_updates: the learner's gradient steps between two candidates it
        puts up for the canary.
    :param canary: the promotion test of candidate policies (``runtime.service.canary``).
    :param source: the config file (named in errors about its values).
    """

    tenants: tuple[Tenant, ...]
    host: str = "127.0.0.1"
    port: int = 8470
    db: str = "rlsched-service.db"
    scheduler: str = "ldwp+iawp"
    queue_bound: int = 100_000
    cluster: str | None = None
    backend: str = "local"
    ray_address: str | None = None
    ray_gpu_model: str = "T4"
    request_timeout_s: float = 30.0
    rebalance: bool = True
    selector_model: str | None = None
    placer_model: str | None = None
    interference_model: str | None = None
    state_dir: str = "rlsched-state"
    checkpoint_interval_s: float = 60.0
    calibration_budget_s: float = 120.0
    calibration_apps: tuple[str, ...] = CALIBRATION_APPS
    active_profiling: bool = False
    log_level: str = "info"
    online_batch: int = 256
    selector_learning: bool = False
    selector_candidate_updates: int = 2000
    canary: CanaryRule = field(default_factory=CanaryRule)
    source: str = field(default="service config", compare=False)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def tenant_for(self, token: str) -> Tenant | None:
        """The tenant whose token this is; every digest is compared, in constant time."""
        digest = hash_token(token)
        found = None
        for t in self.tenants:
            if hmac.compare_digest(digest, t.token_sha256):
                found = t
        return found


def _get(
    path: str, table: dict[str, Any], where: str, key: str, kind: type | tuple[type, ...], fallback: Any
) -> Any:
    v = table.get(key, fallback)
    ok = isinstance(v, kind) and not (isinstance(v, bool) and kind in (int, float, (int, float)))
    if not ok:
        raise ScenarioError(path, f"{where}{key}", f"a value of type {getattr(kind, '__name__', kind)}", v)
    return v


def load_service_config(path: str | Path) -> ServiceConfig:
    """Read a service config file (relative paths resolve against its folder).

    :raises ScenarioError: naming the file and the field at fault.
    """
    shown = str(path)
    doc = read_toml_file(path, "service config file")
    for k in doc:
        if k not in _TOP:
            raise ScenarioError(shown, k, f"one of the keys ({', '.join(_TOP)})", k)
    raw = doc.get("tenants")
    if not isinstance(raw, list) or not raw or not all(isinstance(t, dict) for t in raw):
        raise ScenarioError(shown, "tenants", "at least one [[tenants]] table", raw)
    tenants = tuple(_tenant(shown, t, f"tenants[{i}].") for i, t in enumerate(raw))
    names = [t.name for t in tenants]
    if len(set(names)) != len(names):
        raise ScenarioError(shown, "tenants", "unique tenant names", names)
    if len({t.token_sha256 for t in tenants}) != len(tenants):
        raise ScenarioError(shown, "tenants", "a different token for every tenant")
    folder = Path(path).resolve().parent
    port = _get(shown, doc, "", "port", int, default(ServiceConfig, "port"))
    if not 0 <= port <= 65535:
        raise ScenarioError(shown, "port", "a port from 0 to 65535", port)
    bound = _get(shown, doc, "", "queue_bound", int, default(ServiceConfig, "queue_bound"))
    if bound < 1:
        raise ScenarioError(shown, "queue_bound", "a positive integer", bound)
    cluster = doc.get("cluster")
    if cluster is not None and not isinstance(cluster, str):
        raise ScenarioError(shown, "cluster", "a live cluster file path", cluster)
    backend = _get(shown, doc, "", "backend", str, default(ServiceConfig, "backend"))
    if backend not in BACKENDS:
        raise ScenarioError(shown, "backend", f"one of {', '.join(BACKENDS)}", backend)
    for key in RAY_KEYS:
        if backend != "ray" and key in doc:  # it would be silently ignored
            raise ScenarioError(
                shown, key, f'a key of backend = "ray" only (this config runs {backend})', doc[key]
            )
    address = doc.get("ray_address")
    if address is not None and not isinstance(address, str):
        raise ScenarioError(shown, "ray_address", "a Ray address (or omit it)", address)
    model = _get(shown, doc, "", "ray_gpu_model", str, default(ServiceConfig, "ray_gpu_model"))
    try:
        gpu_model(model)
    except KeyError:
        raise ScenarioError(shown, "ray_gpu_model", "a GPU model of the catalog", model) from None
    timeout = float(
        _get(shown, doc, "", "request_timeout_s", (int, float), default(ServiceConfig, "request_timeout_s"))
    )
    if not 0 < timeout <= 3600:
        raise ScenarioError(shown, "request_timeout_s", "seconds in (0, 3600]", timeout)
    return ServiceConfig(
        tenants=tenants,
        source=shown,
        canary=_canary(shown, doc),
        selector_model=_path(shown, doc, "selector_model", folder),
        placer_model=_path(shown, doc, "placer_model", folder),
        interference_model=_path(shown, doc, "interference_model", folder),
        state_dir=str(folder / _get(shown, doc, "", "state_dir", str, default(ServiceConfig, "state_dir"))),
        checkpoint_interval_s=_seconds(shown, doc, "checkpoint_interval_s", 86400),
        calibration_budget_s=_seconds(shown, doc, "calibration_budget_s", 86400),
        calibration_apps=_apps(shown, doc),
        log_level=_log_level(shown, doc),
        active_profiling=_get(
            shown, doc, "", "active_profiling", bool, default(ServiceConfig, "active_profiling")
        ),
        online_batch=_online_batch(shown, doc),
        selector_learning=_get(
            shown, doc, "", "selector_learning", bool, default(ServiceConfig, "selector_learning")
        ),
        selector_candidate_updates=_candidate_updates(shown, doc),
        backend=backend,
        ray_address=address,
        ray_gpu_model=model,
        request_timeout_s=timeout,
        rebalance=_get(shown, doc, "", "rebalance", bool, default(ServiceConfig, "rebalance")),
        host=_get(shown, doc, "", "host", str, default(ServiceConfig, "host")),
        port=port,
        db=str(folder / _get(shown, doc, "", "db", str, default(ServiceConfig, "db"))),
        scheduler=_get(shown, doc, "", "scheduler", str, default(ServiceConfig, "scheduler")),
        queue_bound=bound,
        cluster=None if cluster is None else str(folder / cluster),
    )


def _path(shown: str, doc: dict[str, Any], key: str, folder: Path) -> str | None:
    v = doc.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or not v:
        raise ScenarioError(shown, key, "a path (relative to this file)", v)
    return str(folder / v)


def _seconds(shown: str, doc: dict[str, Any], key: str, most: float) -> float:
    v = float(_get(shown, doc, "", key, (int, float), default(ServiceConfig, key)))
    if not 0 < v <= most:
        raise ScenarioError(shown, key, f"seconds in (0, {most:g}]", v)
    return v


def _apps(shown: str, doc: dict[str, Any]) -> tuple[str, ...]:
    from runtime.kernels import LIVE_APPS

    v = doc.get("calibration_apps", list(CALIBRATION_APPS))
    if not isinstance(v, list) or not v or not all(isinstance(a, str) and a in LIVE_APPS for a in v):
        raise ScenarioError(
            shown, "calibration_apps", f"a list of apps with live kernels ({', '.join(LIVE_APPS)})", v
        )
    return tuple(v)


def _online_batch(shown: str, doc: dict[str, Any]) -> int:
    n = _get(shown, doc, "", "online_batch", int, default(ServiceConfig, "online_batch"))
    if not 1 <= n <= 1_000_000:
        raise ScenarioError(shown, "online_batch", "samples per update, 1 to 1000000", n)
    return int(n)


def _candidate_updates(shown: str, doc: dict[str, Any]) -> int:
    key = "selector_candidate_updates"
    n = _get(shown, doc, "", key, int, default(ServiceConfig, key))
    if not 1 <= n <= 100_000_000:
        raise ScenarioError(shown, key, "gradient steps, 1 to 100000000", n)
    return int(n)


def _canary(shown: str, doc: dict[str, Any]) -> CanaryRule:
    d = CanaryRule()
    share = float(_get(shown, doc, "", "canary_share", (int, float), d.share))
    if not 0 < share < 1:
        raise ScenarioError(shown, "canary_share", "a share in (0, 1)", share)
    least = _get(shown, doc, "", "canary_min_tasks", int, d.min_tasks)
    promote = _get(shown, doc, "", "canary_promote_tasks", int, d.promote_tasks)
    if least < 2:
        raise ScenarioError(shown, "canary_min_tasks", "an integer >= 2", least)
    if promote < least:
        raise ScenarioError(
            shown, "canary_promote_tasks", f"an integer >= canary_min_tasks ({least})", promote
        )
    margin = float(_get(shown, doc, "", "canary_margin", (int, float), d.margin))
    if not 0 <= margin < 1:
        raise ScenarioError(shown, "canary_margin", "a share in [0, 1)", margin)
    alpha = float(_get(shown, doc, "", "canary_alpha", (int, float), d.alpha))
    if not 0 < alpha < 0.5:
        raise ScenarioError(shown, "canary_alpha", "a level in (0, 0.5)", alpha)
    return CanaryRule(share, least, promote, margin, alpha)


def _tenant(path: str, t: dict[str, Any], where: str) -> Tenant:
    for k in t:
        if k not in _TENANT:
            raise ScenarioError(path, f"{where}{k}", f"one of the keys ({', '.join(_TENANT)})", k)
    name = _get(path, t, where, "name", str, None)
    digest = _get(path, t, where, "token_sha256", str, None).lower()
    if not _HEX64.match(digest):
        raise ScenarioError(path, f"{where}token_sha256", "64 hex digits (sha256 of the token)", digest)
    weight = float(_get(path, t, where, "weight", (int, float), default(Tenant, "weight")))
    if not weight > 0:
        raise ScenarioError(path, f"{where}weight", "a positive number", weight)
    mq = _get(path, t, where, "max_queued", int, default(Tenant, "max_queued"))
    mr = _get(path, t, where, "max_running", int, default(Tenant, "max_running"))
    if mq < 1 or mr < 1:
        raise ScenarioError(
            path, f"{where}max_queued" if mq < 1 else f"{where}max_running", "a positive integer"
        )
    share = float(_get(path, t, where, "gpu_share", (int, float), default(Tenant, "gpu_share")))
    if not 0 < share <= 1:
        raise ScenarioError(path, f"{where}gpu_share", "a share in (0, 1]", share)
    admin = _get(path, t, where, "admin", bool, default(Tenant, "admin"))
    return Tenant(name, digest, weight, mq, mr, share, admin)


def _log_level(path: str, doc: dict[str, Any]) -> str:
    level = _get(path, doc, "", "log_level", str, default(ServiceConfig, "log_level"))
    if level not in LOG_LEVELS:
        raise ScenarioError(path, "log_level", f"one of {', '.join(LOG_LEVELS)}", level)
    return level

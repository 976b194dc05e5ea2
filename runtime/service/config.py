"""The service's configuration file (TOML): where it listens, what it schedules with, its tenants.

```toml
host = "127.0.0.1"          # default; binding elsewhere is the operator's explicit choice
port = 8470
db = "rlsched-service.db"   # the durable queue (SQLite, WAL), relative to this file
scheduler = "auto"          # default: recognises the case, runs the pair it wants; or any SELECTOR+PLACER
queue_bound = 100000        # queued tasks in all; beyond it submissions get 429
cluster = "live.toml"       # optional live cluster file; default: the embedded cluster
backend = "local"           # "local" (agents in this process) or "ray" (one agent per Ray node)
ray_address = "auto"        # Ray: the cluster to join; omit to start a local Ray
ray_gpu_model = "T4"        # Ray: model of the GPUs of joining Ray nodes without an accelerator label
request_timeout_s = 30      # a request (its body included) must complete within this
rebalance = true            # move not-yet-started tasks off overloaded nodes and to idle GPU nodes
selector_model = "runs/a/best"        # LDWP checkpoint (train/finetune); default: shipped
placer_model = "runs/p/best"          # iawp-rl checkpoint (train --stage 2); default: shipped
interference_model = "interf"         # interference fit folder, or profile's colocation.csv
recogniser_model = "runs/rec"         # scheduler = "auto": its recogniser (fit-recogniser); default: shipped
state_dir = "rlsched-state"           # what is learnt online, checkpointed here
checkpoint_interval_s = 60            # at most this much learning is lost to a crash
calibration_budget_s = 120            # one survey of the cluster's GPU models may take this
calibration_apps = ["intrusion_detection", "video_synopsis"]  # whose kinds are surveyed
active_profiling = false              # choose the surveyed pairs by value (same budget)
prediction_fallback = 0               # > 0: place by speedup's rule on GPU models predicted this far off
log_format = "text"                   # "json": one object per line, for a log collector
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
token_sha256 = "9f86d0..."  # sha256 hex of the bearer token (tokens are never stored); or a list
                            # of up to 4 (any of them authenticates: a new token beside the old)
weight = 2                  # share under contention
max_queued = 10000
max_running = 64
gpu_share = 0.5             # at most half of the cluster's GPU dispatch slots (default 1)
admin = false
```

A bad file raises :class:`rlsched.config_reader.ConfigError` naming the file, the line and the
field.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlsched.config_reader import ConfigReader
from rlsched.defaults import default
from rlsched.hardware import gpu_model, model_names
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
    "tls_certfile",
    "tls_keyfile",
    "rebalance",
    "finished_retention_s",
    "selector_model",
    "placer_model",
    "interference_model",
    "recogniser_model",
    "state_dir",
    "checkpoint_interval_s",
    "calibration_budget_s",
    "calibration_apps",
    "active_profiling",
    "prediction_fallback",
    "log_level",
    "log_format",
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
#: Formats of the service log (``log_format``, ``--log-format``; :mod:`runtime.service.log_format`).
LOG_FORMATS = ("text", "json")
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
    :param more_tokens_sha256: digests of more tokens that authenticate it (the config's
        ``token_sha256`` as a list: a new token beside the old while its clients move).
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
    more_tokens_sha256: tuple[str, ...] = ()

    @property
    def digests(self) -> tuple[str, ...]:
        """Every token digest that authenticates it."""
        return (self.token_sha256, *self.more_tokens_sha256)


@dataclass(frozen=True)
class ServiceConfig:
    """A service.

    :param tenants: its clients.
    :param host: address to bind (loopback by default).
    :param port: TCP port.
    :param db: the queue's SQLite file.
    :param scheduler: ``SELECTOR+PLACER``, or ``auto`` (the default: the case recogniser over
        candidate pairs, :mod:`rlsched.policies.auto`).
    :param queue_bound: queued tasks in all before 429.
    :param cluster: live cluster file, or ``None`` for the embedded cluster.
    :param backend: ``local`` (node agents in this process) or ``ray`` (one per Ray node).
    :param ray_address: Ray cluster to join (``auto``: the one this machine belongs to);
        ``None`` starts a local Ray whose one node may hold several agents.
    :param ray_gpu_model: catalog model of the GPUs of a Ray node that joins without an
        ``accelerator_type:MODEL`` resource naming a catalog model.
    :param tls_certfile: PEM certificate (chain) to serve HTTPS with; with ``tls_keyfile``, or
        neither (plain HTTP: keep it on 127.0.0.1, or behind a TLS proxy).
    :param tls_keyfile: the certificate's PEM private key.
    :param request_timeout_s: seconds within which a request must have been read and answered
        (408 for a body that is not sent in time, 503 for an answer that is not ready).
    :param rebalance: move not-yet-started tasks off nodes that stay overloaded, and to idle GPU
        nodes where they would wait longer than they run there (`rlsched/overload.py`).
    :param selector_model: LDWP checkpoint folder (``None``: the shipped one).
    :param placer_model: ``iawp-rl`` checkpoint folder (``None``: the shipped one).
    :param interference_model: interference model folder or co-location CSV (``None``: fitted
        from the service's own survey of its cluster).
    :param recogniser_model: the case recogniser of ``scheduler = "auto"`` (``None``: shipped).
    :param state_dir: folder of the online-learned state's checkpoints.
    :param checkpoint_interval_s: seconds between checkpoints of the learned state.
    :param finished_retention_s: seconds a finished task (done, failed, cancelled) stays in the
        queue file, with its result and audit rows, before it is removed (0: kept for ever).
    :param calibration_budget_s: seconds one survey of the cluster's GPU models may take.
    :param calibration_apps: apps whose GPU kinds the survey measures.
    :param log_level: the service log's level (``debug``, ``info``, ``warning``, ``error``): at
        ``info``, one line per request, the queue's recovery at start and the shutdown.
    :param log_format: ``text`` (a timestamped line) or ``json`` (one object per line,
        :mod:`runtime.service.log_format`).
    :param active_profiling: the survey picks its co-runs by the value of their answer
        (:mod:`rlsched.interference.active`) instead of at random, within the same budget.
    :param prediction_fallback: where the placer's predicted speeds on a GPU model were off by
        more than this (an EMA of ``|log(measured / predicted)|``, ``/v1/models`` shows it), it
        places there by ``speedup``'s rule until they come right again; 0 (default) = off.
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
    scheduler: str = "auto"
    queue_bound: int = 100_000
    cluster: str | None = None
    backend: str = "local"
    ray_address: str | None = None
    ray_gpu_model: str = "T4"
    tls_certfile: str | None = None
    tls_keyfile: str | None = None
    request_timeout_s: float = 30.0
    rebalance: bool = True
    selector_model: str | None = None
    placer_model: str | None = None
    interference_model: str | None = None
    recogniser_model: str | None = None
    state_dir: str = "rlsched-state"
    checkpoint_interval_s: float = 60.0
    finished_retention_s: float = 7 * 86400.0
    calibration_budget_s: float = 120.0
    calibration_apps: tuple[str, ...] = CALIBRATION_APPS
    active_profiling: bool = False
    prediction_fallback: float = 0.0
    log_level: str = "info"
    log_format: str = "text"
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
            for d in t.digests:
                if hmac.compare_digest(digest, d):
                    found = t
        return found


def load_service_config(path: str | Path) -> ServiceConfig:
    """Read a service config file (relative paths resolve against its folder).

    :raises ConfigError: naming the file, the line and the field at fault.
    """
    r = ConfigReader.open(path, "service config file")
    doc = r.doc
    r.keys(doc, "", _TOP)
    raw = r.tables(doc, "", "tenants")
    if not raw:
        raise r.error("tenants", "at least one [[tenants]] table", doc.get("tenants"))
    tenants = tuple(_tenant(r, t, f"tenants[{i}]") for i, t in enumerate(raw))
    names = [t.name for t in tenants]
    if len(set(names)) != len(names):
        raise r.error("tenants", "unique tenant names", names)
    digests = [d for t in tenants for d in t.digests]
    if len(set(digests)) != len(digests):
        raise r.error("tenants", "a different token for every tenant (and within a tenant's list)")
    folder = Path(path).resolve().parent
    # Not 0: a port the system picks would be one neither the banner nor any client knows.
    port = r.integer(doc, "", "port", _d("port"), ge=1, le=65535)
    bound = r.integer(doc, "", "queue_bound", _d("queue_bound"), ge=1)
    cluster = r.string(doc, "", "cluster", None, expected="a live cluster file path")
    backend = r.choice(doc, "", "backend", BACKENDS, _d("backend"))
    for key in RAY_KEYS:
        if backend != "ray" and key in doc:  # it would be silently ignored
            raise r.error(key, f'a key of backend = "ray" only (this config runs {backend})', doc[key])
    address = r.string(doc, "", "ray_address", None, expected="a Ray address (or omit it)")
    model = r.string(doc, "", "ray_gpu_model", _d("ray_gpu_model"))
    try:
        gpu_model(model)
    except KeyError:
        raise r.error("ray_gpu_model", f"a GPU model of the catalog ({model_names()})", model) from None
    timeout = r.number(doc, "", "request_timeout_s", _d("request_timeout_s"), gt=0, le=3600)
    return ServiceConfig(
        tenants=tenants,
        source=r.shown,
        canary=_canary(r, doc),
        selector_model=_path(r, doc, "selector_model", folder),
        recogniser_model=_path(r, doc, "recogniser_model", folder),
        placer_model=_path(r, doc, "placer_model", folder),
        interference_model=_path(r, doc, "interference_model", folder),
        state_dir=str(folder / r.string(doc, "", "state_dir", _d("state_dir"))),
        checkpoint_interval_s=r.number(
            doc, "", "checkpoint_interval_s", _d("checkpoint_interval_s"), gt=0, le=86400
        ),
        calibration_budget_s=r.number(
            doc, "", "calibration_budget_s", _d("calibration_budget_s"), gt=0, le=86400
        ),
        finished_retention_s=_retention(r, doc),
        calibration_apps=_apps(r, doc),
        log_level=r.choice(doc, "", "log_level", LOG_LEVELS, _d("log_level")),
        log_format=r.choice(doc, "", "log_format", LOG_FORMATS, _d("log_format")),
        active_profiling=r.boolean(doc, "", "active_profiling", _d("active_profiling")),
        prediction_fallback=r.number(doc, "", "prediction_fallback", _d("prediction_fallback"), ge=0, le=10),
        online_batch=r.integer(doc, "", "online_batch", _d("online_batch"), ge=1, le=1_000_000),
        selector_learning=r.boolean(doc, "", "selector_learning", _d("selector_learning")),
        selector_candidate_updates=r.integer(
            doc, "", "selector_candidate_updates", _d("selector_candidate_updates"), ge=1, le=100_000_000
        ),
        backend=backend,
        ray_address=address,
        ray_gpu_model=model,
        request_timeout_s=timeout,
        tls_certfile=_path(r, doc, "tls_certfile", folder),
        tls_keyfile=_path(r, doc, "tls_keyfile", folder),
        rebalance=r.boolean(doc, "", "rebalance", _d("rebalance")),
        host=r.string(doc, "", "host", _d("host")),
        port=port,
        db=str(folder / r.string(doc, "", "db", _d("db"))),
        scheduler=r.string(doc, "", "scheduler", _d("scheduler")),
        queue_bound=bound,
        cluster=None if cluster is None else str(folder / cluster),
    )


def _d(key: str) -> Any:
    """The default of a :class:`ServiceConfig` field."""
    return default(ServiceConfig, key)


def _path(r: ConfigReader, doc: dict[str, Any], key: str, folder: Path) -> str | None:
    v = r.string(doc, "", key, None, non_empty=True, expected="a path (relative to this file)")
    return None if v is None else str(folder / v)


#: The shortest retention (a client polling for its result must find it).
MIN_RETENTION_S = 60.0


def _retention(r: ConfigReader, doc: dict[str, Any]) -> float:
    v = r.number(doc, "", "finished_retention_s", _d("finished_retention_s"), ge=0, le=100 * 365 * 86400)
    if 0 < v < MIN_RETENTION_S:
        raise r.error("finished_retention_s", f"0 (keep for ever) or at least {MIN_RETENTION_S:g} seconds", v)
    return v


def _apps(r: ConfigReader, doc: dict[str, Any]) -> tuple[str, ...]:
    from runtime.kernels import LIVE_APPS

    v = doc.get("calibration_apps", list(CALIBRATION_APPS))
    if not isinstance(v, list) or not v or not all(isinstance(a, str) and a in LIVE_APPS for a in v):
        expected = f"a list of apps with live kernels ({', '.join(LIVE_APPS)})"
        raise r.error("calibration_apps", expected, v)
    return tuple(v)


def _canary(r: ConfigReader, doc: dict[str, Any]) -> CanaryRule:
    d = CanaryRule()
    share = r.number(doc, "", "canary_share", d.share, gt=0, lt=1)
    least = r.integer(doc, "", "canary_min_tasks", d.min_tasks, ge=2)
    promote = r.integer(doc, "", "canary_promote_tasks", d.promote_tasks)
    if promote < least:
        raise r.error("canary_promote_tasks", f"an integer >= canary_min_tasks ({least})", promote)
    margin = r.number(doc, "", "canary_margin", d.margin, ge=0, lt=1)
    alpha = r.number(doc, "", "canary_alpha", d.alpha, gt=0, lt=0.5)
    return CanaryRule(share, least, promote, margin, alpha)


#: Tokens one tenant may have at once (a new one beside the old while its clients move).
MAX_TOKENS = 4


def _digests(r: ConfigReader, t: dict[str, Any], where: str) -> tuple[str, ...]:
    """``token_sha256``: one digest, or a list of 1 to :data:`MAX_TOKENS`."""
    v = t.get("token_sha256")
    values: list[Any] = v if isinstance(v, list) else [r.string(t, where, "token_sha256")]
    expected = f"64 hex digits (sha256 of the token), or a list of 1 to {MAX_TOKENS} of them"
    if isinstance(v, list) and not 1 <= len(values) <= MAX_TOKENS:
        raise r.error(f"{where}.token_sha256", expected, v)
    out = []
    for x in values:
        if not isinstance(x, str) or not _HEX64.match(x.lower()):
            raise r.error(f"{where}.token_sha256", expected, x)
        out.append(x.lower())
    return tuple(out)


def _tenant(r: ConfigReader, t: dict[str, Any], where: str) -> Tenant:
    r.keys(t, where, _TENANT)
    name = r.string(t, where, "name")
    digests = _digests(r, t, where)
    return Tenant(
        name,
        digests[0],
        more_tokens_sha256=digests[1:],
        weight=r.number(t, where, "weight", default(Tenant, "weight"), gt=0),
        max_queued=r.integer(t, where, "max_queued", default(Tenant, "max_queued"), ge=1),
        max_running=r.integer(t, where, "max_running", default(Tenant, "max_running"), ge=1),
        gpu_share=r.number(t, where, "gpu_share", default(Tenant, "gpu_share"), gt=0, le=1),
        admin=r.boolean(t, where, "admin", default(Tenant, "admin")),
    )

"""The service's configuration file (TOML): where it listens, what it schedules with, its tenants.

```toml
host = "127.0.0.1"          # default; binding elsewhere is the operator's explicit choice
port = 8470
db = "rlsched-service.db"   # the durable queue (SQLite, WAL), relative to this file
scheduler = "ldwp+iawp"     # SELECTOR+PLACER
queue_bound = 100000        # queued tasks in all; beyond it submissions get 429
cluster = "live.toml"       # optional live cluster file; default: the embedded cluster

[[tenants]]
name = "video"
token_sha256 = "9f86d0..."  # sha256 hex of the bearer token (tokens are never stored)
weight = 2                  # share under contention
max_queued = 10000
max_running = 64
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
from rlsched.scenarios.loader import ScenarioError, read_toml_file

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_TOP = ("host", "port", "db", "scheduler", "queue_bound", "cluster", "tenants")
_TENANT = ("name", "token_sha256", "weight", "max_queued", "max_running", "admin")


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
    :param admin: may run cluster operations.
    """

    name: str
    token_sha256: str
    weight: float = 1.0
    max_queued: int = 10_000
    max_running: int = 64
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
    """

    tenants: tuple[Tenant, ...]
    host: str = "127.0.0.1"
    port: int = 8470
    db: str = "rlsched-service.db"
    scheduler: str = "ldwp+iawp"
    queue_bound: int = 100_000
    cluster: str | None = None
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
    return ServiceConfig(
        tenants=tenants,
        host=_get(shown, doc, "", "host", str, default(ServiceConfig, "host")),
        port=port,
        db=str(folder / _get(shown, doc, "", "db", str, default(ServiceConfig, "db"))),
        scheduler=_get(shown, doc, "", "scheduler", str, default(ServiceConfig, "scheduler")),
        queue_bound=bound,
        cluster=None if cluster is None else str(folder / cluster),
    )


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
    admin = _get(path, t, where, "admin", bool, default(Tenant, "admin"))
    return Tenant(name, digest, weight, mq, mr, admin)

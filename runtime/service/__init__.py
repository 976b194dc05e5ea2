"""``rlsched serve``: the live scheduling service — an HTTP API in front of the live runtime, with
tenants, a durable SQLite queue, fair sharing and Prometheus metrics."""

from __future__ import annotations

from rlsched.lazy import lazy_exports

_EXPORTS = {
    "ServiceConfig": "runtime.service.config",
    "Tenant": "runtime.service.config",
    "hash_token": "runtime.service.config",
    "load_service_config": "runtime.service.config",
    "TaskStore": "runtime.service.store",
    "Service": "runtime.service.service",
    "serve": "runtime.service.service",
    "create_app": "runtime.service.app",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)

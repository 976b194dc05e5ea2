"""``rlsched serve``: the live scheduling service — an HTTP API in front of the live runtime, with
tenants, a durable SQLite queue, fair sharing and Prometheus metrics — and its Python client.

The service's packages are the ``serve`` extra (``pip install 'rlsched[serve]'``). This package
imports nothing on its own: each name imports its module on first use (PEP 562), so the client
(httpx only) and :mod:`runtime.service.extra` come without the server (fastapi, uvicorn).
"""

from __future__ import annotations

from rlsched.lazy import lazy_dir, lazy_exports

_EXPORTS = {
    "ServiceConfig": "runtime.service.config",
    "Tenant": "runtime.service.config",
    "hash_token": "runtime.service.config",
    "load_service_config": "runtime.service.config",
    "TaskStore": "runtime.service.store",
    "Service": "runtime.service.service",
    "serve": "runtime.service.server",
    "create_app": "runtime.service.app",
    "Client": "runtime.service.client",
    "ServiceError": "runtime.service.client",
    "require_serve_extra": "runtime.service.extra",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
__dir__ = lazy_dir(__name__, _EXPORTS)

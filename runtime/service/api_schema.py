"""What the published OpenAPI schema says beyond what FastAPI derives from the routes: the bearer
scheme every call but the probes needs, and the error answers each operation can give (FastAPI
lists only 2xx and 422), each ``{"detail": "..."}``. A client generated from ``/openapi.json``
then knows to send the token and what a 401, 429 or 503 looks like."""

from __future__ import annotations

from typing import Any

#: Paths anyone may call (no token): the probes, the metrics and the schema itself.
PUBLIC = frozenset({"/healthz", "/readyz", "/metrics"})

_ERROR = {"$ref": "#/components/schemas/Error"}
_WHY = {
    "401": "no valid bearer token (checked before the body is read)",
    "403": "the tenant lacks the admin role (checked before the body is read)",
    "404": "no such task or node of the caller's",
    "408": "the body was not received within the service's request_timeout_s",
    "409": "the state does not allow it (a task already started, no canary, a config that does not load)",
    "413": "the body is over 1 MiB",
    "415": "the body is not declared Content-Type: application/json",
    "429": "the tenant's max_queued or the service's queue_bound is reached; see Retry-After",
    "503": "not ready, no answer within request_timeout_s, or the queue file refuses writes; see Retry-After",
    "507": "the queue file's disk is full; see Retry-After",
}


def _errors(path: str, method: str, op: dict[str, Any]) -> list[str]:
    """The error answers ``method path`` can give, besides FastAPI's 422."""
    codes = ["401", "503"]
    if path.startswith("/v1/admin/"):
        codes.append("403")
    if "requestBody" in op:
        codes += ["408", "413", "415"]
    if "{" in path or path in ("/v1/tasks/lookup", "/v1/tasks/cancel"):
        codes.append("404")
    if path.endswith("/cancel") or path.startswith("/v1/admin/"):
        codes.append("409")
    if path == "/v1/tasks" and method == "post":
        codes += ["429", "507"]
    if path.startswith("/v1/tasks/") and path.endswith("/cancel"):
        codes.append("507")  # a cancel is a write (admin changes apply all the same: kept false)
    return sorted(set(codes))


def complete(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (FastAPI's) with the bearer scheme, each operation's security and error answers,
    and without the ``authorization`` header parameter the scheme stands for."""
    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {})["bearer"] = {
        "type": "http",
        "scheme": "bearer",
        "description": "a tenant's token (the config lists its sha256)",
    }
    components.setdefault("schemas", {})["Error"] = {
        "type": "object",
        "properties": {"detail": {"type": "string"}},
        "required": ["detail"],
    }
    for path, ops in schema.get("paths", {}).items():
        if path in PUBLIC:
            continue
        for method, op in ops.items():
            op["security"] = [{"bearer": []}]
            params = [p for p in op.get("parameters", []) if p.get("name", "").lower() != "authorization"]
            if params:
                op["parameters"] = params
            else:
                op.pop("parameters", None)
            answers = op.setdefault("responses", {})
            for code in _errors(path, method, op):
                answers.setdefault(
                    code, {"description": _WHY[code], "content": {"application/json": {"schema": _ERROR}}}
                )
            if path == "/v1/tasks" and method == "post":
                answers.setdefault(
                    "200",
                    {
                        **answers.get("201", {}),
                        "description": "every key was seen before: the tasks it created then",
                    },
                )
    return schema

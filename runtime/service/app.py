"""The service's HTTP API (FastAPI), versioned under ``/v1``; OpenAPI at ``/openapi.json``.

- ``POST /v1/tasks`` — one task or a list (at most :data:`MAX_BATCH`); 201 with the tasks
  (a repeated idempotency key returns the task it first created); 429 with ``Retry-After``
  when the tenant's or the service's queue bound is reached.
- ``GET /v1/tasks/{id}`` — a task of the caller (another tenant's id answers 404).
- ``GET /v1/tasks?state=&after=&limit=`` — the caller's tasks, oldest first, paged by id.
- ``POST /v1/tasks/{id}/cancel`` — cancel a queued task (409 when it already started).
- ``GET /v1/cluster`` — nodes, GPUs, streams, memory and queue depth.
- ``GET /healthz``, ``GET /readyz`` (ready once the cluster runs and the queue is recovered),
  ``GET /metrics`` (Prometheus text).

Every request but the health probes and metrics carries ``Authorization: Bearer TOKEN``. Bodies
larger than :data:`MAX_BODY_BYTES` get 413; every malformed value gets 422 naming its field.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from runtime.kernels import LIVE_APPS
from runtime.service.config import Tenant
from runtime.service.service import Service
from runtime.service.store import STATES, NewTask

MAX_BATCH = 1000
#: Largest task id (SQLite's INTEGER): larger ids answer 422, not a server error.
MAX_ID = 2**63 - 1
TaskId = Annotated[int, Path(ge=1, le=MAX_ID)]
MAX_BODY_BYTES = 1 << 20
#: Seconds a client is told to wait after a 429.
RETRY_AFTER_S = 1


class TaskIn(BaseModel):
    """A task to run: chunk ``chunk`` of stream ``stream`` of ``app``."""

    app: str = Field(description=f"one of {', '.join(sorted(LIVE_APPS))}")
    stream: int = Field(0, ge=0, le=1_000_000)
    chunk: int = Field(0, ge=0, le=1_000_000_000)
    priority: int = Field(0, ge=-1000, le=1000)
    deadline_s: float | None = Field(None, gt=0, le=86_400 * 365)
    idempotency_key: str | None = Field(None, min_length=1, max_length=200)


class TaskOut(BaseModel):
    """A task as the service records it."""

    id: int
    app: str
    stream: int
    chunk: int
    priority: int
    deadline_s: float | None
    idempotency_key: str | None
    state: str
    attempt: int
    node: str | None
    error: str | None
    submitted_at: float
    started_at: float | None
    finished_at: float | None


class TaskList(BaseModel):
    tasks: list[TaskOut]
    next_after: int | None


def _out(row: Any) -> TaskOut:
    d = row.to_dict()
    d["idempotency_key"] = d.pop("idem_key")
    return TaskOut(**{k: v for k, v in d.items() if k in TaskOut.model_fields})


def _invalid(loc: tuple[str | int, ...], msg: str, got: object) -> None:
    """Answer 422 in the shape of every other validation error (the published schema's)."""
    raise RequestValidationError([{"type": "value_error", "loc": loc, "msg": msg, "input": got}])


def current_tenant(request: Request, authorization: Annotated[str | None, Header()] = None) -> Tenant:
    """The caller, from its bearer token (every tenant's digest compared in constant time)."""
    service: Service = request.app.state.service
    scheme, _, token = (authorization or "").partition(" ")
    t = service.config.tenant_for(token) if scheme.lower() == "bearer" and token else None
    if t is None:
        raise HTTPException(401, "authorization: a valid bearer token", {"WWW-Authenticate": "Bearer"})
    return t


Caller = Annotated[Tenant, Depends(current_tenant)]


def create_app(service: Service) -> FastAPI:
    """The API of ``service`` (which the caller starts and stops)."""
    app = FastAPI(title="rlsched service", version="1")
    app.state.service = service

    @app.middleware("http")
    async def limit_body(request: Request, call_next: Any) -> Response:
        size = request.headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > MAX_BODY_BYTES):
            return JSONResponse({"detail": f"body: at most {MAX_BODY_BYTES} bytes"}, status_code=413)
        return await call_next(request)

    @app.post("/v1/tasks", status_code=201, response_model=list[TaskOut])
    def submit(body: TaskIn | list[TaskIn], who: Caller, response: Response) -> list[TaskOut]:
        items = body if isinstance(body, list) else [body]
        if not items or len(items) > MAX_BATCH:
            _invalid(("body",), f"1 to {MAX_BATCH} tasks, got {len(items)}", len(items))
        for i, t in enumerate(items):
            if t.app not in LIVE_APPS:
                _invalid(("body", i, "app"), f"one of {', '.join(sorted(LIVE_APPS))}", t.app)
        reason = service.admission(who, len(items))
        if reason is not None:
            service.metrics.rejected.labels(who.name).inc(len(items))
            raise HTTPException(429, reason, {"Retry-After": str(RETRY_AFTER_S)})
        new = [NewTask(t.app, t.stream, t.chunk, t.priority, t.deadline_s, t.idempotency_key) for t in items]
        rows = service.store.submit(who.name, new)
        created = sum(1 for _, c in rows if c)
        service.metrics.accepted.labels(who.name).inc(created)
        if created == 0:
            response.status_code = 200
        return [_out(r) for r, _ in rows]

    @app.get("/v1/tasks/{task_id}", response_model=TaskOut)
    def get_task(task_id: TaskId, who: Caller) -> TaskOut:
        row = service.store.get(who.name, task_id)
        if row is None:
            raise HTTPException(404, f"task {task_id}: no such task")
        return _out(row)

    @app.get("/v1/tasks", response_model=TaskList)
    def list_tasks(
        who: Caller,
        state: Annotated[str | None, Query(pattern="^(" + "|".join(STATES) + ")$")] = None,
        after: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> TaskList:
        rows = service.store.list_tasks(who.name, state, after, limit)
        return TaskList(tasks=[_out(r) for r in rows], next_after=rows[-1].id if len(rows) == limit else None)

    @app.post("/v1/tasks/{task_id}/cancel", response_model=TaskOut)
    def cancel(task_id: TaskId, who: Caller) -> TaskOut:
        row = service.store.cancel(who.name, task_id)
        if row is None:
            raise HTTPException(404, f"task {task_id}: no such task")
        if row.state != "cancelled":
            raise HTTPException(
                409, f"task {task_id}: already {row.state}, only queued tasks can be cancelled"
            )
        return _out(row)

    @app.get("/v1/cluster")
    def cluster(who: Caller) -> dict[str, Any]:
        return service.cluster_state()

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    def readyz() -> JSONResponse:
        ready = service.ready.is_set()
        return JSONResponse({"ready": ready}, status_code=200 if ready else 503)

    @app.get("/metrics")
    def metrics() -> Response:
        body, ctype = service.metrics.render(service)
        return Response(body, media_type=ctype)

    return app

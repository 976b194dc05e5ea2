"""The service's HTTP API (FastAPI), versioned under ``/v1``; OpenAPI at ``/openapi.json``.

- ``POST /v1/tasks`` — one task or a list (at most :data:`MAX_BATCH`); 201 with the tasks
  (a repeated idempotency key returns the task it first created); 429 with ``Retry-After``
  when the tenant's or the service's queue bound is reached.
- ``GET /v1/tasks/{id}`` — a task of the caller (another tenant's id answers 404).
- ``POST /v1/tasks/lookup`` — ``{"ids": [...]}`` (at most :data:`MAX_BATCH`): those tasks in one
  answer, in that order; 404 naming the first that is not the caller's.
- ``GET /v1/tasks?state=&after=&limit=&key_prefix=`` — the caller's tasks, oldest first, paged by id
  (``key_prefix``: those whose idempotency key starts with it, a submission's tasks).
- ``POST /v1/tasks/{id}/cancel`` — cancel a queued task (409 when it already started).
- ``POST /v1/tasks/cancel`` — ``{"ids": [...]}``: cancel those that are queued; the tasks as they
  now are (those that had started keep their state).
- ``GET /v1/cluster`` — nodes, GPUs, streams, memory and queue depth; the models in use and
  their versions, the placer's calibration per GPU model, online updates, the last checkpoint.
- ``GET /v1/models`` — the same about models, and the placer's predicted co-location table
  (normalised throughput by GPU model, kind and partner).
- ``GET /healthz``, ``GET /readyz`` (ready once the cluster runs and the queue is recovered),
  ``GET /metrics`` (Prometheus text).
- Admin tenants only (others get 403): ``POST /v1/admin/nodes`` (a node joins),
  ``DELETE /v1/admin/nodes/{name}`` (it leaves; its tasks run again elsewhere),
  ``POST /v1/admin/nodes/{name}/drain`` and ``.../resume``, ``PUT /v1/admin/scheduler``;
  ``GET /v1/admin/models`` (the incumbent's versions, the canary, the history),
  ``POST /v1/admin/models/candidate`` (a candidate selector runs as a canary),
  ``POST /v1/admin/models/promote`` and ``.../rollback`` (409 when no canary runs);
  ``GET /v1/admin/tenants`` (each tenant's limits and tasks by state),
  ``POST /v1/admin/reload[?dry_run=true]`` (the config file re-read: what it applied, or with
  ``dry_run`` would apply, which changed keys wait for a restart; 409 when the file does not
  load, and nothing changed).

Every request but the health probes, metrics and the schema carries ``Authorization: Bearer
TOKEN``, checked before any byte of the body is read (:mod:`runtime.service.guard`). Bodies larger
than :data:`MAX_BODY_BYTES` get 413, however they are framed; every malformed value gets 422 naming
its field; a body not received within the service's ``request_timeout_s`` gets 408, an answer not
ready by then 503 (a submission that was committed meanwhile is found again by its idempotency
key). When the queue's file refuses writes (full: 507; read-only or failing: 503, both with
``Retry-After``) nothing was written, and ``readyz`` answers 503 until it takes writes again
(an idle service finds out by a probe write every ``PROBE_IDLE_S``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Path, Query, Request, Response
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from rlsched.errors import InputError
from rlsched.hardware import gpu_model, model_names
from rlsched.policies.registry import describe_auto
from rlsched.scenarios.limits import MAX_CPU_CORES, MAX_GPUS_PER_NODE, MAX_STREAMS_PER_GPU
from rlsched.version import package_version
from runtime import failpoints
from runtime.cluster.config import LiveGpu, LiveNode
from runtime.cluster.config_io import MAX_GPU_INDEX, MAX_GPU_MEM_MIB, MAX_HOST_MEM_GIB, MAX_SPEED
from runtime.kernels import LIVE_APPS
from runtime.service.access_log import AccessLog
from runtime.service.api_errors import echoable, invalid, not_json_body, one_branch
from runtime.service.api_schema import complete
from runtime.service.config import Tenant
from runtime.service.guard import TENANT_KEY, RequestGuard, bearer_token
from runtime.service.nodes import NodeAdmin, NodeError, UnknownNode
from runtime.service.promotion import PromotionError
from runtime.service.reload import ReloadRefused
from runtime.service.service import Service
from runtime.service.store import STATES, NewTask, StorageError
from runtime.service.store_rows import KeyReused
from runtime.service.task_limits import (
    MAX_CHUNK,
    MAX_DEADLINE_S,
    MAX_ID,
    MAX_PRIORITY,
    MAX_STREAM,
    MIN_PRIORITY,
)

MAX_BATCH = 1000
#: Largest task id (SQLite's INTEGER): larger ids answer 422, not a server error.
TaskId = Annotated[int, Path(ge=1, le=MAX_ID)]
MAX_BODY_BYTES = 1 << 20
#: Seconds a client is told to wait after a 429.
RETRY_AFTER_S = 1
log = logging.getLogger(__name__)


#: What a listing's ``key_prefix`` may hold: the characters of the keys ``rlsched submit`` makes
#: (``KEY/APP/STREAM/CHUNK``); a key of other characters is found by its task's id.
KEY_PREFIX_PATTERN = r"^[A-Za-z0-9_.:/-]{1,200}$"


#: Input models refuse a key they do not know (a misspelt ``priorty`` was dropped in silence) and
#: a value of another JSON type (``"priority": true`` read as 1, ``"5"`` as 5).
_CLOSED = ConfigDict(extra="forbid", strict=True)


class TaskIn(BaseModel):
    """A task to run: chunk ``chunk`` of stream ``stream`` of ``app``."""

    model_config = _CLOSED
    app: str = Field(description=f"one of {', '.join(sorted(LIVE_APPS))}")
    stream: int = Field(0, ge=0, le=MAX_STREAM)
    chunk: int = Field(0, ge=0, le=MAX_CHUNK)
    priority: int = Field(0, ge=MIN_PRIORITY, le=MAX_PRIORITY)
    deadline_s: float | None = Field(None, gt=0, le=MAX_DEADLINE_S)
    idempotency_key: str | None = Field(None, min_length=1, max_length=200)


class OutputSummary(BaseModel):
    """One output array of a completed task."""

    shape: list[int]
    dtype: str
    crc32: int


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
    result: dict[str, OutputSummary] | None = Field(
        None, description="a completed task's outputs: shape, dtype and CRC-32 of each array"
    )


class GpuIn(BaseModel):
    """A GPU of a joining node."""

    model_config = _CLOSED
    model: str = Field(description="a GPU model of the catalog, e.g. T4")
    index: int = Field(0, ge=0, le=MAX_GPU_INDEX, description="CUDA ordinal (CuPy backend)")
    mem_mib: float | None = Field(None, gt=0, le=MAX_GPU_MEM_MIB)
    speed: float | None = Field(None, gt=0, le=MAX_SPEED, description="emulated relative speed")


class NodeIn(BaseModel):
    """A node that joins the cluster."""

    model_config = _CLOSED
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    cpu_cores: int = Field(2, ge=0, le=MAX_CPU_CORES)
    gpus: list[GpuIn] = Field(default_factory=list, max_length=MAX_GPUS_PER_NODE)
    streams_per_gpu: int = Field(4, ge=1, le=MAX_STREAMS_PER_GPU)
    host_mem_gib: float = Field(16.0, gt=0, le=MAX_HOST_MEM_GIB)
    ray_node_id: str | None = Field(None, min_length=1, max_length=128, description="Ray backend")


class SchedulerIn(BaseModel):
    model_config = _CLOSED

    scheduler: str = Field(min_length=1, max_length=200, description="SELECTOR+PLACER")


class CandidateIn(BaseModel):
    model_config = _CLOSED

    scheduler: str = Field(min_length=1, max_length=200, description="the candidate SELECTOR")
    selector_model: str | None = Field(
        default=None, max_length=4096, description="an LDWP checkpoint folder on the service's machine"
    )


class LookupIn(BaseModel):
    """Tasks to look up at once, by id (the answer keeps this order)."""

    model_config = _CLOSED
    ids: list[Annotated[int, Field(ge=1, le=MAX_ID)]] = Field(min_length=1, max_length=MAX_BATCH)


class TaskList(BaseModel):
    tasks: list[TaskOut]
    next_after: int | None


def _out(row: Any) -> TaskOut:
    d = row.to_dict()
    d["idempotency_key"] = d.pop("idem_key")
    return TaskOut(**{k: v for k, v in d.items() if k in TaskOut.model_fields})


def current_tenant(request: Request, authorization: Annotated[str | None, Header()] = None) -> Tenant:
    """The caller: the tenant :class:`~runtime.service.guard.RequestGuard` authenticated before the
    body was read (or, without the guard, the one its bearer token names, in constant time)."""
    found = request.scope.get(TENANT_KEY)
    if isinstance(found, Tenant):
        return found
    service: Service = request.app.state.service
    token = bearer_token(authorization)
    t = service.tenant_for(token) if token is not None else None
    if t is None:
        raise HTTPException(401, "authorization: a valid bearer token", {"WWW-Authenticate": "Bearer"})
    return t


Caller = Annotated[Tenant, Depends(current_tenant)]


def admin_tenant(who: Caller) -> Tenant:
    """The caller, if it has the admin role."""
    if not who.admin:
        raise HTTPException(403, f"tenant {who.name}: cluster operations need the admin role")
    return who


Admin = Annotated[Tenant, Depends(admin_tenant)]
NodeName = Annotated[str, Path(min_length=1, max_length=64)]


def _live_node(body: NodeIn) -> LiveNode:
    for i, g in enumerate(body.gpus):
        try:
            gpu_model(g.model)
        except KeyError:
            invalid(("body", "gpus", i, "model"), f"a GPU model of the catalog ({model_names()})", g.model)
    if body.cpu_cores == 0 and not body.gpus:
        invalid(("body", "cpu_cores"), "at least one CPU core or one GPU", 0)
    gpus = tuple(LiveGpu(g.model, g.index, g.mem_mib, g.speed) for g in body.gpus)
    return LiveNode(body.name, body.cpu_cores, gpus, body.streams_per_gpu, body.host_mem_gib)


def create_app(service: Service) -> FastAPI:
    """The API of ``service`` (which the caller starts and stops)."""
    app = FastAPI(title="rlsched service", version="1")
    app.state.service = service

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = complete(
                get_openapi(title=app.title, version=app.version, routes=app.routes)
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    timeout = service.config.request_timeout_s

    def admin_nodes() -> NodeAdmin:
        if service.nodes is None:  # only before start(), when nothing is served
            raise HTTPException(503, "service: not started", {"Retry-After": str(RETRY_AFTER_S)})
        return service.nodes

    @app.middleware("http")
    async def limit_time(request: Request, call_next: Any) -> Response:
        try:
            return await asyncio.wait_for(call_next(request), timeout)
        except TimeoutError:
            return JSONResponse(
                {"detail": f"request: no answer within {timeout:g} s"},
                status_code=503,
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )

    # Outermost (added last): no body is read before the caller is known, none beyond the limit.
    app.add_middleware(
        RequestGuard, tenant_for=service.tenant_for, max_body=MAX_BODY_BYTES, timeout_s=timeout
    )
    app.add_middleware(AccessLog)  # outside the guard: refused requests are logged too

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, e: RequestValidationError) -> JSONResponse:
        unread = not_json_body(e.errors(), request.headers.get("content-type"))
        if unread is not None:  # the body was never parsed: its fields' errors would mislead
            return JSONResponse({"detail": unread}, status_code=415)
        errors = [echoable(err) for err in one_branch(e.errors(), e.body)]
        return await request_validation_exception_handler(
            request, RequestValidationError(errors, body=e.body)
        )

    @app.exception_handler(StorageError)
    async def storage_error(request: Request, e: StorageError) -> JSONResponse:
        # Nothing was written (the transaction rolled back): the client may simply retry.
        return JSONResponse(
            {"detail": str(e)},
            status_code=507 if e.kind == "full" else 503,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )

    @app.post("/v1/tasks", status_code=201, response_model=list[TaskOut])
    def submit(body: TaskIn | list[TaskIn], who: Caller, response: Response) -> list[TaskOut]:
        items = body if isinstance(body, list) else [body]
        if not items or len(items) > MAX_BATCH:
            invalid(("body",), f"1 to {MAX_BATCH} tasks", len(items))
        for i, t in enumerate(items):
            if t.app not in LIVE_APPS:  # where the schema's own errors would put it
                where = ("body", i, "app") if isinstance(body, list) else ("body", "app")
                invalid(where, f"one of {', '.join(sorted(LIVE_APPS))}", t.app)
        reason = service.admission(who, len(items))
        keys = [t.idempotency_key for t in items if t.idempotency_key is not None]
        if reason is not None and keys:
            # A batch sent again (its answer was lost) holds tasks already queued: only the new
            # ones count against the bounds, so a tenant at its quota gets its first answer back.
            # Asked only when the whole batch would not fit: the queue looks the keys up anyway.
            fresh = service.store.new_tasks(who.name, [t.idempotency_key for t in items])
            reason = service.admission(who, fresh) if fresh else None
        if reason is not None:
            service.metrics.rejected.labels(who.name).inc(len(items))
            raise HTTPException(429, reason, {"Retry-After": str(RETRY_AFTER_S)})
        new = [NewTask(t.app, t.stream, t.chunk, t.priority, t.deadline_s, t.idempotency_key) for t in items]
        try:
            rows = service.store.submit(who.name, new)
        except KeyReused as e:
            where = (
                ("body", e.index, "idempotency_key")
                if isinstance(body, list)
                else ("body", "idempotency_key")
            )
            whose = (
                f"[{e.first}] of this batch has it" if e.first is not None else f"it names task {e.task_id}"
            )
            invalid(where, f"a key not used for another task ({whose})", e.key)
        late = failpoints.first("submit-late")
        if late is not None:
            time.sleep(float(late))
        created = sum(1 for _, c in rows if c)
        if created:
            service.wake_dispatcher()
        service.metrics.accepted.labels(who.name).inc(created)
        if created == 0:
            response.status_code = 200
        return [_out(r) for r, _ in rows]

    # Before the id route, which would take "lookup" for an id and answer 422.
    @app.get("/v1/tasks/lookup", include_in_schema=False)
    @app.get("/v1/tasks/cancel", include_in_schema=False)
    def post_only(who: Caller) -> None:
        raise HTTPException(405, "Method Not Allowed", {"Allow": "POST"})

    @app.get("/v1/tasks/{task_id}", response_model=TaskOut)
    def get_task(task_id: TaskId, who: Caller) -> TaskOut:
        row = service.store.get(who.name, task_id)
        if row is None:
            raise HTTPException(404, f"task {task_id}: no such task")
        return _out(row)

    def tasks_of(who: Tenant, ids: Sequence[int]) -> dict[int, Any]:
        """The caller's tasks ``ids``; 404 naming the first that is not one of them."""
        rows = service.store.get_many(who.name, ids)
        missing = [i for i in ids if i not in rows]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise HTTPException(404, f"task {missing[0]}: no such task{more}")
        return rows

    @app.post("/v1/tasks/lookup", response_model=list[TaskOut])
    def lookup(body: LookupIn, who: Caller) -> list[TaskOut]:
        rows = tasks_of(who, body.ids)
        return [_out(rows[i]) for i in body.ids]

    @app.post("/v1/tasks/cancel", response_model=list[TaskOut])
    def cancel_many(body: LookupIn, who: Caller) -> list[TaskOut]:
        tasks_of(who, body.ids)  # every id the caller's, before anything changes
        service.store.cancel_many(who.name, body.ids)
        rows = tasks_of(who, body.ids)
        return [_out(rows[i]) for i in body.ids]

    @app.get("/v1/tasks", response_model=TaskList)
    def list_tasks(
        who: Caller,
        state: Annotated[str | None, Query(pattern="^(" + "|".join(STATES) + ")$")] = None,
        after: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        key_prefix: Annotated[str | None, Query(pattern=KEY_PREFIX_PATTERN)] = None,
    ) -> TaskList:
        rows = service.store.list_tasks(who.name, state, after, limit, key_prefix)
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

    @app.get("/v1/models")
    def models(who: Caller) -> dict[str, Any]:
        learning = service.learning
        return {
            **learning.describe(),
            "predictions": learning.predictions(),
            "prediction_error": learning.prediction_error(),
            "auto": describe_auto(service.scheduler),
        }

    @app.exception_handler(NodeError)
    async def node_error(request: Request, e: NodeError) -> JSONResponse:
        return JSONResponse({"detail": str(e)}, status_code=404 if isinstance(e, UnknownNode) else 409)

    @app.post("/v1/admin/nodes", status_code=201)
    def add_node(body: NodeIn, who: Admin) -> dict[str, Any]:
        node = _live_node(body)
        return {"name": node.name, "index": admin_nodes().add(node, body.ray_node_id)}

    @app.delete("/v1/admin/nodes/{name}")
    def remove_node(name: NodeName, who: Admin) -> dict[str, Any]:
        admin_nodes()  # 503 until the service has started
        return service.remove_node(name)

    @app.post("/v1/admin/nodes/{name}/drain")
    def drain_node(name: NodeName, who: Admin) -> dict[str, Any]:
        admin_nodes()  # 503 until the service has started
        return service.drain_node(name)

    @app.post("/v1/admin/nodes/{name}/resume")
    def resume_node(name: NodeName, who: Admin) -> dict[str, Any]:
        admin_nodes()  # 503 until the service has started
        return service.drain_node(name, on=False)

    @app.put("/v1/admin/scheduler")
    def set_scheduler(body: SchedulerIn, who: Admin) -> dict[str, Any]:
        try:
            return service.switch_scheduler(body.scheduler)
        except ValueError as e:
            invalid(("body", "scheduler"), str(e), body.scheduler)

    @app.get("/v1/admin/models")
    def list_models(who: Admin) -> dict[str, Any]:
        return service.promotion.describe()

    @app.post("/v1/admin/models/candidate", status_code=201)
    def start_canary(body: CandidateIn, who: Admin) -> dict[str, Any]:
        try:
            return service.start_canary(body.scheduler, body.selector_model)
        except InputError as e:
            invalid(
                ("body", "selector_model" if e.field != "scheduler" else "scheduler"), str(e), body.scheduler
            )

    @app.post("/v1/admin/models/promote")
    def promote(who: Admin) -> dict[str, Any]:
        return service.promotion.promote(f"by {who.name}")

    @app.post("/v1/admin/models/rollback")
    def rollback(who: Admin) -> dict[str, Any]:
        return service.promotion.rollback(f"by {who.name}")

    @app.get("/v1/admin/tenants")
    def list_tenants(who: Admin) -> dict[str, Any]:
        return {"tenants": service.tenants_state()}

    @app.post("/v1/admin/reload")
    def reload(who: Admin, dry_run: bool = False) -> dict[str, Any]:
        if service.reloader is None:
            raise HTTPException(409, "service: not started from a config file (rlsched serve --config)")
        try:
            outcome = service.reloader.reload(dry_run)
        except ReloadRefused as e:
            if not dry_run:
                log.error("rlsched serve: reload refused (asked by tenant %s): %s", who.name, e)
            raise HTTPException(409, f"config: {e}") from None
        if not dry_run:
            log.info("%s (asked by tenant %s)", outcome.text(), who.name)
        return outcome.as_dict()

    @app.exception_handler(PromotionError)
    async def promotion_error(request: Request, e: PromotionError) -> JSONResponse:
        return JSONResponse({"detail": str(e)}, status_code=409)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok", "version": package_version()}

    @app.get("/readyz")
    def readyz() -> JSONResponse:
        storage = service.store.degraded
        ready = service.ready.is_set() and storage is None
        body: dict[str, Any] = {"ready": ready}
        if storage is not None:
            body["storage"] = str(storage)
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get("/metrics")
    def metrics() -> Response:
        body, ctype = service.metrics_text()
        return Response(body, media_type=ctype)

    return app

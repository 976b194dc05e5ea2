"""The shape of the API's 422 answers: one branch of a body's errors, values strict JSON can carry,
and 422s of the service's own checks in the same shape as the schema's."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NoReturn

from fastapi.exceptions import RequestValidationError

#: The branches of ``POST /v1/tasks``'s body (one task, or a list), as pydantic tags the errors of each.
_BODY_BRANCHES = {"TaskIn": dict, "list[TaskIn]": list}


def one_branch(errors: Sequence[Any], body: Any) -> list[Any]:
    """A task body's errors without those of the branch its shape did not take: a list of tasks
    with one bad field is told of that field (``loc: ["body", 0, "priority"]``), not also that
    a list is not one task (pydantic reports every branch of ``TaskIn | list[TaskIn]``)."""
    out = []
    for err in errors:
        loc = tuple(err.get("loc", ()))
        shape = _BODY_BRANCHES.get(loc[1]) if len(loc) > 1 and loc[0] == "body" else None
        if shape is None:
            out.append(err)
        elif isinstance(body, shape):
            out.append({**err, "loc": (loc[0], *loc[2:])})
    return out or list(errors)


def echoable(value: Any) -> Any:
    """``value`` as strict JSON can carry it: a float JSON has no number for (NaN, Infinity, which
    Python's parser accepts) as its text, a string with a lone surrogate escaped. The 422 echoes the
    input it refuses, and these made it a 500 with a traceback in the log."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {k: echoable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(echoable(v) for v in value)
    return value


def invalid(loc: tuple[str | int, ...], msg: str, got: object) -> NoReturn:
    """Answer 422 in the shape of every other validation error (the published schema's)."""
    raise RequestValidationError([{"type": "value_error", "loc": loc, "msg": msg, "input": got}])


def not_json_body(errors: Sequence[Any], content_type: str | None) -> str | None:
    """Why a body was not read, when it was refused for a ``Content-Type`` that is not JSON, or
    none (``curl -d`` sends ``application/x-www-form-urlencoded``; FastAPI reads a body as JSON
    only when the header says so): the framework then validates the raw bytes, and its 422 says
    only that a task is not an object. ``None`` when the type is JSON or no error is the body's."""
    if not any(tuple(err.get("loc", ()))[:1] == ("body",) for err in errors):
        return None
    if content_type is None:
        return "Content-Type: expected application/json, none given"
    media = content_type.split(";", 1)[0].strip().lower()
    if media == "application/json" or (media.startswith("application/") and media.endswith("+json")):
        return None
    shown = echoable(content_type[:80])
    return f"Content-Type: expected application/json, got {shown!r}"

"""The queue file's schema and the rows it holds: a task as stored (:class:`TaskRow`) and as
submitted (:class:`NewTask`), its states, and the error a refused write raises
(:class:`StorageError`). The queue's transactions are :mod:`runtime.service.store`."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

STATES = ("queued", "running", "done", "failed", "cancelled")
SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    app TEXT NOT NULL,
    stream INTEGER NOT NULL,
    chunk INTEGER NOT NULL,
    priority INTEGER NOT NULL,
    deadline_s REAL,
    idem_key TEXT,
    state TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    completions INTEGER NOT NULL DEFAULT 0,
    node TEXT,
    error TEXT,
    submitted_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    result TEXT,
    UNIQUE (tenant, idem_key)
);
CREATE INDEX IF NOT EXISTS tasks_queue ON tasks (state, tenant, priority DESC, id);
CREATE INDEX IF NOT EXISTS tasks_finished ON tasks (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS tasks_tenant ON tasks (tenant);
CREATE INDEX IF NOT EXISTS tasks_tenant_state ON tasks (tenant, state);
CREATE TABLE IF NOT EXISTS attempts (
    task_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    node TEXT NOT NULL,
    started_at REAL NOT NULL,
    PRIMARY KEY (task_id, attempt)
);
CREATE TABLE IF NOT EXISTS reports (
    task_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    reported_at REAL NOT NULL,
    outcome TEXT NOT NULL,
    recorded INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS reports_task ON reports (task_id);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
"""
#: States whose tasks are finished (``finished_at`` set) and may be pruned.
FINISHED = ("done", "failed", "cancelled")
#: Outcomes an attempt report carries (``abandoned``: the process holding it died).
OUTCOMES = ("done", "failed", "lost", "moved", "abandoned")
COLUMNS = (
    "id, tenant, app, stream, chunk, priority, deadline_s, idem_key, state, attempt, completions, "
    "node, error, submitted_at, started_at, finished_at, result"
)


@dataclass(frozen=True)
class TaskRow:
    """One task as stored."""

    id: int
    tenant: str
    app: str
    stream: int
    chunk: int
    priority: int
    deadline_s: float | None
    idem_key: str | None
    state: str
    attempt: int
    completions: int
    node: str | None
    error: str | None
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    #: JSON summary of the outputs of a completed task (see ``runtime.service.dispatcher``).
    result: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields the API returns (the idempotency key included, the tenant too)."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["result"] = json.loads(self.result) if self.result else None
        return d


@dataclass(frozen=True)
class NewTask:
    """A task as submitted."""

    app: str
    stream: int = 0
    chunk: int = 0
    priority: int = 0
    deadline_s: float | None = None
    idem_key: str | None = None


class StorageError(Exception):
    """A write SQLite refused; its transaction was rolled back.

    :param kind: ``full`` (no space: disk or page cap), ``readonly``, or ``unavailable``
        (an I/O error, a locked or vanished file).
    :param detail: SQLite's message.
    """

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"queue database {kind}: {detail}")
        self.kind, self.detail = kind, detail


def storage_error(e: sqlite3.Error) -> StorageError:
    name = getattr(e, "sqlite_errorname", "") or ""
    if name.startswith("SQLITE_FULL"):
        return StorageError("full", str(e))
    if name.startswith("SQLITE_READONLY"):
        return StorageError("readonly", str(e))
    return StorageError("unavailable", str(e))


class KeyReused(ValueError):
    """An idempotency key sent again with another task: a key names one task, so the batch is
    refused whole (a client whose keys collide lost the second task without a word).

    :param index: the task's position in its batch.
    :param key: the key.
    :param task_id: the task the key names.
    :param first: the position in this batch of the task the key names, when this batch made it
        (its id is then none a client can look up: the batch is rolled back).
    """

    def __init__(self, index: int, key: str, task_id: int, first: int | None = None) -> None:
        whose = f"task [{first}] of this batch" if first is not None else f"task {task_id}"
        super().__init__(f"idempotency key {key!r} names {whose}, another task")
        self.index, self.key, self.task_id, self.first = index, key, task_id, first


def check_same(index: int, row: TaskRow, t: NewTask, first: int | None = None) -> TaskRow:
    """``row``, the task ``t``'s key names; refused if it is another task (app, stream, chunk,
    priority, deadline).

    :param first: ``row``'s position in this batch, when this batch made it.
    :raises KeyReused: naming the key and the task it names.
    """
    if (row.app, row.stream, row.chunk, row.priority, row.deadline_s) != (
        t.app,
        t.stream,
        t.chunk,
        t.priority,
        t.deadline_s,
    ):
        raise KeyReused(index, t.idem_key or "", row.id, first)
    return row

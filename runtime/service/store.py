"""The service's durable task queue: one SQLite file in WAL mode.

Every accepted task is committed before the service answers 2xx, so a crash (``kill -9``) loses
nothing that was accepted: on restart, :meth:`TaskStore.recover` puts tasks that were running back
in the queue. Completion is recorded exactly once: a result is written only by the attempt that
holds the task (``UPDATE ... WHERE state = 'running' AND attempt = ?``), so a late answer from an
attempt that a restart superseded changes nothing.

States: ``queued`` → ``running`` → ``done`` | ``failed``; ``queued`` → ``cancelled``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STATES = ("queued", "running", "done", "failed", "cancelled")
_SCHEMA = """
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
"""
_COLUMNS = (
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


class TaskStore:
    """The queue and the record of every task, in one SQLite file (WAL, synchronous=FULL).

    :param path: the database file (created with its schema if absent).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # committed = on disk, before the 2xx
        self._db.executescript(_SCHEMA)
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(tasks)")}
        if "result" not in columns:  # a queue written before results were recorded
            self._db.execute("ALTER TABLE tasks ADD COLUMN result TEXT")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[TaskRow]:
        return [TaskRow(*r) for r in self._db.execute(sql, args).fetchall()]

    def submit(self, tenant: str, tasks: list[NewTask]) -> list[tuple[TaskRow, bool]]:
        """Queue ``tasks`` in one transaction; (row, created) each — a repeated idempotency key
        returns the task it first created, with ``created`` false."""
        now = time.time()
        out = []
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for t in tasks:
                    if t.idem_key is not None:
                        old = self._rows(
                            f"SELECT {_COLUMNS} FROM tasks WHERE tenant = ? AND idem_key = ?",
                            (tenant, t.idem_key),
                        )
                        if old:
                            out.append((old[0], False))
                            continue
                    cur = self._db.execute(
                        "INSERT INTO tasks (tenant, app, stream, chunk, priority, deadline_s, idem_key, "
                        "state, submitted_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?)",
                        (tenant, t.app, t.stream, t.chunk, t.priority, t.deadline_s, t.idem_key, now),
                    )
                    # The new row is what was inserted: no read-back (one query per task, not two).
                    row = TaskRow(
                        int(cur.lastrowid or 0), tenant, t.app, t.stream, t.chunk, t.priority, t.deadline_s,
                        t.idem_key, "queued", 0, 0, None, None, now, None, None,
                    )  # fmt: skip
                    out.append((row, True))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return out

    def get(self, tenant: str | None, task_id: int) -> TaskRow | None:
        """A task, if it exists and belongs to ``tenant`` (``None``: any tenant)."""
        with self._lock:
            rows = self._rows(f"SELECT {_COLUMNS} FROM tasks WHERE id = ?", (task_id,))
        if not rows or (tenant is not None and rows[0].tenant != tenant):
            return None
        return rows[0]

    def list_tasks(self, tenant: str, state: str | None, after: int, limit: int) -> list[TaskRow]:
        """A tenant's tasks with id > ``after``, oldest first, at most ``limit``."""
        sql = f"SELECT {_COLUMNS} FROM tasks WHERE tenant = ? AND id > ?"
        args: tuple[Any, ...] = (tenant, after)
        if state is not None:
            sql += " AND state = ?"
            args += (state,)
        with self._lock:
            return self._rows(sql + " ORDER BY id LIMIT ?", (*args, limit))

    def cancel(self, tenant: str, task_id: int) -> TaskRow | None:
        """Cancel a queued task of ``tenant``; the task as it now is (``None``: not found)."""
        with self._lock:
            self._db.execute(
                "UPDATE tasks SET state = 'cancelled', finished_at = ? WHERE id = ? AND tenant = ? "
                "AND state = 'queued'",
                (time.time(), task_id, tenant),
            )
        return self.get(tenant, task_id)

    def counts(self) -> dict[tuple[str, str], int]:
        """(tenant, state) -> tasks."""
        with self._lock:
            rows = self._db.execute(
                "SELECT tenant, state, COUNT(*) FROM tasks GROUP BY tenant, state"
            ).fetchall()
        return {(t, s): n for t, s, n in rows}

    def queued_heads(self, per_tenant: int) -> dict[str, list[TaskRow]]:
        """The first ``per_tenant`` queued tasks of each tenant, in dispatch order (higher
        priority first, then older)."""
        with self._lock:
            tenants = [
                r[0] for r in self._db.execute("SELECT DISTINCT tenant FROM tasks WHERE state = 'queued'")
            ]
            return {
                t: self._rows(
                    f"SELECT {_COLUMNS} FROM tasks WHERE state = 'queued' AND tenant = ? "
                    "ORDER BY priority DESC, id LIMIT ?",
                    (t, per_tenant),
                )
                for t in tenants
            }

    def start(self, task_id: int, node: str) -> int | None:
        """Mark a queued task running on ``node``; its attempt number, or ``None`` if it was no
        longer queued (cancelled meanwhile)."""
        with self._lock:
            cur = self._db.execute(
                "UPDATE tasks SET state = 'running', attempt = attempt + 1, node = ?, started_at = ? "
                "WHERE id = ? AND state = 'queued'",
                (node, time.time(), task_id),
            )
            if cur.rowcount != 1:
                return None
            return int(self._db.execute("SELECT attempt FROM tasks WHERE id = ?", (task_id,)).fetchone()[0])

    def finish(self, task_id: int, attempt: int, error: str | None, result: str | None = None) -> bool:
        """Record the outcome of ``attempt`` (``result``: JSON); True if it was recorded
        (exactly once per task)."""
        state = "done" if error is None else "failed"
        with self._lock:
            cur = self._db.execute(
                "UPDATE tasks SET state = ?, error = ?, finished_at = ?, completions = completions + 1, "
                "result = ? WHERE id = ? AND state = 'running' AND attempt = ?",
                (state, error, time.time(), result, task_id, attempt),
            )
            return cur.rowcount == 1

    def requeue(self, task_id: int, attempt: int) -> None:
        """Put a running attempt back in the queue (its node was lost)."""
        with self._lock:
            self._db.execute(
                "UPDATE tasks SET state = 'queued', node = NULL "
                "WHERE id = ? AND state = 'running' AND attempt = ?",
                (task_id, attempt),
            )

    def recover(self) -> int:
        """After a restart: tasks that were running run again. Returns how many."""
        with self._lock:
            cur = self._db.execute("UPDATE tasks SET state = 'queued', node = NULL WHERE state = 'running'")
            return cur.rowcount

"""The queue file's read queries: tasks by id, by idempotency key, and a tenant's tasks a page at a
time. Functions of the connection; :class:`runtime.service.store.TaskStore` calls them holding
its lock (inside a write transaction where a write depends on the answer)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any

from runtime.service.store_rows import COLUMNS, TaskRow

#: Values one ``IN (...)`` list carries: SQLite before 3.32 takes at most 999 parameters a
#: statement.
IN_PART = 500


def in_parts(values: Iterable[Any]) -> Iterator[tuple[tuple[Any, ...], str]]:
    """``values`` (each once, sorted) in parts of at most :data:`IN_PART`, each with its
    ``?,?,...`` placeholders."""
    unique = sorted(set(values))
    for k in range(0, len(unique), IN_PART):
        part = tuple(unique[k : k + IN_PART])
        yield part, ",".join("?" * len(part))


def rows(db: sqlite3.Connection, sql: str, args: tuple[Any, ...] = ()) -> list[TaskRow]:
    """The tasks a ``SELECT {COLUMNS} FROM tasks ...`` answers."""
    return [TaskRow(*r) for r in db.execute(sql, args).fetchall()]


def by_ids(db: sqlite3.Connection, ids: Iterable[int]) -> list[TaskRow]:
    """The tasks among ``ids`` that exist: lookups of the primary key, a statement per part."""
    out: list[TaskRow] = []
    for part, marks in in_parts(ids):
        out += rows(db, f"SELECT {COLUMNS} FROM tasks WHERE id IN ({marks})", part)
    return out


def by_keys(db: sqlite3.Connection, tenant: str, keys: Iterable[str]) -> dict[str, TaskRow]:
    """``tenant``'s tasks with these idempotency keys, by key: the key's unique index, a statement
    per part (a query per task cost ~12 ms a 1,000)."""
    out: dict[str, TaskRow] = {}
    for part, marks in in_parts(keys):
        sql = f"SELECT {COLUMNS} FROM tasks WHERE tenant = ? AND idem_key IN ({marks})"
        out |= {str(r.idem_key): r for r in rows(db, sql, (tenant, *part))}
    return out


def page(
    db: sqlite3.Connection, tenant: str, state: str | None, after: int, limit: int, key_prefix: str | None
) -> list[TaskRow]:
    """A tenant's tasks with id > ``after``, oldest first, at most ``limit``: a range of the
    ``tasks_tenant`` (or ``tasks_tenant_state``) index, whose entries are in id order (an index
    ends with the rowid), not a sort of every task of the tenant (137 ms at a million).

    :param key_prefix: only tasks whose idempotency key starts with it (a submission's tasks:
        ``rlsched submit --key K`` gives them ``K/...``); ASCII (the API's pattern), so that its
        last character has a successor.
    """
    # With a key prefix, the range of the key's unique index (tenant, idem_key) holds only the
    # submission's tasks, sorted by id after; the unary + keeps SQLite off the id-ordered indexes,
    # whose scan walks every task of the tenant to find them.
    plus = "+" if key_prefix else ""
    sql = f"SELECT {COLUMNS} FROM tasks WHERE tenant = ? AND {plus}id > ?"
    args: tuple[Any, ...] = (tenant, after)
    if state is not None:
        sql += f" AND {plus}state = ?"
        args += (state,)
    if key_prefix:
        # A range, not LIKE: no wildcard in a key can widen it.
        sql += " AND idem_key >= ? AND idem_key < ?"
        args += (key_prefix, key_prefix[:-1] + chr(ord(key_prefix[-1]) + 1))
    return rows(db, sql + f" ORDER BY {plus}id LIMIT ?", (*args, limit))

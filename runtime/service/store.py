"""The service's durable task queue: one SQLite file in WAL mode.

Every accepted task is committed before the service answers 2xx, so a crash (``kill -9``) loses
nothing that was accepted: on restart, :meth:`TaskStore.recover` puts tasks that were running back
in the queue. Completion is recorded exactly once: a result is written only by the attempt that
holds the task (``UPDATE ... WHERE state = 'running' AND attempt = ?``), so a late answer from an
attempt that a restart or a lost node superseded changes nothing.

Every attempt also leaves a row in the ``attempts`` table (when it started, and where), and every
outcome reported for an attempt a row in ``reports``, with whether that report changed the task
(``recorded``) — late and repeated reports included. The guarantee is checked from this audit, not
from the state column the guard itself maintains: a task is done exactly once when exactly one
finishing report was recorded for it and that report came from the attempt the task names
(:func:`runtime.service.store_audit.exactly_once_violations`).

One service per file: the store takes an exclusive lock (``DB.lock`` beside it, ``flock``; the
kernel drops it when the process dies, ``kill -9`` included) before it reads or writes anything,
and a second process gets :class:`DatabaseInUse` naming the holder.

A write that SQLite refuses (the disk or the file's page cap full, the file read-only, an I/O
error) raises :class:`StorageError` after its transaction rolled back: nothing is half-written.
The store remembers it (:attr:`TaskStore.degraded`) until a write succeeds again.

States: ``queued`` → ``running`` → ``done`` | ``failed``; ``queued`` → ``cancelled``. A finished
task is kept until the service prunes it (:meth:`TaskStore.prune`, after the config's
``finished_retention_s``), with its attempts and reports.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runtime import failpoints
from runtime.service import store_reads as reads
from runtime.service.dblock import DatabaseLock
from runtime.service.store_rows import (
    COLUMNS,
    FINISHED,
    SCHEMA,
    STATES,
    NewTask,
    StorageError,
    TaskRow,
    check_same,
    storage_error,
)

#: Re-exported: what the service and its tests have always imported from here.
__all__ = ["PRUNE_BATCH", "STATES", "NewTask", "StorageError", "TaskRow", "TaskStore"]


#: WAL pages after which a commit checkpoints itself (SQLite's default is 1,000, about 4 MB).
WAL_BOUND_PAGES = 50_000
#: Finished tasks one pruning transaction removes at most (the queue's lock is held meanwhile).
PRUNE_BATCH = 200
#: SQLite's largest page cap: what ``store-full`` sets back when space returns.
_NO_PAGE_CAP = 1073741823


class TaskStore:
    """The queue and the record of every task, in one SQLite file (WAL, synchronous=FULL).

    :param path: the database file (created with its schema if absent).
    :param owner: how this process describes itself in the lock file (e.g. its address).
    :raises DatabaseInUse: another process holds the file.
    """

    def __init__(self, path: str | Path, owner: str = "") -> None:
        self.path = str(path)
        self._file_lock = DatabaseLock(self.path, owner)  # before anything reads the file
        #: A new queue's files (not an existing one's: its WAL is its data), for :meth:`close`.
        new = not os.path.exists(self.path)
        self._created = [self.path, f"{self.path}-wal", f"{self.path}-shm"] if new else []
        self._lock = threading.Lock()
        self._opened = time.monotonic()
        self._last_write = self._opened
        self._faults = {n: False for n in ("store-full", "store-readonly") if failpoints.window(n)}
        #: The last write SQLite refused, until a write succeeds again (``None``: healthy).
        self.degraded: StorageError | None = None
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # committed = on disk, before the 2xx
        # Checkpoints (copying the WAL into the file, and an fsync of it) run in the service's
        # feedback thread (:meth:`checkpoint_wal`), not in whichever commit crosses SQLite's
        # 1,000-page mark: under 4 posting clients, that commit and the requests behind it made
        # the accept path's p99 (194 ms against 133 ms with them deferred, one run each). The
        # bound here only keeps the WAL finite should those checkpoints never complete.
        self._db.execute(f"PRAGMA wal_autocheckpoint={WAL_BOUND_PAGES}")
        self._checkpointer: sqlite3.Connection | None = None
        self._db.executescript(SCHEMA)
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(tasks)")}
        if "result" not in columns:  # a queue written before results were recorded
            self._db.execute("ALTER TABLE tasks ADD COLUMN result TEXT")
        # Tasks per (tenant, state), kept here: admission asks for the queued ones on every
        # request, and counting a 100,000-task queue in SQL took half of the accept path's time
        # under load (py-spy, BENCHMARKS "Scheduling service load"); /metrics and /v1/cluster ask
        # for all of them, which took 76 ms at a million tasks, under the queue's lock. Counted
        # once here, then only this process writes the file (its lock), and a transaction's
        # changes are applied only once it committed.
        rows = self._db.execute("SELECT tenant, state, COUNT(*) FROM tasks GROUP BY tenant, state")
        self._counts: Counter[tuple[str, str]] = Counter({(t, st): n for t, st, n in rows})
        self._delta: Counter[tuple[str, str]] = Counter()
        # Finished tasks pruned from the file, by (tenant, state): kept in the file's meta table.
        self._pruned: Counter[tuple[str, str]] = _pruned_counts(self.meta(_PRUNED_KEY))

    def close(self, remove_created: bool = False) -> None:
        """Close the queue file and release its lock; ``remove_created``: also remove the files a
        new queue made, its lock file's included (a service that could not start leaves none)."""
        with self._lock:
            if self._checkpointer is not None:
                self._checkpointer.close()
            self._db.close()
            for path in self._created if remove_created else ():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        self._file_lock.release(remove_created)

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[TaskRow]:
        return reads.rows(self._db, sql, args)

    @contextmanager
    def _write(self, durable: bool = True) -> Iterator[None]:
        """One write transaction (lock held): committed whole, or rolled back and reported as a
        :class:`StorageError`.

        :param durable: on disk when this returns (``synchronous=FULL``). Otherwise the commit is
            not flushed (``NORMAL``: the WAL stays consistent), and the next durable commit flushes
            it with its own, as the WAL is written in order.
        """
        with self._lock:
            if self._faults:
                self._apply_faults()
            if not durable:
                self._db.execute("PRAGMA synchronous=NORMAL")
            try:
                yield from self._transaction()
            finally:
                if not durable:
                    self._db.execute("PRAGMA synchronous=FULL")

    def _transaction(self) -> Iterator[None]:
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise self._refused(e) from e
        self._delta.clear()
        try:
            yield
            self._db.execute("COMMIT")
        except sqlite3.Error as e:
            self._rollback()
            raise self._refused(e) from e
        except BaseException:
            self._rollback()
            raise
        self._counts.update(self._delta)  # committed: the counts follow
        self.degraded = None
        self._last_write = time.monotonic()

    def _rollback(self) -> None:
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")

    def _refused(self, e: sqlite3.Error) -> StorageError:
        self.degraded = storage_error(e)
        return self.degraded

    def _apply_faults(self) -> None:
        """Switch the ``store-full`` / ``store-readonly`` failpoints on or off (lock held)."""
        age = time.monotonic() - self._opened
        for name, on in self._faults.items():
            w = failpoints.window(name)
            assert w is not None
            want = w[0] <= age < w[1]
            if want == on:
                continue
            self._faults[name] = want
            if name == "store-full":
                cap = self._db.execute("PRAGMA page_count").fetchone()[0] if want else _NO_PAGE_CAP
                self._db.execute(f"PRAGMA max_page_count = {int(cap)}")
            else:
                self._db.execute(f"PRAGMA query_only = {int(want)}")

    def meta(self, key: str) -> str | None:
        """The value kept under ``key`` in the file's ``meta`` table (``None``: none)."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Keep ``value`` under ``key`` (on disk when this returns).

        :raises StorageError: the file takes no writes (nothing changed).
        """
        with self._write():
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def checkpoint_wal(self) -> None:
        """Copy committed WAL frames into the database file without waiting for, or blocking,
        writers (a passive checkpoint, on a connection of its own: the queue's lock is not
        taken). Called every second by the service."""
        if self._checkpointer is None:
            self._checkpointer = sqlite3.connect(self.path, check_same_thread=False)
        with contextlib.suppress(sqlite3.Error):  # busy or degraded: the next second tries again
            self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def idle_s(self) -> float:
        """Seconds since the last write this store committed (or since it opened)."""
        return time.monotonic() - self._last_write

    def probe(self) -> bool:
        """Try a small write (it grows the file by nothing once written): True if the store
        takes writes again. Clears :attr:`degraded` when it does."""
        try:
            self.set_meta("probe", str(time.time()))
        except StorageError:
            return False
        return True

    def submit(self, tenant: str, tasks: list[NewTask]) -> list[tuple[TaskRow, bool]]:
        """Queue ``tasks`` in one transaction; (row, created) each — a repeated idempotency key
        returns the task it first created, with ``created`` false.

        :raises StorageError: nothing was queued.
        """
        now = time.time()
        out = []
        with self._write():
            # The keys already used, looked up inside the transaction: a concurrent batch with the
            # same keys waits for this one.
            seen = reads.by_keys(self._db, tenant, [t.idem_key for t in tasks if t.idem_key is not None])
            made: dict[str, int] = {}  # key -> position in this batch of the task it made
            for i, t in enumerate(tasks):
                if t.idem_key is not None and t.idem_key in seen:
                    row = check_same(i, seen[t.idem_key], t, made.get(t.idem_key))  # a key names one task
                    out.append((row, False))
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
                if t.idem_key is not None:
                    seen[t.idem_key] = row  # the same key again in this batch is this task
                    made[t.idem_key] = i
                self._delta[tenant, "queued"] += 1
        return out

    def new_tasks(self, tenant: str, keys: Sequence[str | None]) -> int:
        """How many tasks a batch whose idempotency keys are ``keys`` (``None``: a task without
        one) would create for ``tenant``: a key that already names a task creates none, nor does a
        key repeated within the batch; only the rest count against a queue bound, so a batch sent
        again (its answer lost) gets its first answer back at the tenant's quota."""
        given = {k for k in keys if k is not None}
        with self._lock:
            known = reads.by_keys(self._db, tenant, given)
        return sum(1 for k in keys if k is None) + len(given - known.keys())

    def get(self, tenant: str | None, task_id: int) -> TaskRow | None:
        """A task, if it exists and belongs to ``tenant`` (``None``: any tenant)."""
        with self._lock:
            rows = self._rows(f"SELECT {COLUMNS} FROM tasks WHERE id = ?", (task_id,))
        if not rows or (tenant is not None and rows[0].tenant != tenant):
            return None
        return rows[0]

    def get_many(self, tenant: str, ids: Sequence[int]) -> dict[int, TaskRow]:
        """The tasks ``ids`` that exist and belong to ``tenant``, by id: one lookup of the primary
        key for them all (a client waiting on a batch asks once, not once per task)."""
        with self._lock:
            found = reads.by_ids(self._db, ids)
        return {r.id: r for r in found if r.tenant == tenant}

    def list_tasks(
        self, tenant: str, state: str | None, after: int, limit: int, key_prefix: str | None = None
    ) -> list[TaskRow]:
        """A page of a tenant's tasks, oldest first (:func:`runtime.service.store_reads.page`)."""
        with self._lock:
            return reads.page(self._db, tenant, state, after, limit, key_prefix)

    def cancel(self, tenant: str, task_id: int) -> TaskRow | None:
        """Cancel a queued task of ``tenant``; the task as it now is (``None``: not found).

        :raises StorageError: nothing changed.
        """
        with self._write():
            cur = self._db.execute(
                "UPDATE tasks SET state = 'cancelled', finished_at = ? WHERE id = ? AND tenant = ? "
                "AND state = 'queued'",
                (time.time(), task_id, tenant),
            )
            self._delta[tenant, "queued"] -= cur.rowcount
            self._delta[tenant, "cancelled"] += cur.rowcount
        return self.get(tenant, task_id)

    def cancel_many(self, tenant: str, ids: Sequence[int]) -> int:
        """Cancel those of ``ids`` that are queued tasks of ``tenant``, in one transaction; how
        many were (the others already started, or finished).

        :raises StorageError: nothing changed.
        """
        n = 0
        with self._write():
            for part, marks in reads.in_parts(ids):
                cur = self._db.execute(
                    "UPDATE tasks SET state = 'cancelled', finished_at = ? WHERE tenant = ? "
                    f"AND state = 'queued' AND id IN ({marks})",
                    (time.time(), tenant, *part),
                )
                n += cur.rowcount
            self._delta[tenant, "queued"] -= n
            self._delta[tenant, "cancelled"] += n
        return n

    def counts(self, pruned: bool = False) -> dict[tuple[str, str], int]:
        """(tenant, state) -> tasks in the file (counted as transactions commit: no query).

        :param pruned: add the finished tasks pruned from the file (so that ``done``, ``failed``
            and ``cancelled`` count every task since the file was created).
        """
        with self._lock:
            out = self._counts + self._pruned if pruned else +self._counts
        return dict(out)

    def queued(self) -> dict[str, int]:
        """tenant -> queued tasks (counted as transactions commit: no query)."""
        with self._lock:
            return {t: n for (t, st), n in self._counts.items() if st == "queued" and n > 0}

    def queued_heads(self, per_tenant: int) -> dict[str, list[TaskRow]]:
        """The first ``per_tenant`` queued tasks of each tenant that has any, in dispatch order
        (higher priority first, then older): one index lookup per tenant, whatever the queue's
        length."""
        with self._lock:
            tenants = [t for (t, st), n in self._counts.items() if st == "queued" and n > 0]
            return {
                t: self._rows(
                    f"SELECT {COLUMNS} FROM tasks WHERE state = 'queued' AND tenant = ? "
                    "ORDER BY priority DESC, id LIMIT ?",
                    (t, per_tenant),
                )
                for t in tenants
            }

    def start(self, task_id: int, node: str) -> int | None:
        """Mark a queued task running on ``node``; its attempt number, or ``None`` if it was no
        longer queued (cancelled meanwhile).

        Not flushed to disk on its own (the next submission or outcome flushes it): a start lost
        to a power cut leaves the task queued, and the restarted service runs it, as it runs a task
        that was running when it died. Half the service's commits per task, each an fsync that
        held the queue's lock (BENCHMARKS "Scheduling service load").

        :raises StorageError: the task is still queued.
        """
        now = time.time()
        with self._write(durable=False):
            cur = self._db.execute(
                "UPDATE tasks SET state = 'running', attempt = attempt + 1, node = ?, started_at = ? "
                "WHERE id = ? AND state = 'queued' RETURNING attempt, tenant",
                (node, now, task_id),
            )
            got = cur.fetchone()
            if got is None:
                return None
            self._delta[got[1], "queued"] -= 1
            self._delta[got[1], "running"] += 1
            self._db.execute(
                "INSERT INTO attempts (task_id, attempt, node, started_at) VALUES (?, ?, ?, ?)",
                (task_id, got[0], node, now),
            )
            return int(got[0])

    def _report(self, task_id: int, attempt: int, outcome: str, update: Callable[[], int]) -> bool:
        """Run ``update`` (the task's transition, guarded by its attempt; rows changed) and log
        the report in the attempt's audit row, in one transaction; True if it was recorded."""
        with self._write():
            recorded = update() == 1
            self._db.execute(
                "INSERT INTO reports (task_id, attempt, reported_at, outcome, recorded) "
                "VALUES (?, ?, ?, ?, ?)",
                (task_id, attempt, time.time(), outcome, int(recorded)),
            )
            return recorded

    def finish(self, task_id: int, attempt: int, error: str | None, result: str | None = None) -> bool:
        """Record the outcome of ``attempt`` (``result``: JSON); True if it was recorded
        (exactly once per task: only while ``attempt`` holds the task).

        :raises StorageError: nothing was recorded (the caller keeps the outcome and retries).
        """
        state = "done" if error is None else "failed"

        def update() -> int:
            rows = self._db.execute(
                "UPDATE tasks SET state = ?, error = ?, finished_at = ?, completions = completions + 1, "
                "result = ? WHERE id = ? AND state = 'running' AND attempt = ? RETURNING tenant",
                (state, error, time.time(), result, task_id, attempt),
            ).fetchall()
            for (tenant,) in rows:
                self._delta[tenant, "running"] -= 1
                self._delta[tenant, state] += 1
            return len(rows)

        return self._report(task_id, attempt, state, update)

    def requeue(self, task_id: int, attempt: int, outcome: str = "lost") -> bool:
        """Put a running attempt back in the queue (its node was lost, or it was moved); True if
        it was still the task's attempt.

        :raises StorageError: nothing changed.
        """

        def update() -> int:
            rows = self._db.execute(
                "UPDATE tasks SET state = 'queued', node = NULL "
                "WHERE id = ? AND state = 'running' AND attempt = ? RETURNING tenant",
                (task_id, attempt),
            ).fetchall()
            for (tenant,) in rows:
                self._delta[tenant, "running"] -= 1
                self._delta[tenant, "queued"] += 1
            return len(rows)

        return self._report(task_id, attempt, outcome, update)

    def prune(self, before: float, limit: int = PRUNE_BATCH) -> int:
        """Remove up to ``limit`` finished tasks (``done``, ``failed``, ``cancelled``) that
        finished before ``before`` (epoch seconds), oldest first, with their attempts and
        reports, in one transaction; how many. Ids are never reused (``AUTOINCREMENT``), and the
        audit of the tasks kept is whole: a task goes with every row about it.

        Not flushed on its own (a crash before the next durable commit only brings the rows back,
        to be removed again).

        :raises StorageError: nothing was removed.
        """
        with self._lock:  # nothing due (most calls): no write transaction at all
            due = self._db.execute("SELECT 1 FROM tasks WHERE finished_at < ? LIMIT 1", (before,)).fetchone()
        if due is None:
            return 0
        with self._write(durable=False):
            self._db.execute("CREATE TEMP TABLE IF NOT EXISTS pruned (id INTEGER PRIMARY KEY)")
            self._db.execute("DELETE FROM pruned")
            # `+state`: walk the finished_at index, oldest first; through the state index SQLite
            # sorted every finished task for each batch (30 ms a batch at 200,000 tasks).
            self._db.execute(
                "INSERT INTO pruned SELECT id FROM tasks WHERE finished_at < ? AND +state IN (?, ?, ?) "
                "ORDER BY finished_at LIMIT ?",
                (before, *FINISHED, limit),
            )
            gone = self._db.execute(
                "SELECT tenant, state, COUNT(*) FROM tasks WHERE id IN (SELECT id FROM pruned) "
                "GROUP BY tenant, state"
            ).fetchall()
            for table, key in (("reports", "task_id"), ("attempts", "task_id"), ("tasks", "id")):
                self._db.execute(f"DELETE FROM {table} WHERE {key} IN (SELECT id FROM pruned)")
            pruned = self._pruned.copy()
            for tenant, state, n in gone:
                self._delta[tenant, state] -= n
                pruned[tenant, state] += n
            self._db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (_PRUNED_KEY, _pruned_json(pruned))
            )
        self._pruned = pruned  # committed
        return sum(n for _, _, n in gone)

    def recover(self) -> int:
        """After a restart: tasks that were running run again (their attempts are logged as
        ``abandoned``). Returns how many."""
        now = time.time()
        with self._write():
            self._db.execute(
                "INSERT INTO reports (task_id, attempt, reported_at, outcome, recorded) "
                "SELECT id, attempt, ?, 'abandoned', 1 FROM tasks WHERE state = 'running'",
                (now,),
            )
            rows = self._db.execute(
                "UPDATE tasks SET state = 'queued', node = NULL WHERE state = 'running' RETURNING tenant"
            ).fetchall()
            for (tenant,) in rows:
                self._delta[tenant, "running"] -= 1
                self._delta[tenant, "queued"] += 1
            return len(rows)


#: The meta table's key holding how many finished tasks were pruned, by tenant and state.
_PRUNED_KEY = "pruned"


def _pruned_json(counts: Counter[tuple[str, str]]) -> str:
    return json.dumps([[t, st, n] for (t, st), n in sorted(counts.items()) if n])


def _pruned_counts(text: str | None) -> Counter[tuple[str, str]]:
    """:func:`_pruned_json` read back (nothing pruned yet: empty)."""
    return Counter({(t, st): int(n) for t, st, n in json.loads(text)}) if text else Counter()

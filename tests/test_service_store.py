"""The durable queue's file: a queue written by an older service still opens."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from runtime.service.store import NewTask, TaskStore


def test_a_queue_without_the_result_column_gains_it_and_keeps_its_tasks(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    store = TaskStore(db)
    store.submit("a", [NewTask("matmul", chunk=3)])
    store.close()
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE tasks DROP COLUMN result")  # the schema before results were kept
    con.commit()
    con.close()
    store = TaskStore(db)
    try:
        (row,) = store.list_tasks("a", None, 0, 10)
        assert (row.app, row.chunk, row.state, row.result) == ("matmul", 3, "queued", None)
        attempt = store.start(row.id, "n0")
        result = {"out": {"shape": [2], "dtype": "float32", "crc32": 7}}
        assert attempt == 1 and store.finish(row.id, attempt, None, json.dumps(result))
        done = store.get("a", row.id)
        assert done is not None and done.to_dict()["result"] == result
    finally:
        store.close()


def _sql_queued(path: Path) -> dict[str, int]:
    db = sqlite3.connect(path)
    rows = db.execute("SELECT tenant, COUNT(*) FROM tasks WHERE state = 'queued' GROUP BY tenant").fetchall()
    db.close()
    return dict(rows)


def test_queued_counts_and_heads_follow_every_transition_and_survive_a_reopen(tmp_path: Path) -> None:
    """Admission and dispatch read queued counts kept in memory (no query per request): after
    any mix of submit, start, cancel, finish, requeue, a refused write and recover, they equal
    what the database holds, and a reopened store counts the same."""
    import random

    from runtime.service.store import StorageError

    path = tmp_path / "q.db"
    store = TaskStore(path)
    rng = random.Random(0)
    running: list[tuple[int, int]] = []
    for step in range(400):
        op = rng.random()
        tenant = rng.choice(["a", "b", "c"])
        if op < 0.35:
            store.submit(tenant, [NewTask("matmul", chunk=step + k) for k in range(rng.randint(1, 3))])
        elif op < 0.6:
            heads = store.queued_heads(1)
            if heads:
                row = heads[rng.choice(sorted(heads))][0]
                attempt = store.start(row.id, "n0")
                assert attempt is not None
                running.append((row.id, attempt))
        elif op < 0.7:
            ids = [r.id for r in store.list_tasks(tenant, "queued", 0, 5)]
            if ids:
                store.cancel(tenant, rng.choice(ids))
        elif op < 0.85 and running:
            store.finish(*running.pop(rng.randrange(len(running))), None, "{}")
        elif op < 0.95 and running:
            store.requeue(*running.pop(rng.randrange(len(running))))
        elif running:  # a write that fails after the count changed in it: rolled back, uncounted
            task_id, attempt = running[0]
            try:
                with store._write():
                    store._delta["a"] += 1000
                    store._db.execute("INSERT INTO tasks (id) VALUES (?)", (task_id,))  # duplicate id
            except StorageError:
                pass
        assert store.queued() == _sql_queued(path), step
        heads = store.queued_heads(2)
        assert set(heads) == set(_sql_queued(path)), step
    store.recover()
    assert store.queued() == _sql_queued(path)
    store.close()
    reopened = TaskStore(path)
    assert reopened.queued() == _sql_queued(path) and sum(reopened.queued().values()) > 0
    reopened.close()

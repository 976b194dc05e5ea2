"""The durable queue's file: a queue written by an older service still opens; counts follow every
transition; finished tasks past the retention are pruned with their audit."""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from pathlib import Path

import pytest

from runtime.service.store import NewTask, TaskStore
from runtime.service.store_rows import KeyReused


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


def _sql_counts(path: Path) -> dict[tuple[str, str], int]:
    db = sqlite3.connect(path)
    rows = db.execute("SELECT tenant, state, COUNT(*) FROM tasks GROUP BY tenant, state").fetchall()
    db.close()
    return {(t, st): n for t, st, n in rows}


def test_queued_counts_and_heads_follow_every_transition_and_survive_a_reopen(tmp_path: Path) -> None:
    """Admission, dispatch, /metrics and /v1/cluster read counts kept in memory (no query per
    request): after any mix of submit, start, cancel, finish, requeue, prune, a refused write and
    recover, they equal what the database holds, the pruned ones are counted apart (in the file,
    so that a reopened store counts the same), and a reopened store counts the same."""
    import random

    from runtime.service.store import StorageError

    path = tmp_path / "q.db"
    store = TaskStore(path)
    rng = random.Random(0)
    running: list[tuple[int, int]] = []
    pruned: Counter[tuple[str, str]] = Counter()
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
        elif op < 0.92 and running:
            store.requeue(*running.pop(rng.randrange(len(running))))
        elif op < 0.95:  # every finished task, as a retention past them would
            finished = {k: n for k, n in _sql_counts(path).items() if k[1] in ("done", "failed", "cancelled")}
            while store.prune(time.time() + 1):
                pass
            pruned.update(finished)
        elif running:  # a write that fails after the count changed in it: rolled back, uncounted
            task_id, attempt = running[0]
            try:
                with store._write():
                    store._delta["a", "queued"] += 1000
                    store._db.execute("INSERT INTO tasks (id) VALUES (?)", (task_id,))  # duplicate id
            except StorageError:
                pass
        assert store.queued() == _sql_queued(path), step
        assert store.counts() == _sql_counts(path), step
        assert store.counts(pruned=True) == dict(Counter(_sql_counts(path)) + pruned), step
        heads = store.queued_heads(2)
        assert set(heads) == set(_sql_queued(path)), step
    store.recover()
    assert store.queued() == _sql_queued(path) and store.counts() == _sql_counts(path)
    assert sum(pruned.values()) > 0
    store.close()
    reopened = TaskStore(path)
    assert reopened.queued() == _sql_queued(path) and sum(reopened.queued().values()) > 0
    assert reopened.counts() == _sql_counts(path)
    assert reopened.counts(pruned=True) == dict(Counter(_sql_counts(path)) + pruned)
    reopened.close()


def test_prune_removes_old_finished_tasks_with_their_audit_and_nothing_else(tmp_path: Path) -> None:
    """Finished tasks (done, failed, cancelled) past the cut go, oldest first and ``limit`` at a
    time, each with its attempts and reports; queued and running tasks, and finished ones newer
    than the cut, stay; the audit of what stays is whole, and ids are not reused."""
    from runtime.service.store_audit import exactly_once_violations

    path = tmp_path / "q.db"
    store = TaskStore(path)
    rows = [r for r, _ in store.submit("a", [NewTask("matmul", chunk=k) for k in range(8)])]
    ids = [r.id for r in rows]
    for i in ids[:5]:  # 0-2 done, 3 failed, 4 running; 5 cancelled; 6-7 queued
        attempt = store.start(i, "n0")
        assert attempt is not None
        if i != ids[4]:
            assert store.finish(i, attempt, None if i < ids[3] else "boom")
    assert store.cancel("a", ids[5]) is not None
    con = sqlite3.connect(path)
    # Finished an hour ago, oldest first: 5, 3, 0, 2 (not the order of their ids); 1 just now.
    for age, i in ((4000, ids[5]), (3900, ids[3]), (3800, ids[0]), (3700, ids[2])):
        con.execute("UPDATE tasks SET finished_at = finished_at - ? WHERE id = ?", (age, i))
    con.commit()
    try:
        cut = time.time() - 600
        assert store.prune(cut, limit=2) == 2
        left = {r[0] for r in con.execute("SELECT id FROM tasks")}
        assert left == set(ids) - {ids[5], ids[3]}  # the two oldest
        assert store.prune(cut) == 2 and store.prune(cut) == 0
        left = {r[0] for r in con.execute("SELECT id FROM tasks")}
        assert left == {ids[1], ids[4], ids[6], ids[7]}
        gone = [ids[0], ids[2], ids[3], ids[5]]
        for table in ("attempts", "reports"):
            assert (
                con.execute(f"SELECT COUNT(*) FROM {table} WHERE task_id IN (?, ?, ?, ?)", gone).fetchone()[0]
                == 0
            )
        assert con.execute("SELECT COUNT(*) FROM reports WHERE task_id = ?", (ids[1],)).fetchone()[0] == 1
        assert exactly_once_violations(con) == []
        assert store.queued() == {"a": 2}
        ((new, _),) = store.submit("a", [NewTask("matmul", chunk=99)])
        assert new.id > max(ids)  # AUTOINCREMENT: a pruned id never names another task
    finally:
        con.close()
        store.close()


def test_retention_waits_while_the_file_refuses_writes(tmp_path: Path) -> None:
    """While the store is degraded (full or read-only), pruning does not run: a commit of its own
    would clear the degraded state that ``readyz`` shows before the service's probe found the
    file writable. Once healthy, the task past the retention goes, and the counter hears of it."""
    from runtime.service.retention import Retention
    from runtime.service.store import StorageError

    path = tmp_path / "q.db"
    store = TaskStore(path)
    try:
        ((row, _),) = store.submit("a", [NewTask("matmul")])
        assert store.cancel("a", row.id) is not None
        counted: list[int] = []
        retention = Retention(store, 60.0, counted.append, clock=lambda: time.time() + 3600)
        store.degraded = StorageError("full", "database or disk is full")
        assert retention.tick() == 0 and store.degraded is not None and store.get("a", row.id) is not None
        store.degraded = None
        assert retention.tick() == 1 and counted == [1] and store.get("a", row.id) is None
        assert Retention(store, 0.0, counted.append).tick() == 0  # 0: kept for ever
    finally:
        store.close()


def test_listing_a_tenants_tasks_walks_an_index_in_id_order(tmp_path: Path) -> None:
    """``GET /v1/tasks`` pages through a tenant's tasks by id: each page must be a range of an
    index, not a sort of all the tenant's tasks (137 ms a page at a million, under the queue's
    lock), with or without a state."""
    path = tmp_path / "q.db"
    store = TaskStore(path)
    seen: list[str] = []
    try:
        store.submit("a", [NewTask("matmul", chunk=k) for k in range(3)])
        store._db.set_trace_callback(seen.append)
        assert [r.chunk for r in store.list_tasks("a", None, 0, 2)] == [0, 1]
        assert [r.chunk for r in store.list_tasks("a", "queued", 1, 5)] == [1, 2]
        store._db.set_trace_callback(None)
    finally:
        store.close()
    con = sqlite3.connect(path)
    selects = [q for q in seen if q.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 2, seen
    for q, searched in zip(
        selects, ("tenant=? AND rowid>?", "tenant=? AND state=? AND rowid>?"), strict=True
    ):
        plan = " ".join(str(r[3]) for r in con.execute(f"EXPLAIN QUERY PLAN {q}"))
        # The state is searched, not filtered: a rare state (failed) among a million done tasks
        # must not be a walk through all of them.
        assert "INDEX tasks_tenant" in plan and searched in plan and "TEMP B-TREE" not in plan, (q, plan)
    con.close()


def test_a_submissions_tasks_are_a_range_of_the_key_index_and_cancel_in_one_go(tmp_path: Path) -> None:
    """``GET /v1/tasks?key_prefix=`` lists one submission's tasks, in id order, from the range of
    the key's unique index — not a walk through every task of the tenant in id order, which the
    planner picks unless told. ``cancel_many`` cancels the queued ones among given ids, once."""
    path = tmp_path / "q.db"
    store = TaskStore(path)
    seen: list[str] = []
    try:
        new = [
            NewTask("fft", chunk=k, idem_key=f"{p}/fft/0/{k}")
            for p in ("job-1", "job-10", "job-2")
            for k in range(3)
        ]
        new += [NewTask("fft", chunk=9), NewTask("fft", chunk=8, idem_key="job-1/fft/0/8")]
        ids = {r.idem_key: r.id for r, _ in store.submit("a", new)}
        store.submit("b", [NewTask("fft", idem_key="job-1/fft/0/0")])  # another tenant's
        store._db.set_trace_callback(seen.append)
        got = store.list_tasks("a", None, 0, 10, "job-1/")
        store._db.set_trace_callback(None)
        assert [r.idem_key for r in got] == [
            "job-1/fft/0/0",
            "job-1/fft/0/1",
            "job-1/fft/0/2",
            "job-1/fft/0/8",
        ]
        assert [r.chunk for r in store.list_tasks("a", None, ids["job-1/fft/0/1"], 2, "job-1/")] == [2, 8]
        assert store.cancel_many("a", [ids["job-1/fft/0/0"], ids["job-1/fft/0/0"], ids["job-2/fft/0/1"]]) == 2
        assert store.cancel_many("a", [ids["job-1/fft/0/0"]]) == 0  # no longer queued
        assert store.cancel_many("b", [ids["job-1/fft/0/1"]]) == 0  # not b's
        assert [r.chunk for r in store.list_tasks("a", "queued", 0, 10, "job-1/")] == [1, 2, 8]
        assert store.counts()["a", "cancelled"] == 2 and store.counts()["a", "queued"] == 9
    finally:
        store.close()
    con = sqlite3.connect(path)
    q = next(q for q in seen if q.lstrip().upper().startswith("SELECT"))
    plan = " ".join(str(r[3]) for r in con.execute(f"EXPLAIN QUERY PLAN {q}"))
    assert "sqlite_autoindex_tasks_1 (tenant=? AND idem_key>? AND idem_key<?)" in plan, plan
    con.close()


def test_a_key_names_one_task_of_its_tenant_within_a_batch_and_across_batches(tmp_path: Path) -> None:
    """A repeated idempotency key answers the task it first created — later in the same batch,
    in a batch sent again, past 500 keys (the lookup's statements) — and another tenant's key is
    its own."""
    store = TaskStore(tmp_path / "q.db")
    try:
        batch = [NewTask("fft", chunk=k % 700, idem_key=f"s/{k % 700}") for k in range(1400)]
        first = store.submit("a", batch)
        assert [c for _, c in first] == [True] * 700 + [False] * 700
        assert [r.id for r, _ in first[700:]] == [r.id for r, _ in first[:700]]
        again = store.submit("a", [*batch[:700], NewTask("fft", chunk=9, idem_key="s/new")])
        assert [r.id for r, _ in again[:700]] == [r.id for r, _ in first[:700]]
        assert [c for _, c in again] == [False] * 700 + [True]
        # Known keys create nothing, a key twice in a batch one task, a task without a key one.
        assert store.new_tasks("a", ["s/0", "s/699", "s/new", "s/nope"]) == 1
        assert store.new_tasks("a", ["s/5", "s/5", "s/5"]) == 0  # it was 2 of 3: a 429 at the quota
        assert store.new_tasks("a", ["s/x", "s/x", None, None]) == 3
        other = store.submit("b", [NewTask("fft", idem_key="s/0")])
        assert other[0][1] and other[0][0].id not in {r.id for r, _ in first}
        assert store.counts()["a", "queued"] == 701 and store.counts()["b", "queued"] == 1
        # A key names one task: sent with another, the batch is refused whole.
        with pytest.raises(KeyReused, match="'s/3' names task"):
            store.submit(
                "a", [NewTask("fft", idem_key="s/fresh"), NewTask("kmeans", chunk=3, idem_key="s/3")]
            )
        assert store.new_tasks("a", ["s/fresh"]) == 1 and store.counts()["a", "queued"] == 701
    finally:
        store.close()


def test_a_lookup_finds_a_tenants_tasks_by_id_however_many(tmp_path: Path) -> None:
    """``get_many``: every one of a thousand ids at once (in statements of 500 parameters, as
    SQLite before 3.32 allows 999), another tenant's and unknown ids left out."""
    store = TaskStore(tmp_path / "q.db")
    mine = [r.id for r, _ in store.submit("a", [NewTask("matmul", chunk=k) for k in range(1000)])]
    theirs = [r.id for r, _ in store.submit("b", [NewTask("matmul", chunk=k) for k in range(3)])]
    found = store.get_many("a", [*reversed(mine), *theirs, 10**9, mine[0]])
    assert sorted(found) == mine and all(found[i].tenant == "a" for i in mine)
    assert store.get_many("b", mine[:2] + theirs) == {i: store.get("b", i) for i in theirs}
    store.close()

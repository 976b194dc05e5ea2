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

"""What a queue file costs and what keeping it bounded costs (a script, not a test).

    python -m experiments.benchmarks.queue_retention [--tasks 200000]

Fills a fresh queue file (:class:`~runtime.service.store.TaskStore`'s schema and indexes) with
``--tasks`` finished tasks as the service records them — the task row with a result digest, one
attempt, one report — in bulk, and prints: bytes of file per task; the time of one
:meth:`~runtime.service.store.TaskStore.prune` batch (what a submission may wait behind); the
durable submission of 4 tasks alone, for comparison; and whether the file grows when as many
tasks again arrive after the old ones were pruned (SQLite reusing the freed pages).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from runtime.service.store import PRUNE_BATCH, NewTask, TaskStore

#: Batches between two WAL checkpoints (the service checkpoints every second; a batch is ~1 ms).
CHECKPOINT_EVERY = 100
#: A result as the dispatcher records it (``output_digest`` of a video app's outputs).
DIGEST = json.dumps(
    {
        "mask": {"shape": [240, 320], "dtype": "float32", "crc32": 2914541233},
        "boxes": {"shape": [12, 4], "dtype": "float32", "crc32": 1052313887},
    }
)


def fill(path: Path, n: int, finished_at: float, first_id: int) -> None:
    """``n`` finished tasks, ids from ``first_id``, written in one transaction."""
    db = sqlite3.connect(path)
    tasks = [
        (i, "video", "intrusion_detection", i % 50, i, 0, None, None, "done", 1, 1, "n0", None,
         finished_at - 2.0, finished_at - 1.0, finished_at + i * 1e-6, DIGEST)
        for i in range(first_id, first_id + n)
    ]  # fmt: skip
    db.executemany(f"INSERT INTO tasks VALUES ({', '.join('?' * 17)})", tasks)
    db.executemany("INSERT INTO attempts VALUES (?, 1, 'n0', ?)", [(t[0], t[14]) for t in tasks])
    db.executemany("INSERT INTO reports VALUES (?, 1, ?, 'done', 1)", [(t[0], t[15]) for t in tasks])
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def size(path: Path) -> int:
    return sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists())


def submit_ms(store: TaskStore, k: int) -> list[float]:
    out = []
    for j in range(k):
        t0 = time.perf_counter()
        store.submit("video", [NewTask("matmul", stream=j, chunk=c) for c in range(4)])
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=200_000)
    args = ap.parse_args(argv)
    n = args.tasks
    print(f"# python -m experiments.benchmarks.queue_retention --tasks {n}")
    print(f"# {platform.node()} {platform.machine()}, {os.cpu_count()} cpus, sqlite {sqlite3.sqlite_version}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "queue.db"
        TaskStore(path).close()  # the schema and indexes
        old = time.time() - 30 * 86400
        fill(path, n, old, 1)
        full = size(path)
        print(f"file with {n:,} finished tasks: {full / 1e6:.1f} MB, {full / n:.0f} bytes a task")
        store = TaskStore(path)
        alone = submit_ms(store, 200)
        batches = []
        removed = 0
        while True:
            t0 = time.perf_counter()
            k = store.prune(time.time() - 86400)
            batches.append((time.perf_counter() - t0) * 1000)
            removed += k
            if k < PRUNE_BATCH:
                break
            if len(batches) % CHECKPOINT_EVERY == 0:
                store.checkpoint_wal()  # as the service's feedback thread does every second
        p99 = sorted(batches)[int(0.99 * len(batches))]
        print(f"pruned {removed:,} in {len(batches)} batches of {PRUNE_BATCH}: batch median "
              f"{statistics.median(batches):.1f} ms, p99 {p99:.1f} ms, max {max(batches):.1f} ms, "
              f"total {sum(batches) / 1000:.2f} s")  # fmt: skip
        print(f"a durable submission of 4 tasks alone: median {statistics.median(alone):.2f} ms, "
              f"p99 {sorted(alone)[int(0.99 * len(alone))]:.2f} ms")  # fmt: skip
        t0 = time.perf_counter()
        nothing = [store.prune(time.time() - 86400) for _ in range(100)]
        print(f"a call with nothing due: {(time.perf_counter() - t0) * 1e4:.1f} µs (removed {sum(nothing)})")
        store.close()
        before = size(path)
        fill(path, n, time.time(), 10 * n)
        after = size(path)
        print(f"file after pruning: {before / 1e6:.1f} MB; after {n:,} new tasks: {after / 1e6:.1f} MB "
              f"(full before pruning: {full / 1e6:.1f} MB)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

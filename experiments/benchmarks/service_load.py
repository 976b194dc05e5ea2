"""Load and audit for the chaos campaign and the soak: a client that never gives up on a task it
was told was accepted, and a reading of the queue file that says what became of each.

A :class:`Load` thread submits batches at a steady rate, each batch under fixed idempotency keys,
and sends a batch again (same keys) until it gets a 2xx: a batch whose answer was lost to a crash
is then found again, never queued twice. What the answers said was accepted is the ground truth
:func:`audit` holds the queue file against.
"""

from __future__ import annotations

import collections
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from runtime.service.store_audit import exactly_once_violations

#: Apps a load cycles through (short and long DAGs).
APPS = ("matmul", "intrusion_detection", "fft", "video_synopsis")


@dataclass
class Load:
    """Batches of ``batch`` tasks, one every ``interval_s``, from one tenant.

    :param url: the service.
    :param token: the tenant's bearer token.
    :param batch: tasks per request.
    :param interval_s: seconds between the starts of two batches (the offered rate is
        ``batch / interval_s``); a batch that takes longer is followed at once.
    :param prefix: idempotency-key prefix (unique per load).
    """

    url: str
    token: str
    batch: int = 4
    interval_s: float = 0.2
    prefix: str = "load"
    #: Task ids the service answered 2xx with.
    accepted: set[int] = field(default_factory=set)
    #: Answers by status (``"error"``: no answer: refused, reset, timed out).
    statuses: collections.Counter[int | str] = field(default_factory=collections.Counter)
    #: (time.time() sent, seconds to a 2xx answer) of each accepted batch.
    latencies: list[tuple[float, float]] = field(default_factory=list)
    #: time.time() of each answer that was not a 2xx, with its status.
    refusals: list[tuple[float, int | str]] = field(default_factory=list)
    batches: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-load", daemon=True)

    def start(self) -> Load:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop after the batch in progress is accepted (its keys are never abandoned)."""
        self._stop.set()
        self._thread.join(timeout=300)

    def _body(self, n: int) -> list[dict[str, object]]:
        return [
            {
                "app": APPS[(n + j) % len(APPS)],
                "stream": j % 3,
                "chunk": n % 16,
                "idempotency_key": f"{self.prefix}-{n}-{j}",
            }
            for j in range(self.batch)
        ]

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=self.url, headers=headers, timeout=10) as c:
            n, due = 0, time.monotonic()
            while not self._stop.is_set():
                self._submit(c, self._body(n))
                n += 1
                self.batches = n
                due += self.interval_s
                self._stop.wait(max(0.0, due - time.monotonic()))

    def _submit(self, c: httpx.Client, body: list[dict[str, object]]) -> None:
        """Send ``body`` until a 2xx (its keys make a repeat harmless)."""
        while True:
            sent, t0 = time.time(), time.perf_counter()
            try:
                r = c.post("/v1/tasks", json=body)
                status: int | str = r.status_code
            except httpx.HTTPError:
                status = "error"
            self.statuses[status] += 1
            if isinstance(status, int) and 200 <= status < 300:
                self.accepted.update(t["id"] for t in r.json())
                self.latencies.append((sent, time.perf_counter() - t0))
                return
            self.refusals.append((time.time(), status))
            time.sleep(0.2)


def wait_drained(db: Path, ids: set[int], timeout_s: float = 300.0) -> float:
    """Wait until every task in ``ids`` finished (done or failed); seconds waited.

    :raises TimeoutError: some did not in time.
    """
    t0 = time.monotonic()
    con = sqlite3.connect(db)
    try:
        while True:
            left = _unfinished(con, ids)
            if not left:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout_s:
                raise TimeoutError(f"{len(left)} accepted tasks not finished after {timeout_s:.0f} s")
            time.sleep(0.25)
    finally:
        con.close()


def _unfinished(con: sqlite3.Connection, ids: set[int]) -> set[int]:
    finished = {i for (i,) in con.execute("SELECT id FROM tasks WHERE state IN ('done', 'failed')")}
    return ids - finished


def audit(db: Path, accepted: set[int]) -> dict[str, int]:
    """What became of the accepted tasks: ``accepted``, ``completed`` (done), ``failed``,
    ``duplicated`` (tasks the attempt audit shows finished other than exactly once, by the
    attempt holding them), ``lost`` (accepted, yet absent or unfinished), ``ran_again`` (started
    more than once: a crash or a lost node made them run again)."""
    con = sqlite3.connect(db)
    try:
        states = dict(con.execute("SELECT id, state FROM tasks").fetchall())
        bad = exactly_once_violations(con)
        again = {
            i for (i,) in con.execute("SELECT task_id FROM attempts GROUP BY task_id HAVING COUNT(*) > 1")
        }
    finally:
        con.close()
    return {
        "accepted": len(accepted),
        "completed": sum(states.get(i) == "done" for i in accepted),
        "failed": sum(states.get(i) == "failed" for i in accepted),
        "duplicated": len(bad),
        "lost": sum(states.get(i) not in ("done", "failed") for i in accepted),
        "ran_again": len(again & accepted),
    }


def percentiles(xs: list[float], qs: tuple[float, ...] = (50, 99)) -> list[float]:
    """The ``qs`` percentiles of ``xs`` (NaN for none)."""
    return [float(np.percentile(xs, q)) if xs else float("nan") for q in qs]

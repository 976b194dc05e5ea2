"""Checking the queue file's audit (the ``attempts`` and ``reports`` tables of
:mod:`runtime.service.store`) against the exactly-once guarantee, on any SQLite connection: the
tests, the chaos campaign and the load benchmarks read it, the service does not."""

from __future__ import annotations

import sqlite3


def exactly_once_violations(db: sqlite3.Connection) -> list[str]:
    """What the attempt audit shows against "every task finished at most once, by the attempt
    that held it" (empty: nothing). For tests and the chaos campaign, on any connection.

    Per task: at most one recorded ``done``/``failed`` report; a finished task has exactly one,
    from the attempt the task names; an unfinished task has none.
    """
    bad = []
    rows = db.execute(
        "SELECT t.id, t.state, t.attempt, "
        "SUM(r.recorded AND r.outcome IN ('done', 'failed')), "
        "MAX(CASE WHEN r.recorded AND r.outcome IN ('done', 'failed') THEN r.attempt END) "
        "FROM tasks t LEFT JOIN reports r ON r.task_id = t.id GROUP BY t.id"
    ).fetchall()
    for task, state, attempt, finishes, by in rows:
        finishes = finishes or 0
        if state in ("done", "failed"):
            if finishes != 1:
                bad.append(f"task {task}: {state}, finished by {finishes} reports")
            elif by != attempt:
                bad.append(f"task {task}: {state} by attempt {by}, but attempt {attempt} holds it")
        elif finishes:
            bad.append(f"task {task}: {state}, yet {finishes} finishing reports were recorded")
    return bad

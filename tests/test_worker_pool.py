"""A worker process killed mid-item (the OOM killer, a signal) costs only that item: the rest of
the work runs, in ``run_surviving`` and through ``rlsched evaluate``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from experiments.worker_pool import run_surviving
from tests.conftest import evaluate_two_tiny_killing


def square_or_die(x: int) -> int:
    """Run in a worker: item 3 kills its process, as the OOM killer would."""
    if x == 3:
        os._exit(9)
    return x * x


def test_an_item_that_kills_its_worker_every_time_costs_only_itself() -> None:
    got: dict[int, int] = {}
    lost: dict[int, str] = {}
    breaks: list[int] = []
    run_surviving(list(range(6)), square_or_die, 2, got.__setitem__, lost.__setitem__, breaks.append)
    assert got == {i: i * i for i in range(6) if i != 3}
    assert list(lost) == [3] and "its worker process died" in lost[3], lost
    assert breaks and breaks[0] >= 1


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
def test_evaluate_runs_every_case_when_a_run_worker_is_killed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, the pool broke and the command ended with an internal error, its report lost."""
    rc, killed, out = evaluate_two_tiny_killing(tmp_path, "mct,mct-mem", 0)
    cap = capsys.readouterr()
    assert killed, "no run worker was seen"
    assert rc == 0, cap.err
    assert "evaluate: a worker process died;" in cap.err
    summary = json.loads(cap.out.strip().splitlines()[-1])
    assert summary["failed"] == 0, summary
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert len(rows) == 4 and {r["status"] for r in rows} == {"ok"}


def test_an_error_of_take_is_raised_and_not_taken_for_a_dead_worker() -> None:
    """A full disk while keeping a result is the caller's error: it is raised at once, not read as
    a broken pool (which would run every item again, one process each)."""

    def take(i: int, r: int) -> None:
        raise OSError(28, "No space left on device")

    breaks: list[int] = []
    with pytest.raises(OSError, match="No space left"):
        run_surviving([0, 1, 2], square_or_die, 2, take, lambda i, why: None, breaks.append)
    assert breaks == []

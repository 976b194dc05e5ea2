"""The memory check before a run: refuses what cannot fit, names the field, passes what fits."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rlsched.footprint import BYTES_PER_TASK, RunTooLarge, available_bytes, check_fits, run_bytes
from rlsched.scenarios.loader import load_scenario


def test_a_run_that_would_not_fit_is_refused_naming_the_task_count() -> None:
    paper = load_scenario("paper")
    check_fits(paper, available=run_bytes(paper))  # exactly enough
    big = dataclasses.replace(paper, workload=dataclasses.replace(paper.workload, tasks=1_000_000))
    assert run_bytes(big) - run_bytes(paper) == BYTES_PER_TASK * (1_000_000 - paper.workload.tasks)
    with pytest.raises(
        RunTooLarge, match=r"workload.tasks: expected at most ~\d[\d,]* tasks .* needs ~3\.\d GiB"
    ):
        check_fits(big, available=2**30)
    with pytest.raises(RunTooLarge, match=r"got 1000000; lower workload.tasks"):
        check_fits(big, available=2**30)
    with pytest.raises(RunTooLarge, match=r"2 run\(s\)"):
        check_fits(paper, processes=2, available=run_bytes(paper))


def test_available_memory_is_read_from_meminfo(tmp_path: Path) -> None:
    f = tmp_path / "meminfo"
    f.write_text("MemTotal: 100 kB\nMemAvailable:   2048 kB\n")
    assert available_bytes(f) == 2048 * 1024
    f.write_text("MemTotal: 100 kB\n")
    assert available_bytes(f) is None
    assert available_bytes(tmp_path / "missing") is None

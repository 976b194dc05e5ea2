"""The allocation-LP probe (``experiments/benchmarks/lp_affinity.py``): its selector picks feasible
nodes, follows the LP's prices only while the window's work outruns its arrivals, and the script
prints a row per case."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from experiments.benchmarks import lp_affinity
from rlsched.policies.registry import parse_scheduler
from rlsched.scheduler import TwoStageScheduler
from tests.conftest import drive_selector
from tests.test_evaluate import TINY


def _choices(path: Path, selector: object, rate: float | None = None) -> list[int]:
    sched = TwoStageScheduler(selector, parse_scheduler("mct-mem+iawp-pass").placer)  # type: ignore[arg-type]
    return drive_selector(path, sched, rate)[0]


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    (tmp_path / "tiny.toml").write_text(TINY.replace("tasks = 40", "tasks = 120"))
    return tmp_path / "tiny.toml"


def test_prices_are_followed_only_when_work_outruns_arrivals(tiny: Path) -> None:
    """At 6 tasks/min the window's work fits its arrivals: the probe decides as ``mct-mem`` does.
    Saturated (600/min), the LP's prices move some tasks elsewhere."""
    greedy = parse_scheduler("mct-mem").selector
    slow = 6.0
    assert _choices(tiny, lp_affinity.LpAffinitySelector(), slow) == _choices(tiny, greedy, slow)
    fast = _choices(tiny, lp_affinity.LpAffinitySelector())
    assert fast != _choices(tiny, parse_scheduler("mct-mem").selector)
    assert len(fast) == 120


def test_the_script_prints_one_row_per_case(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lp_affinity.main(["--scenarios", str(tiny.parent), "--cases", "tiny", "--variants", "lp-d10"])
    out = capsys.readouterr().out
    assert "| case | mct-mem+iawp-pass | lp-d10+iawp-pass | mct-drain+iawp-pass |" in out
    row = next(x for x in out.splitlines() if x.startswith("| tiny |"))
    cells = re.findall(r"([\d.]+) \(([\d.]+)\)", row)
    assert len(cells) == 3 and all(float(t) > 0 for t, _ in cells), row
    assert np.isfinite([float(x) for c in cells for x in c]).all()

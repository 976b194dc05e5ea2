"""The live benchmark script runs end to end (its quick dispatch and cache sections)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from experiments.benchmarks.bench_live.__main__ import main


def test_quick_dispatch_and_cache_sections(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Both tables print, the overhead is a finite positive number and the cache saves bytes."""
    results = main(["--quick", "--backend", "numpy", "--out", str(tmp_path), "--sections", "dispatch,cache"])
    out = capsys.readouterr().out
    assert "# command: python -m experiments.benchmarks.bench_live --quick" in out
    assert "## 1. Dispatch overhead per subtask" in out and "## 2. Host-to-device bytes saved" in out
    assert "| backend | task | batch |" in out and "| device memory | tasks done |" in out
    assert "| dispatch |" in out and "| cache |" in out  # per-section wall times
    overheads = results["dispatch"]
    assert overheads and all(math.isfinite(v) and v > 0 for v in overheads.values()), overheads
    cache = results["cache"]
    assert cache["lost_1024"] == 0
    # Small memories evict (whether they also lose tasks is the runtime's business: its tests).
    assert cache["evictions_40"] + cache["evictions_24"] > 0
    assert 0 < cache["saved_share_1024"] <= 1


def test_unknown_section_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--sections", "dispatch,nope"])
    assert "unknown section(s) nope" in capsys.readouterr().err

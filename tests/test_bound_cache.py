"""The cache behind `rlsched scenarios`: a hit gives the computed figures, any edit misses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from experiments.bound_cache import cache_dir
from experiments.suites import scenario_table

SCENARIO = """name = "cached"
[[cluster.nodes]]
name = "g"
count = 2
cpu_cores = 4
host_mem_gib = 16
gpu_model = "T4"
[workload]
tasks = 40
apps = { matmul = 1 }
[workload.arrival]
process = "poisson"
rate_per_min = 30
"""


def test_a_cached_bound_is_shown_and_an_edit_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLSCHED_CACHE_DIR", str(tmp_path / "cache"))
    assert cache_dir() == tmp_path / "cache"
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    first = scenario_table([str(path)])
    entries = json.loads((tmp_path / "cache" / "bounds.json").read_text())
    assert len(entries) == 1
    assert scenario_table([str(path)]) == first  # a hit: the same line
    # A wrong cached figure would be shown: proof that the second call read the cache.
    key = next(iter(entries))
    entries[key]["capacity_per_min"] = 12345.0
    (tmp_path / "cache" / "bounds.json").write_text(json.dumps(entries))
    assert "12345.0" in scenario_table([str(path)])
    path.write_text(SCENARIO.replace("rate_per_min = 30", "rate_per_min = 31"))
    assert "12345.0" not in scenario_table([str(path)])  # edited: recomputed
    assert len(json.loads((tmp_path / "cache" / "bounds.json").read_text())) == 2


def test_an_unwritable_cache_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("RLSCHED_CACHE_DIR", str(blocker / "cache"))
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    out = scenario_table([str(path)])
    assert "arrival-bound" in out or "has headroom" in out
    assert not os.path.isdir(blocker / "cache")

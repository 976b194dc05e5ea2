"""The benchmark that compares checkpoints against one heuristic grid, and picks the best
heuristic pair of each case on other seeds."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.benchmarks.against_best import merged_rows, pick_ceiling, picked_ratios


def _row(scenario: str, scheduler: str, seed: int, throughput: float) -> dict:
    return {
        "scenario": scenario,
        "scheduler": scheduler,
        "seed": seed,
        "status": "ok",
        "throughput": throughput,
        "latency_mean_s": 1.0,
    }


def test_the_best_pair_is_picked_on_the_other_seeds_and_measured_on_these() -> None:
    """On the picking seeds ``mct+speedup`` is best; on the measured seeds ``mlsm+speedup`` happens
    to be. The learned pair is measured against ``mct+speedup``'s figures on the measured seeds."""
    pick = [_row("a", "mct+speedup", 10001, 10.0), _row("a", "mlsm+speedup", 10001, 9.0)]
    test = [
        _row("a", "mct+speedup", 20000, 8.0),
        _row("a", "mlsm+speedup", 20000, 12.0),
        _row("a", "ldwp+iawp", 20000, 10.0),
    ]
    ratios = picked_ratios(test, pick)
    assert ratios == {"ldwp+iawp": [(10.0 / 8.0, "mct+speedup")]}


def test_candidates_learned_rows_are_renamed_and_stay_learned(tmp_path: Path) -> None:
    grid, cand = tmp_path / "grid.json", tmp_path / "cand.json"
    grid.write_text(json.dumps({"rows": [_row("a", "mct+speedup", 1, 1.0), _row("a", "ldwp+iawp", 1, 2.0)]}))
    cand.write_text(json.dumps({"rows": [_row("a", "ldwp+iawp", 1, 3.0), _row("a", "mct+iawp-rl", 1, 4.0)]}))
    rows = merged_rows(str(grid), [("bc", str(cand))])
    assert [r["scheduler"] for r in rows] == ["mct+speedup", "ldwp+iawp@bc", "mct@bc+iawp-rl"]
    assert [r["throughput"] for r in rows] == [1.0, 3.0, 4.0]


def test_the_ceiling_is_the_pair_picked_on_other_seeds_against_the_best_on_these() -> None:
    """Picked on the other seeds, ``mct+speedup`` reads 8/12 where ``mlsm+speedup`` is best; on a
    case where the pick holds, 1."""
    pick = [
        _row("a", "mct+speedup", 10001, 10.0),
        _row("a", "mlsm+speedup", 10001, 9.0),
        _row("b", "mct+speedup", 10001, 5.0),
        _row("b", "mlsm+speedup", 10001, 9.0),
    ]
    test = [
        _row("a", "mct+speedup", 20000, 8.0),
        _row("a", "mlsm+speedup", 20000, 12.0),
        _row("b", "mct+speedup", 20000, 5.0),
        _row("b", "mlsm+speedup", 20000, 9.0),
    ]
    assert pick_ceiling(test, pick) == [8.0 / 12.0, 1.0]

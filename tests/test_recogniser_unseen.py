"""Leave one family out: a recogniser scored on a kind of case as if it had never seen it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from experiments.cli import main
from experiments.recogniser_fit import fit, read_grid
from experiments.recogniser_unseen import case_family, families_left_out, without_cases
from tests.test_auto import grid_folder

TRAIN = ["paper#100", "transfer-4#100", "hetero-saturated#100", "dynamic#100"]
BEST = dict.fromkeys(TRAIN, "mct+speedup") | {"hetero-saturated#100": "mlsm+speedup"}
PAIRS = ["ldwp+iawp", "mct+speedup", "mlsm+speedup"]


def test_a_family_left_out_loses_what_only_its_own_training_cases_taught(tmp_path: Path) -> None:
    """Only ``hetero-saturated``'s training runs say ``mlsm+speedup`` wins there: seen, the nearest
    run picks it (10 of 10); left out, the rest say ``mct+speedup`` (8 of 10), as the default does."""
    train = read_grid(grid_folder(tmp_path / "train", TRAIN, [5000, 5001], BEST))
    val_best = {"hetero-saturated#100": "mlsm+speedup"}
    val = read_grid(grid_folder(tmp_path / "val", ["hetero-saturated#100"], [10001], val_best))
    rec = fit(train, PAIRS, window=20, k=1, margin=0.0)
    (out,) = families_left_out(rec, val)
    assert (out.family, out.cases, out.training_cases) == ("hetero-saturated", 1, 1)
    assert out.seen == pytest.approx(1.0)
    assert out.unseen == pytest.approx(0.8) and out.default == pytest.approx(0.8)


def test_without_cases_drops_their_rows_and_rescales_over_the_rest(tmp_path: Path) -> None:
    train = read_grid(grid_folder(tmp_path / "train", TRAIN, [5000, 5001], BEST))
    rec = fit(train, PAIRS, window=20, k=8, margin=0.0)
    less = without_cases(rec, ["dynamic#100"])
    assert "dynamic#100" not in less.row_cases and len(less.rows) == 6 and less.k == 6
    np.testing.assert_allclose(less.center, less.rows.mean(axis=0))
    assert less.candidates == rec.candidates and less.margin == rec.margin
    with pytest.raises(ValueError, match="no training row"):
        without_cases(rec, TRAIN)


def test_a_generated_case_is_of_its_family_and_a_built_in_of_its_own(tmp_path: Path) -> None:
    assert (
        main(
            [
                "scenarios",
                "generate",
                "--family",
                "churn",
                "--count",
                "1",
                "--seed",
                "3",
                "--out",
                str(tmp_path / "g"),
            ]
        )
        == 0
    )
    (case,) = sorted((tmp_path / "g").glob("*.toml"))
    assert case_family(str(case)) == "churn"
    assert case_family("paper@30#100") == "paper"


def test_fit_recogniser_families_out_keeps_the_table(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    g = grid_folder(tmp_path / "train", TRAIN, [5000, 5001], BEST)
    v = grid_folder(
        tmp_path / "val", ["hetero-saturated#100"], [10001], {"hetero-saturated#100": "mlsm+speedup"}
    )
    out = tmp_path / "rec"
    common = ["fit-recogniser", "--grid", str(g), "--window", "20", "--candidates", "gain", "--out", str(out)]
    assert main([*common, "--validation-grid", str(v), "--families-out"]) == 0
    (row,) = json.loads((out / "validation.json").read_text())["families_out"]
    assert row["family"] == "hetero-saturated" and row["training_cases"] == 1
    assert row["unseen"] <= row["seen"]
    assert "family (left out)" in capsys.readouterr().err
    assert main([*common, "--families-out"]) == 2
    assert "--families-out" in capsys.readouterr().err

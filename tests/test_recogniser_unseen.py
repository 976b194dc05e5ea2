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


def test_a_family_that_is_all_the_training_cases_is_not_left_out(tmp_path: Path) -> None:
    best = {"paper#100": "mct+speedup"}
    train = read_grid(grid_folder(tmp_path / "train", ["paper#100"], [5000, 5001], best))
    val = read_grid(grid_folder(tmp_path / "val", ["paper#100"], [10001], best))
    (out,) = families_left_out(fit(train, PAIRS[:2], window=20, k=1), val)
    assert out.unseen is None and out.seen == pytest.approx(1.0) and out.default == pytest.approx(0.8)


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
    assert case_family("transfer-32#100") == "transfer-32"  # a built-in is a kind of its own
    moved = tmp_path / "moved"
    moved.mkdir()
    (moved / case.name).write_text(case.read_text())  # without its set's index: the file's name
    assert case_family(str(moved / case.name)) == "churn"


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
    # The same --out again: the recogniser it holds is not replaced without a word.
    assert main([*common, "--validation-grid", str(v)]) == 2
    assert "expected a folder without a checkpoint" in capsys.readouterr().err


def test_features_chosen_family_by_family_are_the_ones_that_carry_to_another_family() -> None:
    """Feature 0 names the family (families 0 and 1 want ``a+x``, 2 and 3 ``b+y``, and neighbouring
    names want different pairs); feature 1 says which pair wins in every family. Leaving one case
    out, the name is as good (and chosen first); leaving one family out, only feature 1 carries."""
    from experiments.recogniser_fit import leave_one_case_out, select_features
    from rlsched.policies.case_features import FEATURES
    from rlsched.policies.recogniser import Recogniser

    per, fams = 12, [0, 1, 2, 3]
    family = np.repeat(fams, per)
    rows = np.zeros((len(family), len(FEATURES)))
    rows[:, 0] = np.array([0.0, 30.0, 10.0, 40.0])[family]  # the name: 0's nearest other is 2
    rows[:, 1] = (family >= 2).astype(float)
    scores = np.log(np.where(rows[:, 1:2] > 0.5, [[0.5, 1.0]], [[1.0, 0.5]]))
    names = tuple(f"f{f}-c{i}" for i, f in enumerate(family))
    r = Recogniser(
        ("a+x", "b+y"), "a+x", 20, 10, 0.0, rows.mean(axis=0), np.ones(len(FEATURES)), rows, scores, names
    )
    groups = [f"f{f}" for f in family]
    name_only = np.eye(len(FEATURES))[0]
    assert leave_one_case_out(r, name_only, 5, 0.0) == pytest.approx(1.0)
    assert leave_one_case_out(r, name_only, 5, 0.0, groups) == pytest.approx(0.5)
    by_case, _ = select_features(r)
    by_family, steps = select_features(r, groups)
    assert by_case[0] == 1.0
    assert by_family[0] == 0.0 and by_family[1] == 1.0 and steps[1][0] == FEATURES[1]
    assert leave_one_case_out(r, by_family, 10, 0.05, groups) == pytest.approx(1.0)

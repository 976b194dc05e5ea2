"""The recogniser's far fallback: a case unlike every training row runs a robust pair, and the
distance that counts as far is chosen on the training rows alone."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from experiments.cli import main
from experiments.recogniser_far import fit_far, nearest_other, robust_pair
from experiments.recogniser_fit import fit, read_grid
from models.checkpoint import CheckpointError, sha256, write_meta
from rlsched.policies.case_features import FEATURES
from rlsched.policies.recogniser import MODEL_FILE, Choice, Recogniser, load_recogniser
from tests.test_auto import grid_folder
from tests.test_recogniser_unseen import BEST, TRAIN

F = len(FEATURES)
PAIRS = ("a+x", "b+y", "c+z")


def families_recogniser(
    positions: list[float], wants: list[int], robust: float, per: int = 10
) -> tuple[Recogniser, list[str]]:
    """``per`` rows of each family around ``positions[f]`` on feature 0; family ``f`` wants pair
    ``wants[f]`` (ratio 1, the other of a+x / b+y 0.5) and c+z reads ``robust`` everywhere."""
    rng = np.random.default_rng(0)
    family = np.repeat(np.arange(len(positions)), per)
    rows = np.zeros((len(family), F))
    rows[:, 0] = np.asarray(positions)[family] + rng.uniform(-0.3, 0.3, len(family))
    want = np.asarray(wants)[family]
    ratios = np.column_stack(
        [np.where(want == 0, 1.0, 0.5), np.where(want == 1, 1.0, 0.5), np.full(len(family), robust)]
    )
    names = tuple(f"f{f}-{i}.toml" for i, f in enumerate(family))
    r = Recogniser(PAIRS, "a+x", 20, 3, 0.0, rows.mean(axis=0), np.ones(F), rows, np.log(ratios), names)
    return r, [f"f{f}" for f in family]


def test_a_case_far_from_every_training_row_runs_the_far_pair(tmp_path: Path) -> None:
    rows = np.zeros((2, F))
    rows[:, 0] = [0.0, 1.0]
    scores = np.log([[0.5, 1.0, 0.9], [0.5, 1.0, 0.9]])
    r = Recogniser(PAIRS, "a+x", 20, 1, 0.0, rows.mean(axis=0), np.ones(F), rows, scores, ("c0", "c1"))
    far = r.with_far("c+z", 5.0)
    x = np.zeros(F)
    x[0] = 10.0
    assert r.choose(x).pair == "b+y" and not r.choose(x).far  # no fallback: the neighbours decide
    near, away = far.choose(np.zeros(F)), far.choose(x)
    assert near.pair == "b+y" and not near.far and near.distance == pytest.approx(0.0)
    assert away.pair == "c+z" and away.far and away.distance == pytest.approx(9.0)
    back = Choice.from_dict(json.loads(json.dumps(away.to_dict())))
    assert back.far and back.distance == pytest.approx(9.0) and back.pair == "c+z"
    assert load_recogniser(far.save(tmp_path / "far")).choose(x) == away  # the file keeps it
    assert "far_pair" not in r.to_json()  # without a fallback the file is as before
    with pytest.raises(ValueError, match="far_pair"):
        r.with_far("d+w", 5.0)
    with pytest.raises(ValueError, match="far_distance"):
        r.with_far("c+z", 0.0)


def test_a_file_with_a_bad_far_distance_is_refused_naming_it(tmp_path: Path) -> None:
    r, _ = families_recogniser([0.0, 10.0], [0, 1], 0.9)
    d = r.with_far("c+z", 2.0).save(tmp_path / "rec")
    data = json.loads((d / MODEL_FILE).read_text())
    data["far_distance"] = -1.0
    (d / MODEL_FILE).write_text(json.dumps(data))
    meta = json.loads((d / "meta.json").read_text())
    meta["files"][MODEL_FILE] = sha256(d / MODEL_FILE)
    write_meta(d, meta)
    with pytest.raises(CheckpointError, match="far_distance"):
        load_recogniser(d)


def test_the_fallback_is_kept_where_a_family_left_out_gains_from_it() -> None:
    """Neighbouring families want opposite pairs: left out, a family's neighbours say the wrong
    one (0.5), and c+z (0.9 everywhere) does better; within a family, no row is far."""
    r, fams = families_recogniser([0.0, 10.0, 20.0, 30.0], [0, 1, 0, 1], 0.9)
    assert robust_pair(r) == "c+z"
    assert np.isfinite(nearest_other(r, fams)).all()
    model, trials = fit_far(r, fams)
    never = trials[0]
    assert (
        never.percentile is None and never.seen == pytest.approx(1.0) and never.unseen == pytest.approx(0.5)
    )
    assert model.far_pair == "c+z" and math.isfinite(model.far_distance)
    kept = next(t for t in trials if t.distance == model.far_distance)
    assert kept.unseen > never.unseen + 0.1 and kept.seen == pytest.approx(1.0)


def test_no_fallback_where_the_neighbours_already_carry_across_families() -> None:
    """Families 0 and 1 want a+x, 2 and 3 b+y, each beside one that wants the same: left out,
    the neighbours are right, and the robust pair could only lose."""
    r, fams = families_recogniser([0.0, 10.0, 100.0, 110.0], [0, 0, 1, 1], 0.4)
    model, trials = fit_far(r, fams)
    assert trials[0].unseen == pytest.approx(1.0)
    assert model.far_pair is None and model.far_distance == math.inf
    with pytest.raises(ValueError, match="one family"):
        nearest_other(r, ["f0"] * len(r.rows))


def test_fit_recogniser_from_a_fitted_one_adds_the_fallback(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    g = grid_folder(tmp_path / "train", TRAIN, [5000, 5001], BEST)
    base = tmp_path / "base"
    assert main(["fit-recogniser", "--grid", str(g), "--window", "20", "--k", "2", "--out", str(base)]) == 0
    out = tmp_path / "far"
    assert main(["fit-recogniser", "--from", str(base), "--far-fallback", "--out", str(out)]) == 0
    assert "far distance (percentile)" in capsys.readouterr().err
    meta = json.loads((out / "meta.json").read_text())
    assert meta["from"] == str(base) and meta["grid"] == str(g) and len(meta["far"]["trials"]) == 8
    fitted, source = load_recogniser(out), load_recogniser(base)
    assert np.array_equal(fitted.rows, source.rows) and (fitted.k, fitted.margin) == (2, 0.0)
    assert fitted.far_pair == meta["far"]["pair"]
    assert main(["fit-recogniser", "--from", str(base), "--k", "5", "--out", str(tmp_path / "x")]) == 2
    assert "--k" in capsys.readouterr().err
    assert main(["fit-recogniser", "--out", str(tmp_path / "y")]) == 2
    assert "--from" in capsys.readouterr().err
    assert main(["fit-recogniser", "--from", str(tmp_path / "nope"), "--out", str(tmp_path / "z")]) == 2
    # The shipped recogniser by name: its path is inside the installed package, not the cwd.
    from models import PRETRAINED_RECOGNISER

    assert main(["fit-recogniser", "--from", "shipped", "--out", str(tmp_path / "s")]) == 0
    assert json.loads((tmp_path / "s" / "meta.json").read_text())["from"] == str(PRETRAINED_RECOGNISER)


def test_leave_one_family_out_counts_the_fallback(tmp_path: Path) -> None:
    """The training score ``fit_far`` chooses by judges a far row by the far pair, as ``choose`` does."""
    from experiments.recogniser_fit import leave_one_case_out

    rec = fit(
        read_grid(grid_folder(tmp_path / "g", TRAIN, [5000, 5001], BEST)), ["ldwp+iawp", "mct+speedup"], 20, 1
    )
    groups = [c.split("#")[0] for c in rec.row_cases]
    everything_far = rec.with_far("ldwp+iawp", 1e-9)
    # every row is far from every other: each gets ldwp+iawp, 0.8 of mct+speedup on three cases
    # and the better of the two candidates on hetero-saturated
    assert leave_one_case_out(everything_far, rec.weights, 1, 0.0, groups) == pytest.approx(0.8**0.75)
    assert leave_one_case_out(rec, rec.weights, 1, 0.0, groups) > 0.8

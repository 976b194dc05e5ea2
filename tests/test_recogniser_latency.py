"""Latency labels in the recogniser: among candidates that tie on throughput, the one of least
predicted mean latency runs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from experiments.cli import main
from rlsched.policies.case_features import FEATURES
from rlsched.policies.recogniser import Choice, Recogniser, load_recogniser
from tests.test_recogniser_far import PAIRS, families_recogniser
from tests.test_recogniser_unseen import TRAIN

F = len(FEATURES)


def test_latency_labels_break_a_throughput_tie_and_only_a_tie(tmp_path: Path) -> None:
    """b+y and c+z tie within 1 % on throughput, c+z at half the latency: it runs; a+x is 3 %
    behind at a tenth of the latency: it does not."""
    rows = np.zeros((2, F))
    rows[:, 0] = [0.0, 1.0]
    scores = np.log([[0.97, 1.0, 0.995], [0.97, 1.0, 0.995]])
    latency = np.log([[1.0, 10.0, 5.0], [1.0, 10.0, 5.0]])
    r = Recogniser(PAIRS, "a+x", 20, 2, 0.0, rows.mean(axis=0), np.ones(F), rows, scores, ("c0", "c1"))
    assert r.choose(np.zeros(F)).pair == "b+y" and r.choose(np.zeros(F)).latency == {}
    lat = dataclasses.replace(r, latency=latency)
    c = lat.choose(np.zeros(F))
    assert c.pair == "c+z" and c.latency["b+y"] == pytest.approx(10.0)
    assert Choice.from_dict(json.loads(json.dumps(c.to_dict()))).latency == pytest.approx(c.latency, abs=1e-4)
    assert load_recogniser(lat.save(tmp_path / "lat")).choose(np.zeros(F)) == c  # the file keeps them
    assert "latency" not in r.to_json()
    with pytest.raises(ValueError, match="latency"):
        dataclasses.replace(r, latency=latency[:1])


def test_fit_recogniser_latency_tie_labels_each_candidate_s_latency(tmp_path: Path) -> None:
    """On every training case mct+speedup and mlsm+speedup tie (10 tasks/s), mlsm+speedup at a
    third of the latency: fitted with --latency-tie, auto runs it; without, mct+speedup."""
    rows = []
    for e in TRAIN:
        for p, thr, lat in (("ldwp+iawp", 8.0, 1.0), ("mct+speedup", 10.0, 3.0), ("mlsm+speedup", 10.0, 1.0)):
            for s in (5000, 5001):
                rows.append({"scenario": e, "scheduler": p, "seed": s, "status": "ok", "throughput": thr,
                             "latency_mean_s": lat})  # fmt: skip
    g = tmp_path / "g"
    g.mkdir()
    (g / "results.json").write_text(json.dumps({"rows": rows}))
    common = ["fit-recogniser", "--grid", str(g), "--window", "20", "--k", "2"]
    assert main([*common, "--out", str(tmp_path / "a")]) == 0
    assert main([*common, "--latency-tie", "--out", str(tmp_path / "b")]) == 0
    plain, timed = load_recogniser(tmp_path / "a"), load_recogniser(tmp_path / "b")
    x = plain.rows[0]
    assert plain.latency is None and plain.choose(x).pair == "mct+speedup"
    assert timed.latency is not None and timed.choose(x).pair == "mlsm+speedup"
    assert timed.latency[:, timed.candidates.index("mct+speedup")] == pytest.approx(np.log(3.0))


def test_a_family_left_out_drops_its_latency_rows_too() -> None:
    from experiments.recogniser_unseen import without_cases

    r, _ = families_recogniser([0.0, 10.0], [0, 1], 0.9)
    timed = dataclasses.replace(r, latency=np.tile(np.log([1.0, 2.0, 3.0]), (len(r.rows), 1)))
    timed.latency[0, 0] = np.log(5.0)  # type: ignore[index]
    less = without_cases(timed, [r.row_cases[0]])
    assert less.latency is not None and less.latency.shape == (len(r.rows) - 1, 3)
    assert np.allclose(less.latency[:, 0], 0.0)  # the dropped case's own label left with it

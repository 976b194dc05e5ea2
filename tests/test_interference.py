"""The co-location interference model: CSV format, NCF and its baselines, online updates, checkpoints."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from models.checkpoint import META, WEIGHTS, CheckpointError
from models.interference.neumf import NeuMF
from models.interference.rows import Rows
from models.interference.training import NetTrainConfig
from rlsched.interference.measurements import (
    ColocationData,
    ColocationError,
    read_colocation_csv,
    write_colocation_csv,
)
from rlsched.interference.predictor import (
    FitOptions,
    InterferencePredictor,
    evaluate,
    family_of,
    fit_interference,
    kind_name_features,
)
from rlsched.scenarios.data_paths import packaged_data_dir

FAMILIES = {
    "Alpha": (0.9, 0.3, 3.0),
    "Beta": (0.4, 0.8, 5.0),
    "Gamma": (0.7, 0.6, 8.0),
    "Delta": (0.2, 0.2, 2.0),
}
BATCHES = (8, 32, 128)
#: Device -> (contention scale, memory capacity).
DEVICES = {"v100": (0.9, 16.0), "p100": (1.2, 16.0), "t4": (0.3, 16.0)}


def synthetic(
    devices: tuple[str, ...] = ("v100", "p100"), noise: float = 0.01, seed: int = 0
) -> ColocationData:
    """Every (device, kind, partner) of 12 kinds (4 families x 3 batch sizes) with a learnable
    structure: throughput 1 - scale(device) * sensitivity(kind) * aggression(partner), both
    growing with the batch size within a family; 0 where the two kinds' memory exceeds the
    device's."""
    rng = np.random.default_rng(seed)
    kinds = [f"{f} (batch size {b})" for f in FAMILIES for b in BATCHES]

    def attrs(k: str) -> tuple[float, float, float]:
        sens, aggr, mem = FAMILIES[family_of(k)]
        grow = np.log2(int(k.split()[-1].rstrip(")"))) / 7.0
        return sens * (0.6 + 0.4 * grow), aggr * (0.6 + 0.4 * grow), mem * (0.5 + grow)

    dev, kind, part, ys = [], [], [], []
    for d in devices:
        scale, cap = DEVICES[d]
        for k in kinds:
            for p in kinds:
                (s, _, mk), (_, a, mp) = attrs(k), attrs(p)
                y = (
                    0.0
                    if mk + mp > cap
                    else float(np.clip(1 - 0.8 * scale * s * a + rng.normal(0, noise), 0.05, 1))
                )
                dev.append(d)
                kind.append(k)
                part.append(p)
                ys.append(y)
    return ColocationData(dev, kind, part, np.array(ys))


def halves(data: ColocationData, seed: int = 0) -> tuple[ColocationData, ColocationData]:
    perm = np.random.default_rng(seed).permutation(len(data))
    return data.take(perm[: len(data) // 2]), data.take(perm[len(data) // 2 :])


FAST = FitOptions(
    ncf_train=NetTrainConfig(epochs=150, lr=0.01, weight_decay=0.1, l2=1.0, prior=True, cosine=True),
    ncf_members=[{"weight_decay": 0.3}],
    svd_train=NetTrainConfig(
        epochs=200, lr=0.2, batch_size=256, optimizer="sgd", weight_decay=0.0, prior=True
    ),
    svd_members=[{"l2": 0.1}],
)


@pytest.fixture(scope="module")
def data() -> ColocationData:
    return synthetic()


@pytest.fixture(scope="module")
def ncf(data: ColocationData) -> InterferencePredictor:
    return fit_interference(halves(data)[0], "ncf", 0, options=FAST)


# --- CSV ------------------------------------------------------------------------------------------


def test_csv_round_trip_is_exact(tmp_path: Path, data: ColocationData) -> None:
    d = data.take(range(40))
    d.y[3] = 1 / 3  # a value with no short decimal form
    write_colocation_csv(tmp_path / "c.csv", d)
    back = read_colocation_csv(tmp_path / "c.csv")
    assert (back.device, back.kind, back.partner) == (d.device, d.kind, d.partner)
    assert back.y.dtype == np.float64 and np.array_equal(back.y, d.y)


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("device,kind,throughput\nv100,a,1\n", ["line 1", "header", "device,kind,partner,norm_throughput"]),
        ("device,kind,partner,norm_throughput\nv100,a,b,0.5\nv100,a,0.5\n", ["line 3", "4 fields"]),
        ("device,kind,partner,norm_throughput\nv100,,b,0.5\n", ["line 2", "kind"]),
        (
            "device,kind,partner,norm_throughput\nv100,a,b,0.5\n\np100,a,b,fast\n",
            ["line 4", "norm_throughput", "'fast'"],
        ),
        ("device,kind,partner,norm_throughput\nv100,a,b,-0.1\n", ["line 2", "norm_throughput", "[0, 2]"]),
        ("device,kind,partner,norm_throughput\nv100,a,b,nan\n", ["line 2", "norm_throughput"]),
        ("device,kind,partner,norm_throughput\n", ["at least one data row"]),
    ],
)
def test_bad_csv_names_file_line_and_field(tmp_path: Path, text: str, fragments: list[str]) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(text)
    with pytest.raises(ColocationError) as e:
        read_colocation_csv(f)
    msg = str(e.value)
    assert str(f) in msg and "\n" not in msg
    for frag in fragments:
        assert frag in msg


# --- side information -----------------------------------------------------------------------------


def test_kind_features_parse_family_and_batch_and_builtin_costs() -> None:
    x = kind_name_features(
        ["ResNet-18 (batch size 32)", "ResNet-18 (batch size 128)", "A3C", "matmul"], ["A3C", "ResNet-18"]
    )
    assert x[0, 1] == x[1, 1] == 1 and x[0, 0] == 0 and x[2, 0] == 1
    assert x[1, 3] > x[0, 3]  # larger batch
    assert x[3, :2].sum() == 0 and x[3, 4] == 1  # built-in kind: no family, its cost model
    assert x[2, 4] == 0


# --- fitting --------------------------------------------------------------------------------------


def test_ncf_and_svd_beat_the_kind_mean_on_held_out_pairs(
    data: ColocationData, ncf: InterferencePredictor
) -> None:
    train, test = halves(data)
    mean = evaluate(fit_interference(train, "mean", 0), test)
    svd = evaluate(fit_interference(train, "svd", 0, options=FAST), test)
    got = evaluate(ncf, test)
    assert got["n"] == len(test)
    assert got["mae"] < 0.6 * mean["mae"], (got, mean)
    assert svd["mae"] < mean["mae"], (svd, mean)
    assert got["feasible_accuracy"] >= 0.95
    assert got["rmse"] >= got["mae"]


def test_predictions_are_float64_zero_where_infeasible(
    data: ColocationData, ncf: InterferencePredictor
) -> None:
    p = ncf.predict(data.device, data.kind, data.partner)
    assert p.dtype == np.float64 and p.shape == (len(data),)
    assert (p >= 0).all() and (p <= ncf.y_max).all()
    infeasible = data.y == 0
    assert infeasible.any() and (p[infeasible] == 0).mean() > 0.9


def test_catalog_models_resolve_to_the_measured_device(
    ncf: InterferencePredictor, data: ColocationData
) -> None:
    k, p = data.kind[:30], data.partner[:30]
    assert np.array_equal(ncf.predict(["V100M16"] * 30, k, p), ncf.predict(["v100"] * 30, k, p))
    assert np.array_equal(ncf.predict(["P100"] * 30, k, p), ncf.predict(["p100"] * 30, k, p))


def test_unknown_names_the_kinds_and_devices_it_cannot_predict(ncf: InterferencePredictor) -> None:
    rows = ColocationData(
        ["v100", "X9000", "v100"],
        ["Alpha (batch size 8)", "Alpha (batch size 8)", "Omega"],
        ["Beta (batch size 8)", "Zeta", "Alpha (batch size 8)"],
        np.zeros(3),
    )
    assert ncf.unknown(rows) == ["Omega", "X9000", "Zeta"]
    with pytest.raises(ValueError, match="Omega, X9000, Zeta"):
        ncf.predict(rows.device, rows.kind, rows.partner)


def test_ncf_cold_starts_a_new_batch_size_and_a_catalog_device(
    ncf: InterferencePredictor, data: ColocationData
) -> None:
    """A kind of a known family at a new batch size, or a catalog GPU never measured, are
    predicted from side features (svd has none, and says so)."""
    rows = ColocationData(
        ["T4", "v100"],
        ["Alpha (batch size 64)", "Beta (batch size 8)"],
        ["Beta (batch size 8)", "Gamma (batch size 16)"],
        np.zeros(2),
    )
    assert ncf.unknown(rows) == []
    assert np.isfinite(ncf.predict(rows.device, rows.kind, rows.partner)).all()
    svd = fit_interference(halves(data)[0], "svd", 0, options=FAST)
    assert svd.unknown(rows) == ["Alpha (batch size 64)", "Gamma (batch size 16)", "T4"]


def test_fit_rejects_unknown_method_and_empty_data(data: ColocationData) -> None:
    with pytest.raises(ValueError, match="unknown interference method 'knn'"):
        fit_interference(data, "knn")
    with pytest.raises(ValueError, match="no co-location rows"):
        fit_interference(data.take([]), "ncf")


def test_mean_model_is_the_kind_mean_on_the_device() -> None:
    d = ColocationData(
        ["a", "a", "a", "b"], ["k", "k", "k", "k"], ["p", "q", "r", "p"], np.array([0.4, 0.6, 0.0, 0.9])
    )
    m = fit_interference(d, "mean")
    # Two of three rows feasible: predict their mean, whoever the partner.
    assert np.allclose(m.predict(["a", "a", "b"], ["k", "k", "k"], ["p", "q", "r"]), [0.5, 0.5, 0.9])


# --- online updates -------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["ncf", "svd"])
def test_online_update_learns_a_new_device_from_few_samples(method: str) -> None:
    old = synthetic(("v100", "p100"))
    new = synthetic(("t4",), seed=1)
    perm = np.random.default_rng(0).permutation(len(new))
    few, rest = new.take(perm[:30]), new.take(perm[30:])
    pred = fit_interference(old, method, 0, options=FAST)
    if method == "ncf":
        before = evaluate(pred, rest)["mae"]  # cold start from the catalog specs of T4
    else:
        # svd cannot cold-start: without learning, T4 could only be read as the nearest device.
        assert pred.unknown(rest) == ["t4"]
        before = evaluate(pred, ColocationData(["p100"] * len(rest), rest.kind, rest.partner, rest.y))["mae"]
    updated = copy.deepcopy(pred)
    updated.update(few, steps=60)
    after = evaluate(updated, rest)["mae"]
    assert after < 0.8 * before, (before, after)
    assert "t4" in updated.devices and updated.info["updates"] == 1
    # What it knew stays close to what it was.
    assert evaluate(updated, old)["mae"] < evaluate(pred, old)["mae"] + 0.02


def test_update_adds_new_kinds_to_the_vocabulary(ncf: InterferencePredictor) -> None:
    pred = copy.deepcopy(ncf)
    rows = ColocationData(["v100"] * 4, ["Omega"] * 4, ["Alpha (batch size 8)"] * 4, np.full(4, 0.3))
    assert pred.unknown(rows) == ["Omega"]
    pred.update(rows, steps=100)
    assert pred.unknown(rows) == [] and "Omega" in pred.kinds
    before = ncf.predict(["v100"], ["Beta (batch size 8)"], ["Gamma (batch size 8)"])
    assert (
        abs(pred.predict(["v100"], ["Beta (batch size 8)"], ["Gamma (batch size 8)"])[0] - before[0]) < 0.05
    )


def test_grow_keeps_existing_predictions() -> None:
    torch.manual_seed(0)
    m = NeuMF(3, 2, kind_dim=4, device_dim=5, seed=1)
    rows = Rows(
        torch.tensor([0, 1, 2]),
        torch.tensor([2, 0, 1]),
        torch.tensor([0, 1, 1]),
        torch.zeros(3),
        torch.randn(3, 4),
        torch.randn(3, 4),
        torch.randn(3, 5),
    )
    before = m(*rows.inputs())
    m.grow(kinds=2, devices=1)
    after = m(*rows.inputs())
    assert torch.equal(before[0], after[0]) and torch.equal(before[1], after[1])
    assert m.config()["n_kinds"] == 5 and m.config()["n_devices"] == 3


# --- checkpoints ----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["ncf", "svd", "mean"])
def test_save_load_round_trip_predicts_identically(tmp_path: Path, data: ColocationData, method: str) -> None:
    train, test = halves(data)
    pred = fit_interference(train, method, 0, options=FAST)
    pred.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / META).read_text())
    assert (
        meta["format"] == "rlsched-interference"
        and meta["method"] == method
        and len(meta["files"][WEIGHTS]) == 64
    )
    back = InterferencePredictor.load(tmp_path / "m")
    assert back.method == method and back.kinds == pred.kinds and back.devices == pred.devices
    a = pred.predict(test.device, test.kind, test.partner)
    assert np.array_equal(a, back.predict(test.device, test.kind, test.partner))


def test_corrupt_or_foreign_checkpoint_is_refused(tmp_path: Path, ncf: InterferencePredictor) -> None:
    ncf.save(tmp_path / "m")
    with (tmp_path / "m" / WEIGHTS).open("ab") as f:
        f.write(b"\0")
    with pytest.raises(CheckpointError, match=r"weights.pt: sha256: expected the checksum meta.json records"):
        InterferencePredictor.load(tmp_path / "m")
    other = tmp_path / "ldwp"
    other.mkdir()
    (other / META).write_text(json.dumps({"feature_version": 3, "files": {}}))
    with pytest.raises(
        CheckpointError, match=r"meta.json: format: expected .* \(an interference model\), got None"
    ):
        InterferencePredictor.load(other)


# --- Gavel data -----------------------------------------------------------------------------------

GAVEL = packaged_data_dir() / "colocation" / "gavel-v100-p100.csv"


def test_gavel_csv_reads_as_documented() -> None:
    assert GAVEL is not None
    d = read_colocation_csv(GAVEL)
    assert len(d) == 1352 and set(d.device) == {"v100", "p100"} and len(set(d.kind)) == 26
    assert (d.y == 0).any() and d.y.max() <= 1.0


@pytest.mark.slow
def test_gavel_ncf_beats_svd_on_half_observed() -> None:
    assert GAVEL is not None
    train, test = halves(read_colocation_csv(GAVEL))
    ncf = evaluate(fit_interference(train, "ncf", 0), test)
    svd = evaluate(fit_interference(train, "svd", 0), test)
    assert ncf["mae"] < 0.085 and ncf["mae"] < svd["mae"] and ncf["feasible_accuracy"] >= 0.95

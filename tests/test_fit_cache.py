"""The fit store of the simulation commands: a run reads the interference model another process
fitted instead of fitting it again, its results unchanged; a torn or corrupt stored model is
fitted again; ``RLSCHED_FIT_CACHE=0`` turns it off."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from experiments.evaluation import Case, run_case
from experiments.fit_cache import DiskFitStore, install
from rlsched.interference import fit_store
from rlsched.interference.predictor import ColocationData, fit_interference
from rlsched.policies import iawp_model

CASE = Case("interference-saturated#150", "mct+iawp", 10001)
_TIMED = ("wall_s", "decisions_per_s")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh disk store for this test, and no model kept in this process from an earlier one."""
    monkeypatch.setenv("RLSCHED_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(iawp_model, "_CALIBRATED", {})
    monkeypatch.setattr(fit_store, "_STORE", None)
    install()
    return tmp_path / "cache" / "fits"


def _metrics() -> dict:
    iawp_model._CALIBRATED.clear()  # as a fresh worker process: only the disk store is shared
    r = run_case(CASE)
    assert r.status == "ok", r.error
    return {k: v for k, v in r.metrics.items() if k not in _TIMED}


def test_a_stored_model_is_read_not_fitted_and_the_run_is_the_same(store: Path) -> None:
    first = _metrics()
    (entry,) = store.iterdir()
    assert _metrics() == first  # read back: the same run, bit for bit
    # Proof that it was read, not fitted again: a different model under its key changes the run.
    other = fit_interference(
        ColocationData(["T4", "T4"], ["k_a", "k_b"], ["k_b", "k_a"], [0.2, 0.2]), "mean", 0
    )
    DiskFitStore(store).put(entry.name, other)
    assert _metrics() != first


def test_a_corrupt_stored_model_is_fitted_again_and_replaced(store: Path) -> None:
    first = _metrics()
    (entry,) = store.iterdir()
    weights = entry / "weights.pt"
    weights.write_bytes(weights.read_bytes()[:-7] + b"corrupt")
    assert _metrics() == first
    meta = json.loads((entry / "meta.json").read_text())
    from models.checkpoint import sha256

    assert sha256(weights) == meta["files"]["weights.pt"]  # the corrupt copy was replaced


def test_the_store_is_off_with_rlsched_fit_cache_0(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLSCHED_FIT_CACHE", "0")
    monkeypatch.setattr(fit_store, "_STORE", None)
    install()
    _metrics()
    assert not store.exists()


def test_the_key_holds_the_data_the_method_and_the_seed() -> None:
    data = ColocationData(["T4", "T4"], ["k_a", "k_b"], ["k_b", "k_a"], np.array([0.5, 0.7]))
    key = fit_store.fit_key(data, "ncf", 0)
    assert key == fit_store.fit_key(
        ColocationData(data.device, data.kind, data.partner, data.y.copy()), "ncf", 0
    )
    moved = ColocationData(data.device, data.kind, data.partner, np.array([0.5, 0.7000001]))
    assert len({key, fit_store.fit_key(moved, "ncf", 0), fit_store.fit_key(data, "svd", 0)}) == 3
    assert fit_store.fit_key(data, "ncf", 1) != key

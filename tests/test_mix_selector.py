"""The co-run-priced selector probe (``experiments/benchmarks/mix_selector.py``): its rate lies
between what a GPU was measured to deliver and its streams' capacity, the selector reads the
placer's calibrated model, and the script summarises every pair against it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from envs.simulator import Simulator
from experiments.benchmarks import mix_selector
from experiments.evaluation import load_entry
from rlsched.policies import registry
from rlsched.policies.registry import parse_scheduler
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed
from tests.conftest import drive_selector
from tests.test_evaluate import TINY


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    # Four streams per T4: a full GPU's predicted slowdown matters there.
    (tmp_path / "tiny.toml").write_text(TINY.replace("gpu_count = 2", "gpu_count = 2\nstreams_per_gpu = 4"))
    return tmp_path / "tiny.toml"


def _sim(path: Path) -> Simulator:
    sc = scenario_for_seed(load_entry(str(path), None), 10001)
    placer = parse_scheduler("mct+iawp-pass").placer
    return Simulator(sc, generate_tasks(sc, 10001), placer, seed=10001)


def test_rate_lies_between_measured_delivery_and_capacity(tiny: Path) -> None:
    view = _sim(tiny).view
    view.gpu_rate = view.gpu_rate * 0.1  # a lightly used GPU reads slow
    models = max(len(view.model_names), 1)
    cap = (view.speed_gpu * view.gpu_streams * view.gpu_valid).sum(axis=1)
    measured = (view.gpu_rate * view.gpu_valid).sum(axis=1)
    assert np.allclose(mix_selector.mix_rate(view, np.zeros(models)), cap)
    slowed = mix_selector.mix_rate(view, np.full(models, 0.5))
    many = (view.gpu_streams * view.gpu_valid).max(axis=1) > 1
    assert many.any()
    assert (slowed[many] < cap[many]).all() and (slowed >= measured - 1e-12).all()
    assert np.allclose(mix_selector.mix_rate(view, np.full(models, 1e6)), measured)


def test_selector_needs_the_placers_model_and_picks_feasible_nodes(
    tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What install() does, undone after the test (other tests in this process see the shipped table).
    monkeypatch.setitem(registry.SELECTORS, "mct-mix", lambda _o: mix_selector.MixSelector())
    monkeypatch.setitem(registry.PLACERS, "iawp-pass", mix_selector._iawp_pass_shared)
    sched = parse_scheduler("mct-mix+iawp-pass")
    assert sched.selector.placer is sched.placer  # type: ignore[attr-defined]
    _, sim, seen = drive_selector(tiny, sched)
    assert seen
    alone = mix_selector.MixSelector()
    mix_selector._PENDING.clear()
    with pytest.raises(RuntimeError, match="iawp-pass"):
        alone.select(seen[-1], sim.view, np.ones(sim.view.n_nodes, bool))


def test_the_script_summarises_each_pair_against_mix(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One job runs in this process and installs the probe's names: into copies of the tables,
    # so that later tests in this process see the shipped ones.
    monkeypatch.setattr(registry, "SELECTORS", dict(registry.SELECTORS))
    monkeypatch.setattr(registry, "PLACERS", dict(registry.PLACERS))
    out = tmp_path / "mix.json"
    mix_selector.main(["--scenarios", str(tiny.parent), "--seeds", "1", "--out", str(out)])
    data = json.loads(out.read_text())
    assert len(data["runs"]) == len(mix_selector.SELECTORS)
    keys = {k for k in data["summary"] if k.startswith("mix/")}
    assert keys == {f"mix/{s}+iawp-pass" for s in mix_selector.SELECTORS if s != "mct-mix"}
    assert all(v["geomean"] > 0 for k, v in data["summary"].items() if k in keys)
    assert "mct-mix" in registry.SELECTORS  # installed here (undone after the test)

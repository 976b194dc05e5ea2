"""The learned placer ``iawp-rl``: its starting point, its checkpoints, and its training."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from envs.simulator import Simulator
from experiments.cli import main
from experiments.evaluation import load_entry
from experiments.train_placer import PlacerTrainConfig, _Runner, ars_update
from models.checkpoint import CheckpointError, write_meta
from rlsched.policies.iawp import IawpPassPlacer
from rlsched.policies.iawp_rl import INITIAL, PARAM_NAMES, LearnedIawpPlacer, load_params, save_params
from rlsched.policies.registry import make_placer, make_selector
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed
from rlsched.scheduler import TwoStageScheduler
from tests.conftest import interrupt_rlsched

SMALL = "interference-saturated#250"


def _run(placer_name_or_obj: object, seed: int = 3) -> dict:
    base = scenario_for_seed(load_entry(SMALL, None), seed)
    placer = make_placer(placer_name_or_obj)  # type: ignore[arg-type]
    sim = Simulator(base, generate_tasks(base, seed), placer, seed=seed)
    m = sim.run(TwoStageScheduler(make_selector("mct"), placer))
    return {k: v for k, v in m.to_dict().items() if k not in ("wall_s", "decisions_per_s")}


def test_the_initial_parameters_are_iawp_pass_exactly() -> None:
    assert _run(LearnedIawpPlacer(INITIAL)) == _run(IawpPassPlacer())


def test_other_parameters_place_differently() -> None:
    never_hold = INITIAL.copy()
    never_hold[6] = -10.0  # the hold logit is always negative: iawp-pass without holding back
    assert _run(LearnedIawpPlacer(never_hold)) != _run(LearnedIawpPlacer(INITIAL))


def test_params_round_trip_and_tampering_is_refused(tmp_path: Path) -> None:
    w = INITIAL + 0.25
    save_params(tmp_path / "c", w, {"note": "test"})
    assert np.array_equal(load_params(tmp_path / "c"), w)
    assert np.array_equal(LearnedIawpPlacer(model_dir=tmp_path / "c").w, w)
    meta = json.loads((tmp_path / "c" / "meta.json").read_text())
    assert meta["params"] == list(PARAM_NAMES) and meta["feature_version"] == 1
    (tmp_path / "c" / "weights.pt").write_bytes(b"not weights")
    with pytest.raises(CheckpointError, match="sha256"):
        load_params(tmp_path / "c")


def test_a_checkpoint_with_other_parameters_is_refused(tmp_path: Path) -> None:
    save_params(tmp_path / "c", INITIAL, {})
    meta_path = tmp_path / "c" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["params"] = meta["params"][:-1]
    write_meta(meta_path.parent, meta)
    with pytest.raises(CheckpointError, match="params"):
        load_params(tmp_path / "c")
    with pytest.raises(ValueError, match="expected 10 values"):
        LearnedIawpPlacer(np.zeros(3))


def test_ars_moves_along_the_better_direction_and_not_on_a_flat_return() -> None:
    cfg = PlacerTrainConfig(directions=2, top=1, step_size=0.1)
    w = np.zeros(3)
    deltas = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    new = ars_update(w, deltas, np.array([2.0, 0.1]), np.array([1.0, 0.0]), cfg)
    assert new[0] > 0 and new[1] == 0 and new[2] == 0  # only the top direction, towards r+
    flat = ars_update(w, deltas, np.ones(2), np.ones(2), cfg)
    assert np.array_equal(flat, w)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("scenarios", " , ", "scenarios: at least one"),
        ("iterations", 0, "iterations: must be at least 1"),
        ("top", 9, "top: must be at most directions"),
        ("noise", float("nan"), "noise: must be a positive number"),
        ("eval_seeds", (20000,), "eval_seeds: must be non-empty validation seeds"),
    ],
)
def test_bad_settings_name_the_field(field: str, value: object, message: str) -> None:
    cfg = PlacerTrainConfig(**{field: value})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        cfg.check()


def test_train_stage_2_writes_a_placer_that_simulate_uses(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "placer"
    argv = ["train", "--stage", "2", "--scenario", "interference-saturated#120", "--iterations", "1"]
    assert main([*argv, "--jobs", "1", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "validation seeds 10001, 10002, 10003" in summary["seed_sets"]["validation"]
    history = json.loads((out / "history.json").read_text())
    assert [h["iteration"] for h in history] == [0, 1]
    # a new history from a checkpoint: not into the run it came from (it would be overwritten)
    assert main([*argv, "--jobs", "1", "--out", str(out), "--resume", str(out / "last")]) == 2
    err = capsys.readouterr().err
    assert "--out: value: expected a folder without an earlier run" in err and "go on with" not in err, err
    assert json.loads((out / "history.json").read_text()) == history
    assert summary["best_iteration"] in (0, 1)
    best = load_params(out / "best")
    assert np.array_equal(best, np.array(history[summary["best_iteration"]]["params"]))
    rc = main(["simulate", "--scheduler", "mct+iawp-rl", "--placer-model", str(out / "best"), "--json"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out)["scheduler"] == "mct+iawp-rl"
    # evaluate draws its search (it read a DQN run's keys from it: exit 1 after every run)
    ev = ["evaluate", "--scenarios", "paper#60", "--schedulers", "mct", "--seeds", "1", "--jobs", "1"]
    assert main([*ev, "--runs", f"pl={out}", "--out", str(tmp_path / "ev")]) == 0
    assert (tmp_path / "ev" / "img" / "placer-search-curves.png").is_file()
    assert "the learned placer's search (stage 2)" in (tmp_path / "ev" / "report.md").read_text()
    capsys.readouterr()
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "history.json").write_text('[{"episode": 1}]')
    assert main([*ev, "--runs", f"odd={tmp_path / 'odd'}", "--out", str(tmp_path / "ev2")]) == 2
    assert "--runs: odd: expected a training, fine-tuning or stage-2 run folder" in capsys.readouterr().err
    assert not (tmp_path / "ev2" / "runs.jsonl").exists()


def test_a_bad_placer_checkpoint_exits_2(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["simulate", "--scheduler", "mct+iawp-rl", "--placer-model", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"rlsched: error: {tmp_path / 'meta.json'}: <file>: expected a checkpoint's meta.json"
    )
    assert "not found" in err and err.strip().endswith("the checkpoint of --placer-model")


TINY = """name = "tiny"
seed = 0
[[cluster.nodes]]
name = "v100"
count = 2
cpu_cores = 8
host_mem_gib = 32
gpu_model = "V100M16"
gpu_count = 2
[workload]
tasks = 60
apps = { matmul = 1, fft = 1, kmeans = 1 }
input_mb = [20, 80]
[workload.arrival]
process = "poisson"
rate_per_min = 600
"""


def test_train_stage_both_trains_ldwp_then_the_placer_behind_it(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY)
    out = tmp_path / "both"
    argv = ["train", "--stage", "both", "--scenario", str(scenario), "--steps", "300", "--iterations", "1"]
    assert main([*argv, "--jobs", "1", "--out", str(out)]) == 0
    # What a researcher reads at the end: which network and which parameters best/ holds.
    said = capsys.readouterr().out
    ldwp = json.loads((out / "stage1" / "best" / "meta.json").read_text())
    assert f"LDWP: best/ is the network at step {ldwp['dqn_steps']:,} of 300," in said, said
    placer = json.loads((out / "stage2" / "best" / "meta.json").read_text())
    assert f"iawp-rl: best/ holds the parameters of iteration {placer['iteration']}\n" in said, said
    assert said.count("figures from validation seeds") == 2 and "{" not in said and "[" not in said, said
    meta = json.loads((out / "stage2" / "best" / "meta.json").read_text())
    assert meta["config"]["selector"] == "ldwp"
    assert meta["config"]["selector_model"] == str(out / "stage1" / "best")
    load_params(out / "stage2" / "best")
    # Resumed as its Ctrl-C line says: behind the same network, on the same cases (it went on
    # behind mct, on the default scenarios, and no flag could name the network).
    again = tmp_path / "again"
    argv = ["train", "--stage", "2", "--resume", str(out / "stage2" / "last"), "--iterations", "1"]
    assert main([*argv, "--jobs", "1", "--out", str(again)]) == 0
    config = json.loads((again / "best" / "meta.json").read_text())["config"]
    assert (config["selector"], config["selector_model"], config["scenarios"]) == (
        "ldwp",
        str(out / "stage1" / "best"),
        str(scenario),
    )


@pytest.mark.slow  # Ctrl-C during training stays tested in the default run by test_train.py (stage 1)
def test_ctrl_c_in_stage_2_exits_130_and_names_the_parameters_to_resume_from(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["train", "--stage", "2", "--scenario", "interference-saturated#150", "--iterations", "500"]
    # The start is validated and saved to last/ before the first iteration.
    rc, err = interrupt_rlsched([*args, "--out", str(out)], out / "last" / "meta.json", 2.0)
    assert rc == 130, err
    # It said only "--resume", and the same --out is refused (it holds a run).
    assert f"continue with --resume {out / 'last'} into another --out" in err and "Traceback" not in err
    load_params(out / "last")


@pytest.mark.parametrize(
    ("stage", "flag", "value"),
    [
        ("2", "--steps", "5"),
        ("2", "--no-double-q", None),
        ("2", "--objective", "latency"),
        ("1", "--iterations", "3"),
    ],
)
def test_a_flag_the_stage_ignores_is_named(
    tmp_path: Path, capsys, stage: str, flag: str, value: str | None
) -> None:  # type: ignore[no-untyped-def]
    extra = [flag] if value is None else [flag, value]
    argv = ["train", "--stage", stage, *extra, "--scenario", "no-such-scenario", "--out", str(tmp_path / "o")]
    assert main(argv) == 2  # the scenario is bad: nothing trains
    assert f"rlsched: warning: {flag} ignored with --stage {stage}" in capsys.readouterr().err


def _imported(name: str) -> bool:
    return name in sys.modules


def test_the_placer_trainers_workers_are_spawned_not_forked(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--stage both` trains LDWP (torch's thread pools) in the process that then starts the
    placer's workers: a fork of it can deadlock, so they are spawned. A forked worker would see a
    module only the parent imported."""
    monkeypatch.setitem(sys.modules, "rlsched_parent_only", types.ModuleType("rlsched_parent_only"))
    runner = _Runner(PlacerTrainConfig(jobs=1))
    try:
        assert runner.pool.submit(_imported, "rlsched_parent_only").result(timeout=120) is False
    finally:
        runner.close()

"""``auto``'s second decision: the run's features, keep-or-switch by nearest training runs, its file
beside the recogniser's, the switch in a real simulation, and a restart that restores it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from envs.simulator import Simulator
from experiments.evaluation import load_entry
from models.checkpoint import CheckpointError
from rlsched.policies import PolicyOptions, parse_scheduler
from rlsched.policies.auto import describe
from rlsched.policies.case_features import FEATURES
from rlsched.policies.recogniser import Recogniser
from rlsched.policies.registry import auto_second, restore_auto_choice
from rlsched.policies.revisit import REVISIT_FILE, Revisit, SecondChoice, load_revisit
from rlsched.policies.run_features import RUN_FEATURES, RunWatch, snapshot
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed
from rlsched.view import ClusterView

R = len(RUN_FEATURES)


def _view(small_scenario, node, tasks: list[int]) -> ClusterView:
    """Four alike one-GPU nodes of two streams each, with ``tasks`` committed to them."""
    nodes = tuple(node(f"n{i}", cores=4, mem_gib=8, gpus=("T4",), streams=2) for i in range(4))
    view = ClusterView.from_spec(small_scenario(nodes=nodes).cluster)
    view.tasks_on_node[:] = tasks
    return view


def test_run_features_measure_imbalance_not_just_load(small_scenario, node) -> None:
    """8 tasks on 8 streams: balanced, nothing stranded; piled on one node, 6 of the 8 streams'
    worth waits there while 6 streams idle elsewhere."""
    even = snapshot(_view(small_scenario, node, [2, 2, 2, 2]))
    piled = snapshot(_view(small_scenario, node, [8, 0, 0, 0]))
    assert even == pytest.approx((1.0, 0.0, 1.0, 0.0))
    assert piled[0] == pytest.approx(1.0)  # the same load
    assert piled[1] == pytest.approx(6 / 8) and piled[2] == pytest.approx(4.0) and piled[3] > 1
    assert snapshot(_view(small_scenario, node, [2, 2, 0, 0]))[1] == 0.0  # idle streams, nothing waits
    watch = RunWatch()
    for tasks in ([2, 2, 2, 2], [8, 0, 0, 0]):
        watch.observe(_view(small_scenario, node, tasks))
    x = watch.features(_view(small_scenario, node, [1, 1, 0, 0]), arrived=10)
    assert x[:4] == pytest.approx(np.mean([even, piled], axis=0))
    assert x[4] == pytest.approx(0.8)  # 2 of the 10 arrived are still in the system


def _revisit(running: list[str], gains: list[list[float]], rows: np.ndarray | None = None, **kw) -> Revisit:
    rows = np.zeros((len(running), R)) if rows is None else rows
    args = {"at": 60, "k": 2, "margin": 0.0, **kw}
    targets = ("mct+speedup", "round-robin+first-free")
    return Revisit(
        args["at"], targets, args["k"], args["margin"], np.zeros(R), np.ones(R), rows,
        tuple(running), np.log(np.asarray(gains)),
    )  # fmt: skip


def test_it_switches_on_the_gain_of_the_nearest_runs_of_the_same_pair() -> None:
    rows = np.zeros((4, R))
    rows[:, 1] = [0.0, 0.1, 5.0, 0.0]
    gains = [[1.0, 1.5], [1.0, 1.3], [1.0, 0.5], [1.0, 0.2]]
    r = _revisit(["mct+speedup", "mct+speedup", "mct+speedup", "ldwp+iawp"], gains, rows)
    c = r.decide(np.zeros(R), "mct+speedup")  # nearest of its pair: rows 0 and 1 (row 3 ran another)
    assert c.pair == "round-robin+first-free" and c.running == "mct+speedup"
    assert c.predicted["round-robin+first-free"] == pytest.approx(np.sqrt(1.5 * 1.3))
    assert r.with_choice_rule(2, 0.5).decide(np.zeros(R), "mct+speedup").pair == "mct+speedup"  # gain < 0.5
    far = np.zeros(R)
    far[1] = 5.0
    assert r.with_choice_rule(1, 0.0).decide(far, "mct+speedup").pair == "mct+speedup"  # row 2: a loss
    assert r.decide(np.zeros(R), "ldwp+iawp").pair == "ldwp+iawp"  # 1 row of that pair < k


def _recogniser(window: int = 20) -> Recogniser:
    rows = np.zeros((1, len(FEATURES)))
    return Recogniser(
        ("mct+speedup",), "mct+speedup", window, 1, 0.0, np.zeros(len(FEATURES)), np.ones(len(FEATURES)),
        rows, np.zeros((1, 1)), ("c0",),
    )  # fmt: skip


def test_a_second_decision_file_round_trips_and_a_modified_one_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "rec"
    _recogniser().save(folder)
    assert load_revisit(folder) is None  # a recogniser without one decides once
    r = _revisit(["mct+speedup", "mct+speedup"], [[1.0, 2.0], [1.0, 2.0]])
    r.save(folder)
    back = load_revisit(folder)
    assert back is not None and back.targets == r.targets and np.array_equal(back.gains, r.gains)
    assert back.decide(np.zeros(R), "mct+speedup") == r.decide(np.zeros(R), "mct+speedup")
    path = folder / REVISIT_FILE
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "margin": 9.0}))
    with pytest.raises(CheckpointError, match="sha256"):
        load_revisit(folder)
    path.unlink()
    with pytest.raises(CheckpointError, match="existing file"):
        load_revisit(folder)


def test_auto_switches_after_its_second_window_and_a_restart_restores_it(tmp_path: Path) -> None:
    """``auto`` runs its first choice from the 20th arrival, watches the run, and at the 60th
    switches to the pair its training runs say gains; the second decision survives a restart's
    restore, and without it the restored ``auto`` still decides a second time."""
    folder = tmp_path / "rec"
    _recogniser(window=20).save(folder)
    _revisit(["mct+speedup"] * 2, [[1.0, 2.0], [1.0, 2.0]], at=60).save(folder)
    sched = parse_scheduler("auto", PolicyOptions(recogniser_model=str(folder)))
    sc = scenario_for_seed(load_entry("paper#200", None), 20000)
    m = Simulator(sc, generate_tasks(sc, 20000), sched.placer, seed=20000).run(sched)
    board = sched.selector.board  # type: ignore[attr-defined]
    assert m.tasks_completed == 200
    assert board.choice.pair == "mct+speedup" and board.current == "round-robin+first-free"
    assert board.second is not None and board.watch.samples == 40  # arrivals 21..60
    state = describe(sched)
    assert state is not None and state["revisit_at"] == 60
    assert state["second"]["pair"] == "round-robin+first-free"

    saved, second = board.choice.to_dict(), auto_second(sched)
    again = parse_scheduler("auto", PolicyOptions(recogniser_model=str(folder)))
    assert restore_auto_choice(again, saved, second) == "round-robin+first-free"
    fresh = parse_scheduler("auto", PolicyOptions(recogniser_model=str(folder)))
    assert restore_auto_choice(fresh, saved) == "mct+speedup"
    fb = fresh.selector.board  # type: ignore[attr-defined]
    assert fb.second is None and fb.arrived == 20  # the second decision still to come, 40 arrivals on
    with pytest.raises(ValueError, match="running"):
        SecondChoice.from_dict({"pair": "x+y", "predicted": {}})


def test_fit_revisit_runs_the_switches_fits_and_chooses_k_on_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``rlsched fit-revisit`` runs each case with the first decision, keeps or switches at the
    40th arrival, fits from the measured gains and writes a folder ``auto`` loads; training runs
    on a validation seed are refused naming the flag."""
    from experiments.cli import main
    from rlsched.scenarios.writer import write_scenario

    for folder, entries in (("train", ("paper#80", "hetero-saturated#80")), ("val", ("transfer-4#80",))):
        (tmp_path / folder).mkdir()
        for e in entries:
            write_scenario(load_entry(e, None), tmp_path / folder / f"{e.partition('#')[0]}.toml")
    _recogniser(window=20).save(tmp_path / "rec")
    grid = tmp_path / "grid"
    grid.mkdir()
    pairs = ("mct+speedup", "round-robin+first-free")
    rows = [{"scenario": "val/transfer-4.toml", "scheduler": p, "seed": 10001, "status": "ok",
             "throughput": 1.0, "latency_mean_s": 1.0} for p in pairs]  # fmt: skip
    (grid / "results.json").write_text(json.dumps({"rows": rows}))
    out = tmp_path / "out"
    args = ["fit-revisit", "--recogniser", str(tmp_path / "rec"), "--cases", str(tmp_path / "train"),
            "--seeds", "5000", "--validation-cases", str(tmp_path / "val"), "--validation-seeds", "10001",
            "--validation-grid", str(grid), "--targets", "round-robin+first-free", "--at", "40",
            "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    text, err = capsys.readouterr()
    assert "training runs: 1/2\ntraining runs: 2/2\n" in err, err  # a line each when not a terminal
    assert text.startswith("fitted auto's second decision at arrival 40 from 2 training runs")
    assert f"rlsched simulate --scheduler auto --recogniser {out}" in text
    # --json, on the runs just written (read back, not run again)
    again = [a for a in args if a != str(out)][:-1]
    again += ["--train-rows", str(out / "train-runs.jsonl"), "--out", str(tmp_path / "again"), "--json"]
    assert main(again) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["training_runs"] == 2 and summary["at"] == 40
    model = load_revisit(out)
    assert model is not None and model.running == ("mct+speedup", "mct+speedup")
    runs = [json.loads(line) for line in (out / "train-runs.jsonl").read_text().splitlines()]
    want = [np.log(r["switch"]["round-robin+first-free"] / r["stay"]) for r in runs]
    assert model.gains[:, 0] == pytest.approx(want)  # measured: the switch ran
    scores = json.loads((out / "validation.json").read_text())["scores"]
    assert [s["k"] for s in scores] == [2] * 4  # every k above the 2 runs is k = 2: scored once
    sched = parse_scheduler("auto", PolicyOptions(recogniser_model=str(out)))
    assert sched.selector.board.revisit.at == 40  # type: ignore[attr-defined]
    bad = [*args[:-1], str(tmp_path / "bad")]
    bad[bad.index("--seeds") + 1] = "10001"
    assert main(bad) == 2
    assert "--seeds" in capsys.readouterr().err

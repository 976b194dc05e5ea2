"""The ``auto`` scheduler: case features, the recogniser's choice and file, the switch to the chosen
pair in a real simulation, and ``rlsched fit-recogniser`` on a grid."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from envs.simulator import Simulator
from experiments.cli import main
from experiments.evaluation import load_entry
from experiments.recogniser_fit import run_features
from models.checkpoint import CheckpointError, write_meta
from rlsched.policies import PolicyOptions, parse_scheduler
from rlsched.policies.auto import describe
from rlsched.policies.case_features import FEATURES, case_features
from rlsched.policies.recogniser import MODEL_FILE, Choice, Recogniser, load_recogniser
from rlsched.scenarios.loader import load_scenario
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed
from rlsched.view import ClusterView

F = len(FEATURES)


def _recogniser(
    candidates: tuple[str, ...], scores: list[list[float]], rows: np.ndarray | None = None, **kw: object
) -> Recogniser:
    rows = np.arange(len(scores) * F, dtype=float).reshape(len(scores), F) if rows is None else rows
    args = {"window": 20, "k": 1, "margin": 0.0, **kw}
    names = tuple(f"c{i}" for i in range(len(scores)))
    w, k, margin = args["window"], args["k"], args["margin"]
    log = np.log(np.asarray(scores))
    return Recogniser(
        candidates, candidates[0], w, k, margin, rows.mean(axis=0), np.ones(F), rows, log, names
    )  # type: ignore[arg-type]


def test_case_features_describe_the_fleet_and_the_arrivals() -> None:
    sc = scenario_for_seed(load_scenario("paper"), 20000)
    tasks = generate_tasks(sc, 20000)[:50]
    view = ClusterView.from_spec(sc.cluster)
    x = dict(zip(FEATURES, case_features(view, tasks), strict=True))
    assert x["log_nodes"] == pytest.approx(np.log10(len(sc.cluster.nodes)))
    assert 0 < x["gpu_load"] < 10 and x["gpu_models"] >= 2  # the TPDS platform: K80 and P4
    faster = [dataclasses.replace(t, arrival_s=t.arrival_s / 2) for t in tasks]
    y = dict(zip(FEATURES, case_features(view, faster), strict=True))
    assert y["log_arrivals_per_gpu"] == pytest.approx(x["log_arrivals_per_gpu"] + np.log10(2))
    assert y["gpu_load"] == pytest.approx(2 * x["gpu_load"])
    with pytest.raises(ValueError, match="at least 2 tasks"):
        case_features(view, tasks[:1])


def test_the_choice_averages_the_nearest_cases_and_keeps_the_default_within_the_margin() -> None:
    pairs = ("ldwp+iawp", "mct+speedup", "mlsm+speedup")
    scores = [[0.90, 1.0, 0.8], [0.95, 0.9, 1.0], [1.0, 0.5, 0.5]]
    rows = np.zeros((3, F))
    rows[:, 0] = [0.0, 1.0, 10.0]
    r = _recogniser(pairs, scores, rows, k=2)
    c = r.choose(np.zeros(F))  # nearest: rows 0 and 1; mean ratios 0.925 / 0.95 / 0.9 (geometric)
    assert c.pair == "mct+speedup" and c.neighbours == ("c0", "c1")
    assert c.predicted["mct+speedup"] == pytest.approx(np.sqrt(0.9))
    assert r.with_choice_rule(2, 0.05).choose(np.zeros(F)).pair == "ldwp+iawp"  # gain 0.027 < 0.05
    far = np.zeros(F)
    far[0] = 10.0
    assert r.with_choice_rule(1, 0.0).choose(far).pair == "ldwp+iawp"  # nearest: row 2


def test_a_recogniser_file_round_trips_and_a_modified_one_is_refused(tmp_path: Path) -> None:
    r = _recogniser(("ldwp+iawp", "mct+speedup"), [[1.0, 0.5], [0.5, 1.0]])
    r.save(tmp_path / "rec", {"grid": "x"})
    back = load_recogniser(tmp_path / "rec")
    assert back.candidates == r.candidates and np.array_equal(back.rows, r.rows)
    x = np.ones(F)
    assert back.choose(x) == r.choose(x)
    meta_path = tmp_path / "rec" / "meta.json"
    sealed = meta_path.read_text()
    meta_path.write_text(sealed.replace('"grid": "x"', '"grid": "y"'))  # its meta edited by hand
    with pytest.raises(CheckpointError, match=r"meta\.json: meta_sha256"):
        load_recogniser(tmp_path / "rec")
    meta_path.write_text(sealed)
    path = tmp_path / "rec" / MODEL_FILE
    data = json.loads(path.read_text())
    data["k"] = 2
    path.write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match="sha256"):
        load_recogniser(tmp_path / "rec")
    r.save(tmp_path / "old")
    meta_path = tmp_path / "old" / "meta.json"
    data = json.loads((tmp_path / "old" / MODEL_FILE).read_text())
    data["features"] = data["features"][:-1]
    (tmp_path / "old" / MODEL_FILE).write_text(json.dumps(data))
    meta = json.loads(meta_path.read_text())
    from models.checkpoint import sha256

    meta["files"][MODEL_FILE] = sha256(tmp_path / "old" / MODEL_FILE)
    write_meta(meta_path.parent, meta)
    with pytest.raises(CheckpointError, match="feature_version"):
        load_recogniser(tmp_path / "old")


def test_the_shipped_recogniser_loads_and_auto_builds_from_it() -> None:
    r = load_recogniser()
    assert r.default == "ldwp+iawp" and r.default in r.candidates and r.window == 50
    assert r.rows.shape == (len(r.row_cases), F) and np.isfinite(r.rows).all()
    sched = parse_scheduler("auto")
    assert set(sched.selector.board.selectors) == {c.partition("+")[0] for c in r.candidates}  # type: ignore[attr-defined]


def _run_auto(rec_dir: Path, entry: str, seed: int) -> tuple[object, object]:
    sched = parse_scheduler("auto", PolicyOptions(recogniser_model=str(rec_dir)))
    sc = scenario_for_seed(load_entry(entry, None), seed)
    tasks = generate_tasks(sc, seed)
    sim = Simulator(sc, tasks, sched.placer, seed=seed)
    return sim.run(sched), sched


def test_auto_switches_to_the_chosen_pair_after_its_window(tmp_path: Path) -> None:
    """Every training case says ``round-robin+first-free`` is best by far: after 20 tasks of its
    default, ``auto`` runs it; its choice was made on the same features the fit computes offline."""
    pairs = ("mct+speedup", "round-robin+first-free")
    _recogniser(pairs, [[0.5, 1.0], [0.5, 1.0]], window=20).save(tmp_path / "rec")
    m, sched = _run_auto(tmp_path / "rec", "paper#200", 20000)
    board = sched.selector.board  # type: ignore[attr-defined]
    assert m.tasks_completed == 200
    assert board.current == "round-robin+first-free" and board.choice is not None
    offline = run_features("paper#200", 20000, window=20)
    assert np.allclose(board.choice.features, offline)
    state = describe(sched)
    assert state is not None and state["running"] == "round-robin+first-free" and state["tasks_seen"] == 20


def test_evaluate_says_which_pair_auto_ran(tmp_path: Path) -> None:
    pairs = ("mct+speedup", "round-robin+first-free")
    _recogniser(pairs, [[0.5, 1.0], [0.5, 1.0]], window=20).save(tmp_path / "rec")
    out = tmp_path / "ev"
    args = ["evaluate", "--scenarios", "paper#60", "--schedulers", "auto,mct+speedup", "--seeds", "1"]
    assert main([*args, "--jobs", "1", "--recogniser", str(tmp_path / "rec"), "--out", str(out)]) == 0
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert {r["scheduler"]: r["chose"] for r in rows} == {"auto": "round-robin+first-free", "mct+speedup": ""}


def test_simulate_says_which_pair_auto_ran(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pairs = ("mct+speedup", "round-robin+first-free")
    _recogniser(pairs, [[0.5, 1.0], [0.5, 1.0]], window=20).save(tmp_path / "rec")
    args = [
        "simulate",
        "--scenario",
        "paper",
        "--scheduler",
        "auto",
        "--recogniser",
        str(tmp_path / "rec"),
    ]
    assert main(args) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[2].split(None, 1) == ["auto_chose", "round-robin+first-free (after 20 tasks on mct+speedup)"]
    assert main([*args, "--json"]) == 0
    auto = json.loads(capsys.readouterr().out)["auto"]
    assert auto["running"] == auto["choice"]["pair"] == "round-robin+first-free" and auto["window"] == 20
    assert main([*args[:4], "mct+speedup", "--json"]) == 0
    assert "auto" not in json.loads(capsys.readouterr().out)  # only an auto run says it


def test_auto_keeps_its_default_when_told_and_calibrates_its_interference_placers(tmp_path: Path) -> None:
    pairs = ("mct+iawp", "mct+iawp-pass", "mct+speedup")
    _recogniser(pairs, [[1.0, 0.9, 0.9]] * 2, window=20).save(tmp_path / "rec")
    alone = parse_scheduler("mct+iawp")
    sc = scenario_for_seed(load_entry("interference-saturated#300", None), 20000)
    tasks = generate_tasks(sc, 20000)
    m_alone = Simulator(sc, tasks, alone.placer, seed=20000).run(alone)
    m, sched = _run_auto(tmp_path / "rec", "interference-saturated#300", 20000)
    placers = sched.placer.board.placers  # type: ignore[attr-defined]
    assert placers["iawp"].predictor is not None and placers["iawp-pass"].predictor is not None
    assert sched.placer.predictor is placers["iawp"].predictor  # the service reads the primary's
    assert m.throughput == pytest.approx(m_alone.throughput, rel=1e-9)


def grid_folder(path: Path, entries: list[str], seeds: list[int], best: dict[str, str]) -> Path:
    """An ``rlsched evaluate`` folder of four pairs on ``entries``: ``best[entry]`` 10 tasks/s there, the
    other two 8, ``random+speedup`` 1 (other test modules build their grids with it)."""
    pairs = ["ldwp+iawp", "mct+speedup", "mlsm+speedup", "random+speedup"]
    rows = []
    for e in entries:
        for p in pairs:
            for s in seeds:
                thr = 10.0 if p == best[e] else 8.0 if p != "random+speedup" else 1.0
                rows.append({"scenario": e, "scheduler": p, "seed": s, "status": "ok", "throughput": thr,
                             "latency_mean_s": 1.0})  # fmt: skip
    path.mkdir(parents=True)
    (path / "results.json").write_text(json.dumps({"rows": rows}))
    return path


def test_fit_recogniser_chooses_candidates_and_k_by_their_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    train = ["paper#100", "transfer-4#100", "hetero-saturated#100", "dynamic#100"]
    best = dict.fromkeys(train, "mct+speedup") | {"hetero-saturated#100": "mlsm+speedup"}
    g = grid_folder(tmp_path / "train", train, [5000, 5001], best)
    v = grid_folder(tmp_path / "val", ["transfer-32#100"], [10001], {"transfer-32#100": "mct+speedup"})
    out = tmp_path / "rec"
    argv = [
        "fit-recogniser",
        "--grid",
        str(g),
        "--validation-grid",
        str(v),
        "--out",
        str(out),
        "--window",
        "20",
    ]
    code = main([*argv, "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # mct+speedup is within 0.99x of the best on 3 cases: a candidate; mlsm+speedup on 1 only.
    assert summary["candidates"] == ["ldwp+iawp", "mct+speedup"]
    rec = load_recogniser(out)
    table = json.loads((out / "validation.json").read_text())
    top = max(s["geo_mean"] for s in table["scores"])
    assert top == pytest.approx(1.0)  # mct+speedup is the best heuristic of the validation case
    assert (rec.k, rec.margin) == (8, 0.05)  # ties go to the largest k (8 rows), then margin
    rules = [(s["k"], s["margin"]) for s in table["scores"]]
    assert len(rules) == len(set(rules)) and max(k for k, _ in rules) == 8  # each k above 8 was 8
    assert "family (left out)" not in capsys.readouterr().err  # no --families-out: no table


def test_grids_repeated_are_read_together_as_one_grid_of_all_their_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``--grid A --grid B`` (the same cases at more seeds) fits the recogniser one grid of both
    would: the same file, byte for byte; a missing one is refused naming the flag."""
    train = ["paper#100", "transfer-4#100", "hetero-saturated#100", "dynamic#100"]
    best = dict.fromkeys(train, "mct+speedup") | {"hetero-saturated#100": "mlsm+speedup"}
    both = grid_folder(tmp_path / "both", train, [5000, 5001], best)
    first = grid_folder(tmp_path / "first", train, [5000], best)
    second = grid_folder(tmp_path / "second", train, [5001], best)
    common = ["--window", "20", "--k", "4"]
    assert main(["fit-recogniser", "--grid", str(both), "--out", str(tmp_path / "a"), *common]) == 0
    said = capsys.readouterr().out.splitlines()  # what was fitted, and how to use it
    assert said[0].startswith(f"fit-recogniser: wrote {tmp_path / 'a'} in ") and said[0].endswith(
        "k=4, margin 0.0, a window of 20 tasks on ldwp+iawp, 8 training runs"
    ), said
    assert said[1] == "  candidates: ldwp+iawp, mct+speedup", said
    assert said[-1].startswith(
        f"use it with: rlsched simulate --scheduler auto --recogniser {tmp_path / 'a'} "
    )
    split = ["--grid", str(first), "--grid", str(second)]
    assert main(["fit-recogniser", *split, "--out", str(tmp_path / "b"), *common]) == 0
    a, b = (json.loads((tmp_path / d / "recogniser.json").read_text()) for d in "ab")
    assert a == b and len(b["rows"]) == 8  # four cases, two seeds each
    assert json.loads((tmp_path / "b" / "meta.json").read_text())["grid"] == [str(first), str(second)]
    capsys.readouterr()
    missing = [
        "fit-recogniser",
        "--grid",
        str(first),
        "--grid",
        str(tmp_path / "nope"),
        "--out",
        str(tmp_path / "c"),
    ]
    assert main(missing) == 2
    assert "--grid" in capsys.readouterr().err


def test_the_gain_rule_admits_a_pair_that_rescues_one_case(tmp_path: Path) -> None:
    from experiments.recogniser_fit import candidates_by, read_grid

    train = ["paper#100", "transfer-4#100", "hetero-saturated#100", "dynamic#100"]
    best = dict.fromkeys(train, "mct+speedup") | {"hetero-saturated#100": "mlsm+speedup"}
    grid = read_grid(grid_folder(tmp_path / "train", train, [5000, 5001], best))
    assert candidates_by("count", grid) == ["ldwp+iawp", "mct+speedup"]
    # mlsm+speedup is best on one case only, where nothing else comes within 0.8x: it joins
    assert candidates_by("gain", grid) == ["ldwp+iawp", "mct+speedup", "mlsm+speedup"]


def test_feature_selection_keeps_the_feature_that_tells_the_cases_apart(tmp_path: Path) -> None:
    """Feature 3 says which pair wins; the others are noise that hides it from the full distance."""
    from experiments.recogniser_fit import leave_one_case_out, select_features

    rng = np.random.default_rng(0)
    n = 40
    rows = rng.normal(size=(n, F)) * 5.0
    rows[:, 3] = np.repeat([0.0, 1.0], n // 2)
    scores = np.where(rows[:, 3:4] > 0.5, [[0.5, 1.0]], [[1.0, 0.5]])
    names = tuple(f"c{i // 2}" for i in range(n))  # two rows per case
    r = Recogniser(
        ("a+x", "b+y"), "a+x", 20, 10, 0.0, rows.mean(axis=0), rows.std(axis=0), rows, np.log(scores), names
    )
    weights, steps = select_features(r)
    assert steps[0][0] == "none" and steps[1][0] == FEATURES[3]
    assert weights[3] == 1.0 and weights.sum() < F
    assert leave_one_case_out(r, weights, 10, 0.05) == pytest.approx(1.0)
    assert leave_one_case_out(r, np.ones(F), 10, 0.05) < 0.95
    picked = r.with_weights(weights)
    assert picked.used_features[0] == FEATURES[3]
    back = load_recogniser(picked.save(tmp_path / "rec"))
    assert np.array_equal(back.weights, weights)  # the weights are part of the file
    x = rows[0].copy()
    x[3] = 1.0
    assert back.choose(x).pair == "b+y"


def test_fit_recogniser_refuses_grids_on_the_wrong_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    best = {"paper#100": "mct+speedup"}
    on_test = grid_folder(tmp_path / "test", ["paper#100"], [20000], best)
    on_train = grid_folder(tmp_path / "train", ["paper#100"], [5000], best)
    assert main(["fit-recogniser", "--grid", str(on_test), "--out", str(tmp_path / "a")]) == 2
    assert "--grid: seed: expected runs on training seeds only, got 20000" in capsys.readouterr().err
    args = [
        "fit-recogniser",
        "--grid",
        str(on_train),
        "--validation-grid",
        str(on_train),
        "--out",
        str(tmp_path / "b"),
    ]
    assert main(args) == 2
    assert "--validation-grid: seed: expected runs on validation seeds only" in capsys.readouterr().err


def test_a_choice_round_trips_through_the_service_state(tmp_path: Path) -> None:
    """A service restart restores auto's decision from ``current.json``; a mangled one is refused
    naming the key (the service will not start on a state it cannot read)."""
    from runtime.service.learned_state import Learned, LearnedState

    pairs = ("ldwp+iawp", "mct+speedup", "mlsm+speedup")
    c = _recogniser(pairs, [[0.9, 1.0, 0.8]]).choose(np.zeros(F))
    state = LearnedState(tmp_path / "state")
    state.save(Learned(auto={"recogniser_sha256": "abc", "choice": c.to_dict()}))
    saved = LearnedState(tmp_path / "state").load()
    assert saved is not None and saved.auto is not None and saved.auto["recogniser_sha256"] == "abc"
    back = Choice.from_dict(saved.auto["choice"])
    assert back.pair == c.pair == "mct+speedup" and back.neighbours == c.neighbours
    assert back.features == pytest.approx(c.features, abs=1e-4)
    with pytest.raises(ValueError, match="pair"):
        Choice.from_dict({"predicted": {}})
    doc = json.loads((tmp_path / "state" / "current.json").read_text())
    doc["auto"] = "mct+speedup"
    (tmp_path / "state" / "current.json").write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match="auto"):
        LearnedState(tmp_path / "state").load()

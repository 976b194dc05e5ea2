"""The scenario generator (``rlsched scenarios generate``): every family writes scenarios that load
back and run, at the offered load aimed at; seed sets and test-only families are enforced; the
index round-trips and refuses what breaks its rules; the CLI lists a generated set."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from experiments.bound_cache import own_bound
from experiments.cli import main
from experiments.scenario_gen.families import FAMILIES, TEST_ONLY
from experiments.scenario_gen.generate import generate_set, plan
from experiments.scenario_gen.index import INDEX_NAME, CaseIndex, check_use, read_index, write_index
from experiments.simulate import simulate
from rlsched.errors import InputError
from rlsched.scenarios.loader import load_scenario
from rlsched.seeds import TEST
from tests.conftest import interrupt_rlsched

#: Tasks a test runs of each case (the cases themselves hold hundreds).
FEW_TASKS = 25


@pytest.fixture(scope="module")
def one_of_each(tmp_path_factory: pytest.TempPathFactory) -> CaseIndex:
    """One case of every family, on test seeds (round-robin over all families)."""
    out = tmp_path_factory.mktemp("set")
    return generate_set(out, len(FAMILIES), TEST.start, None, "rlsched scenarios generate (test)")


def test_there_are_test_only_families_and_a_set_takes_each_family_in_turn(one_of_each: CaseIndex) -> None:
    assert len(TEST_ONLY) >= 2
    assert [c.family for c in one_of_each.cases] == list(FAMILIES)
    assert [c.seed for c in one_of_each.cases] == list(range(TEST.start, TEST.start + len(FAMILIES)))
    assert {c.family for c in one_of_each.cases if c.test_only} == TEST_ONLY


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_family_loads_back_and_runs(one_of_each: CaseIndex, family: str) -> None:
    case = next(c for c in one_of_each.cases if c.family == family)
    sc = load_scenario(str(one_of_each.path(case)))
    assert (sc.seed, len(sc.cluster.nodes), sc.workload.tasks) == (case.seed, case.nodes, case.tasks)
    few = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, tasks=FEW_TASKS))
    m = simulate(few, "mct+speedup", case.seed)
    assert m.tasks_total == FEW_TASKS and m.tasks_completed > 0


def test_the_offered_load_lands_on_its_target(one_of_each: CaseIndex) -> None:
    for c in one_of_each.cases:
        assert abs(c.offered_load / c.target_load - 1.0) <= 0.1, c
        assert 0.3 <= c.target_load <= 2.0
    # What the index says is what the file gives (the bound of `rlsched scenarios`).
    for c in one_of_each.cases[:2]:
        b = own_bound(load_scenario(str(one_of_each.path(c))))
        assert b["offered_load"] == pytest.approx(c.offered_load, rel=1e-9)


def test_files_name_shipped_data_through_the_variable_and_move_with_the_set(
    one_of_each: CaseIndex, tmp_path: Path
) -> None:
    texts = [p.read_text() for p in one_of_each.paths()]
    assert any("${RLSCHED_DATA}/" in t for t in texts)
    assert not any(str(Path(__file__).resolve().parents[1] / "rlsched" / "data") in t for t in texts)
    moved = tmp_path / "moved"
    shutil.copytree(one_of_each.folder, moved)
    again = read_index(moved)
    for p in again.paths():
        assert load_scenario(str(p)).path == str(p.resolve())


def test_the_same_seed_and_family_write_the_same_case(tmp_path: Path) -> None:
    a = generate_set(tmp_path / "a", 1, 20_500, "generations", "x")
    b = generate_set(tmp_path / "b", 1, 20_500, "generations", "y")
    assert a.paths()[0].read_text() == b.paths()[0].read_text()
    assert a.cases == b.cases


def test_seed_sets_and_test_only_families_are_enforced_naming_the_flag() -> None:
    with pytest.raises(InputError, match=r"^--seed: .*10000, a seed of the validation set") as e:
        plan(2, 9_999, None)
    assert e.value.source == "--seed"
    # Past numpy's seed range the message names that rule (it named the set "30000 and up").
    with pytest.raises(InputError, match=r"^--seed: .*stay at most 4,294,967,295 \(numpy's seed range\)"):
        plan(1, 4_294_967_296, None)
    for seed in (5, 10_005):  # a training and a validation seed
        for family in TEST_ONLY:
            with pytest.raises(InputError, match=rf"^--family: .*{family} is held out") as e:
                plan(1, seed, family)
            assert e.value.source == "--family"
    with pytest.raises(InputError, match=r"^--family: value: expected a family \(generations"):
        plan(1, 0, "nope")
    # Without --family, training and validation sets leave the held-out families out.
    assert not {f.name for _, f in plan(20, 0, None)} & TEST_ONLY
    assert not {f.name for _, f in plan(20, 10_000, None)} & TEST_ONLY
    assert {f.name for _, f in plan(20, 20_000, None)} == set(FAMILIES)


def test_a_held_out_family_on_training_seeds_exits_2_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    family = sorted(TEST_ONLY)[0]
    out = tmp_path / "refused"
    rc = main(["scenarios", "generate", "--family", family, "--count", "1", "--seed", "3", "--out", str(out)])
    assert rc == 2
    assert "rlsched: error: --family:" in capsys.readouterr().err
    assert not out.exists()  # the folder made for --out is removed again


def test_the_index_round_trips(one_of_each: CaseIndex, tmp_path: Path) -> None:
    again = read_index(one_of_each.folder / INDEX_NAME)
    assert again == one_of_each
    written = json.loads((one_of_each.folder / INDEX_NAME).read_text())["cases"]
    assert [dataclasses.asdict(c) for c in again.cases] == written
    assert again.command == "rlsched scenarios generate (test)" and again.generator_version >= 1
    shutil.copytree(one_of_each.folder, tmp_path / "copy")
    write_index(tmp_path / "copy", one_of_each.cases, 7, "again")
    copy = read_index(tmp_path / "copy")
    assert (copy.cases, copy.generator_version, copy.command) == (one_of_each.cases, 7, "again")
    assert one_of_each.in_set("test") == one_of_each.cases and one_of_each.in_set("training") == ()


def _broken(index: CaseIndex, tmp_path: Path, edit: Callable[[dict[str, Any]], object]) -> Path:
    folder = tmp_path / "broken"
    shutil.copytree(index.folder, folder)
    doc = json.loads((folder / INDEX_NAME).read_text())
    edit(doc)
    (folder / INDEX_NAME).write_text(json.dumps(doc))
    return folder


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d["cases"][0].update(seed_set="training"), "cases[0].seed_set"),
        (lambda d: d["cases"][5].update(test_only=False), "cases[5].test_only"),
        (lambda d: d["cases"][5].update(seed=5, seed_set="training"), "cases[5].seed"),
        (lambda d: d["cases"][1].update(file="nowhere.toml"), "cases[1].file"),
        (lambda d: d["cases"][2].update(offered_load=-1), "cases[2].offered_load"),
        (lambda d: d["cases"][2].update(regime="busy"), "cases[2].regime"),
        (lambda d: d["cases"][3].update(seed=d["cases"][2]["seed"]), "cases[3].seed"),
        (lambda d: d.update(format_version=99), "format_version"),
        (lambda d: d.update(cases=[]), "cases"),
    ],
)
def test_a_bad_index_is_refused_naming_file_and_field(
    one_of_each: CaseIndex, tmp_path: Path, edit: Callable[[dict[str, Any]], object], field: str
) -> None:
    folder = _broken(one_of_each, tmp_path, edit)
    with pytest.raises(InputError) as e:
        read_index(folder)
    assert (e.value.source, e.value.field) == (str(folder / INDEX_NAME), field)


def test_an_unreadable_index_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="<file>: expected the index"):
        read_index(tmp_path)
    (tmp_path / INDEX_NAME).write_text("{not json")
    with pytest.raises(InputError, match="<syntax>"):
        read_index(tmp_path)


def test_check_use_keeps_test_cases_out_of_training_and_validation(one_of_each: CaseIndex) -> None:
    check_use(one_of_each, "test", "--scenarios")
    for use in ("training", "validation"):
        with pytest.raises(InputError, match=r"^--scenario: value: expected a set for") as e:
            check_use(one_of_each, use, "--scenario")
        assert e.value.source == "--scenario"


def test_cli_generates_and_lists_a_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gen"
    argv = [
        "scenarios",
        "generate",
        "--family",
        "classes",
        "--count",
        "2",
        "--seed",
        "10010",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    index = read_index(out)
    assert [c.seed_set for c in index.cases] == ["validation"] * 2
    assert index.command.startswith("rlsched scenarios generate --family classes")
    assert "2 cases (validation seeds" in capsys.readouterr().out
    assert main(["scenarios", "--generated", str(out)]) == 0
    table = capsys.readouterr().out
    assert "family" in table and "seed set" in table
    assert "test-only family" not in table  # no family of the set is marked: no footnote
    for c in index.cases:
        row = next(line for line in table.splitlines() if line.startswith(Path(c.file).stem))
        assert "classes" in row and "validation" in row and c.regime in row
        assert f"{c.offered_load:.2f}" in row
    # A second run into the same folder would mix two sets: refused.
    assert main(argv) == 2
    assert "--out: value: expected a new or empty folder" in capsys.readouterr().err


def test_an_interrupted_generation_leaves_no_half_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C half-way: the folder is as it was (a half set would be refused by the next run, or
    evaluated as if it were whole); a set killed outright is refused saying it is unfinished."""
    out = tmp_path / "set"
    out.mkdir()
    (out / "notes.txt").write_text("mine")  # not the generator's: it stays
    argv = ["scenarios", "generate", "--count", "40", "--seed", "0", "--out", str(out)]
    rc, err = interrupt_rlsched(argv, lambda: any(out.glob("alibaba-pods-*.toml")), 0.5)
    assert rc == 130, err
    assert sorted(p.name for p in out.rglob("*")) == ["notes.txt"]
    assert main([*argv[:3], "1", *argv[4:]]) == 0  # the same folder takes the set
    (out / INDEX_NAME).unlink()  # as a kill -9 before the index would leave it
    capsys.readouterr()
    assert main([*argv[:3], "1", *argv[4:]]) == 2
    err = capsys.readouterr().err
    assert "it holds scenario files but no cases.json: an unfinished set?" in err, err


def test_a_folder_whose_data_folder_holds_files_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cases write their pod lists and arrivals under ``data/``: a user's file there would be
    overwritten, or removed with an interrupted set. Refused, and left as it was."""
    mine = tmp_path / "set" / "data" / "pods-0.csv"
    mine.parent.mkdir(parents=True)
    mine.write_text("mine")
    argv = ["scenarios", "generate", "--count", "1", "--seed", "0", "--out", str(tmp_path / "set")]
    assert main(argv) == 2
    assert "its data/ folder holds files, where a set's cases write theirs" in capsys.readouterr().err
    assert mine.read_text() == "mine" and sorted(p.name for p in (tmp_path / "set").rglob("*")) == [
        "data",
        "pods-0.csv",
    ]


def test_a_commands_own_flag_is_refused_with_its_action(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as e:
        main(
            [
                "scenarios",
                "--generated",
                str(tmp_path),
                "generate",
                "--count",
                "1",
                "--seed",
                "1",
                "--out",
                "x",
            ]
        )
    assert e.value.code == 2


@pytest.mark.slow
def test_a_generated_case_runs_in_simulate_and_evaluate(one_of_each: CaseIndex, tmp_path: Path) -> None:
    files = [str(p) for p in one_of_each.paths()[:2]]
    assert main(["simulate", "--scenario", files[0], "--scheduler", "mct", "--json"]) == 0
    entries = ",".join(f"{f}#{FEW_TASKS}" for f in files)
    out = tmp_path / "report"
    assert (
        main(["evaluate", "--scenarios", entries, "--schedulers", "mct", "--seeds", "1", "--out", str(out)])
        == 0
    )
    assert (out / "report.md").is_file()


def test_one_file_of_a_test_set_is_refused_for_training_as_its_folder_is(
    one_of_each: CaseIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the folder was refused: each file of it trained LDWP, the placer and a fine-tune
    (exit 0), and chose a network as a validation scenario, with summaries saying "not test
    figures"; a case copied out of its set too."""
    from experiments.case_folders import check_file_use

    case = str(one_of_each.path(one_of_each.cases[0]))
    out = str(tmp_path / "out")
    refused = [
        ["train", "--scenario", f"{case}#60", "--steps", "100", "--out", out],
        ["train", "--scenario", "paper#60", "--validation-scenario", case, "--steps", "100", "--out", out],
        ["train", "--stage", "2", "--scenario", f"{case}#60", "--iterations", "1", "--out", out],
        ["finetune", "--from", "shipped", "--scenario", f"{case}#60", "--steps", "100", "--out", out],
    ]
    for args in refused:
        assert main(args) == 2, args
        assert "is a test seed" in capsys.readouterr().err, args
    copied = tmp_path / "mine.toml"
    shutil.copy(case, copied)
    with pytest.raises(InputError, match=r"^--scenario: value: expected a scenario for training, not a test"):
        check_file_use(f"{copied}~0.5", "training", "--scenario")
    check_file_use(case, "test", "--scenarios")  # evaluate's use
    check_file_use("paper#60", "training", "--scenario")  # a built-in: no file


def test_stage_2_trains_on_a_folder_of_generated_cases(tmp_path: Path) -> None:
    """``--stage 2`` refused a folder (after ``--stage both``'s stage 1 had trained in full)."""
    folder = tmp_path / "gen-train"
    generate = ["scenarios", "generate", "--family", "churn", "--count", "1", "--seed", "0", "--out"]
    assert main([*generate, str(folder)]) == 0
    out = tmp_path / "s2"
    args = ["train", "--stage", "2", "--scenario", f"{folder}#40", "--iterations", "1", "--jobs", "1"]
    assert main([*args, "--out", str(out)]) == 0
    scenarios = json.loads((out / "best" / "meta.json").read_text())["config"]["scenarios"]
    assert scenarios == f"{folder / 'churn-0.toml'}#40"

"""The report's "Against the best heuristic pair": ratios, the best pair, the tied subset and the
worst cases are computed right, and ``rlsched evaluate`` over a folder of cases writes the section."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.case_folders import CaseInfo, case_info, expand_folders, split_suffix
from experiments.report_generalisation import (
    PairMean,
    applies,
    best_heuristic,
    by_learned,
    case_ratios,
    generalisation_blocks,
    latency_summary,
    throughput_summary,
    worst_cases,
)
from rlsched.errors import InputError
from rlsched.policies.registry import is_learned_spec
from tests.test_evaluate import TINY


def result_row(
    sc: str, pair: str, thr: float | None, lat: float | None = 10.0, seed: int = 1, **kw: object
) -> dict:
    """One row of an evaluation's results.json (the report tests build grids of them)."""
    return {
        "scenario": sc,
        "scheduler": pair,
        "seed": seed,
        "status": "ok" if thr is not None else "failed",
        "throughput": thr,
        "latency_mean_s": lat,
        "clairvoyant": False,
        **kw,
    }


def test_learned_pairs_are_the_ones_with_a_trained_network() -> None:
    assert is_learned_spec("ldwp") and is_learned_spec("ldwp+iawp") and is_learned_spec("mct+iawp-rl")
    assert not is_learned_spec("mct+iawp") and not is_learned_spec("oracle+speedup")
    rows = [result_row("a", "oracle+speedup", 2.0, clairvoyant=True), result_row("a", "ldwp+speedup", 1.0)]
    assert not applies(rows)  # a clairvoyant reference is no heuristic
    assert applies([*rows, result_row("a", "mct+speedup", 1.0)])


def test_best_heuristic_is_the_highest_throughput_and_ties_go_to_lower_latency() -> None:
    means = {
        "mct+speedup": PairMean(1.000, 20.0),
        "mct-mem+speedup": PairMean(0.995, 12.0),  # within 1 % of the top, lower latency: best
        "mct+iawp-pass": PairMean(0.985, 5.0),  # 1.5 % behind: not tied, whatever its latency
        "ldwp+speedup": PairMean(2.0, 1.0),  # learned: never the reference
        "random+speedup": PairMean(None, None),  # a failed run: not a candidate
    }
    heur = {"mct+speedup", "mct-mem+speedup", "mct+iawp-pass", "random+speedup"}
    assert best_heuristic(means, heur) == "mct-mem+speedup"
    means["mct-mem+speedup"] = PairMean(0.989, 12.0)  # now 1.1 % behind
    assert best_heuristic(means, heur) == "mct+speedup"
    assert best_heuristic({"random+speedup": PairMean(None, None)}, heur) is None


def _cases() -> list[dict]:
    rows = []
    # Case a: learned 0.95 of the best (mct+speedup 2.0; mct-mem 1.0).
    for seed, (mine, h1, h2) in enumerate([(1.8, 1.9, 1.0), (2.0, 2.1, 1.0)]):
        rows += [result_row("gen/a.toml", "ldwp+speedup", mine, seed=seed)]
        rows += [
            result_row("gen/a.toml", "mct+speedup", h1, seed=seed),
            result_row("gen/a.toml", "mct-mem+speedup", h2, seed=seed),
        ]
    # Case b: tie (1.005x); latency 1.2x of the best's.
    rows += [
        result_row("gen/b.toml", "ldwp+speedup", 1.005, 12.0),
        result_row("gen/b.toml", "mct+speedup", 1.0, 10.0),
    ]
    rows += [result_row("gen/b.toml", "mct-mem+speedup", 0.5, 1.0)]
    # Case c: ahead by 10 % (no tie: no latency ratio).
    rows += [
        result_row("c", "ldwp+speedup", 1.1, 50.0),
        result_row("c", "mct+speedup", 1.0),
        result_row("c", "mct-mem+speedup", 0.9),
    ]
    # Case d: tie at exactly 0.99x, latency 1.0x.
    rows += [
        result_row("d", "ldwp+speedup", 0.99, 10.0),
        result_row("d", "mct+speedup", 1.0),
        result_row("d", "mct-mem+speedup", 0.2),
    ]
    # Case e: the learned pair fails one seed; ties are irrelevant then.
    rows += [
        result_row("e", "ldwp+speedup", 1.0, seed=1),
        result_row("e", "ldwp+speedup", None, None, seed=2),
    ]
    rows += [result_row("e", "mct+speedup", 1.0, seed=1), result_row("e", "mct+speedup", 1.0, seed=2)]
    return rows


def test_ratios_tied_subset_shares_and_worst_cases() -> None:
    info = {
        "gen/a.toml": CaseInfo(family="fleet", seed_set="test"),
        "gen/b.toml": CaseInfo(family="mix", seed_set="test"),
    }
    ratios = case_ratios(_cases(), info)
    by_case = {c.scenario: c for c in ratios}
    a = by_case["gen/a.toml"]
    assert a.best_heuristic == "mct+speedup" and a.throughput_ratio == pytest.approx(1.9 / 2.0)
    assert not a.ties and a.latency_ratio is None and (a.family, a.seed_set) == ("fleet", "test")
    assert by_case["gen/b.toml"].ties and by_case["gen/b.toml"].latency_ratio == pytest.approx(1.2)
    assert by_case["c"].throughput_ratio == pytest.approx(1.1) and not by_case["c"].ties
    assert by_case["d"].ties and by_case["d"].latency_ratio == pytest.approx(1.0)
    assert by_case["e"].throughput_ratio is None and by_case["e"].best_heuristic == "mct+speedup"

    thr = throughput_summary(ratios)
    assert (thr.cases, thr.failed) == (5, 1)
    assert thr.ratios[0] == pytest.approx(0.95) and thr.median() == pytest.approx(0.9975)
    assert thr.share(at_least=0.99) == pytest.approx(3 / 5)  # b, c, d (0.99 counts); e failed
    assert thr.share(at_least=0.97) == pytest.approx(3 / 5)
    lat = latency_summary(ratios)
    assert (lat.cases, lat.ratios) == (2, pytest.approx((1.0, 1.2)))
    assert lat.share(at_most=1.05) == pytest.approx(1 / 2)

    worst = worst_cases(ratios, n=3)
    assert [c.scenario for c in worst] == ["e", "gen/a.toml", "d"]  # the failed case first
    assert [c.best_heuristic for c in worst] == ["mct+speedup"] * 3


def test_each_learned_pair_is_judged_on_its_own() -> None:
    rows = [*_cases(), *(result_row(r["scenario"], "mct+iawp-rl", 0.5, seed=r["seed"]) for r in _cases()[:1])]
    groups = by_learned(case_ratios(rows))
    assert list(groups) == ["ldwp+speedup", "mct+iawp-rl"]
    rl = {c.scenario: c for c in groups["mct+iawp-rl"]}
    assert rl["gen/a.toml"].throughput_ratio is None  # ran on one seed of two: no mean
    assert rl["c"].throughput is None  # never ran there


def test_folders_expand_to_their_sorted_files_with_the_suffix(tmp_path: Path) -> None:
    for name in ("b.toml", "a.toml", "notes.txt"):
        (tmp_path / name).write_text("")
    assert split_suffix(f"{tmp_path}/#40") == (f"{tmp_path}/", "#40")
    assert split_suffix("paper@30#5") == ("paper", "@30#5")
    got = expand_folders([f"{tmp_path}#40", "paper"])
    assert got == [f"{tmp_path}/a.toml#40", f"{tmp_path}/b.toml#40", "paper"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="scenario files"):
        expand_folders([str(tmp_path / "empty")])


def _index(folder: Path, files: list[str]) -> None:
    """A generated set's index for ``files`` (the generator's own writer)."""
    from experiments.scenario_gen.index import Case, write_index

    cases = [
        Case(
            f,
            "tiny-fleet",
            20_000 + i,
            "test",
            True,
            1.0,
            1.0,
            "has headroom",
            "workload.arrival.rate_per_min",
            3,
            40,
        )
        for i, f in enumerate(files)
    ]
    write_index(folder, cases, 1, "test")


def test_evaluate_over_a_generated_folder_writes_the_section(tmp_path: Path) -> None:
    from experiments.cli import main

    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "one.toml").write_text(TINY)
    (cases / "two.toml").write_text(TINY.replace("rate_per_min = 600", "rate_per_min = 60"))
    _index(cases, ["one.toml", "two.toml"])
    out = tmp_path / "out"
    args = [
        "evaluate",
        "--scenarios",
        f"{cases}/#20",
        "--schedulers",
        "ldwp+speedup,mct+speedup,mct-mem+speedup",
    ]
    assert main([*args, "--seeds", "1", "--jobs", "1", "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "## Against the best heuristic pair" in md and "| one.toml#20 | tiny-fleet | test |" in md
    assert "test (2); 2 of 2 cases indexed, 2 from families held out" in md
    assert "| ldwp+speedup | tiny-fleet | yes | 2 |" in md  # By family (report_by_family)
    assert "Against the best heuristic pair" in (out / "report.html").read_text()
    assert (out / "img" / "against-best-heuristic.png").is_file()
    doc = json.loads((out / "results.json").read_text())
    got = doc["against_best_heuristic"]
    assert {Path(c["scenario"]).name for c in got} == {"one.toml#20", "two.toml#20"}
    assert {(c["family"], c["seed_set"]) for c in got} == {("tiny-fleet", "test")}
    heuristics = ("mct+speedup", "mct-mem+speedup")
    for c in got:  # the ratio is the learned pair's mean over the best heuristic's, from the rows
        thr = {r["scheduler"]: r["throughput"] for r in doc["rows"] if r["scenario"] == c["scenario"]}
        assert c["best_heuristic"] in heuristics
        assert all(thr[c["best_heuristic"]] >= 0.99 * thr[h] for h in heuristics)
        assert c["throughput_ratio"] == pytest.approx(thr["ldwp+speedup"] / thr[c["best_heuristic"]])


def test_a_plain_folder_has_no_index_and_a_file_listed_by_one_gets_its_case(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text(TINY)
    assert case_info([str(tmp_path / "a.toml#5"), "paper"]) == {}
    _index(tmp_path, ["a.toml"])
    info = case_info([str(tmp_path / "a.toml#5")])
    assert info[str(tmp_path / "a.toml#5")] == CaseInfo(
        "tiny-fleet", "test", True, 20_000, 1.0, "has headroom"
    )


@pytest.mark.parametrize(
    ("seed_set", "cautioned"), [("test", False), ("validation", True), ("training", True)]
)
def test_the_section_cautions_that_seen_cases_do_not_measure_generalisation(
    tmp_path: Path, seed_set: str, cautioned: bool
) -> None:
    """A researcher who evaluates training or validation cases is told their ratios are not the
    test set's: a pair chosen on them scores well there by construction."""
    info = {"gen/a.toml": CaseInfo(family="fleet", seed_set=seed_set)}
    rows = [result_row("gen/a.toml", "mct+speedup", 2.0), result_row("gen/a.toml", "ldwp+speedup", 1.9)]
    (tmp_path / "img").mkdir()
    blocks = generalisation_blocks(case_ratios(rows, info), [1], tmp_path)
    text = " ".join(b.text for b in blocks)
    assert ("are training or validation cases" in text) is cautioned, text[:2000]


def test_arrival_bound_cases_are_named_and_the_throughput_table_is_given_without_them(tmp_path: Path) -> None:
    """Where arrivals bind, a throughput ratio measures the last tasks' tail: the section gives the
    table again over the cases with headroom, and the worst cases say which are arrival-bound."""
    rows = []
    for seed, load in ((1, 0.3), (2, 0.5)):  # case a: arrival-bound (mean 0.4), learned 0.9x
        rows += [
            result_row("a", "mct+speedup", 1.0, seed=seed, bound_offered_load=load),
            result_row("a", "ldwp+speedup", 0.9, seed=seed, bound_offered_load=load),
        ]
    for seed in (1, 2):  # case b: headroom, learned 1.0x
        rows += [
            result_row("b", "mct+speedup", 2.0, seed=seed, bound_offered_load=1.5),
            result_row("b", "ldwp+speedup", 2.0, seed=seed, bound_offered_load=1.5),
        ]
    ratios = case_ratios(rows)
    by_case = {c.scenario: c for c in ratios}
    assert by_case["a"].offered_load == pytest.approx(0.4) and by_case["a"].arrival_bound
    assert by_case["b"].offered_load == pytest.approx(1.5) and not by_case["b"].arrival_bound
    (tmp_path / "img").mkdir()
    blocks = generalisation_blocks(ratios, [1, 2], tmp_path)
    tables = [b for b in blocks if b.kind == "table"]
    assert tables[0].rows[0][:3] == ("ldwp+speedup", "2", "0.900")  # the measure: every case
    assert tables[1].rows[0][:3] == ("ldwp+speedup", "1", "1.000")  # the cases with headroom
    said = next(b.text for b in blocks if "arrival-bound" in b.text)
    assert said.startswith("1 of these cases is arrival-bound") and "over the 1 case with headroom:" in said
    worst = tables[-1]
    assert [r[4] for r in worst.rows] == ["0.40 (arrival-bound)", "1.50"]
    # Without an arrival-bound case there is no second table.
    blocks = generalisation_blocks(case_ratios([r for r in rows if r["scenario"] == "b"]), [1, 2], tmp_path)
    assert not any("arrival-bound" in b.text for b in blocks)


@pytest.mark.parametrize(("seeds", "cautioned"), [([20_000], False), ([10_001], True), ([0, 20_000], True)])
def test_runs_on_training_or_validation_seeds_are_cautioned(
    tmp_path: Path, seeds: list[int], cautioned: bool
) -> None:
    """The shipped checkpoint was chosen on validation seeds 10001-10003: a report on them compared
    it with heuristics without a word."""
    rows = [result_row("a", "mct+speedup", 2.0), result_row("a", "ldwp+speedup", 1.9)]
    (tmp_path / "img").mkdir()
    text = " ".join(b.text for b in generalisation_blocks(case_ratios(rows), seeds, tmp_path))
    assert ("seeds**: learning trains on training seeds" in text) is cautioned, text[:600]

"""Drawing a report's figures: in parallel with progress, one file set per scenario however deep
its folder, and a figure that fails, or a drawing process that dies, costs only its own scenario's
figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from experiments.cli import main
from tests.conftest import evaluate_two_tiny_killing
from tests.test_evaluate import TINY


def test_figures_drawn_in_parallel_with_progress_off_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After the runs' lines, one line per scenario whose figures are drawn (a generated set of 40
    cases and 38 schedulers took minutes there, silent before); with two workers the figures are
    drawn in two processes and the report still shows each scenario's own, in its order."""
    (tmp_path / "tiny.toml").write_text(TINY)
    (tmp_path / "tiny2.toml").write_text(TINY.replace('name = "tiny"', 'name = "tiny2"'))
    out = tmp_path / "out"
    args = [
        "evaluate",
        "--scenarios",
        f"{tmp_path / 'tiny.toml'},{tmp_path / 'tiny2.toml'}",
        "--schedulers",
        "mct",
    ]
    assert main([*args, "--seeds", "1", "--jobs", "2", "--out", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    drawn = [x for x in err if x.startswith("report: ")]
    assert [x.split(",")[0] for x in drawn] == [
        "report: 1/2 scenarios drawn",
        "report: 2/2 scenarios drawn",
    ], err
    assert sorted(Path(x.rsplit(": ", 1)[1]).name for x in drawn) == ["tiny.toml", "tiny2.toml"]
    assert err.index(drawn[0]) > max(i for i, x in enumerate(err) if x.startswith("evaluate: 2/2 runs"))
    md = (out / "report.md").read_text()
    shown = re.findall(r"\(img/([^)]*-devices\.png)\)", md)
    assert len(shown) == 2 and "tiny2" not in shown[0] and "tiny2" in shown[1], shown
    for name in shown:
        assert (out / "img" / name).read_bytes().startswith(b"\x89PNG")


def test_scenarios_deep_in_a_folder_keep_their_own_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Figure files are named after the scenario's path: two cases in a folder whose path is long
    (a generated set under a deep working directory) must not draw over each other's files."""
    deep = tmp_path / ("generated-validation-cases-" * 4)
    deep.mkdir()
    (deep / "tiny.toml").write_text(TINY)
    (deep / "tiny2.toml").write_text(TINY.replace('name = "tiny"', 'name = "tiny2"'))
    out = tmp_path / "out"
    scen = f"{deep / 'tiny.toml'},{deep / 'tiny2.toml'}"
    args = ["evaluate", "--scenarios", scen, "--schedulers", "mct", "--seeds", "1"]
    assert main([*args, "--out", str(out)]) == 0
    capsys.readouterr()
    md = (out / "report.md").read_text()
    shown = re.findall(r"\(img/([^)]*-devices\.png)\)", md)
    assert len(set(shown)) == 2 and "tiny2" in shown[1] and "tiny2" not in shown[0], shown


def test_a_figure_that_cannot_be_drawn_costs_only_its_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Drawing runs after every run is measured: a figure that fails (here, its file's path is
    taken by a folder) removes the scenario's figures drawn before it and leaves the other
    scenario's figures, the report and its exit status, and says in the report, the summary and
    on stderr which scenario has none and why."""
    from experiments.report_plots import figure_stem

    (tmp_path / "tiny.toml").write_text(TINY)
    (tmp_path / "tiny2.toml").write_text(TINY.replace('name = "tiny"', 'name = "tiny2"'))
    out = tmp_path / "out"
    blocked = str(tmp_path / "tiny2.toml")
    (out / "img" / f"{figure_stem(blocked)}-devices.png").mkdir(parents=True)  # its last figure
    scen = f"{tmp_path / 'tiny.toml'},{blocked}"
    args = ["evaluate", "--scenarios", scen, "--schedulers", "mct", "--seeds", "1", "--jobs", "2"]
    assert main([*args, "--out", str(out)]) == 0
    cap = capsys.readouterr()
    said = cap.out.strip().splitlines()
    tail = "; none failed, none above the capacity bound, the figures of 1 scenario not drawn"
    assert said[0].startswith("evaluate: 2 runs in ") and said[0].endswith(tail + " (the report names them)")
    assert said[1] == f"report: {out}/report.html (and report.md; every row in results.json and results.csv)"
    assert f"report: the figures of {blocked} could not be drawn" in cap.err
    assert "Traceback" in cap.err and "IsADirectoryError" in cap.err
    md = (out / "report.md").read_text()
    assert "Its figures could not be drawn (IsADirectoryError" in md
    assert f"The figures of 1 scenario(s) could not be drawn: {blocked}." in md.split("## ")[0]
    assert md.count("could not be drawn") == 2
    shown = re.findall(r"\(img/([^)]*-devices\.png)\)", md)
    assert len(shown) == 1 and "tiny2" not in shown[0], shown
    assert "could not be drawn" in (out / "report.html").read_text()
    # The figures drawn before the failure, which the report does not show, are gone too.
    left = [f.name for f in (out / "img").iterdir() if f.is_file() and figure_stem(blocked) in f.name]
    assert left == [], left


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
def test_a_drawing_process_that_dies_costs_no_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A drawing worker killed mid-report (the OOM killer, a signal) broke the whole pool and the
    report with it; now the scenarios it left are drawn again, each in a process of its own."""
    rc, killed, out = evaluate_two_tiny_killing(tmp_path, "mct", 1)  # runs, then figures
    cap = capsys.readouterr()
    assert killed, "no drawing worker was seen"
    assert rc == 0, cap.err
    assert "report: a drawing process died; the" in cap.err
    assert json.loads(cap.out.strip().splitlines()[-1])["figures_failed"] == 0
    md = (out / "report.md").read_text()
    shown = re.findall(r"\(img/([^)]*-devices\.png)\)", md)
    assert len(shown) == 2 and "tiny2" in shown[1], shown
    assert all((out / "img" / name).read_bytes().startswith(b"\x89PNG") for name in shown)


def test_the_latency_cdfs_floor_pools_every_seed_as_its_curves_do() -> None:
    """The CDF pools the latencies of every seed's tasks; its dashed floor was the first seed's
    tasks' alone (the caption said so, but a floor of other tasks is no floor of these)."""
    from experiments.configs import EvalConfig
    from experiments.report_figures import _latency_lower_bounds

    one = _latency_lower_bounds("transfer-4#20", EvalConfig(["transfer-4#20"], ["mct"], [20000]))
    two = _latency_lower_bounds("transfer-4#20", EvalConfig(["transfer-4#20"], ["mct"], [20000, 20001]))
    assert len(one) == 20 and len(two) == 40 and two[:20] == one and two[20:] != one


def test_the_figures_mark_a_clairvoyant_reference_as_the_tables_do(tmp_path: Path) -> None:
    """`oracle+speedup` stood unmarked among the schedulers in every figure."""
    from experiments.report_figures import figure_labels

    (tmp_path / "tiny.toml").write_text(TINY)
    out = tmp_path / "out"
    args = ["evaluate", "--scenarios", str(tmp_path / "tiny.toml"), "--schedulers", "mct,oracle"]
    assert main([*args, "--seeds", "1", "--jobs", "1", "--out", str(out)]) == 0
    rows = json.loads((out / "results.json").read_text())["rows"]
    runs = {s: [r for r in rows if r["scheduler"] == s] for s in ("mct", "oracle")}
    assert figure_labels(runs) == {"mct": "mct", "oracle": "oracle (clairvoyant)"}

"""``rlsched interference fit|evaluate`` as a user runs them: the installed script, in a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from experiments.cli import main
from rlsched.interference.measurements import ColocationData, write_colocation_csv

KINDS = [f"{f} (batch size {b})" for f in ("Alpha", "Beta", "Gamma") for b in (16, 64)]


def rlsched(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("rlsched") or str(Path(sys.executable).with_name("rlsched"))
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=300, check=False)


def table(devices: tuple[str, ...] = ("v100", "p100"), kinds: list[str] = KINDS) -> ColocationData:
    """Every pair of ``kinds`` on ``devices``: throughput falls with both kinds' index; the two
    largest kinds cannot share."""
    rows = [
        (d, k, p, 0.0 if i + j >= 2 * len(kinds) - 3 else 1.0 - 0.05 * (i + 1) * (j + 1) / (2 + di))
        for di, d in enumerate(devices)
        for i, k in enumerate(kinds)
        for j, p in enumerate(kinds)
    ]
    d, k, p, y = zip(*rows, strict=True)
    return ColocationData(list(d), list(k), list(p), np.clip(np.array(y), 0.0, 1.0))


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(model directory, evaluation CSV) of a model fitted through the CLI on two CSVs (the
    kind-mean model: fitting the others is tested in test_interference.py, and the commands do
    not depend on the method)."""
    tmp = tmp_path_factory.mktemp("cli")
    data = table()
    half = len(data) // 2
    write_colocation_csv(tmp / "a.csv", data.take(range(half)))
    write_colocation_csv(tmp / "b.csv", data.take(range(half, len(data))))
    r = rlsched(
        "interference",
        "fit",
        "--data",
        str(tmp / "a.csv"),
        "--data",
        str(tmp / "b.csv"),
        "--method",
        "mean",
        "--seed",
        "3",
        "--out",
        str(tmp / "model"),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["rows"] == len(data) and out["kinds"] == len(KINDS) and out["devices"] == ["p100", "v100"]
    return tmp / "model", tmp / "a.csv"


def test_fit_then_evaluate_json(fitted: tuple[Path, Path]) -> None:
    model, csv = fitted
    assert (model / "weights.pt").is_file() and (model / "meta.json").is_file()
    r = rlsched("interference", "evaluate", "--model", str(model), "--data", str(csv), "--json")
    assert r.returncode == 0, r.stderr
    scores = json.loads(r.stdout)
    assert set(scores) == {"mae", "rmse", "n", "feasible_accuracy"}
    assert scores["n"] == len(table()) // 2
    assert 0 < scores["mae"] < 0.2 and scores["rmse"] >= scores["mae"] and scores["feasible_accuracy"] > 0.8


def test_fit_prints_lines_by_default(fitted: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    model, csv = fitted
    out = model.parent / "again"
    assert main(["interference", "fit", "--data", str(csv), "--method", "mean", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"fitted mean on {len(table()) // 2} rows ({len(KINDS)} kinds; devices v100)")
    assert f"rlsched interference evaluate --model {out} --data CSV" in text
    assert f'interference_model = "{out}"' in text and "{" not in text
    # A relative --out is printed whole: the service reads the key relative to its config's folder.
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(model.parent)
        assert main(["interference", "fit", "--data", str(csv), "--method", "mean", "--out", "rel"]) == 0
    assert f'interference_model = "{model.parent / "rel"}"' in capsys.readouterr().out
    # A folder holding a checkpoint (this fit, or any network) is refused, not replaced.
    before = (out / "weights.pt").read_bytes()
    assert main(["interference", "fit", "--data", str(csv), "--method", "ncf", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "expected a folder without a checkpoint" in err and "it holds meta.json, weights.pt" in err, err
    assert (out / "weights.pt").read_bytes() == before


def test_evaluate_prints_a_table_by_default(
    fitted: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    model, csv = fitted
    assert main(["interference", "evaluate", "--model", str(model), "--data", str(csv)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines] == ["mae", "rmse", "n", "feasible_accuracy"]


def test_unknown_kind_is_an_error_that_names_it(fitted: tuple[Path, Path], tmp_path: Path) -> None:
    model, _ = fitted
    other = tmp_path / "other.csv"
    write_colocation_csv(other, table(kinds=[*KINDS[:2], "Omega"]))
    r = rlsched("interference", "evaluate", "--model", str(model), "--data", str(other), "--json")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and str(other) in line and "Omega" in line and "Alpha" not in line


def test_bad_csv_exits_2_naming_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("device,kind,partner,norm_throughput\nv100,A,B,0.5\nv100,A,C,lots\n")
    assert main(["interference", "fit", "--data", str(bad), "--out", str(tmp_path / "m")]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and str(bad) in line and "line 3" in line and "norm_throughput" in line
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("what", ["model", "data"])
def test_missing_files_exit_2(
    fitted: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    model, csv = fitted
    args = {"model": str(model), "data": str(csv), what: str(tmp_path / "nope")}
    assert main(["interference", "evaluate", "--model", args["model"], "--data", args["data"]]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(tmp_path / "nope") in err

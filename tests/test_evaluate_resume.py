"""``rlsched evaluate --resume``: an evaluation interrupted mid-grid, or asked for more schedulers,
runs only the runs its folder does not hold, and its report is the one a full run writes; a
folder holding an evaluation is never overwritten without it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from experiments.cli import main
from models.checkpoint import write_meta
from rlsched.policies.registry import SELECTORS, register_selector
from tests.conftest import interrupt_rlsched
from tests.test_evaluate import TINY

#: Metrics that time the run (they differ between two runs of the same case).
_TIMED = {"wall_s", "decisions_per_s"}


def _rows(out: Path) -> dict[tuple[str, str, int], dict]:
    rows = json.loads((out / "results.json").read_text())["rows"]
    return {(r["scenario"], r["scheduler"], r["seed"]): r for r in rows}


def _evaluate(tiny: Path, out: Path, schedulers: str, *more: str) -> int:
    args = ["evaluate", "--scenarios", str(tiny), "--schedulers", schedulers, "--seeds", "2", "--jobs", "1"]
    return main([*args, "--out", str(out), *more])


def _untimed(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in _TIMED and not k.endswith("_wall_s")}


def test_resume_runs_only_what_the_folder_lacks_and_reports_as_a_full_run(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    tiny = tmp_path / "tiny.toml"
    tiny.write_text(TINY)
    out = tmp_path / "ev"
    assert _evaluate(tiny, out, "mct+speedup") == 0
    first = _rows(out)
    capsys.readouterr()
    assert _evaluate(tiny, out, "mct+speedup,mct-mem+speedup", "--resume") == 0
    said = capsys.readouterr()
    assert "resuming: 2 of 4 runs kept" in said.err
    assert ", 2 of them kept from the folder's earlier runs; none failed" in said.out, said.out
    both = _rows(out)
    assert len(both) == 4 and (out / "report.md").read_text().count("resumed: 2 runs kept") == 1
    for key, row in first.items():  # kept, not run again: even the run's own wall time is the same
        assert both[key] == row, key
    assert len((out / "runs.jsonl").read_text().splitlines()) == 4
    full = tmp_path / "full"
    assert _evaluate(tiny, full, "mct+speedup,mct-mem+speedup") == 0
    assert {k: _untimed(r) for k, r in _rows(full).items()} == {k: _untimed(r) for k, r in both.items()}
    # Figures drawn from the kept runs' own per-task latencies, as from a full run's.
    assert sorted(p.name for p in (out / "img").iterdir()) == sorted(p.name for p in (full / "img").iterdir())


def test_a_folder_holding_an_evaluation_is_refused_without_resume(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    tiny = tmp_path / "tiny.toml"
    tiny.write_text(TINY)
    out = tmp_path / "ev"
    assert _evaluate(tiny, out, "mct+speedup") == 0
    before = (out / "runs.jsonl").read_text()
    capsys.readouterr()
    assert _evaluate(tiny, out, "mct+speedup") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rlsched: error: --out:") and "--resume" in err[0], err
    assert (out / "runs.jsonl").read_text() == before  # nothing of it touched


def test_runs_of_other_settings_are_refused_not_deleted_and_a_cut_line_runs_again(  # type: ignore[no-untyped-def]
    tmp_path: Path, capsys
) -> None:
    """Resuming with another setting deleted every earlier run in silence (24 of a grid, with one
    flag mistyped); now refused, the folder as it was. A finished run is the same under another
    time limit (raising --timeout reran them all), and a half-written line runs again."""
    tiny = tmp_path / "tiny.toml"
    tiny.write_text(TINY)
    out = tmp_path / "ev"
    assert _evaluate(tiny, out, "mct+speedup") == 0
    before = (out / "runs.jsonl").read_text()
    capsys.readouterr()
    for other in (("--rate", "30"), ("--schedulers", "mct-mem+speedup")):
        args = ["evaluate", "--scenarios", str(tiny), "--schedulers", "mct+speedup", "--seeds", "2"]
        args += ["--jobs", "1", "--out", str(out), "--resume", *other]
        assert main(args) == 2
        assert "2 of its runs ran other " in capsys.readouterr().err
        assert (out / "runs.jsonl").read_text() == before and len(list((out / "run-details").iterdir())) == 2
    with (out / "runs.jsonl").open("a") as f:
        f.write('{"scenario": "cut sho')  # the line an interruption left half-written
    assert _evaluate(tiny, out, "mct+speedup", "--resume", "--timeout", "300") == 0
    assert "resuming: 2 of 2 runs kept" in capsys.readouterr().err  # another time limit: the same runs
    assert (out / "runs.jsonl").read_text() == before  # the cut line is gone, the runs kept


def test_an_interrupted_evaluation_resumes_where_it_stopped(tmp_path: Path) -> None:
    tiny = tmp_path / "tiny.toml"
    tiny.write_text(TINY.replace("tasks = 40", "tasks = 400"))
    out = tmp_path / "ev"
    scheds = "mct+speedup,mct-mem+speedup,least-loaded+speedup,mct+mlsm"
    args = ["evaluate", "--scenarios", str(tiny), "--schedulers", scheds, "--seeds", "3", "--jobs", "1"]

    def one_run_done() -> bool:
        return (out / "runs.jsonl").is_file() and bool((out / "runs.jsonl").read_text().strip())

    rc, _ = interrupt_rlsched([*args, "--out", str(out)], one_run_done, 0.2)
    assert rc == 130
    done = len((out / "runs.jsonl").read_text().splitlines())
    assert 0 < done < 12, done  # stopped mid-grid
    assert not (out / "results.json").exists()
    assert main([*args, "--out", str(out), "--resume"]) == 0
    assert len(_rows(out)) == 12 and len((out / "runs.jsonl").read_text().splitlines()) == 12


def test_runs_of_a_model_retrained_in_place_run_again(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The key holds the model folder's checksums, not just its path: a network retrained into the
    same folder is another network."""
    from models import PRETRAINED_LDWP

    tiny = tmp_path / "tiny.toml"
    tiny.write_text(TINY)
    model = tmp_path / "net"
    model.mkdir()
    for f in ("meta.json", "weights.pt"):
        (model / f).write_bytes((PRETRAINED_LDWP / f).read_bytes())
    out = tmp_path / "ev"
    assert _evaluate(tiny, out, "ldwp+speedup", "--model", str(model)) == 0
    capsys.readouterr()
    assert _evaluate(tiny, out, "ldwp+speedup", "--model", str(model), "--resume") == 0
    assert "resuming: 2 of 2 runs kept" in capsys.readouterr().err
    meta = json.loads((model / "meta.json").read_text())
    write_meta(model, {**meta, "retrained": "in place"})
    before = (out / "runs.jsonl").read_text()
    # Another network's runs: refused, not deleted (they are the old network's results).
    assert _evaluate(tiny, out, "ldwp+speedup", "--model", str(model), "--resume") == 2
    err = capsys.readouterr().err
    assert "rlsched: error: --resume: value: expected a folder whose finished runs are all runs of" in err
    assert "2 of its runs ran other " in err and (out / "runs.jsonl").read_text() == before
    # An edited scenario file is another scenario, the same way.
    tiny.write_text(TINY.replace("tasks = 40", "tasks = 41"))
    write_meta(model, meta)
    assert _evaluate(tiny, out, "ldwp+speedup", "--model", str(model), "--resume") == 2
    assert "2 of its runs ran other " in capsys.readouterr().err


def test_the_code_digest_changes_with_the_code_runs_depend_on_only(tmp_path: Path) -> None:
    """A run made by other code (an upgrade, an edit) runs again; a change to the report's code
    keeps every run."""
    from experiments.evaluate_resume import code_digest

    for f in ("rlsched/sim.py", "envs/a.py", "models/pretrained/x/meta.json", "experiments/evaluation.py"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("one\n")
    (tmp_path / "experiments/report.py").write_text("one\n")
    first = code_digest(tmp_path)
    (tmp_path / "experiments/report.py").write_text("two\n")
    code_digest.cache_clear()
    assert code_digest(tmp_path) == first
    for f in ("rlsched/sim.py", "models/pretrained/x/meta.json", "experiments/evaluation.py"):
        (tmp_path / f).write_text("two\n")
        code_digest.cache_clear()
        now = code_digest(tmp_path)
        assert now != first, f
        first = now


class _FailsWhileTold:
    """A selector that raises while ``RLSCHED_TEST_FAIL`` is set (a worker inherits it): a run
    that failed for a reason since removed."""

    name = "fails-while-told"

    def reset(self, view: object, seed: int) -> None:
        pass

    def select(self, task: object, view: object, mask: np.ndarray) -> int:
        if os.environ.get("RLSCHED_TEST_FAIL"):
            raise RuntimeError("told to fail")
        return int(np.flatnonzero(mask)[0])


def test_failed_runs_exit_6_and_resume_runs_only_them_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tiny = tmp_path / "tiny.toml"
    tiny.write_text(TINY)
    out = tmp_path / "ev"
    register_selector("fails-while-told", _FailsWhileTold)
    try:
        monkeypatch.setenv("RLSCHED_TEST_FAIL", "1")
        assert _evaluate(tiny, out, "mct+speedup,fails-while-told+speedup") == 6
        assert "2 failed (their rows say why; --resume runs them again)" in capsys.readouterr().out
        first = _rows(out)
        monkeypatch.delenv("RLSCHED_TEST_FAIL")
        assert _evaluate(tiny, out, "mct+speedup,fails-while-told+speedup", "--resume") == 0
        said = capsys.readouterr()
    finally:
        SELECTORS.pop("fails-while-told")
    assert "resuming: 2 of 4 runs kept" in said.err and "none failed" in said.out, said
    again = _rows(out)
    assert all(r["status"] == "ok" for r in again.values())
    for key, row in first.items():  # the runs that were ok are kept as they were
        if row["status"] == "ok":
            assert again[key] == row, key

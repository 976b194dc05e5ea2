"""Every benchmark script answers ``--help`` (they are scripts, not tests: nothing else runs them
between the sessions that record their figures, and one could break unseen). Run in process, as
``python -m`` runs them, so each costs its imports once."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "experiments" / "benchmarks"
#: Modules that are helpers of the scripts, not scripts.
HELPERS = {"__init__", "service_process", "service_load"}
SCRIPTS = [*sorted(p.stem for p in BENCHMARKS.glob("*.py") if p.stem not in HELPERS), "bench_live"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_script_answers_help(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(sys, "argv", [f"experiments.benchmarks.{name}", "--help"])
    # another script may have imported this one as a module: run it fresh, as python -m does
    for module in (f"experiments.benchmarks.{name}", f"experiments.benchmarks.{name}.__main__"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(SystemExit) as done:
        runpy.run_module(f"experiments.benchmarks.{name}", run_name="__main__", alter_sys=True)
    assert done.value.code in (0, None), name
    assert "usage:" in capsys.readouterr().out, name


def test_speculate_refuses_a_learned_pair_it_would_not_run_before_running(tmp_path: Path) -> None:
    """It judged the learned pairs only after every run, then failed on one it had not run (a
    KeyError), and the runs were lost."""
    from experiments.benchmarks.speculate import main

    argv = ["--scenarios", str(tmp_path), "--schedulers", "mct+mlsm", "--out", str(tmp_path / "o.json")]
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2 and not (tmp_path / "o.json").exists()

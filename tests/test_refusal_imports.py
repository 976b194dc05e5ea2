"""A typo costs a third of a second: the research commands read their flags, scenario entries and
checkpoint folders before they import torch, stable-baselines3, matplotlib or scipy.stats (about
2 s together; `rlsched train`, `finetune` and `evaluate` took 2.0-2.3 s to refuse a bad entry).
The service's own refusals: tests/test_serve_refusals.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import cli_in_a_fresh_interpreter

HEAVY = ("torch", "stable_baselines3", "matplotlib", "scipy.stats")

REFUSALS = {
    "evaluate: a bad scheduler": ["evaluate", "--scenarios", "paper", "--schedulers", "mct,bogus+x"],
    "evaluate: a bad load": ["evaluate", "--scenarios", "paper", "--schedulers", "mct", "--loads", "0"],
    "evaluate: no model folder": [
        "evaluate", "--scenarios", "paper", "--schedulers", "ldwp", "--model", "/no",
    ],
    "evaluate: no placer folder": [
        "evaluate", "--scenarios", "paper", "--schedulers", "mct+iawp-rl", "--placer-model", "/no",
    ],
    "train: a bad scenario": ["train", "--scenario", "nope"],
    "train --stage 2: a bad scenario": ["train", "--stage", "2", "--scenario", "nope"],
    "train --stage both: a bad scenario": ["train", "--stage", "both", "--scenario", "nope"],
    "finetune: no model folder": ["finetune", "--from", "/no", "--scenario", "paper"],
    "finetune: a bad scenario": ["finetune", "--from", "models/pretrained/ldwp", "--scenario", "nope"],
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_refusal_comes_before_the_heavy_imports(tmp_path: Path, case: str) -> None:
    argv = [*REFUSALS[case], "--out", str(tmp_path / "out")]
    rc, loaded, err = cli_in_a_fresh_interpreter(argv, HEAVY)
    assert (rc, loaded) == (2, []), (rc, loaded, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()

"""The pods mechanism script: each variant swaps one part of an ``alibaba-pods`` case and keeps
its offered load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.benchmarks import pods_mechanism as pm
from experiments.cli import main
from rlsched.scenarios.loader import load_scenario


def test_the_variants_swap_one_part_each_at_the_case_s_load(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    gen = tmp_path / "gen"
    assert (
        main(
            [
                "scenarios",
                "generate",
                "--family",
                "alibaba-pods",
                "--count",
                "1",
                "--seed",
                "7",
                "--out",
                str(gen),
            ]
        )
        == 0
    )
    (case,) = json.loads((gen / "cases.json").read_text())["cases"]
    pm.write(tmp_path / "mech", [str(gen)])
    out = {v: load_scenario(str(tmp_path / "mech" / v / case["file"])) for v in pm.VARIANTS}
    orig = out["orig"]
    assert all(n.gpus for n in orig.cluster.nodes[: orig.workload.alibaba.nodes])  # type: ignore[union-attr]
    assert max(len(n.gpus) for n in orig.cluster.nodes) > 1
    assert all(len(n.gpus) <= 1 for n in out["cap1"].cluster.nodes)
    assert next(n.gpus for n in out["cap1"].cluster.nodes if n.gpus)[0].name in {
        g.name for n in orig.cluster.nodes for g in n.gpus
    }
    assert out["apps"].workload.alibaba is None and out["apps"].workload.apps
    assert [n.gpus for n in out["apps"].cluster.nodes] == [n.gpus for n in orig.cluster.nodes]
    assert {len(n.gpus) for n in out["cat48"].cluster.nodes} <= {4, 8}
    assert {len(n.gpus) for n in out["cat12"].cluster.nodes} <= {1, 2}
    for v in ("cat48", "cat12"):
        assert out[v].workload.alibaba.pod_csv == orig.workload.alibaba.pod_csv  # type: ignore[union-attr]
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "offered load" in ln]
    assert len(lines) == len(pm.VARIANTS)
    for ln in lines:  # each set back to the case's own load (within the load step's tolerance)
        got, want = (float(x.strip("()")) for x in ln.split("offered load ")[1].split(" (case "))
        assert got == pytest.approx(want, rel=0.05)


def test_read_prints_each_ratio_over_the_cases(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rows = []
    for case, (a, b) in {"c1": (2.0, 1.0), "c2": (1.0, 2.0)}.items():
        for pair, thr in (("ldwp+iawp", a), ("mct-drain+iawp", b)):
            rows.append(
                {"scenario": case, "scheduler": pair, "seed": 5000, "status": "ok", "throughput": thr}
            )
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "results.json").write_text(json.dumps({"rows": rows}))
    pm.read([str(tmp_path / "r")])
    assert "ldwp+iawp / mct-drain+iawp 1.000 (0.50-2.00, 2 cases)" in capsys.readouterr().out

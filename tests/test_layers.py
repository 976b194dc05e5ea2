"""The layering of DESIGN.md section 2, checked on every import statement of every package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = {"rlsched", "envs", "runtime", "models", "experiments"}
ALLOWED: dict[str, set[str]] = {
    "models": set(),
    "rlsched": {"models"},
    "envs": {"rlsched", "models"},
    "runtime": {"rlsched", "models"},
    "experiments": OURS - {"experiments"},
}


def imported_packages(path: Path) -> set[tuple[str, int]]:
    """Top-level packages of ours that a file imports, with line numbers."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in OURS:
                out.add((top, node.lineno))
    return out


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_lower_layers(package: str) -> None:
    bad = []
    for f in sorted((ROOT / package).rglob("*.py")):
        for top, line in imported_packages(f):
            if top != package and top not in ALLOWED[package]:
                bad.append(f"{f.relative_to(ROOT)}:{line} imports {top}")
    assert not bad, "imports that cross the layers of DESIGN.md section 2:\n" + "\n".join(bad)


def test_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("import os\nfrom runtime.backends import thing\nimport experiments.cli\n")
    assert imported_packages(f) == {("runtime", 2), ("experiments", 3)}


def test_only_simulator_and_oracle_import_ground_truth() -> None:
    """Only the oracle bound may read the simulator's ground truth (policies in rlsched cannot
    import envs at all, which the layer test checks)."""
    readers = []
    for pkg in ("envs", "experiments", "runtime"):
        for f in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text())):
                mods = []
                if isinstance(node, ast.ImportFrom):
                    mods = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                elif isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                if any(m.endswith("ground_truth") for m in mods) and f.name not in {
                    "simulator.py",
                    "oracle.py",
                    # The simulated world's measuring instrument (nsight/nvprof on a real machine):
                    # it hands schedulers sparse, noisy measurements, never the truth itself.
                    "kind_profiler.py",
                }:
                    readers.append(str(f.relative_to(ROOT)))
    assert not readers, f"modules other than the simulator and the oracle import ground truth: {readers}"

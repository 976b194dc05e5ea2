"""rlsched ships top-level packages beside ``rlsched`` (``envs``, ``models``, ``runtime``,
``experiments``: the project's layout). A project's own package of one of those names, first on
``sys.path``, is imported in their place; ``import rlsched`` says so rather than leave a
``No module named 'models.interference'`` far from the cause."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _import_rlsched(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import rlsched; print(rlsched.shadowed_siblings())"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_a_projects_own_models_package_is_named_at_import(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("# a project's own models\n")
    r = _import_rlsched(tmp_path)
    assert r.returncode == 0, r.stderr
    assert "another package of the same name comes first on sys.path" in r.stderr, r.stderr
    assert f"'models' is {(tmp_path / 'models').resolve()}" in r.stderr, r.stderr
    assert "envs" not in r.stdout  # only the one that is shadowed


def test_no_warning_where_nothing_is_shadowed(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()  # a folder without __init__.py is a namespace portion: ours wins
    r = _import_rlsched(tmp_path)
    assert r.returncode == 0 and r.stderr == "" and r.stdout.strip() == "[]", (r.stdout, r.stderr)

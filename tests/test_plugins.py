"""A third-party policy package, registered through the ``rlsched.policies`` entry-point group,
runs in ``rlsched simulate``, on the live runtime (``rlsched demo --live``) and in ``rlsched serve``.

The package is real: the README's example module next to a ``.dist-info`` folder with its
``entry_points.txt``, found by ``importlib.metadata`` on ``PYTHONPATH`` exactly as an installed
distribution is; each command runs in a fresh process, as a user would run it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "plugin" / "fewest_tasks.py"
SPEC = "fewest-tasks+emptiest-gpu"


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    shutil.copy(EXAMPLE, site / "fewest_tasks.py")
    info = site / "fewest_tasks-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fewest-tasks\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[rlsched.policies]\n"
        "fewest-tasks = fewest_tasks:FewestTasks\n"
        "emptiest-gpu = fewest_tasks:EmptiestGpu\n"
    )
    return site


def _run(site: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_plugin_policy_runs_in_simulate(plugin_path: Path) -> None:
    r = _run(plugin_path, "simulate", "--scenario", "transfer-4", "--scheduler", SPEC, "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["scheduler"] == SPEC
    assert out["tasks_completed"] == out["tasks_total"] > 0 and out["tasks_lost"] == 0


def test_a_plugin_policy_runs_on_the_live_runtime(plugin_path: Path) -> None:
    r = _run(
        plugin_path,
        "demo",
        "--live",
        "--schedulers",
        f"{SPEC},mct+mlsm",
        "--tasks",
        "40",
        "--seeds",
        "1",
        "--backend",
        "numpy",
        timeout=240,
    )
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith(f"| {SPEC} "))
    assert "Traceback" not in r.stderr
    # Every task completed (the demo also checked every result against its ground truth).
    head = next(line for line in r.stdout.splitlines() if line.startswith("| scheduler "))
    cells = dict(zip(head.split("|"), row.split("|"), strict=True))
    assert cells[" not completed "].strip() == "0", row


def test_without_the_package_the_name_is_unknown_and_listed_names_are_built_ins() -> None:
    r = _run(ROOT / "nonexistent", "simulate", "--scenario", "transfer-4", "--scheduler", SPEC, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("rlsched: error: --scheduler: selector: expected")
    assert "got 'fewest-tasks'" in r.stderr and "oracle" in r.stderr


def test_the_readme_shows_the_example_policy() -> None:
    """The README's example is the tested module's code, so the two cannot drift apart."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("### Your own policy", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert block.strip() and block in EXAMPLE.read_text()


def test_a_plugin_policy_serves_tasks_through_rlsched_serve(plugin_path: Path, tmp_path: Path) -> None:
    """An operator names the plug-in's pair in the service's config: ``rlsched serve`` places
    every task with it, and says so (``/v1/cluster``)."""
    from runtime.service.client import Client
    from tests.service_helpers import TOKENS, Server, free_port, service_config

    port = free_port()
    pythonpath = f"{plugin_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    s = Server(service_config(tmp_path, port, scheduler=SPEC), port, env={"PYTHONPATH": pythonpath})
    s.start()
    try:
        with Client(s.url, TOKENS["video"]) as c:
            assert c.cluster()["scheduler"] == SPEC
            rows = c.wait(
                [t["id"] for t in c.submit([{"app": "video_synopsis", "chunk": k} for k in range(6)])], 90
            )
        assert [r["state"] for r in rows] == ["done"] * 6, rows
    finally:
        s.stop()


def test_a_plugin_that_does_not_load_is_one_warning_line_and_the_built_ins_run(tmp_path: Path) -> None:
    """A broken plug-in is named in one ``rlsched: warning:`` line (it was Python's warning form,
    with the source line of the call that loaded it); the built-ins still run."""
    info = tmp_path / "broken-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[rlsched.policies]\nbroken = no_such_module:Policy\n")
    r = _run(tmp_path, "simulate", "--scenario", "transfer-4", "--scheduler", "mct", "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith(
        "rlsched: warning: rlsched.policies entry point 'broken' (no_such_module:Policy)"
    )
    assert "UserWarning" not in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr


BROKEN = """
class Raises:
    def reset(self, view, seed): pass
    def select(self, task, view, mask): raise RuntimeError("boom from the plug-in")

class ReturnsNone:
    def reset(self, view, seed): pass
    def select(self, task, view, mask): return None

class Both:
    def reset(self, view, seed): pass
    def select(self, task, view, mask): return 0
    def place(self, sub, node, view, free): return None

class ClaimsClairvoyance:
    clairvoyant = True
    def reset(self, view, seed): pass
    def select(self, task, view, mask): return int(mask.nonzero()[0][0])
"""


def test_a_plugin_that_breaks_its_contract_is_named_not_called_a_bug_of_rlsched(tmp_path: Path) -> None:
    """A plug-in's exception or a return that is no node's index was 'internal error ... (a bug)',
    naming no plug-in; a class with both methods was said to have neither; clairvoyant = True
    without bind_simulator ran as an ordinary scheduler (its runs said clairvoyant: false)."""
    (tmp_path / "brokenplug.py").write_text(BROKEN)
    info = tmp_path / "brokenplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplug\nVersion: 0.1\n")
    names = {
        "raises": "Raises",
        "returns-none": "ReturnsNone",
        "both": "Both",
        "claims": "ClaimsClairvoyance",
    }
    eps = "".join(f"{n} = brokenplug:{c}\n" for n, c in names.items())
    (info / "entry_points.txt").write_text("[rlsched.policies]\n" + eps)
    for name, said in (
        ("raises", "RuntimeError: boom from the plug-in (a bug in the plug-in 'raises' (brokenplug:Raises)"),
        ("returns-none", "selector 'ReturnsNone': select returned None for task 0, expected the index"),
    ):
        r = _run(tmp_path, "simulate", "--scenario", "paper#20", "--scheduler", name, timeout=120)
        assert r.returncode == 1 and said in r.stderr and "not in rlsched" in r.stderr, r.stderr
        assert "(brokenplug:" in r.stderr.splitlines()[-1], r.stderr
    r = _run(tmp_path, "simulate", "--scenario", "paper#20", "--scheduler", "mct", "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    warned = r.stderr.splitlines()
    assert any("'both' (brokenplug:Both)" in w and w.endswith("not both") for w in warned), warned
    assert any("'claims'" in w and "clairvoyant = True needs a bind_simulator(sim)" in w for w in warned), (
        warned
    )

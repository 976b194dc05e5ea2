"""The service's packages are the ``serve`` extra: a researcher's path (simulate, train, evaluate)
works without them, and a command that needs them says how to get them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlsched.errors import Unavailable
from runtime.service.extra import CLIENT_MODULES, HINT, SERVE_MODULES, require_serve_extra

ROOT = Path(__file__).resolve().parents[1]
#: What a researcher imports: the core, the simulated world, the models and the offline commands.
RESEARCH_MODULES = (
    "rlsched",
    "envs",
    "models",
    "experiments.simulate",
    "experiments.evaluate",
    "experiments.train",
    "experiments.cli",
)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=180)


def test_the_research_path_imports_none_of_the_serve_extra() -> None:
    """In a fresh interpreter, importing the research modules loads no package of the extra."""
    code = (
        "import importlib, sys\n"
        f"for m in {RESEARCH_MODULES!r}:\n"
        "    importlib.import_module(m)\n"
        f"print(' '.join(m for m in {SERVE_MODULES!r} if m in sys.modules))\n"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [], f"the research path imports {out.stdout.split()} (the serve extra)"


def test_the_research_path_runs_with_the_serve_extra_uninstalled() -> None:
    """With every package of the extra made unimportable (as when it is not installed), the research
    modules import, and the client module imports none of the server's packages."""
    code = (
        "import importlib, sys\n"
        f"for m in {SERVE_MODULES!r}:\n"
        "    sys.modules[m] = None  # `import m` now raises ImportError\n"
        f"for m in {RESEARCH_MODULES!r}:\n"
        "    importlib.import_module(m)\n"
        f"for m in {CLIENT_MODULES!r}:\n"
        "    del sys.modules[m]\n"
        "import runtime.service.client\n"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("missing", SERVE_MODULES)
def test_a_command_without_the_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # find_spec answers None: not installed
    with pytest.raises(Unavailable) as err:
        require_serve_extra("rlsched serve")
    assert str(err.value) == f"rlsched serve: {HINT} ({missing} not installed)"
    assert "pip install 'rlsched[serve]'" in str(err.value)


def test_the_client_commands_need_only_the_client_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fastapi", None)
    require_serve_extra("rlsched submit", CLIENT_MODULES)  # no server package needed
    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(Unavailable, match=r"^rlsched submit: .*\(httpx not installed\)$"):
        require_serve_extra("rlsched submit", CLIENT_MODULES)


def test_the_check_passes_where_the_extra_is_installed() -> None:
    require_serve_extra("rlsched serve")  # the dev install (make setup) has the extra

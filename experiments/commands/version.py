"""``rlsched --version``: the package's version and the shipped models it runs, read without
importing torch (what a bug report needs to name the exact networks)."""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from models import PRETRAINED_IAWP_RL, PRETRAINED_LDWP, PRETRAINED_RECOGNISER
from rlsched.version import package_version

#: Characters of a model's sha256 shown (the service's /v1/models shows it whole).
_SHOWN = 12


def version_text() -> str:
    """Two lines: the package, Python and platform; each shipped model with the sha256 of its
    file, as ``meta.json`` lists it (``missing`` where a model does not ship)."""
    own = package_version()
    py = f"Python {platform.python_version()}, {platform.system()} {platform.machine()}"
    return f"rlsched {own} ({py})\nshipped models (sha256): {shipped_models()}"


def shipped_models() -> str:
    """Each shipped model with the first characters of its file's sha256, as its ``meta.json``
    lists it: ``ldwp 1a2b..., iawp-rl ..., recogniser ...`` (``missing`` where one does not ship)."""
    return ", ".join(
        f"{name} {_digest(path)}"
        for name, path in (
            ("ldwp", PRETRAINED_LDWP),
            ("iawp-rl", PRETRAINED_IAWP_RL),
            ("recogniser", PRETRAINED_RECOGNISER),
        )
    )


def _digest(folder: Path) -> str:
    try:
        files = json.loads((folder / "meta.json").read_text(encoding="utf-8"))["files"]
        return str(next(iter(files.values())))[:_SHOWN]
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return "missing"


class VersionAction(argparse.Action):
    """``--version``: print :func:`version_text` and exit 0 (computed only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(version_text())
        sys.exit(0)

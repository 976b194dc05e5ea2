"""Processes that exit without the collector's last walks (:mod:`experiments.process_exit`): the
``rlsched`` console script and every spawned worker freeze their heap at exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Registered before the code under test, so it runs after that code's atexit handlers (LIFO).
_REPORT = "import atexit, gc\natexit.register(lambda: print('frozen at exit:', gc.get_freeze_count()))\n"


@pytest.mark.parametrize(
    "code",
    [
        "import sys\nfrom experiments.cli import entry\nsys.argv = ['rlsched', '--version']\nentry()\n",
        "from experiments.worker_pool import worker_init\nworker_init()\nimport torch\n",
    ],
    ids=["console-script", "worker"],
)
def test_the_heap_is_frozen_out_of_the_collector_at_exit(code: str) -> None:
    """Without it a process that imported torch spent 0.5-1 s of its exit in the collector."""
    r = subprocess.run(
        [sys.executable, "-c", _REPORT + code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    frozen = int(r.stdout.rsplit("frozen at exit:", 1)[1])
    assert frozen > 10_000, r.stdout  # the whole heap, not a handful of objects

"""The worker processes of ``rlsched evaluate`` and ``rlsched train --stage 2`` do not outlive
them: killed mid-run (SIGTERM from a job scheduler, or kill -9), each takes its workers with it
within seconds. Without the workers' watch on their parent they ran their case to the end and then
waited forever on the work queue, whose writing end each of them holds."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (read from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


#: (command, signal): both spawn their workers. ldwp+iawp on large#3000 takes ~20 s a run and a
#: stage-2 episode on the saturated built-ins several seconds: the workers are past their imports
#: (~2-3 s) and mid-run when the signal comes, or, on a slow machine, about to start one (which,
#: without the watch, they would run to its end and past the deadline below).
KILLS = [
    (["evaluate", "--scenarios", "large#3000", "--seeds", "4", "--schedulers", "ldwp+iawp"], signal.SIGTERM),
    (["train", "--stage", "2", "--iterations", "4"], signal.SIGKILL),
]


@pytest.mark.serial
@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
@pytest.mark.parametrize(("args", "sig"), KILLS, ids=["evaluate-sigterm", "train-stage2-kill9"])
def test_workers_exit_when_the_command_is_killed(
    tmp_path: Path, args: list[str], sig: signal.Signals
) -> None:
    exe = shutil.which("rlsched") or str(Path(sys.executable).with_name("rlsched"))
    proc = subprocess.Popen([exe, *args, "--jobs", "2", "--out", str(tmp_path / "out")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(workers) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "the workers did not start"
            workers = children(proc.pid)
            time.sleep(0.2)
        time.sleep(4)  # into their first runs
        workers = sorted(set(workers) | set(children(proc.pid)))
        proc.send_signal(sig)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [w for w in workers if alive(w)], "workers outlived the command"
    finally:
        proc.kill()
        for w in workers:
            if alive(w):
                os.kill(w, signal.SIGKILL)

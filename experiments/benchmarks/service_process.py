"""``rlsched serve`` as a child process, as an operator runs it: for the service tests, the chaos
campaign and the soak (each drives a real uvicorn on 127.0.0.1 and reads the real queue file)."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from runtime.service.client import wait_ready
from runtime.service.config import hash_token

ROOT = Path(__file__).resolve().parents[2]


def proc_figures(pid: int) -> tuple[float, int]:
    """(RSS in MB, open file descriptors) of process ``pid`` (Linux ``/proc``)."""
    rss_kb = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss_kb = int(line.split()[1])
    return rss_kb / 1024, len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(
    folder: Path,
    port: int,
    tokens: Mapping[str, str],
    extra: Mapping[str, str] | None = None,
    top: str = "",
    scheduler: str = "mct+mlsm",
) -> Path:
    """A service config in ``folder`` (queue ``queue.db`` beside it), one tenant per token.

    :param tokens: tenant name -> bearer token.
    :param extra: tenant name -> more TOML lines of its table.
    :param top: more top-level TOML lines.
    """
    extra = extra or {}
    tenants = "".join(
        f'[[tenants]]\nname = "{n}"\ntoken_sha256 = "{hash_token(t)}"\n{extra.get(n, "")}\n'
        for n, t in tokens.items()
    )
    p = folder / "service.toml"
    p.write_text(f'port = {port}\ndb = "queue.db"\nscheduler = "{scheduler}"\n{top}\n{tenants}')
    return p


class ServiceProcess:
    """One ``rlsched serve --config CONFIG`` child (NumPy backend), its stderr in ``server.log``.

    :param config: the service config.
    :param port: the port it names.
    :param env: more environment (e.g. ``RLSCHED_FAILPOINTS``).
    """

    def __init__(self, config: Path, port: int, env: Mapping[str, str] | None = None) -> None:
        self.config, self.port = config, port
        self.url = f"http://127.0.0.1:{port}"
        self.env = dict(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = config.parent / "server.log"

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start the child; do not wait for it."""
        # NumPy unless RLSCHED_TEST_BACKEND says otherwise (gpu_check.sh runs the service on CuPy).
        env = {**os.environ, "RLSCHED_BACKEND": os.environ.get("RLSCHED_TEST_BACKEND", "numpy"), **self.env}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "experiments.cli", "serve", "--config", str(self.config)],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        return self.proc

    def start(self, timeout: float = 60.0) -> None:
        """Start the child and wait until ``/readyz`` answers 200.

        :raises AssertionError: it exited first (with its log).
        """
        proc = self.spawn()
        try:
            wait_ready(self.url, timeout_s=timeout, alive=lambda: proc.poll() is None)
        except RuntimeError:
            raise AssertionError(self.log.read_text()) from None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 20 s."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def until_models(
    s: ServiceProcess,
    headers: Mapping[str, str],
    done: Callable[[dict[str, Any]], bool],
    what: str,
    timeout: float = 120,
) -> dict[str, Any]:
    """``/v1/models`` once ``done`` holds for it, polled every 0.25 s.

    :raises AssertionError: naming ``what`` and the last answer, after ``timeout`` seconds.
    """

    def models() -> dict[str, Any]:
        return dict(httpx.get(f"{s.url}/v1/models", headers=dict(headers), timeout=30).json())

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = models()
        if done(m):
            return m
        time.sleep(0.25)
    raise AssertionError(f"{what} within {timeout} s; last /v1/models: {json.dumps(models())[:2000]}")


def wait_drained(db: sqlite3.Connection, timeout: float = 180) -> None:
    """Until the queue file holds no queued or running task.

    :raises AssertionError: after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db.execute("SELECT COUNT(*) FROM tasks WHERE state IN ('queued', 'running')").fetchone()[0] == 0:
            return
        time.sleep(0.5)
    raise AssertionError(f"tasks still queued or running after {timeout} s")

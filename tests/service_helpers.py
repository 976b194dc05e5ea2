"""Helpers of the service tests: a real ``rlsched serve`` on 127.0.0.1 (a child process), its
tenants' tokens, and the requests the tests repeat."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from experiments.benchmarks.service_process import ServiceProcess, free_port, write_config

TOKENS = {"video": "tok-video", "batch": "tok-batch"}
Server = ServiceProcess
__all__ = [
    "TOKENS",
    "Server",
    "cluster_nodes",
    "free_port",
    "headers",
    "server",
    "service_config",
    "wait_done",
]


def service_config(
    folder: Path, port: int, extra: dict[str, str] | None = None, top: str = "", scheduler: str = "mct+mlsm"
) -> Path:
    """A service config in ``folder`` for :data:`TOKENS`' tenants on ``port``."""
    return write_config(folder, port, TOKENS, extra, top, scheduler)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A running service (``mct+mlsm``), stopped after the test."""
    port = free_port()
    s = Server(service_config(tmp_path, port), port)
    s.start()
    yield s
    s.stop()


def headers(tenant: str) -> dict[str, str]:
    """The bearer header of ``tenant``."""
    return {"Authorization": f"Bearer {TOKENS[tenant]}"}


def cluster_nodes(s: Server) -> list[dict]:
    """The nodes of ``/v1/cluster`` (any tenant may read them)."""
    return list(httpx.get(f"{s.url}/v1/cluster", headers=headers("video"), timeout=30).json()["nodes"])


def wait_done(s: Server, tenant: str, ids: list[int], timeout: float = 90) -> list[dict]:
    """The tasks ``ids`` once all are done or failed; an AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    rows: list[dict] = []
    while time.monotonic() < deadline:
        r = httpx.post(f"{s.url}/v1/tasks/lookup", json={"ids": ids}, headers=headers(tenant), timeout=30)
        assert r.status_code == 200, r.text
        rows = r.json()
        if all(r["state"] in ("done", "failed") for r in rows):
            return rows
        time.sleep(0.2)
    raise AssertionError(f"tasks not finished in {timeout} s: {[r['state'] for r in rows]}")

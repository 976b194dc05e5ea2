"""Canary promotion through a real ``rlsched serve``: a candidate selector places a share of the
tasks; a worse one is rolled back, one that is not worse is promoted, by the test of
``runtime.service.canary`` (unit cases of the test itself at the end)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from experiments.benchmarks.service_process import ServiceProcess, free_port, write_config
from runtime.service.canary import Arm, CanaryRule, in_canary, judge

H = {"Authorization": "Bearer tok-ops"}
#: The canary settings of these tests (stated: the rollback bound below depends on them).
TOP = "canary_share = 0.5\ncanary_min_tasks = 30\ncanary_promote_tasks = 150\ncanary_margin = 0.1\n"
#: A worse candidate must be rolled back within this many of its own finished tasks.
ROLLBACK_WITHIN = 150


def _serve(folder: Path) -> ServiceProcess:
    port = free_port()
    s = ServiceProcess(
        write_config(folder, port, {"ops": "tok-ops"}, {"ops": "admin = true"}, TOP, "mct+mlsm"), port
    )
    s.start()
    return s


class _Load:
    """Batches of ``batch`` video tasks every 0.2 s (7: 35 tasks/s, about 0.75 of the embedded
    cluster's capacity on 2 cores, where a random stage 1 costs about a fifth in latency)."""

    def __init__(self, url: str, batch: int = 7) -> None:
        self.url, self.stop, self.n, self.batch = url, threading.Event(), 0, batch
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with httpx.Client(timeout=30) as c:
            while not self.stop.is_set():
                body = [
                    {"app": "video_synopsis", "stream": (self.n + k) % 8, "chunk": self.n + k}
                    for k in range(self.batch)  # was range(4): 20 tasks/s, where random costs little
                ]
                if c.post(f"{self.url}/v1/tasks", json=body, headers=H).status_code == 201:
                    self.n += self.batch
                self.stop.wait(0.2)


def _models(s: ServiceProcess) -> dict[str, Any]:
    return dict(httpx.get(f"{s.url}/v1/admin/models", headers=H, timeout=30).json())


def _until_decided(s: ServiceProcess, timeout: float = 150) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = _models(s)
        if m["canary"] is None and m["history"][-1]["event"] != "canary":
            return m
        time.sleep(0.5)
    raise AssertionError(f"no decision within {timeout} s: {_models(s)}")


# In `make test-all` only: 16 s, and on 2026-12-04 it promoted `random` in two of seven runs (once
# in a fresh-clone CI run), where `random` was not measurably worse than mct+mlsm in the canary's
# window; the suite's CI time is at its limit.
@pytest.mark.slow
def test_a_worse_candidate_is_rolled_back_and_one_not_worse_is_promoted(tmp_path: Path) -> None:
    s = _serve(tmp_path)
    load = _Load(s.url)
    try:
        r = httpx.post(
            f"{s.url}/v1/admin/models/candidate", json={"scheduler": "random"}, headers=H, timeout=30
        )
        assert r.status_code == 201, r.text
        m = _until_decided(s)
        last = m["history"][-1]
        assert last["event"] == "rolled back" and last["selector"] == "random", last
        cand, inc = last["measured"]["candidate"], last["measured"]["incumbent"]
        assert cand["finished"] <= ROLLBACK_WITHIN, last
        assert cand["mean_latency_s"] > inc["mean_latency_s"], last
        cluster = httpx.get(f"{s.url}/v1/cluster", headers=H, timeout=30).json()
        assert cluster["scheduler"] == "mct+mlsm"
        r = httpx.post(f"{s.url}/v1/admin/models/candidate", json={"scheduler": "mct"}, headers=H, timeout=30)
        assert r.status_code == 201, r.text
        m = _until_decided(s, timeout=200)
        last = m["history"][-1]
        assert last["event"] == "promoted" and last["selector"] == "mct", last
        cluster = httpx.get(f"{s.url}/v1/cluster", headers=H, timeout=30).json()
        assert cluster["scheduler"] == "mct+mlsm"  # the candidate (a fresh mct) is the incumbent now
        metrics = httpx.get(f"{s.url}/metrics", timeout=30).text
        assert (
            "rlsched_canary_rollbacks_total 1.0" in metrics
            and "rlsched_canary_promotions_total 1.0" in metrics
        )
        assert httpx.post(f"{s.url}/v1/admin/models/rollback", headers=H, timeout=30).status_code == 409
    finally:
        load.stop.set()
        s.stop()


@pytest.mark.slow  # 21 s, in make test-all; the canary itself is in make test (the test above)
def test_the_selector_learner_puts_up_candidates_and_a_promoted_one_survives_a_restart(
    tmp_path: Path,
) -> None:
    """``selector_learning``: the LDWP learner's network goes to the canary after
    ``selector_candidate_updates`` steps; promoted (a margin no candidate can miss here), it is the
    incumbent, checkpointed, and the incumbent again after a restart, named by the same version."""
    port = free_port()
    top = (
        "canary_share = 0.5\ncanary_min_tasks = 10\ncanary_promote_tasks = 40\ncanary_margin = 0.99\n"
        "selector_learning = true\nselector_candidate_updates = 100\ncheckpoint_interval_s = 1\n"
    )
    tokens, admin = {"ops": "tok-ops"}, {"ops": "admin = true"}
    s = ServiceProcess(write_config(tmp_path, port, tokens, admin, top, "ldwp+mlsm"), port)
    s.start()
    load = _Load(s.url)
    try:
        m = _until_decided_once(s)
        last = m["history"][-1]
        assert last["event"] == "promoted" and last["selector"] == "ldwp-online", last
        assert m["incumbent"][0]["sha256"] == last["sha256"] and m["incumbent"][0]["source"] == "canary", m
        deadline = time.monotonic() + 30
        state = tmp_path / "rlsched-state" / "current.json"
        while time.monotonic() < deadline and "promoted" not in (state.read_text() if state.exists() else ""):
            time.sleep(0.5)
        assert "promoted" in state.read_text(), state.read_text()
        load.stop.set()
        s.stop()
        s.start()
        m = _models(s)
        assert m["incumbent"][0]["sha256"] == last["sha256"], m
        assert m["incumbent"][0]["source"].endswith("rlsched-state"), m
    finally:
        load.stop.set()
        s.stop()


def _until_decided_once(s: ServiceProcess, timeout: float = 150) -> dict[str, Any]:
    """Until a first candidate was put up and judged."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = _models(s)
        if m["history"] and m["canary"] is None:
            return m
        time.sleep(0.5)
    raise AssertionError(f"no candidate judged within {timeout} s: {_models(s)}")


def test_the_canary_share_is_even_over_ids() -> None:
    share = np.mean([in_canary(i, 0.2) for i in range(1, 10_001)])
    assert abs(share - 0.2) < 0.005


def test_the_promotion_test() -> None:
    rng = np.random.default_rng(0)
    rule = CanaryRule(share=0.5, min_tasks=30, promote_tasks=200, margin=0.05, alpha=0.05)

    def arm(mean: float, n: int, failed: int = 0) -> Arm:
        return Arm(list(rng.normal(mean, 0.1 * mean, n)), failed)

    assert judge(arm(2.0, 29), arm(1.0, 29), rule) is None  # too few to say
    assert judge(arm(2.0, 40), arm(1.0, 40), rule) == "rollback"
    assert judge(arm(1.0, 40, failed=10), arm(1.0, 50), rule) == "rollback"  # fails a fifth
    assert judge(arm(1.0, 100), arm(1.0, 100), rule) is None  # not worse, not yet enough
    assert judge(arm(1.0, 400), arm(1.0, 400), rule) == "promote"
    assert judge(arm(1.04, 60), arm(1.0, 60), rule) is None  # within the margin: no rollback

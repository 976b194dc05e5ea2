"""``rlsched serve`` on a real uvicorn: cluster operations of the admin role, priorities, the
GPU-share quota and request timeouts (the server is a child process, as an operator runs it)."""

from __future__ import annotations

import socket
import sqlite3
import time
from pathlib import Path

import httpx

from runtime.service.store_audit import exactly_once_violations
from tests.service_helpers import Server, cluster_nodes, free_port, headers, service_config, wait_done


def _submit(s: Server, tenant: str, body: list[dict]) -> list[int]:
    r = httpx.post(f"{s.url}/v1/tasks", json=body, headers=headers(tenant), timeout=30)
    assert r.status_code == 201, r.text
    return [t["id"] for t in r.json()]


def _admin(s: Server, method: str, path: str, tenant: str = "video", **kw: object) -> httpx.Response:
    return httpx.request(method, f"{s.url}/v1/admin{path}", headers=headers(tenant), timeout=30, **kw)  # type: ignore[arg-type]


def test_admin_drains_adds_and_removes_nodes_and_switches_the_scheduler(tmp_path: Path) -> None:
    port = free_port()
    s = Server(service_config(tmp_path, port, {"video": "admin = true\n"}), port)
    s.start()
    try:
        assert _admin(s, "POST", "/nodes/volta/drain", tenant="batch").status_code == 403
        assert _admin(s, "POST", "/nodes/nowhere/drain").status_code == 404
        assert _admin(s, "POST", "/nodes/volta/drain").json()["draining"] is True
        rows = wait_done(s, "batch", _submit(s, "batch", [{"app": "matmul", "chunk": k} for k in range(12)]))
        assert {r["node"] for r in rows} == {"turing"} and {r["state"] for r in rows} == {"done"}
        for r in rows:  # each completed task reports its outputs (shape, dtype, CRC-32)
            assert r["result"] and all(
                isinstance(o["crc32"], int) and o["shape"] for o in r["result"].values()
            )
        gpus = [g for n in cluster_nodes(s) for g in n["gpus"] if n["name"] == "turing"]
        assert sum(g["cache_hits"] + g["cache_misses"] for g in gpus) > 0

        # A slow node joins (its GPU 160x slower than a T4): tasks are surely running on it
        # when it is removed, and must run again elsewhere.
        node = {"name": "extra", "cpu_cores": 1, "gpus": [{"model": "T4", "speed": 0.05}]}
        assert _admin(s, "POST", "/nodes", json=node).status_code == 201
        assert _admin(s, "POST", "/nodes", json=node).status_code == 409  # the name is taken
        bad = _admin(s, "POST", "/nodes", json={**node, "name": "x", "gpus": [{"model": "Z9"}]})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "gpus", 0, "model"]
        assert _admin(s, "POST", "/nodes/turing/drain").status_code == 200
        ids = _submit(s, "batch", [{"app": "intrusion_detection", "chunk": k} for k in range(8)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            running = httpx.get(f"{s.url}/v1/tasks?state=running", headers=headers("batch")).json()["tasks"]
            if running:
                break
            time.sleep(0.05)
        assert running and {t["node"] for t in running} == {"extra"}
        for name in ("volta", "turing"):
            assert _admin(s, "POST", f"/nodes/{name}/resume").status_code == 200
        gone = _admin(s, "DELETE", "/nodes/extra")
        assert gone.status_code == 200 and gone.json()["requeued"] >= 1, gone.text
        assert _admin(s, "DELETE", "/nodes/extra").status_code == 404  # already left
        rows = wait_done(s, "batch", ids)
        assert {r["state"] for r in rows} == {"done"}
        moved_off = [r for r in rows if r["attempt"] > 1]
        assert moved_off and all(r["node"] in ("volta", "turing") for r in moved_off)
        db = sqlite3.connect(tmp_path / "queue.db")
        assert exactly_once_violations(db) == []
        db.close()

        sw = _admin(s, "PUT", "/scheduler", json={"scheduler": "round-robin+mlsm"})
        assert sw.status_code == 200 and sw.json() == {"scheduler": "round-robin+mlsm", "kept": True}
        sw = _admin(s, "PUT", "/scheduler", json={"scheduler": "auto"})  # the shipped recogniser
        assert sw.status_code == 200 and sw.json() == {"scheduler": "auto", "kept": True}, sw.text
        sw = _admin(s, "PUT", "/scheduler", json={"scheduler": "round-robin+mlsm"})
        bad = _admin(s, "PUT", "/scheduler", json={"scheduler": "nope+mlsm"})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "scheduler"]
        state = httpx.get(f"{s.url}/v1/cluster", headers=headers("batch")).json()
        assert state["scheduler"] == "round-robin+mlsm"
        assert [(n["name"], n["alive"], n["draining"]) for n in state["nodes"]] == [
            ("volta", True, False),
            ("turing", True, False),
            ("extra", False, False),
        ]
        rows = wait_done(s, "batch", _submit(s, "batch", [{"app": "matmul", "chunk": k} for k in range(8)]))
        assert {r["node"] for r in rows} == {"volta", "turing"}  # round robin: both take tasks
        metrics = httpx.get(f"{s.url}/metrics").text
        assert 'rlsched_nodes{state="gone"} 1.0' in metrics
        assert 'rlsched_tasks_requeued_total{tenant="batch"}' in metrics
    finally:
        s.stop()


def _state(s: Server) -> tuple[str, dict[str, bool]]:
    state = httpx.get(f"{s.url}/v1/cluster", headers=headers("batch"), timeout=30).json()
    return state["scheduler"], {n["name"]: n["draining"] for n in state["nodes"]}


def test_an_admins_drain_and_switch_outlive_a_restart_until_the_config_says_otherwise(
    tmp_path: Path,
) -> None:
    """A node drained for maintenance stays drained after a kill -9 and a restart, and the
    scheduler an admin switched to runs again; once the config's ``scheduler`` is edited, the
    config's runs (the switch is forgotten, said in the log), and a resumed node takes tasks
    again after the next restart."""
    port = free_port()
    admin = {"video": "admin = true\n"}
    s = Server(service_config(tmp_path, port, admin), port)
    s.start()
    try:
        assert _admin(s, "POST", "/nodes/volta/drain").json()["kept"] is True
        sw = _admin(s, "PUT", "/scheduler", json={"scheduler": "round-robin+mlsm"})
        assert sw.json() == {"scheduler": "round-robin+mlsm", "kept": True}, sw.text
        s.kill9()
        s.start()
        assert _state(s) == ("round-robin+mlsm", {"volta": True, "turing": False})
        rows = wait_done(s, "batch", _submit(s, "batch", [{"app": "matmul", "chunk": k} for k in range(6)]))
        assert {r["node"] for r in rows} == {"turing"}  # round robin would use both
        service_config(tmp_path, port, admin, scheduler="least-loaded+least-loaded")  # edited, reloaded
        reload = _admin(s, "POST", "/reload").json()
        assert reload["applied"] == [
            "scheduler: round-robin+mlsm (an admin's switch over mct+mlsm, forgotten) "
            "-> least-loaded+least-loaded"
        ], reload
        assert _state(s)[0] == "least-loaded+least-loaded"
        assert _admin(s, "PUT", "/scheduler", json={"scheduler": "round-robin+mlsm"}).json()["kept"] is True
        s.stop()
        service_config(tmp_path, port, admin, scheduler="mct+mlsm")  # edited, then a restart
        s.start()
        assert _state(s) == ("mct+mlsm", {"volta": True, "turing": False})
        assert _admin(s, "POST", "/nodes/volta/resume").json() == {
            "name": "volta",
            "index": 0,
            "draining": False,
            "kept": True,
        }
        s.stop()
        s.start()
        assert _state(s) == ("mct+mlsm", {"volta": False, "turing": False})
    finally:
        s.stop()
    log = s.log.read_text()
    assert "node volta stays drained, as an admin left it" in log, log[-3000:]
    assert "scheduler round-robin+mlsm, as an admin switched it before the restart" in log, log[-3000:]
    assert "rlsched serve: round-robin+mlsm on http" in log, log[-3000:]  # the banner says what runs
    for over, now in (("mct+mlsm", "least-loaded+least-loaded"), ("least-loaded+least-loaded", "mct+mlsm")):
        said = f"switch to round-robin+mlsm (over {over}) is forgotten: the config names {now} now"
        assert said in log, log[-3000:]  # at the reload, then at the restart


def test_a_drain_of_a_node_not_in_the_cluster_waits_for_it_to_join(tmp_path: Path) -> None:
    """A node added through the API and drained is not in the cluster file: after a restart its
    drain waits, and the node is drained the moment it joins again; a resume forgets a drain
    that waits."""
    port = free_port()
    s = Server(service_config(tmp_path, port, {"video": "admin = true\n"}), port)
    extra = {"name": "extra", "cpu_cores": 1, "gpus": [{"model": "T4"}]}
    s.start()
    try:
        assert _admin(s, "POST", "/nodes", json=extra).status_code == 201
        assert _admin(s, "POST", "/nodes/extra/drain").json()["kept"] is True
        s.kill9()
        s.start()
        assert _state(s)[1] == {"volta": False, "turing": False}
        assert _admin(s, "POST", "/nodes", json=extra).status_code == 201
        assert _state(s)[1] == {"volta": False, "turing": False, "extra": True}
        s.stop()
        s.start()  # extra is waited for again; a resume forgets it
        assert httpx.get(f"{s.url}/v1/cluster", headers=headers("batch")).json()["drains_waiting"] == [
            "extra"
        ]
        r = _admin(s, "POST", "/nodes/extra/resume")
        assert r.json() == {"name": "extra", "index": None, "draining": False, "kept": True}, r.text
        assert _admin(s, "POST", "/nodes/extra/resume").status_code == 404  # nothing left to forget
        assert _admin(s, "POST", "/nodes/extra/drain").status_code == 404  # not a node, not waited for
        assert httpx.get(f"{s.url}/v1/cluster", headers=headers("batch")).json()["drains_waiting"] == []
        s.stop()
        s.start()
        assert _admin(s, "POST", "/nodes", json=extra).status_code == 201
        assert _state(s)[1] == {"volta": False, "turing": False, "extra": False}
    finally:
        s.stop()
    log = s.log.read_text()
    assert log.count("drained node extra is not in the cluster: it is drained if it joins") == 2, log[-3000:]
    assert log.count("node extra joined: drained, as an admin left it") == 1, log[-3000:]


def test_priorities_gpu_share_and_request_timeouts(tmp_path: Path) -> None:
    port = free_port()
    extra = {"video": "max_running = 1\n", "batch": "gpu_share = 0.1\n"}
    s = Server(service_config(tmp_path, port, extra, top="request_timeout_s = 1"), port)
    s.start()
    try:
        # One task at a time: the high-priority tasks, submitted after 12 low ones, overtake
        # every low one that had not started yet.
        low = _submit(s, "video", [{"app": "matmul", "chunk": k} for k in range(12)])
        high = _submit(s, "video", [{"app": "matmul", "chunk": k, "priority": 10} for k in range(5)])
        rows = {r["id"]: r for r in wait_done(s, "video", low + high)}
        order = sorted(rows, key=lambda i: rows[i]["started_at"])
        started_before = sum(
            1 for i in low if rows[i]["started_at"] < min(rows[h]["started_at"] for h in high)
        )
        assert started_before <= 3, started_before
        assert max(order.index(h) for h in high) < started_before + len(high)

        # gpu_share 0.1: at most a tenth of the GPU dispatch slots (2 per GPU stream).
        state = httpx.get(f"{s.url}/v1/cluster", headers=headers("batch")).json()
        slots = 2 * sum(g["streams"] for n in state["nodes"] for g in n["gpus"])
        cap = int(0.1 * slots)
        ids = _submit(s, "batch", [{"app": "intrusion_detection", "chunk": k} for k in range(40)])
        seen = []
        while True:
            r = httpx.get(f"{s.url}/v1/tasks?state=running&limit=1000", headers=headers("batch")).json()
            seen.append(len(r["tasks"]))
            queued = httpx.get(f"{s.url}/v1/tasks?state=queued&limit=1", headers=headers("batch")).json()
            if not queued["tasks"]:
                break
            time.sleep(0.02)
        assert 1 <= max(seen) <= cap, (max(seen), cap)
        wait_done(s, "batch", ids)

        # A client that announces a body and never sends it gets 408 after request_timeout_s.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            head = (
                "POST /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Authorization: Bearer {'tok-video'}\r\nContent-Length: 100\r\n\r\n"
            )
            sock.sendall(head.encode() + b'{"app": ')
            t0 = time.monotonic()
            answer = b""
            while b"}" not in answer:  # the head and the body may come in separate reads
                chunk = sock.recv(4096)
                if not chunk:
                    break
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 408") and b"not received within 1 s" in answer, answer
        assert time.monotonic() - t0 < 5
        assert httpx.get(f"{s.url}/healthz").status_code == 200
    finally:
        s.stop()


def test_the_cli_drains_resumes_and_lists_tasks_page_by_page(tmp_path: Path) -> None:
    """``rlsched drain | resume`` (admin) and ``rlsched tasks`` against a real service."""
    import os
    import subprocess
    import sys

    from experiments.benchmarks.service_process import ROOT
    from tests.service_helpers import TOKENS

    port = free_port()
    s = Server(service_config(tmp_path, port, {"video": "admin = true\n"}), port)
    s.start()

    def cli(tenant: str, *a: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "RLSCHED_TOKEN": TOKENS[tenant], "RLSCHED_URL": s.url}
        cmd = [sys.executable, "-m", "experiments.cli", *a]
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)

    try:
        r = cli("video", "drain", "volta")
        assert r.returncode == 0 and r.stdout.startswith("node volta: draining"), r.stderr
        assert [n["draining"] for n in cluster_nodes(s) if n["name"] == "volta"] == [True]
        rows = wait_done(s, "batch", _submit(s, "batch", [{"app": "matmul", "chunk": k} for k in range(3)]))
        assert {t["node"] for t in rows} == {"turing"}
        r = cli("video", "resume", "volta")
        assert r.returncode == 0 and r.stdout == "node volta: takes new tasks again\n", r.stderr
        assert [n["draining"] for n in cluster_nodes(s) if n["name"] == "volta"] == [False]
        r = cli("video", "switch", "round-robin+mlsm")
        assert r.returncode == 0 and r.stdout.startswith("scheduler round-robin+mlsm for every task"), (
            r.stderr
        )
        assert "it outlives a restart" in r.stdout, r.stdout
        bad = cli("video", "switch", "nope+mlsm")
        assert bad.returncode == 5 and "HTTP 422" in bad.stderr and "nope" in bad.stderr, bad.stderr
        assert cli("batch", "switch", "mct+mlsm").returncode == 5  # not an admin
        assert httpx.get(f"{s.url}/v1/cluster", headers=headers("batch")).json()["scheduler"] == (
            "round-robin+mlsm"
        )
        refused = cli("batch", "drain", "turing")
        assert refused.returncode == 5 and "admin role" in refused.stderr
        assert cli("video", "drain", "nowhere").returncode == 5
        odd = cli("video", "drain", "../../tasks")  # one path segment: no other endpoint reached
        assert odd.returncode == 5 and "HTTP 404" in odd.stderr, odd.stderr

        first = cli("batch", "tasks", "--state", "done", "--limit", "2")
        lines = first.stdout.splitlines()
        assert first.returncode == 0 and len(lines) == 5, first.stdout  # header, 2 tasks, summary, more
        assert lines[-1] == f"more: rlsched tasks --after {rows[1]['id']} --state done --limit 2"
        rest = cli("batch", "tasks", "--state", "done", "--after", str(rows[1]["id"]))
        assert [ln.split()[0] for ln in rest.stdout.splitlines()[1:]] == [str(rows[2]["id"])], rest.stdout
        assert cli("video", "tasks").stdout == "no tasks\n"
        # top: an admin sees a line per tenant; another tenant sees none (403 is not an error).
        frame = cli("video", "top", "--once", "--interval", "0.1").stdout.splitlines()
        assert frame[-3].split() == ["tenant", "weight", "queued", "running", "done", "failed", "cancelled"]
        assert frame[-2:] == [
            f"{'video':<16} {1:>6} {0:>7} {0:>7} {0:>8} {0:>7} {0:>9}",
            f"{'batch':<16} {1:>6} {0:>7} {0:>7} {3:>8} {0:>7} {0:>9}",
        ], frame
        plain = cli("batch", "top", "--once", "--interval", "0.1")
        assert plain.returncode == 0 and "tenant" not in plain.stdout, plain.stderr
    finally:
        s.stop()


def test_the_client_knows_every_task_state() -> None:
    from experiments.commands.client import STATES as CLIENT_STATES
    from runtime.service.store import STATES

    assert CLIENT_STATES == STATES

"""A running service re-reads its config (``SIGHUP``, ``POST /v1/admin/reload``, ``rlsched
reload``): tenants, tokens and limits change at once, keys that need a restart are named, a file
that does not load changes nothing, and a removed tenant's accepted tasks still run."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx

from experiments.benchmarks.service_process import ROOT, write_config
from runtime.service.config import hash_token
from tests.service_helpers import Server, free_port

TOKENS = {"ops": "tok-ops", "batch": "tok-batch"}
OPS = "admin = true\n"


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _reload(s: Server, token: str = "tok-ops") -> httpx.Response:
    return httpx.post(f"{s.url}/v1/admin/reload", headers=_h(token), timeout=30)


def _started(tmp_path: Path) -> tuple[Server, Path, int]:
    """A running service of :data:`TOKENS`' tenants (``ops`` the admin); its config; its port."""
    port = free_port()
    config = write_config(tmp_path, port, TOKENS, {"ops": OPS})
    s = Server(config, port)
    s.start()
    return s, config, port


def _drain(s: Server, token: str, on: bool = True) -> None:
    """Drain (or resume) both nodes of the embedded cluster: nothing starts while they drain."""
    for node in ("volta", "turing"):
        r = httpx.post(
            f"{s.url}/v1/admin/nodes/{node}/{'drain' if on else 'resume'}", headers=_h(token), timeout=30
        )
        assert r.status_code == 200, r.text


def _cluster(s: Server) -> dict:
    return dict(httpx.get(f"{s.url}/v1/cluster", headers=_h("tok-new"), timeout=30).json())


def _states(db: Path, ids: list[int]) -> list[str]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        marks = ",".join("?" * len(ids))
        return [r[0] for r in c.execute(f"SELECT state FROM tasks WHERE id IN ({marks})", ids)]


def test_a_reload_changes_tenants_and_limits_and_names_what_needs_a_restart(tmp_path: Path) -> None:
    s, config, port = _started(tmp_path)
    try:
        assert _reload(s, "tok-batch").status_code == 403  # admins only
        none = _reload(s).json()
        assert none["applied"] == [] and none["needs_restart"] == []

        _drain(s, "tok-ops")  # batch's tasks stay queued across the reload
        body = [{"app": "matmul", "chunk": k} for k in range(3)]
        r = httpx.post(f"{s.url}/v1/tasks", json=body, headers=_h("tok-batch"), timeout=30)
        assert r.status_code == 201, r.text
        ids = [t["id"] for t in r.json()]
        assert httpx.get(f"{s.url}/v1/cluster", headers=_h("tok-new"), timeout=30).status_code == 401

        # batch is removed, "new" joins, ops gets a new token, the queue a bound; port would
        # need a restart.
        write_config(tmp_path, port, {"ops": "tok-ops2", "new": "tok-new"}, {"ops": OPS}, "queue_bound = 4")
        text = config.read_text().replace(f"port = {port}", f"port = {port + 1}")
        config.write_text(text)
        plan = httpx.post(f"{s.url}/v1/admin/reload?dry_run=true", headers=_h("tok-ops"), timeout=30).json()
        assert plan["dry_run"] is True and "tenant new added" in plan["applied"], plan
        assert httpx.get(f"{s.url}/v1/cluster", headers=_h("tok-new"), timeout=30).status_code == 401
        out = _reload(s, "tok-ops")
        assert out.status_code == 200, out.text
        got = out.json()
        assert got["dry_run"] is False and got["applied"] == plan["applied"], (got, plan)
        assert got["applied"] == [
            "tenant batch removed (its accepted tasks still run)",
            "tenant new added",
            "tenant ops: new token",
            "queue_bound: 100000 -> 4",
        ]
        assert got["needs_restart"] == [f"port: {port} -> {port + 1}"]
        assert hash_token("tok-ops2") in config.read_text()

        assert httpx.get(f"{s.url}/v1/cluster", headers=_h("tok-new"), timeout=30).status_code == 200
        for gone in ("tok-batch", "tok-ops"):
            assert httpx.get(f"{s.url}/v1/cluster", headers=_h(gone), timeout=30).status_code == 401
        # The bound counts batch's 3 queued tasks: one more fits, two do not.
        two = [{"app": "matmul", "chunk": k} for k in range(2)]
        r = httpx.post(f"{s.url}/v1/tasks", json=two, headers=_h("tok-new"), timeout=30)
        assert r.status_code == 429 and "at most 4 tasks" in r.json()["detail"], r.text

        listed = httpx.get(f"{s.url}/v1/admin/tenants", headers=_h("tok-ops2"), timeout=30).json()["tenants"]
        by = {t["name"]: t for t in listed}
        assert [t["name"] for t in listed] == ["ops", "new", "batch"]
        assert (
            by["batch"]["configured"] is False and by["batch"]["queued"] == 3 and by["batch"]["tokens"] == 0
        )
        assert by["new"]["configured"] is True and by["new"]["tokens"] == 1 and by["ops"]["admin"] is True
        _drain(s, "tok-ops2", on=False)
        deadline = time.monotonic() + 60
        while _states(tmp_path / "queue.db", ids) != ["done"] * 3:
            assert time.monotonic() < deadline, _states(tmp_path / "queue.db", ids)
            time.sleep(0.2)

        # A file that does not load changes nothing; the answer names the field.
        config.write_text(text.replace("queue_bound = 4", "queue_bound = -1"))
        bad = _reload(s, "tok-ops2")
        assert bad.status_code == 409 and "queue_bound" in bad.json()["detail"], bad.text
        assert httpx.get(f"{s.url}/v1/cluster", headers=_h("tok-new"), timeout=30).status_code == 200
        # The scheduler switches on a reload; one that does not build changes nothing.
        config.write_text(text.replace('scheduler = "mct+mlsm"', 'scheduler = "mct+speedup"'))
        assert "scheduler: mct+mlsm -> mct+speedup" in _reload(s, "tok-ops2").json()["applied"]
        assert (
            httpx.get(f"{s.url}/v1/cluster", headers=_h("tok-new"), timeout=30).json()["scheduler"]
            == "mct+speedup"
        )
        config.write_text(text.replace('scheduler = "mct+mlsm"', 'scheduler = "mct+nope"'))
        bad = _reload(s, "tok-ops2")
        # Named as every other refused key is: the file and the key (it was the bare ValueError).
        said = bad.json()["detail"]
        assert bad.status_code == 409 and f"{config}: scheduler: expected" in said and "nope" in said, (
            bad.text
        )
        assert (
            httpx.get(f"{s.url}/v1/cluster", headers=_h("tok-new"), timeout=30).json()["scheduler"]
            == "mct+speedup"
        )
        # A key that waits for a restart is checked as a start would: applied, it said "reloaded",
        # and the next restart failed on the model folder that is not there.
        config.write_text('selector_model = "no/such/run"\n' + text.replace('"mct+mlsm"', '"ldwp+mlsm"'))
        bad = _reload(s, "tok-ops2")
        assert bad.status_code == 409 and "the checkpoint of selector_model" in bad.json()["detail"], bad.text
        assert (
            httpx.get(f"{s.url}/v1/cluster", headers=_h("tok-new"), timeout=30).json()["scheduler"]
            == "mct+speedup"
        )
        # Still the same port after all: the restart-only key was not applied.
        metrics = httpx.get(f"{s.url}/metrics", timeout=30).text
        assert 'rlsched_config_reloads_total{result="applied"} 3.0' in metrics  # dry runs not counted
        assert 'rlsched_config_reloads_total{result="refused"} 3.0' in metrics
        assert "rlsched_config_pending_restart 1.0" in metrics
    finally:
        s.stop()


def test_sighup_reloads_and_rlsched_reload_reports(tmp_path: Path) -> None:
    s, config, port = _started(tmp_path)
    try:
        write_config(tmp_path, port, {**TOKENS, "late": "tok-late"}, {"ops": OPS})
        os.kill(s.pid, signal.SIGHUP)  # by default it would end the process
        deadline = time.monotonic() + 20
        while httpx.get(f"{s.url}/v1/cluster", headers=_h("tok-late"), timeout=30).status_code != 200:
            assert time.monotonic() < deadline and s.proc is not None and s.proc.poll() is None, (
                s.log.read_text()
            )
            time.sleep(0.1)
        assert "tenant late added" in s.log.read_text()

        write_config(tmp_path, port, TOKENS, {"ops": OPS, "batch": "weight = 3\n"}, "log_level = 'warning'")
        env = {**os.environ, "RLSCHED_TOKEN": "tok-ops", "RLSCHED_URL": s.url}
        cli = [sys.executable, "-m", "experiments.cli", "reload"]
        plan = subprocess.run([*cli, "--dry-run"], cwd=ROOT, env=env, capture_output=True, text=True)
        assert plan.stdout.splitlines()[:2] == [
            f"would reload {config}",
            "  would apply      tenant batch: weight: 1 -> 3",
        ], plan.stdout
        out = subprocess.run(cli, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0] == f"reloaded {config}"
        assert lines[1:] == [
            "  applied          tenant batch: weight: 1 -> 3",
            "  applied          tenant late removed (its accepted tasks still run)",
            "  applied          log_level: info -> warning",
        ]
        listed = subprocess.run([*cli[:-1], "tenants"], cwd=ROOT, env=env, capture_output=True, text=True)
        rows = [ln.split() for ln in listed.stdout.splitlines()]
        assert rows[0][:3] == ["tenant", "weight", "max"] and [r[0] for r in rows[1:]] == ["ops", "batch"], (
            rows
        )
        assert rows[2][1] == "3" and "*" not in listed.stdout, listed.stdout
        as_json = subprocess.run(
            [*cli[:-1], "tenants", "--json"], cwd=ROOT, env=env, capture_output=True, text=True
        )
        # The service's answer, as --help says (it was the bare list).
        assert [t["name"] for t in json.loads(as_json.stdout)["tenants"]] == ["ops", "batch"], as_json.stdout
        refused = subprocess.run(
            cli,
            cwd=ROOT,
            env={**env, "RLSCHED_TOKEN": "tok-batch"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert refused.returncode == 5 and "admin role" in refused.stderr
        # A file that does not load: the service says no (exit 5, not 4: asking again won't do).
        write_config(tmp_path, port, TOKENS, {"ops": OPS}, "queue_bound = 'lots'")
        bad = subprocess.run(cli, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert bad.returncode == 5 and bad.stderr.startswith("rlsched: refused: "), bad.stderr
        assert "queue_bound" in bad.stderr and bad.stderr.count("\n") == 1, bad.stderr
        # The last admin's role removed: applied (the file is the operator's), and said.
        write_config(tmp_path, port, TOKENS, None)
        out = subprocess.run(cli, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and "no tenant has the admin role now" in out.stdout, out.stdout
    finally:
        s.stop()


def test_tasks_of_a_tenant_removed_while_the_service_was_down_still_run(tmp_path: Path) -> None:
    s, _, port = _started(tmp_path)
    try:
        _drain(s, "tok-ops")  # the tasks are still queued at the stop
        body = [{"app": "matmul", "chunk": k} for k in range(2)]
        ids = [t["id"] for t in httpx.post(f"{s.url}/v1/tasks", json=body, headers=_h("tok-batch")).json()]
    finally:
        s.stop()
    write_config(tmp_path, port, {"ops": "tok-ops"}, {"ops": OPS})
    s.start()
    try:
        assert _states(tmp_path / "queue.db", ids) == ["queued"] * 2  # the drains outlived the stop
        _drain(s, "tok-ops", on=False)
        deadline = time.monotonic() + 60
        while _states(tmp_path / "queue.db", ids) != ["done"] * 2:
            assert time.monotonic() < deadline, _states(tmp_path / "queue.db", ids)
            time.sleep(0.2)
        assert "tenant batch is not in the config" in s.log.read_text()
    finally:
        s.stop()


def test_changes_name_each_key_of_the_file() -> None:
    from runtime.service.canary import CanaryRule
    from runtime.service.config import ServiceConfig, Tenant
    from runtime.service.reload import changes

    a = ServiceConfig(tenants=(Tenant("x", "0" * 64),))
    b = ServiceConfig(
        tenants=(Tenant("x", "1" * 64, max_running=3),),
        canary=CanaryRule(share=0.5),
        finished_retention_s=60.0,
        tls_certfile="c.pem",
    )
    assert changes(a, b) == (
        ["tenant x: new token, max_running: 64 -> 3", "finished_retention_s: 604800 -> 60"],
        ["tls_certfile: None -> c.pem", "canary_share: 0.2 -> 0.5"],
    )
    assert changes(b, b) == ([], [])
    two = ServiceConfig(tenants=(Tenant("x", "1" * 64, more_tokens_sha256=("2" * 64,), max_running=3),))
    assert changes(b, two)[0][0] == "tenant x: tokens: 1 added, 0 removed"
    assert changes(two, b)[0][0] == "tenant x: tokens: 0 added, 1 removed"


def test_json_log_lines_and_a_reload_back_to_text(tmp_path: Path) -> None:
    """``log_format = "json"``: every line the service writes is one JSON object (the banner, the
    access log with its fields, uvicorn's); a reload switches the format."""
    import json

    port = free_port()
    config = write_config(tmp_path, port, TOKENS, {"ops": OPS}, 'log_format = "json"')
    s = Server(config, port)
    s.start()
    try:
        assert httpx.get(f"{s.url}/v1/cluster", headers=_h("tok-batch"), timeout=30).status_code == 200
        assert httpx.get(f"{s.url}/v1/cluster", headers=_h("nope"), timeout=30).status_code == 401
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:  # uvicorn warns
            c.sendall(b"NOT HTTP\r\n\r\n")
            c.recv(1024)
        write_config(tmp_path, port, TOKENS, {"ops": OPS}, 'log_format = "text"')
        assert _reload(s).json()["applied"] == ["log_format: json -> text"]
        assert httpx.get(f"{s.url}/v1/cluster", headers=_h("tok-batch"), timeout=30).status_code == 200
    finally:
        s.stop()
    lines = s.log.read_text().splitlines()
    cut = next(i for i, ln in enumerate(lines) if "reloaded" in ln)  # written in the new format
    records = [json.loads(ln) for ln in lines[:cut]]  # each line one object, or this raises
    assert any(r["message"].startswith("rlsched serve: mct+mlsm on http://127.0.0.1:") for r in records)
    assert all({"time", "level", "logger", "message"} <= r.keys() for r in records)
    access = [r for r in records if r.get("path") == "/v1/cluster"]
    assert [(r["method"], r["status"], r["tenant"]) for r in access] == [
        ("GET", 200, "batch"),
        ("GET", 401, "-"),
    ]
    assert access[0]["message"] == f"GET /v1/cluster 200 tenant=batch {access[0]['ms']:.1f} ms"
    after = lines[cut:]
    assert any(" INFO GET /v1/cluster 200 tenant=batch " in ln for ln in after), after
    assert not any(ln.startswith("{") for ln in after), after


def test_the_tenant_table_marks_a_tenant_no_longer_configured() -> None:
    from experiments.commands.admin import tenant_table
    from experiments.commands.client import STATES

    row = {"weight": 1.0, "max_queued": 10, "max_running": 2, "gpu_share": 1.0, "admin": False, "tokens": 1}
    counts = dict.fromkeys(STATES, 0)
    text = tenant_table(
        [
            {**row, **counts, "name": "a", "configured": True, "queued": 4},
            {**row, **counts, "name": "gone", "configured": False, "tokens": 0, "running": 2},
        ]
    ).splitlines()
    assert text[1].split()[:2] == ["a", "1"] and text[1].split()[-5:] == ["4", "0", "0", "0", "0"]
    assert (
        text[2].split()[0] == "gone*"
        and text[-1] == "* no longer in the config: its accepted tasks still run"
    )


def test_a_switched_scheduler_keeps_the_configs_placer_settings(tmp_path: Path) -> None:
    """``PUT /v1/admin/scheduler`` and a reloaded ``scheduler`` build the new pair as a start would:
    with ``prediction_fallback`` (before, a switch dropped it), and a placer that cannot take it
    is refused."""
    import pytest

    from runtime.service.config import ServiceConfig, Tenant
    from runtime.service.service import Service

    cfg = ServiceConfig(
        tenants=(Tenant("a", hash_token("t")),),
        db=str(tmp_path / "q.db"),
        state_dir=str(tmp_path / "state"),
        scheduler="mct+iawp",
        prediction_fallback=0.3,
    )
    svc = Service(cfg)
    try:
        assert svc.scheduler_for("mct-mem+iawp").placer.fallback == 0.3
        with pytest.raises(ValueError, match="prediction_fallback"):
            svc.scheduler_for("mct+mlsm")
    finally:
        svc.stop()

"""The service under faults, each test of a guarantee checked to fail without it (noted per test).

Real parts throughout: ``rlsched serve`` as a child process on 127.0.0.1, its SQLite queue file,
raw sockets for clients that misbehave, and failpoints (``runtime.failpoints``) to inject what
cannot be caused from outside (a lane thread dying mid-kernel, a node's late answer, a full disk).
"""

from __future__ import annotations

import os
import select
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from experiments.benchmarks.service_process import ROOT, ServiceProcess, free_port
from rlsched.hardware import gpu_model
from runtime import failpoints
from runtime.cluster.backend import TaskOutcome
from runtime.service.dblock import DatabaseInUse
from runtime.service.store import NewTask, StorageError, TaskStore
from runtime.service.store_audit import exactly_once_violations
from tests.service_helpers import TOKENS, headers, service_config, wait_done
from tests.service_helpers import server as server  # the fixture: a running service

MIB = 1 << 20


def _chunked_upload(port: int, token: str | None, limit: int, wait_s: float = 5.0) -> tuple[int | None, int]:
    """POST ``/v1/tasks`` with a chunked body, 64 KiB a chunk, up to ``limit`` bytes and never
    ending it; (status of the answer that came meanwhile or within ``wait_s`` after, bytes sent)."""
    s = socket.create_connection(("127.0.0.1", port))
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    s.sendall(
        (
            f"POST /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{auth}"
            "Transfer-Encoding: chunked\r\n\r\n"
        ).encode()
    )
    chunk = b"[" + b'{"app": "matmul"},' * 3640  # 64 KiB of a list that never closes
    sent = 0
    try:
        while sent < limit and not select.select([s], [], [], 0)[0]:
            s.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            sent += len(chunk)
    except OSError:
        pass  # the server answered and closed: what we want
    s.settimeout(wait_s)
    try:
        answer = s.recv(4096)
    except (TimeoutError, OSError):
        answer = b""
    s.close()
    return (int(answer.split()[1]) if answer.startswith(b"HTTP/") else None), sent


def test_no_body_is_read_before_authentication_and_none_beyond_the_limit(server: ServiceProcess) -> None:
    """A chunked upload without a token is refused from its headers (401, without waiting for
    its body, which never ends); with a token, as soon as it passes 1 MiB (413). With the guard
    taken out (checked by hand, 2026-12-03) the tokenless upload was read to its 100 MiB end and
    never answered (the old middleware checked only ``Content-Length``, which chunks do not send)."""
    status, sent = _chunked_upload(server.port, None, 100 * MIB)
    assert status == 401 and sent < 100 * MIB, (status, sent)
    status, sent = _chunked_upload(server.port, TOKENS["video"], 3 * MIB)
    assert status == 413, (status, sent)
    ok = httpx.post(f"{server.url}/v1/tasks", json={"app": "matmul"}, headers=headers("video"))
    assert ok.status_code == 201  # the server is fine afterwards


def _closed_after_refusal(port: int, token: str | None, length: int) -> tuple[int, bool]:
    """Send headers declaring a ``length``-byte body and no body; (status, whether the server
    then closed the connection within 5 s rather than wait to drain the body)."""
    s = socket.create_connection(("127.0.0.1", port))
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    s.sendall(
        (
            f"POST /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{auth}"
            f"Content-Length: {length}\r\n\r\n"
        ).encode()
    )
    s.settimeout(5.0)
    got = b""
    try:
        while chunk := s.recv(4096):
            got += chunk
        closed = True
    except TimeoutError:
        closed = False
    finally:
        s.close()
    return int(got.split()[1]), closed


def test_a_refusal_before_the_body_closes_the_connection_and_odd_json_is_a_422(
    server: ServiceProcess,
) -> None:
    """401 and 413 before the body is read close the connection: without `connection: close` the
    server kept it and drained whatever length the client declared, unauthenticated too (a 50 MB
    declaration was read to its end). A body the 422 must echo (NaN, a lone surrogate) was a 500
    with a traceback; an unknown key or a value of another JSON type was taken in silence."""
    assert _closed_after_refusal(server.port, None, 50 * MIB) == (401, True)
    assert _closed_after_refusal(server.port, TOKENS["video"], 50 * MIB) == (413, True)
    url, h = f"{server.url}/v1/tasks", {**headers("video"), "content-type": "application/json"}
    for body, loc in (
        ('{"app": "fft", "deadline_s": NaN}', ["body", "deadline_s"]),
        ('{"app": "\\ud800"}', ["body", "app"]),
        ('{"app": "fft", "priorty": 7}', ["body", "priorty"]),
        ('{"app": "fft", "priority": true}', ["body", "priority"]),
        ('{"app": "fft", "stream": "7"}', ["body", "stream"]),
    ):
        r = httpx.post(url, content=body, headers=h)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == loc, (body, r.status_code, r.text)
    assert "Traceback" not in server.log.read_text()


def test_a_body_that_is_not_json_gets_415_and_get_on_a_post_only_path_405(server: ServiceProcess) -> None:
    """`curl -d` sends `application/x-www-form-urlencoded`: the body was validated as raw bytes and
    the 422 said a task is not an object, never naming the header (415 now). `GET
    /v1/tasks/lookup` was taken by the id route: 422 for an id "lookup" (405, `Allow: POST`)."""
    url, h = f"{server.url}/v1/tasks", headers("video")
    body = '{"app": "fft"}'
    form = httpx.post(url, content=body, headers={**h, "content-type": "application/x-www-form-urlencoded"})
    assert form.status_code == 415 and "Content-Type: expected application/json" in form.text, form.text
    bare = httpx.post(url, content=body, headers=h)  # FastAPI reads no body as JSON without the header
    assert bare.status_code == 415 and "none given" in bare.text, bare.text
    sent = {**h, "content-type": "application/json; charset=utf-8"}
    assert httpx.post(url, content=body, headers=sent).status_code == 201
    for path in ("lookup", "cancel"):
        r = httpx.get(f"{url}/{path}", headers=h)
        assert r.status_code == 405 and r.headers["allow"] == "POST", (path, r.status_code, r.text)
    assert httpx.get(f"{url}/nine", headers=h).status_code == 422  # an id that is not one
    assert httpx.get(f"{url}/lookup").status_code == 401  # the token first, as everywhere


def test_a_key_sent_again_with_another_task_is_refused_and_nothing_of_its_batch_queued(
    server: ServiceProcess,
) -> None:
    """A key names one task: sent again with another, it answered 200 with the first task, and
    the second was never queued. The same task again is still found (200)."""
    url, h = f"{server.url}/v1/tasks", headers("video")
    first = httpx.post(url, json={"app": "fft", "idempotency_key": "reused-1"}, headers=h)
    assert first.status_code == 201
    again = httpx.post(url, json={"app": "fft", "idempotency_key": "reused-1"}, headers=h)
    assert again.status_code == 200 and again.json()[0]["id"] == first.json()[0]["id"]
    other = httpx.post(url, json={"app": "kmeans", "chunk": 9, "idempotency_key": "reused-1"}, headers=h)
    assert other.status_code == 422 and other.json()["detail"][0]["loc"] == ["body", "idempotency_key"]
    assert f"names task {first.json()[0]['id']}" in other.json()["detail"][0]["msg"], other.text
    batch = [{"app": "fft", "idempotency_key": "fresh-1"}, {"app": "matmul", "idempotency_key": "reused-1"}]
    r = httpx.post(url, json=batch, headers=h)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", 1, "idempotency_key"], r.text
    listed = httpx.get(f"{server.url}/v1/tasks", params={"key_prefix": "fresh-"}, headers=h).json()
    assert listed["tasks"] == []  # the batch was refused whole
    # Two tasks of one batch with one key: the 422 named the id of a task rolled back with the
    # batch (the next submission then got that id).
    twice = [
        {"app": "fft", "chunk": 6, "idempotency_key": "k2"},
        {"app": "fft", "chunk": 7, "idempotency_key": "k2"},
    ]
    r = httpx.post(url, json=twice, headers=h)
    assert r.status_code == 422 and "[0] of this batch has it" in r.json()["detail"][0]["msg"], r.text


def test_a_tenant_without_the_admin_role_is_refused_before_its_body_and_a_gone_client_is_not_a_500(
    server: ServiceProcess,
) -> None:
    """A malformed body to a cluster operation got 422 from a tenant that may not ask at all (the
    body was read and parsed first); a client that hung up mid-body was logged as 500."""
    h = {**headers("video"), "content-type": "application/json"}
    r = httpx.put(f"{server.url}/v1/admin/scheduler", content='{"scheduler": ', headers=h)
    assert r.status_code == 403 and "need the admin role" in r.json()["detail"], r.text
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(
        (
            f"POST /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKENS['video']}\r\n"
            'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n[{"app": '
        ).encode()
    )
    s.close()
    deadline = time.monotonic() + 10
    while " 499 tenant=video" not in server.log.read_text():
        assert time.monotonic() < deadline, server.log.read_text()[-2000:]
        time.sleep(0.1)
    assert "POST /v1/tasks 500" not in server.log.read_text()


def test_a_path_cannot_write_a_line_of_its_own_into_the_log(server: ServiceProcess) -> None:
    """A %0A in the path was decoded into the text log as a newline: a second, forged line
    (`... INFO POST /v1/admin/reload 200 tenant=ops`), from anyone who reaches the port."""
    forged = "FORGED%20INFO%20POST%20/v1/admin/reload%20200%20tenant=ops"
    r = httpx.get(f"{server.url}/v1/x%0A{forged}%00")
    assert r.status_code == 401
    time.sleep(0.2)  # the access line is written as the answer goes
    lines = [ln for ln in server.log.read_text().splitlines() if "FORGED" in ln]
    assert len(lines) == 1 and lines[0].startswith(tuple("0123456789")), lines
    assert "/v1/x\\nFORGED INFO POST /v1/admin/reload 200 tenant=ops\\x00 401" in lines[0], lines


def _serve(config: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "experiments.cli", "serve", "--config", str(config)]
    env = {**os.environ, "RLSCHED_BACKEND": "numpy"}
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_a_second_service_on_the_same_queue_exits_2_and_touches_nothing(
    server: ServiceProcess, tmp_path: Path
) -> None:
    """A second ``rlsched serve`` with the same config, while tasks run: exit 2 naming the holder,
    and no task put back in the queue (no attempt abandoned, none started twice). Another queue on
    the same port: exit 4. Without the lock (checked by hand, 2026-12-03) the second process got
    past the queue and failed only on the bind (exit 4, not 2). Before this change it ran queue
    recovery before the bind: the running service's tasks went back to the queue and ran twice."""
    body = [{"app": "video_synopsis", "stream": k % 4, "chunk": k} for k in range(40)]
    ids = [t["id"] for t in httpx.post(f"{server.url}/v1/tasks", json=body, headers=headers("video")).json()]
    db = sqlite3.connect(tmp_path / "queue.db")
    deadline = time.monotonic() + 30
    while not db.execute("SELECT COUNT(*) FROM tasks WHERE state = 'running'").fetchone()[0]:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    second = _serve(server.config)
    assert second.returncode == 2, second.stderr
    assert f"pid {server.pid}" in second.stderr and "one service per database" in second.stderr
    assert "rlsched serve:" not in second.stderr  # never announced itself
    other = tmp_path / "other"
    other.mkdir()
    config = service_config(other, server.port)
    made = {p.name for p in other.iterdir()}  # the config (and its cluster file)
    third = _serve(config)
    assert third.returncode == 4 and f"127.0.0.1:{server.port}: in use" in third.stderr, third.stderr
    assert {p.name for p in other.iterdir()} == made  # no queue file, no lock file left behind
    rows = wait_done(server, "video", ids, timeout=120)
    assert {r["state"] for r in rows} == {"done"}
    assert db.execute("SELECT COUNT(*) FROM reports WHERE outcome = 'abandoned'").fetchone() == (0,)
    assert db.execute("SELECT MAX(attempt) FROM tasks").fetchone() == (1,)
    assert exactly_once_violations(db) == []
    db.close()


def test_the_store_refuses_a_stale_attempt_and_the_audit_sees_a_planted_double(tmp_path: Path) -> None:
    """Attempt 1 is superseded (its node was lost, attempt 2 started): its late result is refused
    and attempt 2's recorded. With the attempt guard removed from ``TaskStore.finish`` (checked by
    hand, 2026-12-03) ``finish(attempt 1)`` returns True and the audit names the task."""
    store = TaskStore(tmp_path / "q.db")
    try:
        ((row, _),) = store.submit("t", [NewTask("matmul")])
        assert store.start(row.id, "a") == 1
        assert store.requeue(row.id, 1)
        assert store.start(row.id, "b") == 2
        assert not store.finish(row.id, 1, None, "{}")  # late: attempt 2 holds the task
        assert store.finish(row.id, 2, None, "{}")
        assert not store.finish(row.id, 2, None, "{}")  # a repeated report changes nothing
        with pytest.raises(DatabaseInUse, match="pid"):
            TaskStore(tmp_path / "q.db")  # one store per file, in-process too
        (tmp_path / "alias.db").symlink_to(tmp_path / "q.db")  # its lock was alias.db.lock: two services
        with pytest.raises(DatabaseInUse, match="pid"):
            TaskStore(tmp_path / "alias.db")
    finally:
        store.close()
    db = sqlite3.connect(tmp_path / "q.db")
    assert exactly_once_violations(db) == []
    reports = db.execute("SELECT attempt, outcome, recorded FROM reports ORDER BY rowid").fetchall()
    assert reports == [(1, "lost", 1), (1, "done", 0), (2, "done", 1), (2, "done", 0)]
    # Planted: the late report recorded, as a store without the guard would have done.
    db.execute("UPDATE reports SET recorded = 1 WHERE attempt = 1 AND outcome = 'done'")
    assert exactly_once_violations(db) == [f"task {row.id}: done, finished by 2 reports"]
    db.execute("UPDATE reports SET recorded = 0 WHERE attempt = 2")
    assert exactly_once_violations(db) == [f"task {row.id}: done by attempt 1, but attempt 2 holds it"]
    db.close()


def _slow_cluster(folder: Path) -> Path:
    """Nodes ``a`` and ``b`` whose GPUs run 30x slower than the T4 of node ``ref`` (emulated
    speeds are relative to the fastest GPU), so that a task on them runs for a second or more."""
    speed = gpu_model("T4").fp32_tflops
    p = folder / "live.toml"
    p.write_text(
        "".join(
            f'[[nodes]]\nname = "{n}"\ncpu_cores = 1\n[[nodes.gpus]]\nmodel = "T4"\nspeed = {s}\n\n'
            for n, s in (("a", speed / 30), ("b", speed / 30), ("ref", speed))
        )
    )
    return p


def test_an_idle_service_says_not_ready_once_its_queue_file_refuses_writes(tmp_path: Path) -> None:
    """No client writes, and the queue file turns read-only (the ``store-readonly`` failpoint,
    from 6 s after the queue opens): ``/readyz`` answers 503 naming the storage within the idle
    probe's period (``PROBE_IDLE_S``), so a load balancer stops routing submissions to it before a
    client's write fails. Reads still answer. Without the idle probe (checked by hand, 2026-12-07)
    it stayed 200 for the whole read-only window."""
    port = free_port()
    s = ServiceProcess(
        service_config(tmp_path, port), port, env={"RLSCHED_FAILPOINTS": "store-readonly=6-120"}
    )
    s.start()
    try:
        deadline = time.monotonic() + 20
        while True:
            ready = httpx.get(f"{s.url}/readyz", timeout=10)
            if ready.status_code != 200 or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        assert ready.status_code == 503 and "readonly" in ready.json()["storage"], ready.text
        assert httpx.get(f"{s.url}/v1/tasks", headers=headers("video"), timeout=10).status_code == 200
    finally:
        s.stop()


def test_a_removed_nodes_late_result_is_refused_through_the_service(tmp_path: Path) -> None:
    """Node ``a`` is removed mid-task; its tasks run again on ``b``; 0.3 s later ``a``'s results
    arrive anyway (the ``late-result`` failpoint: a partitioned node that finished). Each is
    refused — the audit shows every one, unrecorded — and each task is finished once, by its
    retry. Without the attempt guard (checked by hand, 2026-12-03) the late results were recorded
    while the retries ran, and the audit named every task."""
    port = free_port()
    cfg = service_config(
        tmp_path, port, {"video": "admin = true\n"}, top=f'cluster = "{_slow_cluster(tmp_path)}"\n'
    )
    s = ServiceProcess(cfg, port, env={"RLSCHED_FAILPOINTS": "late-result=0.3"})
    s.start()
    try:
        assert httpx.post(f"{s.url}/v1/admin/nodes/ref/drain", headers=headers("video")).status_code == 200
        body = [{"app": "intrusion_detection", "stream": k % 4, "chunk": k} for k in range(8)]
        ids = [t["id"] for t in httpx.post(f"{s.url}/v1/tasks", json=body, headers=headers("video")).json()]
        deadline = time.monotonic() + 30
        while True:
            running = httpx.get(f"{s.url}/v1/tasks?state=running", headers=headers("video")).json()["tasks"]
            on_a = [t["id"] for t in running if t["node"] == "a"]
            if on_a or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert on_a
        gone = httpx.delete(f"{s.url}/v1/admin/nodes/a", headers=headers("video"))
        assert gone.status_code == 200 and gone.json()["requeued"] >= 1, gone.text
        rows = wait_done(s, "video", ids, timeout=120)
        assert {r["state"] for r in rows} == {"done"}
        db = sqlite3.connect(tmp_path / "queue.db")
        lost = {i for (i,) in db.execute("SELECT task_id FROM reports WHERE outcome = 'lost'")}
        late = db.execute(
            "SELECT task_id, recorded FROM reports WHERE attempt = 1 AND outcome = 'done' AND task_id IN "
            "(SELECT task_id FROM reports WHERE outcome = 'lost')"
        ).fetchall()
        assert lost and {i for i, _ in late} == lost  # every late answer arrived
        assert {r for _, r in late} == {0}, late  # and was refused
        while_retry_ran = db.execute(
            "SELECT COUNT(*) FROM reports l JOIN reports r ON l.task_id = r.task_id "
            "WHERE l.attempt = 1 AND l.outcome = 'done' AND r.attempt = 2 AND r.outcome = 'done' "
            "AND l.reported_at < r.reported_at"
        ).fetchone()[0]
        assert while_retry_ran == len(lost)  # so only the attempt guard could refuse them
        assert exactly_once_violations(db) == []
        db.close()
    finally:
        s.stop()


@pytest.fixture
def faults() -> Iterator[None]:
    yield
    failpoints.set_for_test("")


def test_a_full_or_read_only_queue_refuses_whole_batches_and_recovers(tmp_path: Path, faults: None) -> None:
    """SQLite's real ``SQLITE_FULL`` (page cap) and ``SQLITE_READONLY``: a refused batch leaves no
    row behind, the store says it is degraded, and takes writes again once the fault lifts."""
    failpoints.set_for_test("store-full=0-1.5")
    store = TaskStore(tmp_path / "full.db")
    try:
        batches, refused = 0, None
        while refused is None:
            try:
                store.submit("t", [NewTask("matmul", chunk=k) for k in range(50)])
                batches += 1
            except StorageError as e:
                refused = e
        assert refused.kind == "full" and store.degraded is refused and batches < 20
        assert store.counts() == {("t", "queued"): 50 * batches}  # nothing of the refused batch
        time.sleep(max(0.0, 1.6 - (time.monotonic() - store._opened)))
        store.submit("t", [NewTask("matmul")])
        assert store.degraded is None
    finally:
        store.close()
    failpoints.set_for_test("store-readonly=0-0.5")
    store = TaskStore(tmp_path / "ro.db")
    try:
        with pytest.raises(StorageError) as e:
            store.submit("t", [NewTask("matmul")])
        assert e.value.kind == "readonly" and store.counts() == {}
        assert not store.probe()
        time.sleep(0.6)
        assert store.probe() and store.degraded is None
    finally:
        store.close()


def test_a_lane_thread_that_dies_mid_kernel_has_its_subtask_run_again(faults: None) -> None:
    """A fifth of the kernels kill their lane's thread mid-kernel (``lane-dies``): the agent's
    watchdog (``NodeAgent.revive_lanes``, on every cluster tick) starts the lane again and places
    the subtask anew, and every task completes with right results. With the watchdog off (checked
    by hand, 2026-12-03) the tasks whose lanes died never completed."""
    from rlsched.policies import parse_scheduler
    from runtime.cluster.config import default_live_cluster
    from runtime.cluster.local import LocalCluster
    from runtime.cluster.workload import live_task
    from runtime.kernels import check_result, make_task_data

    failpoints.set_for_test("lane-dies=0.2")
    spec = default_live_cluster()
    cluster = LocalCluster(spec, "numpy")
    cluster.start(parse_scheduler("mct+mlsm").placer, 0, None)
    outcomes: dict[int, TaskOutcome] = {}
    data = {k: make_task_data(app, k % 3, k) for k, app in enumerate(["intrusion_detection", "matmul"] * 6)}
    try:
        for k, d in data.items():
            cluster.submit(
                k % len(spec.nodes), live_task(k, d, 0.0), d, lambda out, k=k: outcomes.update({k: out})
            )
        deadline = time.monotonic() + 60
        while len(outcomes) < len(data) and time.monotonic() < deadline:
            cluster.tick()
            time.sleep(0.05)
        revived = sum(a.lanes_revived for a in cluster.agents)
    finally:
        cluster.close()
    assert len(outcomes) == len(data) and revived > 0, (len(outcomes), revived)
    for k, out in outcomes.items():
        assert out.error is None, out.error
        check_result(data[k], out.outputs)

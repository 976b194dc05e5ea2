"""``rlsched submit`` against a real service: batches past the API's bound, idempotency keys that
make a resend or a rerun queue nothing twice, waiting on a queue bound, ``rlsched status`` of
several tasks, and a ``--wait`` that outlives a ``kill -9`` of the service."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from runtime.service.client import Client, PartlySubmitted, keyed
from tests.conftest import interrupt_rlsched
from tests.service_helpers import TOKENS, Server, cluster_nodes, free_port, headers, service_config, wait_done

ROOT = Path(__file__).resolve().parents[1]


def _cli(s: Server, tenant: str, *a: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RLSCHED_TOKEN": TOKENS[tenant]}
    cmd = [sys.executable, "-m", "experiments.cli", *a, "--url", s.url]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _drain_all(s: Server, on: bool = True) -> None:
    for n in cluster_nodes(s):
        what = "drain" if on else "resume"
        r = httpx.post(f"{s.url}/v1/admin/nodes/{n['name']}/{what}", headers=headers("video"), timeout=30)
        assert r.status_code == 200, r.text


def _keys(db: Path, tenant: str) -> list[tuple[int, str]]:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT id, idem_key FROM tasks WHERE tenant = ? ORDER BY id", (tenant,)).fetchall()


def test_batches_keys_and_queue_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More tasks than a request takes go in batches. Stopped by a quota part-way (no retries),
    the command says what was queued and how to queue the rest; run again with its key, it
    queues only the rest — the batch already queued is found by its keys even while the tenant
    is at its quota. With retries, a submission waits on the quota as the queue drains, in
    smaller batches, and every task is queued once."""
    port = free_port()
    extra = {"video": "max_queued = 1500\nadmin = true", "batch": "max_queued = 20"}
    s = Server(service_config(tmp_path, port, extra), port)
    s.start()
    try:
        _drain_all(s)  # nothing runs: the queue holds what was submitted
        r = _cli(
            s, "video", "submit", "--app", "fft", "--chunks", "2500", "--key", "job-1", "--retry-for", "0"
        )
        assert r.returncode == 4, r.stderr
        assert "1000 of 2500 tasks queued" in r.stderr and "HTTP 429" in r.stderr, r.stderr
        assert "(queued: ids 1-1000); the same command with --key job-1 queues only the rest" in r.stderr
        first = _keys(tmp_path / "queue.db", "video")
        assert [k for _, k in first] == [f"job-1/fft/0/{c}" for c in range(1000)]
        # Again with the key (1,000 queued, the quota 1,500): the first batch is found, not
        # refused for the 1,000 it would add; the next 200 fit.
        r = _cli(
            s, "video", "submit", "--app", "fft", "--chunks", "1200", "--key", "job-1", "--retry-for", "0"
        )
        assert r.returncode == 0, r.stderr
        rows = _keys(tmp_path / "queue.db", "video")
        assert rows[:1000] == first and [k for _, k in rows] == [f"job-1/fft/0/{c}" for c in range(1200)]
        r = _cli(s, "video", "status", "1", "1200", "7", "--json")
        assert r.returncode == 0, r.stderr
        assert [t["id"] for t in json.loads(r.stdout)] == [1, 1200, 7]
        assert _cli(s, "video", "status", "1", "2").stdout.splitlines()[-1] == "2 tasks: 2 queued"
        # Ctrl-C while it waits: the tasks stay queued, and the message says how to find them.
        monkeypatch.setenv("RLSCHED_TOKEN", TOKENS["video"])
        argv = ["submit", "--app", "fft", "--chunks", "2", "--key", "ctrl-c", "--wait", "--url", s.url]
        code, err = interrupt_rlsched(argv, lambda: len(_keys(tmp_path / "queue.db", "video")) == 1202, 0.3)
        assert code == 130 and "rlsched cancel --key ctrl-c cancels what has not started" in err, err
        r = _cli(s, "video", "cancel", "--key", "ctrl-c")
        assert r.stdout.splitlines()[-1] == "2 tasks: 2 cancelled", r.stdout
        # A submission is named by its key: listed, shown, and cancelled, as one.
        assert (
            _cli(s, "video", "status", "--key", "job-1").stdout.splitlines()[-1] == "1200 tasks: 1200 queued"
        )
        assert _cli(s, "video", "status", "--key", "job-2").stdout.strip() == "no tasks of submission job-2"
        r = httpx.get(f"{s.url}/v1/tasks", params={"key_prefix": "\U0010ffff"}, headers=headers("video"))
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "key_prefix"], r.text
        r = _cli(s, "video", "tasks", "--key", "job-1", "--limit", "5", "--after", "10")
        assert r.stdout.splitlines()[-1] == "more: rlsched tasks --after 15 --key job-1 --limit 5", r.stdout
        assert _cli(s, "video", "tasks", "--key", "job-", "--limit", "5").stdout.strip() == "no tasks"
        r = _cli(s, "video", "cancel", "1", "2", "3", "--json")
        assert [t["state"] for t in json.loads(r.stdout)] == ["cancelled"] * 3, r.stderr
        r = _cli(s, "video", "cancel", "--key", "job-1")
        assert r.returncode == 0 and r.stdout.splitlines()[-1] == "1197 tasks: 1197 cancelled", r.stdout
        assert (
            _cli(s, "video", "cancel", "--key", "job-1").stdout.strip()
            == "no queued tasks of submission job-1"
        )
        r = _cli(s, "video", "cancel", "1", "--key", "job-1")
        assert r.returncode == 2 and "task ids or --key KEY" in r.stderr, r.stderr
        with sqlite3.connect(tmp_path / "queue.db") as c:
            assert c.execute("SELECT state, COUNT(*) FROM tasks GROUP BY state").fetchall() == [
                ("cancelled", 1202)
            ]
        # After a 429 the next try sends half of what was refused: 30 against a quota of 20 (nothing
        # runs) queues 15 at the second try; a third would have to wait for room (past retry_for_s).
        with Client(s.url, TOKENS["batch"]) as c:
            with pytest.raises(PartlySubmitted) as e:
                c.submit(keyed([{"app": "fft", "chunk": k} for k in range(30)], "halves"), retry_for_s=1.5)
            assert len(e.value.accepted) == 15 and e.value.total == 30
            c.cancel_many([t["id"] for t in e.value.accepted])
        # A quota of 20 and 30 tasks: with retries the command waits for room, as the nodes,
        # open again a second later, run what is queued.
        threading.Timer(1.0, _drain_all, (s, False)).start()
        t0 = time.monotonic()
        r = _cli(
            s, "batch", "submit", "--app", "fft", "--chunks", "30", "--deadline", "600", "--retry-for", "60"
        )
        assert r.returncode == 0, r.stderr
        assert "HTTP 429: tenant batch: at most 20 queued tasks" in r.stderr, r.stderr
        assert r.stderr.count("\n") <= 2 + (time.monotonic() - t0) / 5, r.stderr  # a line per reason or 5 s
        batch = [(i, k) for i, k in _keys(tmp_path / "queue.db", "batch") if not k.startswith("halves/")]
        assert len(batch) == 30 and len({k for _, k in batch}) == 30
        assert sorted(int(k.rsplit("/", 1)[1]) for _, k in batch) == list(range(30))
        with sqlite3.connect(tmp_path / "queue.db") as c:
            sql = "SELECT DISTINCT deadline_s FROM tasks WHERE tenant = 'batch' AND state != 'cancelled'"
            assert c.execute(sql).fetchall() == [(600.0,)]
        # Deadlines: counted met or missed as tasks finish, on /metrics and in --wait's summary.
        wait_done(s, "batch", [i for i, _ in batch])
        r = _cli(s, "batch", "submit", "--app", "fft", "--chunks", "3", "--deadline", "0.001", "--wait")
        assert r.returncode == 0 and r.stdout.splitlines()[-1].endswith("; deadline missed by 3 of 3"), (
            r.stdout
        )
        key = r.stderr.split("rlsched: key ", 1)[1].split(" ", 1)[0]  # the key it made up
        assert "names the 3 tasks queued" in r.stderr, r.stderr
        assert _cli(s, "batch", "status", "--key", key).stdout.splitlines()[-1].startswith("3 tasks: 3 done")
        metrics = httpx.get(f"{s.url}/metrics", timeout=30).text
        assert 'rlsched_deadlines_total{result="met",tenant="batch"} 30.0' in metrics, metrics
        assert 'rlsched_deadlines_total{result="missed",tenant="batch"} 3.0' in metrics
    finally:
        s.stop()


def test_a_lost_answer_is_sent_again_and_a_wait_outlives_kill_9(tmp_path: Path) -> None:
    """The first submission's answer comes after ``request_timeout_s`` (503) though its tasks
    were queued: the command sends it again, the service finds the tasks by their keys, and each
    is queued once. Its ``--wait`` then outlives a ``kill -9`` of the service and its restart."""
    port = free_port()
    cfg = service_config(tmp_path, port, {"video": "admin = true"}, top="request_timeout_s = 1")
    s = Server(cfg, port, env={"RLSCHED_FAILPOINTS": "submit-late=2"})
    s.start()
    try:
        _drain_all(s)  # the tasks stay queued until the nodes are resumed, after the restart
        env = {**os.environ, "RLSCHED_TOKEN": TOKENS["video"]}
        cmd = [sys.executable, "-m", "experiments.cli", "submit", "--app", "fft", "--chunks", "5", "--wait"]
        cmd += ["--first-chunk", "100"]  # a stream's later chunks
        p = subprocess.Popen(
            [*cmd, "--url", s.url],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while "POST /v1/tasks/lookup 200" not in s.log.read_text():  # it waits on them
            assert time.monotonic() < deadline and p.poll() is None, s.log.read_text()[-2000:]
            time.sleep(0.1)
        s.kill9()
        time.sleep(0.5)  # a wait that does not outlive the outage ends here
        s.start()
        _drain_all(s, on=False)  # the drains outlived the restart
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert "HTTP 503: request: no answer within 1 s" in err and "asking again until it answers" in err, (
            err
        )
        assert out.splitlines()[-1].startswith("5 tasks: 5 done"), out
        assert [int(k.rsplit("/", 1)[1]) for _, k in _keys(tmp_path / "queue.db", "video")] == list(
            range(100, 105)
        )
    finally:
        s.stop()


def test_submit_wait_names_its_key_before_it_waits(tmp_path: Path) -> None:
    """``timeout 3 rlsched submit ... --wait`` (a script's way to bound a wait) ended with SIGTERM
    and nothing said: the queued tasks' made-up key was printed only at the end. It is said as
    soon as they are queued now, and finds them."""
    import signal

    port = free_port()
    s = Server(service_config(tmp_path, port, {"video": "admin = true"}), port)
    s.start()
    try:
        _drain_all(s)  # the tasks stay queued: the wait never ends on its own
        env = {**os.environ, "RLSCHED_TOKEN": TOKENS["video"]}
        cmd = [sys.executable, "-m", "experiments.cli", "submit", "--app", "fft", "--chunks", "2", "--wait"]
        with open(tmp_path / "err", "w") as err:
            p = subprocess.Popen(
                [*cmd, "--url", s.url], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err
            )
            deadline = time.monotonic() + 60
            while "names the 2 tasks queued" not in (tmp_path / "err").read_text():
                assert time.monotonic() < deadline and p.poll() is None, (tmp_path / "err").read_text()
                time.sleep(0.1)
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
        key = (tmp_path / "err").read_text().split("rlsched: key ", 1)[1].split(" ", 1)[0]
        r = _cli(s, "video", "status", "--key", key)
        assert r.stdout.splitlines()[-1].startswith("2 tasks: 2 queued"), r.stdout
    finally:
        s.stop()


def test_the_client_batches_as_the_service_bounds_them() -> None:
    from runtime.service.app import MAX_BATCH
    from runtime.service.client import LOOKUP_BATCH, SUBMIT_BATCH

    assert LOOKUP_BATCH == SUBMIT_BATCH == MAX_BATCH

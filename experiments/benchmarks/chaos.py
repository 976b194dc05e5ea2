"""Fault campaign of ``rlsched serve`` (a script, not a test): each fault injected into a real
service under load, then what became of every accepted task read from its queue file.

    python -m experiments.benchmarks.chaos [--faults kill9,lane,ray,full,readonly,stalled-reader,slow-body]
        [--cycles 10] [--seconds 20] [--json OUT]

Nothing accepted may be lost in any fault, and nothing may finish twice: per fault the table gives
how often it was injected, tasks accepted (answered 2xx), completed, duplicated (finished other
than exactly once by the attempt holding them, from the attempt audit) and lost (accepted but
never finished), and the time to recover. Faults come from outside where they can (``kill -9``, a
Ray node removed, clients that misbehave on raw sockets) and from failpoints where they cannot
(a lane thread dying mid-kernel, the queue file full or read-only: ``runtime.failpoints``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import random
import socket
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from experiments.benchmarks.service_load import Load, audit, percentiles, wait_drained
from experiments.benchmarks.service_process import ServiceProcess, free_port, write_config

TOKEN = "chaos-token"
#: Seconds the queue file stays full / read-only in those faults (from ``WINDOW_START_S``).
WINDOW_S = 6.0
#: When the storage window opens, in seconds after the service opened its queue.
WINDOW_START_S = 8.0

Row = dict[str, Any]


def _service(
    folder: Path, env: dict[str, str] | None = None, top: str = "", timeout_s: float = 5.0
) -> ServiceProcess:
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    top = f"request_timeout_s = {timeout_s:g}\n" + top
    return ServiceProcess(write_config(folder, port, {"chaos": TOKEN}, top=top), port, env)


def _row(fault: str, injected: int, load: Load, db: Path, recover_s: float, note: str) -> Row:
    wait_drained(db, load.accepted)
    return {
        "fault": fault,
        "injected": injected,
        **audit(db, load.accepted),
        "recover_s": recover_s,
        "note": note,
    }


def kill9(folder: Path, cycles: int, seed: int) -> Row:
    """``cycles`` times: under load, wait until tasks run, ``kill -9``, restart; recovery time is
    from the kill to ``readyz`` 200 of the new process."""
    rng = random.Random(seed)
    s = _service(folder)
    s.start()
    db = folder / "queue.db"
    load = Load(s.url, TOKEN, prefix="kill9").start()
    recover, running = [], 0
    try:
        for _ in range(cycles):
            time.sleep(rng.uniform(1.0, 3.0))
            running += _wait_running(db)
            s.kill9()
            t0 = time.monotonic()
            s.start()
            recover.append(time.monotonic() - t0)
        load.stop()
        return _row(
            "kill -9 of the service under load",
            cycles,
            load,
            db,
            max(recover),
            f"{running} tasks running at the kills; restart to ready {min(recover):.1f}-{max(recover):.1f} s",
        )
    finally:
        load.stop()
        s.stop()


def _wait_running(db: Path, timeout_s: float = 10.0) -> int:
    """Tasks running now, once there is at least one (0 after ``timeout_s``)."""
    con = sqlite3.connect(db)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            n = con.execute("SELECT COUNT(*) FROM tasks WHERE state = 'running'").fetchone()[0]
            if n:
                return int(n)
            time.sleep(0.02)
        return 0
    finally:
        con.close()


def lane(folder: Path, seconds: float, chance: float = 0.05) -> Row:
    """Each kernel kills its lane thread mid-kernel with probability ``chance``; the agents'
    watchdog revives the lane and places the subtask again."""
    s = _service(folder, {"RLSCHED_FAILPOINTS": f"lane-dies={chance}"})
    s.start()
    load = Load(s.url, TOKEN, prefix="lane").start()
    try:
        time.sleep(seconds)
        load.stop()
        row = _row("an agent's lane thread killed mid-kernel", 0, load, folder / "queue.db", 0.0, "")
    finally:
        load.stop()
        s.stop()
    row["injected"] = s.log.read_text().count("thread killed mid-job")
    row["note"] = f"p = {chance} per kernel; each subtask placed again (watchdog every 0.25 s)"
    row["recover_s"] = 0.25  # the watchdog's period bounds the time a dead lane goes unnoticed
    return row


def storage(
    folder: Path, kind: str, seconds: float, start_s: float = WINDOW_START_S, width_s: float = WINDOW_S
) -> Row:
    """The queue file full (``store-full``: SQLite's page cap at the file's size, a real
    ``SQLITE_FULL``) or read-only (``store-readonly``) from ``start_s`` for ``width_s`` seconds
    after the service opened it: submissions get 507 / 503, outcomes wait in memory; recovery is
    from the last refusal to the next 2xx."""
    window = f"{start_s:g}-{start_s + width_s:g}"
    s = _service(folder, {"RLSCHED_FAILPOINTS": f"store-{kind}={window}"})
    t_open = time.time()  # an upper bound of when the store opened: the window ends by here + B
    s.start()
    load = Load(s.url, TOKEN, prefix=kind).start()
    ready = _ReadySampler(s.url)
    try:
        time.sleep(max(seconds, start_s + width_s + 2 - (time.time() - t_open)))
        load.stop()
        ready.stop()
        db = folder / "queue.db"
        row = _row(f"queue file {'full' if kind == 'full' else 'read-only'}", 0, load, db, 0.0, "")
        row["half_written"] = _partial_batches(db, load.batch)
    finally:
        load.stop()
        ready.stop()
        s.stop()
    refused = [t for t, st in load.refusals if st in (503, 507)]
    row["injected"] = len(refused)
    after = [t for t, _ in load.latencies if refused and t > max(refused)]
    row["recover_s"] = round(min(after) - max(refused), 2) if after else float("nan")
    codes = sorted({str(st) for _, st in load.refusals})
    row["note"] = (
        f"{width_s:g} s window; answers {', '.join(codes)} ({len(refused)} refused requests); "
        f"readyz 503 in {ready.not_ready} of {ready.samples} samples; "
        f"{row['half_written']} half-written batches"
    )
    return row


class _ReadySampler:
    """Polls ``/readyz`` every 0.2 s in a thread."""

    def __init__(self, url: str) -> None:
        import threading

        self.url, self.samples, self.not_ready = url, 0, 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                ok = httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                continue
            self.samples += 1
            self.not_ready += not ok

    def stop(self) -> None:
        self._stop.set()
        self._t.join(timeout=5)


def _partial_batches(db: Path, batch: int) -> int:
    """Batches (the idempotency keys' ``PREFIX-N`` part) with other than ``batch`` tasks queued:
    a refused write that left part of its batch behind, or a batch queued twice."""
    con = sqlite3.connect(db)
    try:
        keys = [k for (k,) in con.execute("SELECT idem_key FROM tasks WHERE idem_key IS NOT NULL")]
    finally:
        con.close()
    counts = collections.Counter(k.rsplit("-", 1)[0] for k in keys)
    return sum(n != batch for n in counts.values())


def _compare_rates(
    folder: Path,
    fault: str,
    seconds: float,
    inject: Callable[[ServiceProcess], Callable[[], int]],
    timeout_s: float = 5.0,
) -> Row:
    """Under load: ``seconds`` without the fault, then ``seconds`` with it; completions per second
    and p99 accept latency of the two halves (a fault that stalls the dispatcher shows as a drop).
    ``timeout_s`` is the service's request timeout."""
    s = _service(folder, timeout_s=timeout_s)
    s.start()
    db = folder / "queue.db"
    load = Load(s.url, TOKEN, prefix=fault).start()
    try:
        time.sleep(seconds)
        t_mid = time.time()
        stop = inject(s)
        time.sleep(seconds)
        t_end = time.time()
        injected = stop()
        load.stop()
        row = _row(fault, injected, load, db, 0.0, "")
    finally:
        load.stop()
        s.stop()
    con = sqlite3.connect(db)
    before = con.execute(
        "SELECT COUNT(*) FROM tasks WHERE finished_at BETWEEN ? AND ?", (t_mid - seconds, t_mid)
    ).fetchone()[0]
    during = con.execute(
        "SELECT COUNT(*) FROM tasks WHERE finished_at BETWEEN ? AND ?", (t_mid, t_end)
    ).fetchone()[0]
    con.close()
    p99_before = percentiles([x for t, x in load.latencies if t < t_mid])[1]
    p99_during = percentiles([x for t, x in load.latencies if t_mid <= t < t_end])[1]
    row["note"] = (
        f"completed/s {before / seconds:.1f} before, {during / seconds:.1f} during; accept p99 "
        f"{p99_before * 1e3:.0f} ms before, {p99_during * 1e3:.0f} ms during"
    )
    row["rate_ratio"] = during / before if before else float("nan")
    return row


def stalled_readers(folder: Path, seconds: float, clients: int = 32) -> Row:
    """``clients`` connections each ask for :data:`PIPELINED` pages of up to 1,000 tasks at once
    and never read the answers: the server's writes to them stall once the socket buffers are full.
    The note gives the unread bytes in the server's send queues 1 s in, and how many of the
    stalled connections the server still held when the fault ended."""
    import threading

    stuck: list[tuple[int, int]] = []

    def inject(s: ServiceProcess) -> Callable[[], int]:
        socks = []
        request = (
            f"GET /v1/tasks?limit=1000 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        ).encode()
        for _ in range(clients):
            c = socket.socket()
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
            c.connect(("127.0.0.1", s.port))
            c.sendall(request * PIPELINED)  # more answer than the socket buffers hold
            socks.append(c)
        probe = threading.Timer(1.0, lambda: stuck.append(_send_queues(s.port)))
        probe.start()

        def stop() -> int:
            probe.join()
            stuck.append(_send_queues(s.port))
            for c in socks:
                c.close()
            return clients

        return stop

    row = _compare_rates(folder, "clients that stop reading mid-response", seconds, inject)
    (held_1s, bytes_1s), (held_end, _) = stuck
    row["note"] += (
        f"; 1 s in, {bytes_1s / 1e6:.1f} MB of answers unread in {held_1s} connections; at the end "
        f"{held_end} still held (the server drops a stalled connection after its keep-alive timeout)"
    )
    return row


#: Requests each stalled reader sends at once (HTTP/1.1 pipelining): their answers exceed what the
#: socket buffers hold, so the server's writes to it block.
PIPELINED = 8


def _send_queues(port: int) -> tuple[int, int]:
    """(connections, bytes) the server's sockets on ``port`` hold sent but unread by their peers
    (``ss``'s Send-Q), counting only connections with some."""
    import subprocess

    out = subprocess.run(
        ["ss", "-tnH", "state", "established", f"( sport = :{port} )"], capture_output=True, text=True
    )
    queues = [int(line.split()[1]) for line in out.stdout.splitlines() if line.split()]
    return sum(q > 0 for q in queues), sum(queues)


def slow_bodies(folder: Path, seconds: float, clients: int = 32, timeout_s: float = 5.0) -> Row:
    """``clients`` connections announce a 10 kB body and send it a byte every 0.5 s (each gets
    408 after the service's request timeout, ``timeout_s``, and starts over)."""
    import threading

    def inject(s: ServiceProcess) -> Callable[[], int]:
        halt = threading.Event()
        answers: list[int] = []

        def trickle() -> None:
            while not halt.is_set():
                c = socket.create_connection(("127.0.0.1", s.port))
                c.sendall(
                    (
                        f"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                        "Content-Type: application/json\r\nContent-Length: 10000\r\n\r\n"
                    ).encode()
                )
                c.settimeout(0.5)
                while not halt.is_set():
                    try:
                        got = c.recv(64)
                    except TimeoutError:
                        try:
                            c.sendall(b" ")
                        except OSError:
                            break
                        continue
                    except OSError:
                        break
                    if got.startswith(b"HTTP/"):
                        answers.append(int(got.split()[1]))
                    break
                c.close()

        threads = [threading.Thread(target=trickle, daemon=True) for _ in range(clients)]
        for t in threads:
            t.start()

        def stop() -> int:
            halt.set()
            for t in threads:
                t.join(timeout=5)
            inject.answers = answers  # type: ignore[attr-defined]
            return len(answers) or clients

        return stop

    row = _compare_rates(folder, "slow-body clients", seconds, inject, timeout_s)
    codes = getattr(inject, "answers", [])
    row["note"] += f"; their answers: {sorted(set(codes))}"
    return row


def ray_node(folder: Path, seconds: float) -> Row:
    """A Ray worker node removed under sustained load (the service joined a 3-node Ray cluster);
    recovery is from the removal to the completion of the last task that was on it."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    from ray.cluster_utils import Cluster

    mb = 1 << 20
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": 80 * mb, "include_dashboard": False},
    )
    try:
        workers = [cluster.add_node(num_cpus=1, object_store_memory=80 * mb) for _ in range(2)]
        cluster.wait_for_nodes()
        top = f'backend = "ray"\nray_address = "{cluster.address}"\n'
        s = _service(folder, {"RAY_AUTH_MODE": "disabled"}, top=top)
        s.start(timeout=120)
        db = folder / "queue.db"
        load = Load(s.url, TOKEN, prefix="ray").start()
        try:
            time.sleep(seconds / 2)
            doomed = _busy_worker(s, {w.node_id: w for w in workers})
            t_kill = time.time()
            cluster.remove_node(doomed)
            time.sleep(seconds / 2)
            load.stop()
            row = _row("a Ray node killed under sustained load", 1, load, db, 0.0, "")
        finally:
            load.stop()
            s.stop()
        con = sqlite3.connect(db)
        lost = con.execute(
            "SELECT COUNT(DISTINCT t.id), MAX(t.finished_at), MIN(r.reported_at), MAX(r.reported_at) "
            "FROM tasks t JOIN reports r ON r.task_id = t.id AND r.outcome = 'lost'"
        ).fetchone()
        con.close()
        row["recover_s"] = round(lost[1] - t_kill, 2) if lost[1] else float("nan")
        row["note"] = (
            f"{lost[0]} tasks ran again elsewhere; reported lost {lost[2] - t_kill:.1f}-"
            f"{lost[3] - t_kill:.1f} s after the kill, the last finished {row['recover_s']} s after it"
            if lost[0]
            else "no task was on the node"
        )
        return row
    finally:
        cluster.shutdown()


def _busy_worker(s: ServiceProcess, workers: dict[str, Any], timeout_s: float = 30.0) -> Any:
    """A Ray worker node that runs one of the service's tasks now (else, after ``timeout_s``, the
    first worker)."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        nodes = httpx.get(f"{s.url}/v1/cluster", headers=headers, timeout=10).json()["nodes"]
        where = {n["name"]: n["ray_node_id"] for n in nodes}
        running = httpx.get(f"{s.url}/v1/tasks?state=running", headers=headers, timeout=10).json()["tasks"]
        for t in running:
            if where.get(t["node"]) in workers:
                return workers[where[t["node"]]]
        time.sleep(0.05)
    return next(iter(workers.values()))


FAULTS = ("kill9", "lane", "ray", "full", "readonly", "stalled-reader", "slow-body")


def run(fault: str, folder: Path, args: argparse.Namespace) -> Row:
    """One fault of :data:`FAULTS` in ``folder``."""
    if fault == "kill9":
        return kill9(folder, args.cycles, args.seed)
    if fault == "lane":
        return lane(folder, args.seconds)
    if fault == "ray":
        return ray_node(folder, args.seconds)
    if fault in ("full", "readonly"):
        return storage(folder, fault, args.seconds)
    if fault == "stalled-reader":
        return stalled_readers(folder, args.seconds / 2)
    return slow_bodies(folder, args.seconds / 2)


def table(rows: list[Row]) -> str:
    """The campaign as a Markdown table."""
    head = "| fault | injected | accepted | completed | duplicated | lost | time to recover | notes |\n"
    head += "|---|---|---|---|---|---|---|---|\n"
    return head + "".join(
        f"| {r['fault']} | {r['injected']} | {r['accepted']} | {r['completed']} | {r['duplicated']} | "
        f"{r['lost']} | {r['recover_s']:.2f} s | {r['note']} |\n"
        for r in rows
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated, of {', '.join(FAULTS)}")
    p.add_argument("--cycles", type=int, default=10, help="kill -9 cycles")
    p.add_argument("--seconds", type=float, default=20.0, help="load per fault")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the rows here too")
    args = p.parse_args(argv)
    faults = args.faults.split(",")
    bad = [f for f in faults if f not in FAULTS]
    if bad:
        p.error(f"--faults: unknown {', '.join(bad)}; known: {', '.join(FAULTS)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="rlsched-chaos-") as tmp:
        for f in faults:
            t0 = time.monotonic()
            rows.append(run(f, Path(tmp) / f, args))
            print(f"{f}: {json.dumps(rows[-1])} ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
    print(f"# {' '.join(['python -m experiments.benchmarks.chaos', *(argv or sys.argv[1:])])}")
    print(f"# {platform.node()}: {os.cpu_count()} cores, {platform.platform()}\n")
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    failed = [r["fault"] for r in rows if r["lost"] or r["duplicated"]]
    if failed:
        print(f"FAILED: lost or duplicated tasks in: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

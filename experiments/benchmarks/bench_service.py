"""Load benchmark of ``rlsched serve`` (a script, not a test): accepted submissions per second and
accept latency, against a bare FastAPI endpoint doing one SQLite insert per request (the ceiling),
both measured in the same run on loopback.

    python -m experiments.benchmarks.bench_service [--seconds 60] [--clients 4] [--batch 100]

Each server runs as its own uvicorn process; ``--clients`` threads post batches of ``--batch``
tasks as fast as they are answered. Figures: tasks accepted per second over the run, p50/p99 of
the time to an answer per request, and lost tasks (accepted by the answer, missing from the
database afterwards — must be 0). The service meanwhile runs the tasks on its live cluster,
whose emulated GPUs (NumPy backend) share this machine's cores with the HTTP path; a third row
runs the same service with every node drained (tasks accepted and queued, none run): the accept
path alone, as on a cluster whose kernels run on real GPUs.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from runtime.service.client import wait_ready
from runtime.service.config import hash_token

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "bench-token"

#: The ceiling: FastAPI + one SQLite insert per request, same durability settings as the queue.
BARE_APP = """
import sqlite3, sys, threading
from fastapi import FastAPI, Request
db = sqlite3.connect(sys.argv[1], check_same_thread=False, isolation_level=None)
db.execute("PRAGMA journal_mode=WAL"); db.execute("PRAGMA synchronous=FULL")
db.execute("CREATE TABLE IF NOT EXISTS tasks (id INTEGER PRIMARY KEY, body TEXT)")
lock = threading.Lock()
app = FastAPI()
@app.post("/v1/tasks", status_code=201)
async def submit(request: Request):
    body = await request.body()
    with lock:
        db.execute("INSERT INTO tasks (body) VALUES (?)", (body.decode(),))
    return {"ok": True}
@app.get("/readyz")
def readyz():
    return {"ready": True}
import uvicorn
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _load(url: str, seconds: float, clients: int, batch: int) -> tuple[int, list[float], int]:
    """(tasks accepted, per-request latencies in s, failed requests)."""
    accepted = [0] * clients
    lat: list[list[float]] = [[] for _ in range(clients)]
    failed = [0] * clients
    stop = time.monotonic() + seconds

    def worker(i: int) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as c:
            k = 0
            while time.monotonic() < stop:
                body = [{"app": "matmul", "stream": i, "chunk": k + j} for j in range(batch)]
                t0 = time.perf_counter()
                r = c.post("/v1/tasks", json=body)
                lat[i].append(time.perf_counter() - t0)
                if r.status_code in (200, 201):
                    accepted[i] += batch
                else:
                    failed[i] += 1
                k += batch

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(accepted), [x for xs in lat for x in xs], sum(failed)


def _drain_all(url: str) -> None:
    """Drain every node: tasks are accepted and queued but none runs (the accept path alone)."""
    from runtime.cluster.config import default_live_cluster

    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as c:
        for node in default_live_cluster().nodes:
            c.post(f"/v1/admin/nodes/{node.name}/drain").raise_for_status()


def run(kind: str, seconds: float, clients: int, batch: int, folder: Path) -> dict[str, float]:
    """One server under the load: ``bare`` (the ceiling), ``service`` (running the tasks it
    accepts on the embedded cluster, whose emulated GPUs share this machine's cores), or
    ``drained`` (the same service with every node drained: nothing runs)."""
    port = _port()
    db = folder / f"{kind}.db"
    if kind in ("service", "drained"):
        cfg = folder / f"{kind}.toml"
        cfg.write_text(
            f'port = {port}\ndb = "{db}"\nscheduler = "mct+mlsm"\nqueue_bound = 100000000\n\n'
            f'[[tenants]]\nname = "bench"\ntoken_sha256 = "{hash_token(TOKEN)}"\nmax_queued = 100000000\n'
            "admin = true\n"
        )
        cmd = [sys.executable, "-m", "experiments.cli", "serve", "--config", str(cfg)]
    else:
        script = folder / "bare.py"
        script.write_text(BARE_APP)
        cmd = [sys.executable, str(script), str(db), str(port)]
    env = {**os.environ, "RLSCHED_BACKEND": "numpy"}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, alive=lambda: proc.poll() is None)
        if kind == "drained":
            _drain_all(url)
        t0 = time.perf_counter()
        accepted, lat, failed = _load(url, seconds, clients, batch)
        wall = time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    con = sqlite3.connect(db)
    stored = con.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
    con.close()
    stored_tasks = stored if kind == "service" else stored * batch
    return {
        "tasks_per_s": accepted / wall,
        "p50_ms": float(np.percentile(lat, 50)) * 1e3,
        "p99_ms": float(np.percentile(lat, 99)) * 1e3,
        "requests": len(lat),
        "failed_requests": failed,
        "lost": max(accepted - stored_tasks, 0),
    }


def end_to_end(tasks: int, folder: Path) -> dict[str, float]:
    """Completed tasks/s: ``tasks`` video tasks submitted at once to the service, against the same
    tasks as one ``run_live`` on the same (embedded) cluster and scheduler, arriving all at once.

    The service builds each task's input arrays when it dispatches it (~7 ms a video task here);
    ``run_live`` is handed them built. ``run_live`` is therefore timed twice: the run alone
    (``run_live``) and input generation plus the run (``run_live_with_inputs``, the like-for-like
    figure)."""
    from rlsched.policies import parse_scheduler
    from runtime.cluster.config import default_live_cluster
    from runtime.cluster.live import LiveOptions, run_live
    from runtime.cluster.local import LocalCluster
    from runtime.cluster.workload import LiveWorkload, build_work

    t_in = time.perf_counter()
    work = build_work(LiveWorkload(tasks=tasks, rate_per_s=1e6))  # every task at time ~0
    t0 = time.perf_counter()
    res = run_live(
        LocalCluster(default_live_cluster(), "numpy"), parse_scheduler("mct+mlsm"), work, LiveOptions()
    )
    t1 = time.perf_counter()
    direct, with_inputs = len(res.outcomes) / (t1 - t0), len(res.outcomes) / (t1 - t_in)
    port = _port()
    cfg = folder / "e2e.toml"
    cfg.write_text(
        f'port = {port}\ndb = "{folder / "e2e.db"}"\nscheduler = "mct+mlsm"\n\n'
        f'[[tenants]]\nname = "bench"\ntoken_sha256 = "{hash_token(TOKEN)}"\n'
    )
    env = {**os.environ, "RLSCHED_BACKEND": "numpy"}
    cmd = [sys.executable, "-m", "experiments.cli", "serve", "--config", str(cfg)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, alive=lambda: proc.poll() is None)
        body = [{"app": t.app, "stream": d.stream, "chunk": d.chunk} for t, d in work]
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as c:
            t0 = time.perf_counter()
            c.post("/v1/tasks", json=body).raise_for_status()
            # The service-wide counts: cheap to answer (paging 300 task records 20 times a
            # second would itself cost the 2-core service a share of its throughput).
            while c.get("/v1/cluster").json()["done"] < tasks:
                time.sleep(0.05)
            served = tasks / (time.perf_counter() - t0)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {"run_live": direct, "run_live_with_inputs": with_inputs, "service": served}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--seconds", type=float, default=60.0, help="load phase per server (0 skips the load runs)"
    )
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--e2e-tasks", type=int, default=300, help="tasks of the end-to-end comparison (0 skips)")
    args = p.parse_args()
    print(f"# command: python -m experiments.benchmarks.bench_service {' '.join(sys.argv[1:])}")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    print(f"# machine: {platform.machine()}, python {platform.python_version()}, usable cpus {cpus}")
    with tempfile.TemporaryDirectory() as d:
        kinds = ("bare", "service", "drained") if args.seconds > 0 else ()
        res = {k: run(k, args.seconds, args.clients, args.batch, Path(d)) for k in kinds}
        e2e = end_to_end(args.e2e_tasks, Path(d)) if args.e2e_tasks else None
    if res:
        print("\n| server | tasks accepted/s | p50 ms | p99 ms | requests | failed | lost |")
        print("|---|---|---|---|---|---|---|")
        for k, r in res.items():
            cells = (f"{r['tasks_per_s']:,.0f}", f"{r['p50_ms']:.1f}", f"{r['p99_ms']:.1f}")
            counts = (f"{r[c]:.0f}" for c in ("requests", "failed_requests", "lost"))
            print(f"| {k} | {' | '.join(cells)} | {' | '.join(counts)} |")
        for k in ("service", "drained"):
            r, bare = res[k], res["bare"]
            print(
                f"\n{k} / bare: {r['tasks_per_s'] / bare['tasks_per_s']:.2f}x accepted tasks/s, "
                f"p99 {r['p99_ms'] / bare['p99_ms']:.1f}x"
            )
    if e2e is not None:
        sv = e2e["service"]
        print(
            f"\nend to end, {args.e2e_tasks} video tasks at once, mct+mlsm on the embedded cluster: "
            f"service {sv:.1f} tasks/s; run_live with input generation {e2e['run_live_with_inputs']:.1f} "
            f"({sv / e2e['run_live_with_inputs']:.2f}x), run_live given built inputs {e2e['run_live']:.1f} "
            f"({sv / e2e['run_live']:.2f}x)"
        )


if __name__ == "__main__":
    main()
